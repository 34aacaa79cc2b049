// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"fmt"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// otherAssignment is the second load assignment of twoAssignments.
var otherAssignment = xds.LoadAssignment(xds.FQDN("ledger", "shop", "aether.internal"), 8080)

// twoAssignments is the fixture with a second cluster and its load assignment, so that a change
// can touch one load assignment and leave the other as it was.
func twoAssignments(t *testing.T) xds.Resources {
	t.Helper()
	res := baseFixture().resources(t)
	other := cloneCluster(res.Clusters[0], "ledger-cluster")
	other.EdsClusterConfig.ServiceName = otherAssignment
	res.Clusters = append(res.Clusters, other)
	cla := proto.Clone(res.Endpoints[0]).(*endpointv3.ClusterLoadAssignment)
	cla.ClusterName = otherAssignment
	res.Endpoints = append(res.Endpoints, cla)
	return res
}

// withEndpoint is res with load assignment i replaced by a new message holding one more
// endpoint (ip), as a Builder makes a changed resource: the other messages are res's own.
func withEndpoint(res xds.Resources, i int, ip string) xds.Resources {
	out := res
	out.Endpoints = slices.Clone(res.Endpoints)
	cla := proto.Clone(res.Endpoints[i]).(*endpointv3.ClusterLoadAssignment)
	cla.Endpoints[0].LbEndpoints = append(cla.Endpoints[0].LbEndpoints, &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(ip, 18008)}}})
	out.Endpoints[i] = cla
	return out
}

// equalCopy is res with every resource replaced by an equal copy: new messages, same content.
func equalCopy(res xds.Resources) xds.Resources {
	clone := func(m proto.Message) proto.Message { return proto.Clone(m) }
	out := xds.Resources{}
	for _, c := range res.Clusters {
		out.Clusters = append(out.Clusters, clone(c).(*clusterv3.Cluster))
	}
	for _, e := range res.Endpoints {
		out.Endpoints = append(out.Endpoints, clone(e).(*endpointv3.ClusterLoadAssignment))
	}
	for _, l := range res.Listeners {
		out.Listeners = append(out.Listeners, clone(l).(*listenerv3.Listener))
	}
	for _, r := range res.Routes {
		out.Routes = append(out.Routes, clone(r).(*routev3.RouteConfiguration))
	}
	return out
}

// TestChangeSendsTheChangedResourceOnly, over both protocols: Publish reuses a resource's hash
// only for the very message it hashed. A changed load assignment, a new message under the same
// name, is published at a new version and reaches the client with its new content as the next
// response, no other type sent before it. Over delta that response carries it alone, not the
// other load assignment, which the publish left as the very same message. Equal copies of every
// resource (new messages, same content) publish nothing; a change of the other load assignment
// then reaches the client the same way.
func TestChangeSendsTheChangedResourceOnly(t *testing.T) {
	both := slices.Sorted(slices.Values([]string{assignment, otherAssignment}))
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			s, _ := startServer(t)
			publishResources := func(what string, res xds.Resources) map[string]string {
				t.Helper()
				if published, err := s.Publish("node-a", res); err != nil || !published {
					t.Fatalf("publishing %s: published %v, %v; want a new snapshot", what, published, err)
				}
				return s.Versions("node-a")
			}
			first := twoAssignments(t)
			v1 := publishResources("two load assignments", first)
			c, initial := p.open(t, s, "node-a", v1)
			if got := initial[xdstest.Endpoints].names; !slices.Equal(got, both) {
				t.Fatalf("first EDS response %v, want both load assignments", got)
			}

			changed := withEndpoint(first, 0, "127.0.0.12")
			v2 := publishResources("a changed load assignment", changed)
			if v2[xdstest.Endpoints] == v1[xdstest.Endpoints] {
				t.Fatalf("a changed load assignment left the EDS version at %s", v2[xdstest.Endpoints])
			}
			u := p.expect(t, c, "a change of "+assignment, xdstest.Endpoints, p.sent([]string{assignment}, both), v2[xdstest.Endpoints])
			if n := endpointCount(t, u, assignment); n != 2 {
				t.Errorf("load assignment %s has %d endpoints after its change, want 2", assignment, n)
			}
			if !p.incremental {
				if n := endpointCount(t, u, otherAssignment); n != 1 {
					t.Errorf("load assignment %s has %d endpoints, want its one", otherAssignment, n)
				}
			}

			if published, err := s.Publish("node-a", equalCopy(changed)); err != nil || published {
				t.Errorf("publishing equal copies of every resource: published %v, %v; want nothing published", published, err)
			}
			if v := s.Versions("node-a"); fmt.Sprint(v) != fmt.Sprint(v2) {
				t.Errorf("equal copies moved the versions from %v to %v", v2, v)
			}

			changed = withEndpoint(changed, 1, "127.0.0.13")
			v3 := publishResources("the other load assignment changed", changed)
			p.expect(t, c, "a change of "+otherAssignment, xdstest.Endpoints, p.sent([]string{otherAssignment}, both), v3[xdstest.Endpoints])
		})
	}
}
