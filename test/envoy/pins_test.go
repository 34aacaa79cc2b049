// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// TestPinsOnTheWire sends frontend's requests to payments:8080 with the pin headers through the
// live mesh (capture, frontend's node Envoy, the mTLS hop, the destination's inbound, the pod's
// application) and reads which pod answered: one pin reaches exactly its pod; both pins reach the
// pod both name, and are a 503 when they name two. Before the joint selector they matched none and
// balanced over the service: "both_pins_naming_two_pods: request 0: reached the application: port
// 8080 as HTTP on shop/payments-0 [...], want a 503 from the mesh".
func TestPinsOnTheWire(t *testing.T) {
	lm := startMesh(t, xdstest.Scenarios()["subsets"], nil)
	frontend := lm.fabric.pods[xds.PodKey("web", "frontend-0")]
	if frontend == nil {
		t.Fatal("no frontend-0 in the subsets scenario")
	}
	c := client{ns: frontend, podOf: lm.fabric.pod, window: 2 * time.Second}
	const pay1, pay2 = "10.244.2.10", "10.244.3.10"
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    string // the pod, or "" for a 503
	}{
		{"ip pin", map[string]string{"x-aether-ip": pay1}, "shop/payments-1"},
		{"pod pin", map[string]string{"x-aether-pod": "payments-2"}, "shop/payments-2"},
		{"both pins agreeing", map[string]string{"x-aether-ip": pay2, "x-aether-pod": "payments-2"}, "shop/payments-2"},
		{"both pins naming two pods", map[string]string{"x-aether-ip": pay1, "x-aether-pod": "payments-2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Several requests: a pin that does not hold would show as another pod among them.
			for i := range 6 {
				seen := c.send(xdssim.Conn{DstIP: "10.96.0.10", DstPort: 8080, HTTP: &xdssim.Request{
					Host: "payments.shop.aether.internal:8080", Path: fmt.Sprintf("/pin/%d", i), Headers: tc.headers,
				}}, xdswalk.ShapeHTTP11)
				switch {
				case tc.want == "" && (seen.Kind != xdswalk.SawAnswer || seen.Status != 503):
					t.Fatalf("request %d: %s, want a 503 from the mesh", i, seen)
				case tc.want != "" && (seen.Kind != xdswalk.SawApp || !slices.Equal(seen.Pods, []string{tc.want})):
					t.Fatalf("request %d: %s, want %s's application", i, seen, tc.want)
				}
			}
		})
	}
}
