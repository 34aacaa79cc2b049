// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// TestIdentitySource: --spire-admin-socket empty is no source; set, it needs --xds-address and a
// mesh domain that is a SPIFFE trust domain, each refusal naming the flag, the value and the fix;
// otherwise the source holds the mesh domain's identities.
func TestIdentitySource(t *testing.T) {
	const socket = "/run/spire/admin-sockets/admin.sock"
	if src, err := identitySource("", "", "aether.internal", workloadidentity.SPIRE); src != nil || err != nil {
		t.Errorf("without a socket: %v, %v; want no source", src, err)
	}
	for name, tc := range map[string]struct {
		xdsAddress, domain string
		issuer             workloadidentity.Issuer
		want               []string
	}{
		"no xDS serving":            {"", "aether.internal", workloadidentity.SPIRE, []string{"--spire-admin-socket", socket, "needs --xds-address", "set both, or neither"}},
		"not a SPIFFE trust domain": {"unix:///run/aether/xds.sock", "Aether.Internal", workloadidentity.SPIRE, []string{"--mesh-domain", "Aether.Internal", "lower-case"}},
		"no issuer":                 {"unix:///run/aether/xds.sock", "aether.internal", workloadidentity.NoIssuer, []string{"--spire-admin-socket", socket, "--identity-issuer=none", "drop one of them"}},
	} {
		src, err := identitySource(socket, tc.xdsAddress, tc.domain, tc.issuer)
		if err == nil || src != nil {
			t.Errorf("%s: %v, %v; want an error", name, src, err)
			continue
		}
		for _, part := range tc.want {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s: %q does not say %q", name, err, part)
			}
		}
	}
	src, err := identitySource(socket, "unix:///run/aether/xds.sock", "aether.internal", workloadidentity.SPIRE)
	if err != nil || src.TrustDomain().Name() != "aether.internal" {
		t.Errorf("a socket with xDS serving: %v, %v; want a source of trust domain aether.internal", src, err)
	}
}
