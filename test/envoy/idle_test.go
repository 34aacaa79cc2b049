// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/envoytest"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// TestIdleHTTP2ConnectionsAreReclaimed: a client that opens a connection per request leaves a
// pooled upstream connection behind each time (the mesh pools per downstream connection), on the
// mTLS hop and, for an HTTP/2 application, between the destination's inbound and the application.
// Each must be closed after xds.HTTP2IdleTimeout (30 s) idle, not Envoy's default hour: the
// clusters' upstream_cx_idle_timeout counts it. With Envoy's defaults it failed: "waiting until
// the mTLS hop's pool (frontend's node) closed idle: not after 45s; last: upstream_cx_idle_timeout
// is 0".
func TestIdleHTTP2ConnectionsAreReclaimed(t *testing.T) {
	lm := startMesh(t, xdstest.Scenarios()["mixed-http-primary"], nil)
	c := client{ns: lm.fabric.pods[xds.PodKey("web", "frontend-0")], podOf: lm.fabric.pod, window: 2 * time.Second}
	// The HTTP/1.1 request is pinned to payments-1 (on another node): its hop is frontend's
	// node's. The h2c client sends no pin; whichever pod answers, its node's Envoy holds the pool
	// to its HTTP/2 application.
	pin := map[string]string{"x-aether-pod": "payments-1"}
	sent := time.Now()
	hop := c.send(xdssim.Conn{DstIP: "10.96.0.10", DstPort: 8080, HTTP: &xdssim.Request{Host: "payments.shop.aether.internal:8080", Headers: pin}}, xdswalk.ShapeHTTP11)
	if hop.Kind != xdswalk.SawApp || strings.Join(hop.Pods, ",") != "shop/payments-1" {
		t.Fatalf("a request to :8080: %s, want payments-1's application", hop)
	}
	h2 := c.send(xdssim.Conn{DstIP: "10.96.0.10", DstPort: 9090, HTTP: &xdssim.Request{Host: "payments.shop.aether.internal:9090", HTTP2: true}}, xdswalk.ShapeH2C)
	if h2.Kind != xdswalk.SawApp || len(h2.Pods) != 1 {
		t.Fatalf("an h2c request to :9090: %s, want a payments application", h2)
	}
	appNode := ""
	for _, w := range xdstest.Scenarios()["mixed-http-primary"].Workloads {
		if xds.PodKey(w.Namespace, w.Name) == h2.Pods[0] {
			appNode = w.Node
		}
	}
	for _, w := range []struct {
		node, what string
		cluster    *regexp.Regexp
	}{
		{xdstest.ThisNode, "the mTLS hop's pool (frontend's node)", regexp.MustCompile(`^cluster\.payments\.shop\.aether\.internal.*\|web/frontend\.upstream_cx_idle_timeout$`)},
		{appNode, "the HTTP/2 application's pool (" + h2.Pods[0] + "'s node)", regexp.MustCompile(`^cluster\.app\|` + regexp.QuoteMeta(h2.Pods[0]) + `.9090\.upstream_cx_idle_timeout$`)},
	} {
		e := lm.nodes[w.node].envoy
		e.WaitFor(t, 45*time.Second, w.what+" closed idle", func() (bool, string) {
			stats, err := e.Stats()
			if err != nil {
				return false, err.Error()
			}
			idle := envoytest.Matching(stats, w.cluster)
			if len(idle) == 0 {
				return false, "no counter matches " + w.cluster.String()
			}
			for _, v := range idle {
				if v > 0 {
					return true, ""
				}
			}
			return false, "upstream_cx_idle_timeout is 0"
		})
		if waited := time.Since(sent); waited < xds.HTTP2IdleTimeout-time.Second {
			t.Errorf("%s closed after %s, before its %s idle timeout", w.what, waited.Round(time.Millisecond), xds.HTTP2IdleTimeout)
		}
	}
	t.Logf("both pools closed idle %s after the requests", time.Since(sent).Round(time.Second))
}
