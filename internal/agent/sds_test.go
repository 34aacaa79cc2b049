// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/agent/svid"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/spiretest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// meshDomain is the domain of the xDS agents' meshes and of the suite's MeshService controller.
const meshDomain = "aether.internal"

// TestSDSServesSPIREIdentities: the real agent, backed by a real SPIRE agent's Delegated Identity
// API, serves its pods' identities by SDS on its ADS stream. A real ADS client, asking for the
// secrets the clusters and listeners name as Envoy does, gets for each of two pods of different
// ServiceAccounts an X.509 SVID whose one URI SAN is its MeshService's status.identity and which
// chains to the bundle served as the validation context. The second identity's entry is created
// while its pod is served: until then its secret is absent (pending), then it appears. Two pods
// of one ServiceAccount share one subscription. A pod's identity leaves the snapshot with its last
// pod. A TLS handshake between the two served SVIDs succeeds when the client pins the server's
// SPIFFE ID and fails when it pins the other one (the negative control).
func TestSDSServesSPIREIdentities(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	spire := spiretest.Start(t, spiretest.Options{TrustDomain: meshDomain})
	td := spire.TrustDomain
	webID, dbID := spiffeid.RequireFromSegments(td, "ns", ns, "sa", "web"), spiffeid.RequireFromSegments(td, "ns", ns, "sa", "db")
	spire.CreateEntry(t, webID, spire.NodeAlias, "k8s:ns:"+ns, "k8s:sa:web")

	var source *svid.Source
	a := startXDSAgent(t, ns, func(o *XDSOptions) {
		var err error
		source, err = svid.New(svid.Options{Socket: spire.AdminSocket, TrustDomain: td, Log: ctrl.Log.WithName("identities-" + ns)})
		if err != nil {
			t.Fatal(err)
		}
		o.Identities = source
	})
	annotations := map[string]string{portspec.AnnotationPort: "8080"}
	createPodAs(t, ctx, ns, "web-0", "web", a.node, newPodIP(), true, annotations)
	createPodAs(t, ctx, ns, "web-1", "web", a.node, newPodIP(), true, annotations)
	createPodAs(t, ctx, ns, "db-0", "db", a.node, newPodIP(), true, annotations)
	identities := map[string]string{"web": identityOf(t, ctx, ns, "web"), "db": identityOf(t, ctx, ns, "db")}
	if identities["web"] != webID.String() || identities["db"] != dbID.String() {
		t.Fatalf("the MeshServices' identities are %v, want web %s and db %s", identities, webID, dbID)
	}
	webSecret, dbSecret, bundleSecret := xds.CertificateSecret(webID.String()), xds.CertificateSecret(dbID.String()), xds.TrustBundleSecret(meshDomain)

	c := a.dial(t, ctx)
	// db's entry does not exist yet: its listeners name its secret, which is absent.
	if err := c.Await(ctx, func(s xdstest.State) error {
		if asked := s.Requested[xdstest.Secrets]; !slices.Equal(asked, []string{bundleSecret, dbSecret, webSecret}) {
			return fmt.Errorf("the client asks for the secrets %q, want %q", asked, []string{bundleSecret, dbSecret, webSecret})
		}
		if s.Secret(webSecret) == nil || s.Secret(bundleSecret) == nil {
			return fmt.Errorf("secrets %q accepted, want web's and the bundle", slices.Sorted(maps.Keys(s.Resources[xdstest.Secrets])))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if s := c.State(); s.Secret(dbSecret) != nil {
		t.Fatalf("the client holds %s before its SPIRE entry exists", dbSecret)
	}
	if n, err := testenv.Gauge("aether_agent_identities", "state", svid.StatePending); err != nil || n != 1 {
		t.Errorf("aether_agent_identities{state=pending} = %v (%v) before db's entry exists, want 1", n, err)
	}
	if n := source.Subscriptions(); n != 2 {
		t.Errorf("%d SVID subscriptions for three pods of two ServiceAccounts, want 2", n)
	}

	created := time.Now()
	spire.CreateEntry(t, dbID, spire.NodeAlias, "k8s:ns:"+ns, "k8s:sa:db")
	if err := c.Await(ctx, func(s xdstest.State) error {
		if s.Secret(dbSecret) == nil {
			return fmt.Errorf("no secret %s yet", dbSecret)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("db's entry created to its secret accepted by the client: %s", time.Since(created).Round(time.Millisecond))

	served := c.State()
	bundle := servedBundle(t, served.Secret(bundleSecret), td)
	svids := map[string]*x509svid.SVID{}
	for sa, secret := range map[string]string{"web": webSecret, "db": dbSecret} {
		sv := servedSVID(t, served.Secret(secret))
		if uris := sv.Certificates[0].URIs; len(uris) != 1 || uris[0].String() != identities[sa] {
			t.Errorf("the secret %s holds a certificate whose URI SANs are %v, want [%s] (MeshService %s/%s's status.identity)", secret, uris, identities[sa], ns, sa)
		}
		if id, _, err := x509svid.Verify(sv.Certificates, bundle); err != nil || id.String() != identities[sa] {
			t.Errorf("the secret %s verifies against the served bundle as %v, %v; want %s", secret, id, err, identities[sa])
		}
		svids[sa] = sv
	}

	// The handshake: db's pod dials web's, each with the SVID served to the node's Envoy.
	if err := spiffetest.Handshake(svids["web"], svids["db"], bundle, webID); err != nil {
		t.Errorf("db dialing web, pinning web's ID %s: %v", webID, err)
	}
	err := spiffetest.Handshake(svids["web"], svids["db"], bundle, dbID)
	if err == nil {
		t.Errorf("db dialing web while pinning db's own ID %s: the handshake succeeded; it must fail", dbID)
	} else {
		t.Logf("negative control: pinning %s against web's certificate: %v", dbID, err)
	}

	// db's only pod goes: its secret leaves the snapshot, and its subscription ends.
	if err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0"}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if err := c.Await(ctx, func(s xdstest.State) error {
		if s.Secret(dbSecret) != nil || s.Secret(webSecret) == nil {
			return fmt.Errorf("secrets %q accepted, want web's and the bundle", slices.Sorted(maps.Keys(s.Resources[xdstest.Secrets])))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "db's subscription closed", func() error {
		if n := source.Subscriptions(); n != 1 {
			return fmt.Errorf("%d SVID subscriptions, want web's alone", n)
		}
		return nil
	})
}

// identityOf waits for MeshService ns/name's status.identity.
func identityOf(t *testing.T, ctx context.Context, ns, name string) string {
	t.Helper()
	ms := &meshv1alpha1.MeshService{}
	testenv.Eventually(t, "MeshService "+ns+"/"+name+"'s identity", func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ms); err != nil {
			return err
		}
		if ms.Status.Identity == "" {
			return errors.New("no status.identity yet")
		}
		return nil
	})
	return ms.Status.Identity
}

// servedSVID parses an SVID secret with go-spiffe: its chain and key, inline PEM.
func servedSVID(t *testing.T, secret *tlsv3.Secret) *x509svid.SVID {
	t.Helper()
	cert := secret.GetTlsCertificate()
	sv, err := x509svid.Parse(cert.GetCertificateChain().GetInlineBytes(), cert.GetPrivateKey().GetInlineBytes())
	if err != nil {
		t.Fatalf("the secret %s: %v", secret.GetName(), err)
	}
	return sv
}

// servedBundle parses the bundle secret's validation context: its trusted CAs, inline PEM.
func servedBundle(t *testing.T, secret *tlsv3.Secret, td spiffeid.TrustDomain) *x509bundle.Bundle {
	t.Helper()
	b, err := x509bundle.Parse(td, secret.GetValidationContext().GetTrustedCa().GetInlineBytes())
	if err != nil {
		t.Fatalf("the secret %s: %v", secret.GetName(), err)
	}
	return b
}

// TestPodIdentities: one identity per SPIFFE ID, asked by its pods' namespace and ServiceAccount
// (the MeshService's name), sorted, whatever the pods' order.
func TestPodIdentities(t *testing.T) {
	web := "spiffe://aether.internal/ns/shop/sa/web"
	db := "spiffe://aether.internal/ns/shop/sa/db"
	pods := []model.LocalPod{
		{Namespace: "shop", Name: "web-1", Service: "web", Identity: web},
		{Namespace: "shop", Name: "db-0", Service: "db", Identity: db},
		{Namespace: "shop", Name: "web-0", Service: "web", Identity: web},
	}
	want := []svid.Identity{{ID: db, Namespace: "shop", ServiceAccount: "db"}, {ID: web, Namespace: "shop", ServiceAccount: "web"}}
	if got := podIdentities(pods); !slices.Equal(got, want) {
		t.Errorf("podIdentities = %+v, want %+v", got, want)
	}
	if got := podIdentities(nil); len(got) != 0 {
		t.Errorf("podIdentities of no pod = %+v, want none", got)
	}
}
