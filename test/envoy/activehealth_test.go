// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// TestClientsProbeAnActivelyCheckedService: payments asks its clients to probe it
// (health-check-mode active, health path /healthz), and payments-0's application, on this node
// (the one frontend's locality prefers: without probes it takes every request), answers its
// health path 503 while serving every other path. Its node agent's verdict (EDS) still says
// Healthy: only the client's own probes can tell. This node's Envoy probes each payments host from
// each cluster of frontend's (the HTTP 8080 one with its own hop, the TCP 9000 and default TCP
// ones through the primary's hop), takes payments-0 out of all three, and no request or
// connection of frontend's reaches it: the other localities take them.
func TestClientsProbeAnActivelyCheckedService(t *testing.T) {
	const sick = "shop/payments-0"
	lm := startMeshWith(t, xdstest.Scenarios()["active-health"], meshOptions{failingHealth: []string{xds.PodKey("shop", "payments-0")}})
	e := lm.nodes[xdstest.ThisNode].envoy
	// The stat names of frontend's clusters of payments (Envoy writes a name's ':' as '_').
	clusters := map[string]string{
		"HTTP 8080":   `payments\.shop\.aether\.internal_8080`,
		"TCP 9000":    `tcp_payments\.shop\.aether\.internal_9000`,
		"default TCP": `tcp_payments\.shop\.aether\.internal`,
	}
	stat := func(cluster, name string) uint64 {
		return statSum(t, e, regexp.MustCompile(`^cluster\.`+cluster+`\|web/frontend\.`+regexp.QuoteMeta(name)+`$`))
	}
	e.WaitFor(t, 30*time.Second, "every payments cluster probed, two hosts healthy", func() (bool, string) {
		var state string
		done := true
		for what, cluster := range clusters {
			healthy, failed, passed := stat(cluster, "membership_healthy"), stat(cluster, "health_check.failure"), stat(cluster, "health_check.success")
			state += fmt.Sprintf("%s: %d healthy, %d probes passed, %d failed; ", what, healthy, passed, failed)
			done = done && healthy == 2 && failed > 0 && passed > 0
		}
		return done, state
	})
	c := client{ns: lm.fabric.pods[xds.PodKey("web", "frontend-0")], podOf: lm.fabric.pod, window: 2 * time.Second}
	reached := map[string]int{}
	const each = 20
	for _, send := range []struct {
		conn  xdssim.Conn
		shape xdswalk.Shape
	}{
		{xdssim.Conn{DstIP: "10.96.0.10", DstPort: 8080, HTTP: &xdssim.Request{Host: "payments.shop.aether.internal:8080"}}, xdswalk.ShapeHTTP11},
		{xdssim.Conn{DstIP: "10.96.0.10", DstPort: 9000}, xdswalk.ShapeServerFirst},
	} {
		for range each {
			seen := c.send(send.conn, send.shape)
			if seen.Kind != xdswalk.SawApp || len(seen.Pods) != 1 {
				t.Fatalf("payments:%d: %s, want the application of one pod", send.conn.DstPort, seen)
			}
			reached[seen.Pods[0]]++
		}
	}
	t.Logf("%d requests and %d connections reached %v", each, each, reached)
	if reached[sick] != 0 {
		t.Errorf("%s, whose health path fails, was reached %d times: want never (the client's probes take it out)", sick, reached[sick])
	}
	if reached[sick]+reached["shop/payments-1"]+reached["shop/payments-2"] != 2*each {
		t.Errorf("reached %v, want the other two pods for all %d", reached, 2*each)
	}
}
