// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"fmt"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
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

// TestPublishHashesByMessage: Publish reuses a resource's hash only for the very message it
// hashed. A changed load assignment, a new message under the same name, is published at a new
// version and served with its new content over state of the world, while the other types are not
// sent again; equal copies of every resource (new messages, same content) publish nothing.
func TestPublishHashesByMessage(t *testing.T) {
	s, _ := startServer(t)
	first := twoAssignments(t)
	if published, err := s.Publish("node-a", first); err != nil || !published {
		t.Fatalf("first publish: published %v, %v", published, err)
	}
	v1 := s.Versions("node-a")
	c, err := xdstest.Dial(testContext(t), s.Address(), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	all := []string{xdstest.Clusters, xdstest.Endpoints, xdstest.Listeners, xdstest.Routes}
	accepted(t, c, v1, all...)

	changed := withEndpoint(first, 0, "127.0.0.12")
	if published, err := s.Publish("node-a", changed); err != nil || !published {
		t.Fatalf("publishing a changed load assignment: published %v, %v; want a new snapshot", published, err)
	}
	v2 := s.Versions("node-a")
	if v2[xdstest.Endpoints] == v1[xdstest.Endpoints] {
		t.Fatalf("a changed load assignment left the EDS version at %s", v2[xdstest.Endpoints])
	}
	accepted(t, c, v2, xdstest.Endpoints)
	got := c.State()
	if n := len(got.LoadAssignment(assignment).GetEndpoints()[0].GetLbEndpoints()); n != 2 {
		t.Errorf("load assignment %s has %d endpoints after its change, want 2", assignment, n)
	}
	if n := len(got.LoadAssignment(otherAssignment).GetEndpoints()[0].GetLbEndpoints()); n != 1 {
		t.Errorf("load assignment %s has %d endpoints, want its one", otherAssignment, n)
	}
	for _, typ := range []string{xdstest.Clusters, xdstest.Listeners, xdstest.Routes} {
		if rs := versions(got.Received(typ)); !slices.Equal(rs, []string{v1[typ]}) {
			t.Errorf("%s responses %v, want the first only", typ, rs)
		}
	}

	if published, err := s.Publish("node-a", equalCopy(changed)); err != nil || published {
		t.Errorf("publishing equal copies of every resource: published %v, %v; want nothing published", published, err)
	}
	if v3 := s.Versions("node-a"); fmt.Sprint(v3) != fmt.Sprint(v2) {
		t.Errorf("equal copies moved the versions from %v to %v", v2, v3)
	}
}

// TestDeltaSendsOnlyTheChangedResource: over delta xDS, a change of one load assignment sends
// that one and not the other, which the publish left as the very same message; a change of the
// other then sends it alone.
func TestDeltaSendsOnlyTheChangedResource(t *testing.T) {
	s, _ := startServer(t)
	res := twoAssignments(t)
	if _, err := s.Publish("node-a", res); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(xdstest.Target(s.Address()), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "node-a"}
	send := func(req *discoveryv3.DeltaDiscoveryRequest) {
		t.Helper()
		req.Node = node
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() *discoveryv3.DeltaDiscoveryResponse {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
		return resp
	}
	names := func(resp *discoveryv3.DeltaDiscoveryResponse) []string {
		var out []string
		for _, r := range resp.GetResources() {
			out = append(out, r.GetName())
		}
		slices.Sort(out)
		return out
	}
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstest.Endpoints, ResourceNamesSubscribe: []string{assignment, otherAssignment}})
	if resp := recv(); !slices.Equal(names(resp), []string{otherAssignment, assignment}) {
		t.Fatalf("first delta EDS response %v, want both load assignments", names(resp))
	}

	res = withEndpoint(res, 0, "127.0.0.12")
	if _, err := s.Publish("node-a", res); err != nil {
		t.Fatal(err)
	}
	if resp := recv(); resp.GetTypeUrl() != xdstest.Endpoints || !slices.Equal(names(resp), []string{assignment}) {
		t.Fatalf("after a change of %s the stream sent %s %v, want it alone", assignment, resp.GetTypeUrl(), names(resp))
	}

	res = withEndpoint(res, 1, "127.0.0.13")
	if _, err := s.Publish("node-a", res); err != nil {
		t.Fatal(err)
	}
	if resp := recv(); resp.GetTypeUrl() != xdstest.Endpoints || !slices.Equal(names(resp), []string{otherAssignment}) {
		t.Fatalf("after a change of %s the stream sent %s %v, want it alone", otherAssignment, resp.GetTypeUrl(), names(resp))
	}
}
