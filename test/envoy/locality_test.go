// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// TestAnUnlabelledNodePrefersNoEndpoint: a node without topology labels expresses no locality
// preference, so its Envoy spreads requests over every pod of payments, the one on the labelled
// node of another region too; no pod is preferred for sharing the missing labels (the
// unlabelled-nodes scenario: this node and node-b unlabelled, node-c in us-east).
func TestAnUnlabelledNodePrefersNoEndpoint(t *testing.T) {
	lm := startMesh(t, xdstest.Scenarios()["unlabelled-nodes"], nil)
	c := client{ns: lm.fabric.pods[xds.PodKey("web", "frontend-0")], podOf: lm.fabric.pod, window: 2 * time.Second}
	reached := map[string]int{}
	const requests = 30
	for range requests {
		seen := c.send(xdssim.Conn{DstIP: "10.96.0.10", DstPort: 8080, HTTP: &xdssim.Request{Host: "payments.shop.aether.internal:8080"}},
			xdswalk.ShapeHTTP11)
		if seen.Kind != xdswalk.SawApp || len(seen.Pods) != 1 {
			t.Fatalf("payments:8080: %s, want the application of one pod", seen)
		}
		reached[seen.Pods[0]]++
	}
	t.Logf("%d requests reached %v", requests, reached)
	if want := []string{"shop/payments-0", "shop/payments-1", "shop/payments-2"}; !slices.Equal(slices.Sorted(maps.Keys(reached)), want) {
		t.Errorf("%d requests reached %v, want each of %v (no locality is preferred)", requests, reached, want)
	}
}
