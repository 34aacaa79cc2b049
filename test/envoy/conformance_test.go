// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestEveryScenarioIsAccepted serves every golden scenario's configuration, as the agent's xDS
// server serves a node, to a real Envoy 1.40 started from the bootstrap the agent writes, over a
// state-of-the-world and over a delta ADS stream, with each local pod's network namespace real:
// Envoy must accept every resource (no update rejected or failed, nothing left warming, every
// listener, cluster, route configuration, load assignment and secret of the snapshot in its
// configuration dump) and bind every listener in its pod's namespace. A rejection fails the test
// with Envoy's own words.
func TestEveryScenarioIsAccepted(t *testing.T) {
	scenarios := xdstest.All()
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		for _, delta := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%s", name, streamName(delta)), func(t *testing.T) {
				n := startNode(t, scenarios[name], delta)
				n.requireAccepted(t)
				n.requireBound(t)
			})
		}
	}
}

func streamName(delta bool) string {
	if delta {
		return "delta"
	}
	return "sotw"
}

// TestARejectionFailsWithEnvoysWords is the negative control of TestEveryScenarioIsAccepted: a
// break planted after the builder, which the xDS server's own checks do not catch (a listener's
// first filter chain given twice, under another name: two chains with the same match), is
// reported as rejected, with Envoy's reason.
func TestARejectionFailsWithEnvoysWords(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(streamName(delta), func(t *testing.T) {
			m := xdstest.All()["pure-http"]
			n := startNodeWith(t, m, delta, func(res *xds.Resources) {
				l := proto.Clone(res.Listeners[0]).(*listenerv3.Listener)
				twin := proto.Clone(l.FilterChains[0]).(*listenerv3.FilterChain)
				twin.Name += "-twin"
				l.FilterChains = append(l.FilterChains, twin)
				res.Listeners[0] = l
			})
			problems := n.waitSettled(t, 20*time.Second)
			if len(problems) == 0 {
				t.Fatal("Envoy accepted a listener with two chains of the same match")
			}
			joined := strings.Join(problems, "\n")
			if !strings.Contains(joined, "rejected") {
				t.Errorf("the problems do not say what Envoy rejected:\n%s", joined)
			}
			t.Logf("what the test reports (as it must):\n%s", joined)
		})
	}
}
