// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyconfig"
	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// TestDebugEndpointServesThePodsPart: the real agent, with xDS serving and its debug endpoint on
// a loopback listener, answers GET /proxy-config/<ns>/<pod> with what its node's published
// snapshot (built by the real builder from the API server's objects) holds for that pod: its
// capture listener, its identity's capture route configuration and clusters, and its own app
// cluster; nothing of the node's other pod (of another identity), which the same endpoint serves
// on its own path (the negative control: the answer is per pod, not empty). The snapshot also
// serves the pod's SVID by SDS, which a real ADS client receives; the endpoint's answer holds
// neither its name's secret nor its private key. A pod the agent does not mesh is a 404 saying
// so, before and after the build.
func TestDebugEndpointServesThePodsPart(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	debug, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := startXDSAgent(t, ns, func(o *XDSOptions) { o.Debug = debug })
	base := "http://" + debug.Addr().String()

	annotations := map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9000=tcp"}
	createPodAs(t, ctx, ns, "web-0", "web", a.node, newPodIP(), true, annotations)
	createPodAs(t, ctx, ns, "db-0", "db", a.node, newPodIP(), true, annotations)
	createPodAs(t, ctx, ns, "plain", "web", a.node, newPodIP(), false, annotations)
	webID, dbID := identityOf(t, ctx, ns, "web"), identityOf(t, ctx, ns, "db")

	get := func(ns, name string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(base + proxyconfig.PodPath(ns, name))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	read := func(ns, name string) (proxyconfig.Config, xds.Resources, error) {
		status, body := get(ns, name)
		if status != http.StatusOK {
			return proxyconfig.Config{}, xds.Resources{}, fmt.Errorf("GET %s: %d %s", proxyconfig.PodPath(ns, name), status, body)
		}
		var c proxyconfig.Config
		if err := json.Unmarshal(body, &c); err != nil {
			return c, xds.Resources{}, err
		}
		res, err := c.Decode()
		return c, res, err
	}
	webKey, dbKey := xds.PodKey(ns, "web-0"), xds.PodKey(ns, "db-0")
	var web xds.Resources
	testenv.Eventually(t, "web-0's capture listener and its identity's clusters on the debug endpoint", func() error {
		var err error
		if _, web, err = read(ns, "web-0"); err != nil {
			return err
		}
		if !slices.Contains(names(web.Listeners), xds.CaptureListener(webKey)) {
			return fmt.Errorf("listeners %q lack %q", names(web.Listeners), xds.CaptureListener(webKey))
		}
		if !slices.Contains(names(web.Clusters), xds.SourceCluster(xds.HTTPCluster(xds.FQDN("db", ns, meshDomain), 8080), webID)) {
			return fmt.Errorf("clusters %q lack web's cluster of db:8080", names(web.Clusters))
		}
		return nil
	})
	if !slices.Contains(names(web.Routes), xds.CaptureRoutes(webID)) || !slices.Contains(names(web.Clusters), xds.AppCluster(webKey, 8080)) {
		t.Errorf("web-0: routes %q, clusters %q; want %q and %q among them", names(web.Routes), names(web.Clusters), xds.CaptureRoutes(webID), xds.AppCluster(webKey, 8080))
	}
	for _, n := range slices.Concat(names(web.Listeners), names(web.Routes), names(web.Clusters)) {
		if strings.Contains(n, dbKey) || strings.HasSuffix(n, "|"+xds.SourceKey(dbID)) {
			t.Errorf("web-0's configuration holds %q, db-0's", n)
		}
	}
	// Negative control: the other pod is on the same endpoint, with its own.
	if _, db, err := read(ns, "db-0"); err != nil || !slices.Contains(names(db.Listeners), xds.CaptureListener(dbKey)) {
		t.Errorf("db-0: listeners %q, %v; want its capture listener", names(db.Listeners), err)
	}

	// The pod's SVID, served to the node's Envoy by SDS, is not on the endpoint.
	ca, err := spiffetest.NewCA(meshDomain)
	if err != nil {
		t.Fatal(err)
	}
	chain, key, err := ca.Issue(webID)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := xds.SVIDSecret(webID, chain, key)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := xds.BundleSecret(meshDomain, ca.BundlePEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.options.XDS.Server.PublishSecrets(a.node, []*tlsv3.Secret{secret, bundle}); err != nil {
		t.Fatal(err)
	}
	c := a.dial(t, ctx)
	if err := c.Await(ctx, func(s xdstest.State) error {
		if s.Secret(xds.CertificateSecret(webID)) == nil {
			return fmt.Errorf("no secret %q served yet", webID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, body := get(ns, "web-0")
	keyBlock := strings.Split(strings.TrimSpace(string(key)), "\n")[1] // a line of the key's base64
	for _, leak := range []string{"PRIVATE KEY", keyBlock, "transport_sockets.tls.v3.Secret", `"privateKey"`} {
		if bytes.Contains(body, []byte(leak)) {
			t.Errorf("the debug endpoint's answer for web-0 holds %q", leak)
		}
	}

	status, body := get(ns, "plain")
	if status != http.StatusNotFound || !strings.Contains(string(body), "pod "+ns+"/plain has no proxy configuration on node "+a.node) {
		t.Errorf("an unmeshed pod: %d %s; want 404 saying it has no proxy configuration", status, body)
	}
}

// names are the resources' names.
func names[T interface{ GetName() string }](items []T) []string {
	out := make([]string, len(items))
	for i, r := range items {
		out[i] = r.GetName()
	}
	return out
}
