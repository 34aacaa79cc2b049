// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"errors"
	"slices"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/go-logr/logr"

	"github.com/aether-mesh/aether-operator/internal/agent/svid"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver"
)

// The node's identities, by SDS (XDSOptions.Identities). Each rebuild tells the identity source
// which identities the node's pods hold (svid.Source.Want: one subscription per identity); the
// secrets publisher serves what the source holds on the node's snapshot whenever it changes
// (xdsserver.Server.PublishSecrets), apart from the rebuilds: a rotation is an SDS push alone.

// podIdentities are the identities pods hold, one per SPIFFE ID, sorted: a pod's ServiceAccount
// is its MeshService's name, so its SVID is asked for by its namespace and that name.
func podIdentities(pods []model.LocalPod) []svid.Identity {
	out := make([]svid.Identity, 0, len(pods))
	for _, p := range pods {
		out = append(out, svid.Identity{ID: p.Identity, Namespace: p.Namespace, ServiceAccount: p.Service})
	}
	slices.SortFunc(out, func(a, b svid.Identity) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ServiceAccount, b.ServiceAccount))
	})
	return slices.CompactFunc(out, func(a, b svid.Identity) bool { return a.ID == b.ID })
}

// secretsPublisher serves the identity source's SVIDs and bundle on the node's snapshot.
type secretsPublisher struct {
	source *svid.Source
	server *xdsserver.Server
	node   string
	domain string
	log    logr.Logger
}

// NeedLeaderElection is false: every node's agent serves its own node's Envoy.
func (p *secretsPublisher) NeedLeaderElection() bool { return false }

// Start publishes the source's secrets, then again after each change, until ctx ends.
func (p *secretsPublisher) Start(ctx context.Context) error {
	for {
		changed := p.source.Changed() // before reading: a change meanwhile closes it
		p.publish()
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// publish serves the source's secrets now. One that cannot be made is logged and left out; the
// server logs and counts a refusal, and the secrets served stay.
func (p *secretsPublisher) publish() {
	secrets, err := sdsSecrets(p.source.Secrets(), p.domain)
	if err != nil {
		p.log.Error(err, "Left SDS secrets out", "node", p.node)
	}
	_, _ = p.server.PublishSecrets(p.node, secrets)
}

// sdsSecrets are s as SDS secrets: each SVID under its identity's name (xds.CertificateSecret),
// the bundle under the trust domain's (xds.TrustBundleSecret), once SPIRE sent it.
func sdsSecrets(s svid.Secrets, domain string) ([]*tlsv3.Secret, error) {
	var out []*tlsv3.Secret
	var errs []error
	if s.BundlePEM != nil {
		bundle, err := xds.BundleSecret(domain, s.BundlePEM)
		errs = append(errs, err)
		if err == nil {
			out = append(out, bundle)
		}
	}
	for _, sv := range s.SVIDs {
		secret, err := xds.SVIDSecret(sv.ID, sv.ChainPEM, sv.KeyPEM)
		errs = append(errs, err)
		if err == nil {
			out = append(out, secret)
		}
	}
	return out, errors.Join(errs...)
}
