// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// otherIdentity is an identity the fixture's TLS context does not name.
const otherIdentity = "spiffe://aether.internal/ns/shop/sa/ledger"

// testSecrets issues SVID secrets for ids and the bundle secret, from ca.
func testSecrets(t *testing.T, ca *spiffetest.CA, ids ...string) []*tlsv3.Secret {
	t.Helper()
	bundle, err := xds.BundleSecret("aether.internal", ca.BundlePEM)
	if err != nil {
		t.Fatal(err)
	}
	out := []*tlsv3.Secret{bundle}
	for _, id := range ids {
		chain, key, err := ca.Issue(id)
		if err != nil {
			t.Fatal(err)
		}
		secret, err := xds.SVIDSecret(id, chain, key)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, secret)
	}
	return out
}

// keyOf is the private key PEM secret holds, or nil.
func keyOf(secret *tlsv3.Secret) []byte {
	return secret.GetTlsCertificate().GetPrivateKey().GetInlineBytes()
}

// tlsFixture is a test CA of the mesh's trust domain and the base fixture with TLS on.
func tlsFixture(t *testing.T) (*spiffetest.CA, fixture) {
	t.Helper()
	ca, err := spiffetest.NewCA("aether.internal")
	if err != nil {
		t.Fatal(err)
	}
	f := baseFixture()
	f.tls = true
	return ca, f
}

// TestSecretsServedByReference: the secrets PublishSecrets is given are merged into the node's
// snapshot, those its clusters reference and no other; a real ADS client, asking for the secrets
// its clusters name as Envoy does, receives them. A rotation is an SDS push and nothing else (the
// next listener change's LDS response is the first since the initial one); the same secrets again
// publish nothing; a secret taken away leaves the snapshot. Secrets named twice are refused and
// the previous ones stay. No log line, go-control-plane's debug lines included, carries a key.
func TestSecretsServedByReference(t *testing.T) {
	s, logs := startServerLogging(t, 2)
	ca, f := tlsFixture(t)
	given := testSecrets(t, ca, identity, otherIdentity)
	if published, err := s.PublishSecrets("node-a", given); published || err != nil {
		t.Fatalf("PublishSecrets before the node's first Publish: published %v, %v; want them kept, nothing published", published, err)
	}
	v1 := publish(t, s, "node-a", f)
	if names := s.servedNames("node-a", xdstest.Secrets, v1[xdstest.Secrets]); !slices.Equal(names, []string{bundleN, certN}) {
		t.Fatalf("the snapshot serves the secrets %q, want the two the cluster names, %q (not %s's)", names, []string{bundleN, certN}, otherIdentity)
	}

	all := append(slices.Clone(fixtureTypes), xdstest.Secrets)
	c := dial(t, s, "node-a", v1, all...)
	if got, want := keyOf(c.State().Secret(certN)), keyOf(given[1]); len(want) == 0 || !bytes.Equal(got, want) {
		t.Fatalf("the client holds %s with a key of %d bytes, want the given one (%d bytes)", certN, len(got), len(want))
	}

	rotated := testSecrets(t, ca, identity, otherIdentity) // the same bundle, new certificates
	published, err := s.PublishSecrets("node-a", rotated)
	if !published || err != nil {
		t.Fatalf("PublishSecrets of a rotated certificate: published %v, %v; want published", published, err)
	}
	v2 := s.Versions("node-a")
	for _, typ := range all {
		if moved := v1[typ] != v2[typ]; moved != (typ == xdstest.Secrets) {
			t.Errorf("a rotation moved %s from %s to %s (want only the secrets to move)", typ, v1[typ], v2[typ])
		}
	}
	accepted(t, c, v2, xdstest.Secrets)
	if !bytes.Equal(keyOf(c.State().Secret(certN)), keyOf(rotated[1])) {
		t.Error("after the rotation the client holds another key than the rotated one")
	}
	if published, err := s.PublishSecrets("node-a", rotated); published || err != nil {
		t.Errorf("publishing the same secrets again: published %v, %v; want nothing published", published, err)
	}
	f.statPrefix = "after-rotation"
	v3 := publish(t, s, "node-a", f)
	accepted(t, c, v3, xdstest.Listeners)
	if lds := versions(c.State().Received(xdstest.Listeners)); !slices.Equal(lds, []string{v1[xdstest.Listeners], v3[xdstest.Listeners]}) {
		t.Errorf("LDS responses %v, want the first and the listener change's only (the rotation sent a listener update)", lds)
	}
	if sds := versions(c.State().Received(xdstest.Secrets)); !slices.Equal(sds, []string{v1[xdstest.Secrets], v2[xdstest.Secrets]}) {
		t.Errorf("SDS responses %v, want the first and the rotation's", sds)
	}

	before := testutil.ToFloat64(snapshots.WithLabelValues(ResultInvalid))
	if _, err := s.PublishSecrets("node-a", append(slices.Clone(rotated), rotated[1])); err == nil || !strings.Contains(err.Error(), certN) {
		t.Errorf("secrets naming %s twice: %v; want an error naming it", certN, err)
	} else {
		t.Logf("secrets named twice: %v", err)
	}
	if n := testutil.ToFloat64(snapshots.WithLabelValues(ResultInvalid)); n != before+1 {
		t.Errorf("aether_agent_xds_snapshots_total{result=invalid} went from %v to %v, want +1", before, n)
	}
	if got := s.Versions("node-a"); got[xdstest.Secrets] != v2[xdstest.Secrets] {
		t.Errorf("after refused secrets the node serves secrets %s, want the previous %s", got[xdstest.Secrets], v2[xdstest.Secrets])
	}

	// The identity's certificate taken away (its pod went, or SPIRE dropped its entry).
	if published, err := s.PublishSecrets("node-a", rotated[:1]); !published || err != nil {
		t.Fatalf("PublishSecrets without %s: published %v, %v; want published", certN, published, err)
	}
	v4 := s.Versions("node-a")
	if names := s.servedNames("node-a", xdstest.Secrets, v4[xdstest.Secrets]); !slices.Equal(names, []string{bundleN}) {
		t.Errorf("after %s was taken away the snapshot serves %q, want the bundle alone", certN, names)
	}
	accepted(t, c, v4, xdstest.Secrets)

	for _, secret := range append(given, rotated...) {
		if key := keyOf(secret); key != nil {
			body := strings.Split(string(key), "\n")[1] // the key's first line of base64
			if lines := logs.with(body); len(lines) > 0 {
				t.Errorf("a log line carries %s's private key: %q", secret.GetName(), lines[0])
			}
		}
	}
	if lines := logs.with("PRIVATE KEY"); len(lines) > 0 {
		t.Errorf("a log line carries a private key: %q", lines[0])
	}
	if len(logs.with("go-control-plane", xdstest.Secrets)) == 0 {
		t.Error("no go-control-plane debug line mentions the secrets: the leak check above read nothing")
	}
}

