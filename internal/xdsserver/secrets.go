// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"context"
	"fmt"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// SDS: the node's Envoy fetches the certificates and the trust bundle its TLS contexts name
// (xds.CertificateSecret, xds.TrustBundleSecret) over its ADS stream, state of the world or delta,
// from the same snapshot as the rest of its configuration. The secrets change on their own clock
// (SPIRE rotates them), so they are published apart from the resources (PublishSecrets) and
// versioned by their own content hash: a rotation is an SDS push and nothing else.
//
// A node's snapshot serves the secrets its clusters and listeners reference, and no other. In ADS
// mode go-control-plane answers a state-of-the-world request only when it names every resource of
// the snapshot's type (Envoy asks for the secrets its TLS contexts name, all in one request), so
// one secret more than Envoy asks for would hold back every SDS response. A referenced secret
// that was not given (SPIRE has not issued it yet) is simply absent: Envoy waits for it (the
// cluster or listener warms up to its initial_fetch_timeout, 15 s by default, and until the secret
// comes its TLS handshakes fail: closed, never plaintext).
//
// Private keys are never logged: lines name secrets, never their contents.

// PublishSecrets makes secrets the SDS secrets of node nodeID, merged into its snapshot without
// rebuilding the rest: those its clusters and listeners reference are served, at a version that
// hashes their content; the others are kept, and served once a publish references them. Before
// the node's first Publish there is nothing to merge into: they are kept for it. It reports
// whether it published. Secrets without a name, named twice or invalid are refused with an error,
// logged and counted (the previous ones stay in service); so is a proxyless client's node ID (a
// proxyless client reads its certificates from files).
func (s *Server) PublishSecrets(nodeID string, secrets []*tlsv3.Secret) (bool, error) {
	if err := validSecrets(secrets); err != nil {
		snapshots.WithLabelValues(ResultInvalid).Inc()
		s.log.Error(err, "Refusing invalid SDS secrets; the previous ones stay in service", "node", nodeID)
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, had := s.served[nodeID]
	if had && prev.proxyless {
		snapshots.WithLabelValues(ResultInvalid).Inc()
		return false, fmt.Errorf("node %q is a proxyless gRPC client: it is served no SDS secrets (its certificates come from files)", nodeID)
	}
	s.secrets[nodeID] = secrets
	if !had {
		return false, nil // the node's first Publish serves them
	}
	next := prev
	if err := next.setSecrets(secrets); err != nil {
		return false, err
	}
	if next.versions == prev.versions {
		snapshots.WithLabelValues(ResultUnchanged).Inc()
		return false, nil
	}
	if err := s.cache.SetSnapshot(context.Background(), nodeID, next.snapshot()); err != nil {
		return false, fmt.Errorf("setting the xDS snapshot for node %q: %w", nodeID, err)
	}
	s.served[nodeID] = next
	snapshots.WithLabelValues(ResultPublished).Inc()
	s.log.V(1).Info("Published the node's SDS secrets", "node", nodeID, "secrets", next.names[secretKind],
		"version", next.versions[secretKind], "given", len(secrets))
	return true, nil
}

// setSecrets makes the secrets of all that sv's clusters and listeners reference sv's secrets.
func (sv *served) setSecrets(all []*tlsv3.Secret) error {
	var items []cachetypes.Resource
	for _, secret := range all {
		if sv.secretRefs[secret.GetName()] {
			items = append(items, secret)
		}
	}
	last := *sv
	_, err := sv.set(secretKind, items, &last)
	return err
}

// validSecrets checks that every secret has a name, no name is given twice, and each passes its
// validator (whose messages name fields, never their values).
func validSecrets(secrets []*tlsv3.Secret) error {
	if _, err := uniqueNames(kinds[secretKind], resources(secrets)); err != nil {
		return err
	}
	for _, secret := range secrets {
		if err := secret.ValidateAll(); err != nil {
			return fmt.Errorf("SDS secret %q is invalid: %w", secret.GetName(), err)
		}
	}
	return nil
}
