// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestSecretNames: for every scenario, the secrets SecretNames reads off the clusters and
// listeners (what the xDS server serves, and Envoy asks for) are the ones an independent walk of
// every SdsSecretConfig finds (xdscheck.SecretReferences), for the clusters and the listeners
// together and for each alone (each alone names the secrets too: both readings are exercised);
// and they are the node's pods' identities and the trust bundle, what the agent fetches from SPIRE.
func TestSecretNames(t *testing.T) {
	scenarios := xdstest.All()
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		t.Run(name, func(t *testing.T) {
			m := scenarios[name]
			res := build(t, m)
			for part, r := range map[string]xds.Resources{
				"clusters and listeners": {Clusters: res.Clusters, Listeners: res.Listeners},
				"clusters":               {Clusters: res.Clusters},
				"listeners":              {Listeners: res.Listeners},
			} {
				got, err := xds.SecretNames(r.Clusters, r.Listeners)
				if err != nil {
					t.Fatal(err)
				}
				walked, unreadable := xdscheck.SecretReferences(r)
				if len(unreadable) > 0 {
					t.Fatalf("the walk could not read: %q", unreadable)
				}
				if !slices.Equal(got, walked) || (len(m.Pods) > 0 && len(got) == 0) {
					t.Errorf("%s: SecretNames %q, every SdsSecretConfig %q", part, got, walked)
				}
			}
			got, err := xds.SecretNames(res.Clusters, res.Listeners)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{}
			for _, p := range m.Pods {
				want[xds.CertificateSecret(p.Identity)] = true
			}
			if len(want) > 0 {
				want[xds.TrustBundleSecret(m.Domain)] = true
			}
			if !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
				t.Errorf("SecretNames %q, want the pods' identities and the bundle %q", got, slices.Sorted(maps.Keys(want)))
			}
		})
	}
}

// TestSecretsOfSVIDs: an SVID secret is named after its identity and carries its chain and key
// inline; the bundle secret is named after the trust domain and carries the authorities as its
// trusted CAs. Missing material is an error naming the secret and never quoting a key.
func TestSecretsOfSVIDs(t *testing.T) {
	ca, err := spiffetest.NewCA("aether.internal")
	if err != nil {
		t.Fatal(err)
	}
	const id = "spiffe://aether.internal/ns/shop/sa/payments"
	chain, key, err := ca.Issue(id)
	if err != nil {
		t.Fatal(err)
	}
	svid, err := xds.SVIDSecret(id, chain, key)
	if err != nil {
		t.Fatal(err)
	}
	tlsCert := svid.GetTlsCertificate()
	if svid.GetName() != xds.CertificateSecret(id) || string(tlsCert.GetCertificateChain().GetInlineBytes()) != string(chain) ||
		string(tlsCert.GetPrivateKey().GetInlineBytes()) != string(key) {
		t.Errorf("SVIDSecret: %q with a chain of %d bytes and a key of %d, want %q with the issued chain and key", svid.GetName(),
			len(tlsCert.GetCertificateChain().GetInlineBytes()), len(tlsCert.GetPrivateKey().GetInlineBytes()), xds.CertificateSecret(id))
	}
	bundle, err := xds.BundleSecret("aether.internal", ca.BundlePEM)
	if err != nil {
		t.Fatal(err)
	}
	if bundle.GetName() != "spiffe://aether.internal" || string(bundle.GetValidationContext().GetTrustedCa().GetInlineBytes()) != string(ca.BundlePEM) {
		t.Errorf("BundleSecret: %q, want spiffe://aether.internal holding the CA as trusted_ca", bundle.GetName())
	}

	for what, err := range map[string]error{
		"an SVID without its key":   second(xds.SVIDSecret(id, chain, nil)),
		"an SVID without its chain": second(xds.SVIDSecret(id, nil, key)),
		"a bundle without a CA":     second(xds.BundleSecret("aether.internal", nil)),
	} {
		switch {
		case err == nil:
			t.Errorf("%s: no error", what)
		case strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "BEGIN"):
			t.Errorf("%s: the error quotes the material: %v", what, err)
		case !strings.Contains(err.Error(), "spiffe://aether.internal"):
			t.Errorf("%s: the error does not name the secret: %v", what, err)
		default:
			t.Logf("%s: %v", what, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