// TestSecretsADSNeedsEveryNameRequested is why a snapshot serves only the secrets its clusters
// and listeners reference. go-control-plane's ADS-mode cache answers a state-of-the-world request
// only if it names every resource of that type in the snapshot: asked for the secrets the
// fixture's cluster names, the served snapshot answers at once; the same snapshot holding one
// secret more (the negative control: what serving every given secret would be) opens a watch
// that no change of that secret will answer, so Envoy would never get its certificates.
func TestSecretsADSNeedsEveryNameRequested(t *testing.T) {
	s := New(Options{})
	ca, f := tlsFixture(t)
	given := testSecrets(t, ca, identity, otherIdentity)
	if _, err := s.PublishSecrets("node-a", given); err != nil {
		t.Fatal(err)
	}
	v := publish(t, s, "node-a", f)
	requested := []string{bundleN, certN}
	ask := func(cache cachev3.SnapshotCache) int {
		req := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "node-a"}, TypeUrl: xdstest.Secrets, ResourceNames: requested}
		answers := make(chan cachev3.Response, 1)
		cancel, err := cache.CreateWatch(req, streamv3.NewSotwSubscription(requested, false), answers)
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
		return len(answers) // a watch answerable now is answered before CreateWatch returns
	}
	if n := ask(s.cache); n != 1 {
		t.Fatalf("the served snapshot (secrets version %s) gave %d answers to a request naming %q, want 1", v[xdstest.Secrets], n, requested)
	}

	unfiltered := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	snap := s.served["node-a"].snapshot()
	all := make([]cachetypes.Resource, len(given))
	for i, secret := range given {
		all[i] = secret
	}
	snap.Resources[cachetypes.Secret] = cachev3.NewResources("all-given", all)
	if err := unfiltered.SetSnapshot(testContext(t), "node-a", snap); err != nil {
		t.Fatal(err)
	}
	if n := ask(unfiltered); n != 0 {
		t.Fatalf("a snapshot serving %s too answered a request that does not name it: the filter would not be needed", otherIdentity)
	}
	t.Logf("negative control: a snapshot serving every given secret (%d) leaves a request naming %q unanswered", len(given), requested)
}

// TestSecretsDelta: a delta stream subscribing to the fixture's secrets by name receives them, a
// rotation comes as one delta response carrying the rotated certificate alone, and a secret no
// cluster references is not served even to a client asking for it by name.
func TestSecretsDelta(t *testing.T) {
	s, _ := startServer(t)
	ca, f := tlsFixture(t)
	if _, err := s.PublishSecrets("node-a", testSecrets(t, ca, identity, otherIdentity)); err != nil {
		t.Fatal(err)
	}
	publish(t, s, "node-a", f)
	d := dialDelta(t, s, "node-a")
	otherN := xds.CertificateSecret(otherIdentity)
	d.subscribe(t, xdstest.Secrets, bundleN, certN, otherN)
	if u := d.next(t); u.typ != xdstest.Secrets || !slices.Equal(u.names, []string{bundleN, certN}) {
		t.Fatalf("the first delta response carries %s %q, want the secrets %q (not %s, which nothing references)", u.typ, u.names, []string{bundleN, certN}, otherN)
	}

	rotated := testSecrets(t, ca, identity) // the same bundle, a new certificate
	if published, err := s.PublishSecrets("node-a", rotated); !published || err != nil {
		t.Fatalf("PublishSecrets: %v, %v", published, err)
	}
	u := d.next(t)
	if !slices.Equal(u.names, []string{certN}) || len(u.removed) != 0 {
		t.Fatalf("after a rotation the delta response carries %q (removed %q), want %s alone", u.names, u.removed, certN)
	}
	if secret, _ := u.resources[certN].(*tlsv3.Secret); !bytes.Equal(keyOf(secret), keyOf(rotated[1])) {
		t.Errorf("the delta response carries another key than the rotated %s's", certN)
	}
}
