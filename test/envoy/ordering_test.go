// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestInboundListenerBeforeItsAppCluster: over delta ADS a new pod's inbound listener can reach
// Envoy before its app|<pod>:<port> clusters do (each type is its own response, and nothing
// orders them). The listener must be taken all the same: a rejected listener is not sent again
// until it changes, and the pod would stay unreachable. Here the snapshot lacks the local pods'
// app clusters altogether: the inbound listeners must still be taken, with every other resource.
// (Failed on the builder before its inline route configurations stopped validating clusters:
// "listener inbound_shop/payments-0 rejected: route: unknown cluster 'app|shop/payments-0:8080'".)
func TestInboundListenerBeforeItsAppCluster(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(streamName(delta), func(t *testing.T) {
			var dropped []string
			n := startNodeWith(t, xdstest.All()["mixed-http-primary"], delta, func(res *xds.Resources) {
				res.Clusters = slices.DeleteFunc(slices.Clone(res.Clusters), func(c *clusterv3.Cluster) bool {
					if strings.HasPrefix(c.GetName(), "app|") {
						dropped = append(dropped, c.GetName())
						return true
					}
					return false
				})
			})
			if len(dropped) == 0 {
				t.Fatal("the scenario has no app| cluster to hold back: the test proves nothing")
			}
			if problems := n.waitSettled(t, 30*time.Second); len(problems) > 0 {
				t.Fatalf("with %v not yet sent, Envoy refused:\n%s", dropped, strings.Join(problems, "\n"))
			}
		})
	}
}
