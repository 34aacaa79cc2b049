// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/model"
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

// TestPodChurnOverDelta replaces local pods again and again, as a rolling update does, each
// change one snapshot published to a live Envoy on a delta stream, where every type is its own
// response and nothing orders a new pod's inbound listener after its app clusters: Envoy must
// reject nothing, and hold the last snapshot whole at the end (every listener bound in its pod's
// namespace). (With the inbound routes still validating clusters this passed too, three runs of
// three: the agent's server and Envoy's ADS mux order the types in practice. It guards the churn;
// TestInboundListenerBeforeItsAppCluster is what fails without the fix.)
func TestPodChurnOverDelta(t *testing.T) {
	const rounds = 6
	m := xdstest.All()["mixed-http-primary"]
	pods := map[string]*nstest.NS{}
	for _, p := range m.Pods {
		pods[xds.PodKey(p.Namespace, p.Name)] = nstest.NewNamed(t, "aelive", p.Address)
	}
	srv := serveXDS(t)
	n := startNodeOn(t, m, nodeOptions{delta: true, pods: pods, xds: srv})
	n.requireAccepted(t)
	template := slices.IndexFunc(n.mesh.Pods, func(p model.LocalPod) bool { return p.Name == "payments-0" })
	if template < 0 {
		t.Fatal("no local payments-0 to replace")
	}
	for round := 1; round <= rounds; round++ {
		// This round's replica comes, last round's goes: one new inbound listener and its app
		// clusters, one of each removed, in one snapshot.
		next := n.mesh
		next.Pods = slices.DeleteFunc(slices.Clone(n.mesh.Pods), func(p model.LocalPod) bool { return strings.HasPrefix(p.Name, "payments-new-") })
		p := n.mesh.Pods[template]
		p.Name, p.UID = fmt.Sprintf("payments-new-%d", round), fmt.Sprintf("uid-new-%d", round)
		p.Address = fmt.Sprintf("10.244.1.%d", 100+round)
		ns := nstest.NewNamed(t, "aelive", p.Address)
		p.NetNS = ns.Path
		n.netns[ns.Path] = ns
		next.Pods = append(next.Pods, p)
		slices.SortFunc(next.Pods, func(a, b model.LocalPod) int {
			return strings.Compare(xds.PodKey(a.Namespace, a.Name), xds.PodKey(b.Namespace, b.Name))
		})
		res, err := xds.Build(next)
		if err != nil {
			t.Fatalf("round %d: Build: %v", round, err)
		}
		if _, err := srv.Publish(next.Node.Name, res); err != nil {
			t.Fatalf("round %d: Publish: %v", round, err)
		}
		n.mesh, n.res = next, res
		if problems := n.waitSettled(t, 30*time.Second); len(problems) > 0 {
			t.Fatalf("round %d (%s came): Envoy refused:\n%s", round, p.Name, strings.Join(problems, "\n"))
		}
	}
	n.requireBound(t)
}
