// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestCircuitBreakersAreTheNodes reads, from the live Envoy's /clusters, the circuit breakers it
// applies to every cluster of a node: none may be below the node's own budget
// (xds.ClusterCircuitBreaker). Envoy's defaults (1 024 connections, pending and active requests,
// 3 retries) capped the node's whole non-mesh egress at 1 024 connections through the one
// passthrough cluster. It failed while a cluster kept them: "blackhole: max_connections is 1024,
// want 50000", "blackhole: max_retries is 3, want 50000".
func TestCircuitBreakersAreTheNodes(t *testing.T) {
	n := startNode(t, xdstest.All()["mixed-http-primary"], false)
	n.requireAccepted(t)
	body, err := n.envoy.Get("/clusters")
	if err != nil {
		t.Fatal(err)
	}
	// Lines of the form <cluster>::default_priority::max_connections::<n>.
	limits := map[string]map[string]int{}
	for line := range strings.SplitSeq(string(body), "\n") {
		parts := strings.Split(line, "::")
		if len(parts) != 4 || parts[1] != "default_priority" {
			continue
		}
		v, err := strconv.Atoi(parts[3])
		if err != nil {
			t.Fatalf("/clusters line %q: %v", line, err)
		}
		if limits[parts[0]] == nil {
			limits[parts[0]] = map[string]int{}
		}
		limits[parts[0]][parts[2]] = v
	}
	checked := 0
	for _, c := range n.res.Clusters {
		got := limits[c.GetName()]
		if got == nil {
			t.Errorf("%s: /clusters shows no thresholds for it", c.GetName())
			continue
		}
		for _, threshold := range []string{"max_connections", "max_pending_requests", "max_requests", "max_retries"} {
			if got[threshold] != xds.ClusterCircuitBreaker {
				t.Errorf("%s: %s is %d, want %d", c.GetName(), threshold, got[threshold], xds.ClusterCircuitBreaker)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no cluster checked: the test proves nothing")
	}
	t.Logf("%d clusters at %d each", checked, xds.ClusterCircuitBreaker)
}
