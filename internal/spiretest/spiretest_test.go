// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spiretest

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	delegatedv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/agent/delegatedidentity/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// TestDelegatedIdentity is the harness's proof: an entry with k8s selectors parented to the
// node alias is handed to the authorized delegate for those selectors, as an X.509 SVID whose URI
// SAN is the entry's ID and which chains to the bundle the agent serves; selectors of another
// ServiceAccount get no SVID of it.
func TestDelegatedIdentity(t *testing.T) {
	env := Start(t, Options{})
	web := spiffeid.RequireFromPath(env.TrustDomain, "/ns/default/sa/web")
	env.CreateEntry(t, web, env.NodeAlias, "k8s:ns:default", "k8s:sa:web")

	client := DelegatedClient(t, env.AdminSocket)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	roots := x509.NewCertPool()
	for _, c := range X509Bundle(ctx, t, client, env.TrustDomain) {
		roots.AddCert(c)
	}

	// The agent syncs entries every 5 s: the first answers may not have web's SVID yet.
	svid := WaitX509SVID(ctx, t, client, web, selectors(t, "k8s:ns:default", "k8s:sa:web"))
	cert, err := x509.ParseCertificate(svid.X509Svid.CertChain[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.URIs) != 1 || cert.URIs[0].String() != web.String() {
		t.Fatalf("the SVID's URI SANs are %v, want [%s]", cert.URIs, web)
	}
	inter := x509.NewCertPool()
	for _, der := range svid.X509Svid.CertChain[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		inter.AddCert(c)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("the SVID does not chain to the agent's bundle: %v", err)
	}

	// Negative control: another ServiceAccount's selectors get no SVID of web.
	other, err := client.SubscribeToX509SVIDs(ctx, &delegatedv1.SubscribeToX509SVIDsRequest{Selectors: selectors(t, "k8s:ns:default", "k8s:sa:db")})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := other.Recv()
	if err == nil {
		for _, s := range resp.X509Svids {
			t.Errorf("selectors of sa db got an SVID for %v", s.X509Svid.Id)
		}
	}
}

func selectors(t *testing.T, in ...string) []*types.Selector {
	t.Helper()
	var out []*types.Selector
	for _, s := range in {
		typ, value, _ := cut(s)
		out = append(out, &types.Selector{Type: typ, Value: value})
	}
	return out
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
