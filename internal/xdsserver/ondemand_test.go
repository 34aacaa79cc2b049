// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"cmp"
	"maps"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/go-logr/logr"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	servertest "github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// TestOnDemandClusterIsAnswered is on-demand cluster discovery as the node's Envoy does it, over a
// real delta ADS stream: subscribed to every cluster (wildcard), it asks for one more by name,
// catalog's, which the node does not carry (the declared-upstreams scenario). The server hands
// the name over (OnClusterDemand); the answer is built as the agent builds it (xds.Demand against
// the full model, then the mesh with that service demanded) and published; the open stream then
// delivers the cluster, and its load assignment when asked for it by name, as Envoy's EDS does.
func TestOnDemandClusterIsAnswered(t *testing.T) {
	const node = "node-a"
	const wanted = "catalog.shop.aether.internal:8080|web/frontend"
	m := xdstest.DeclaredUpstreams()
	s, _ := startServer(t)
	asked := make(chan []string, 4)
	s.OnClusterDemand(func(nodeID string, clusters []string) {
		if nodeID == node {
			asked <- clusters
		}
	})
	res, err := xds.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(res.Clusters, func(c *clusterv3.Cluster) bool { return c.GetName() == wanted }) {
		t.Fatalf("the node carries %s up front: the scenario proves nothing", wanted)
	}
	if _, err := s.Publish(node, res); err != nil {
		t.Fatal(err)
	}
	d := dialDelta(t, s, node)
	d.subscribe(t, servertest.Clusters) // every cluster, as Envoy's CDS
	if u := d.next(t); u.typ != servertest.Clusters || slices.Contains(u.names, wanted) {
		t.Fatalf("the first cluster response: %s %v; want clusters without %s", u.typ, u.names, wanted)
	}
	d.subscribe(t, servertest.Clusters, wanted) // on demand: resource_names_subscribe
	var names []string
	select {
	case names = <-asked:
	case <-testContext(t).Done():
		t.Fatal("the server handed over no cluster name")
	}
	if !slices.Equal(names, []string{wanted}) {
		t.Fatalf("the server handed over %q, want [%s]", names, wanted)
	}
	identity, service, ok := xds.Demand(m, wanted)
	if !ok || identity != xdstest.Identity("web", "frontend") || service != "catalog.shop" {
		t.Fatalf("xds.Demand(%s) = %q, %q, %v; want frontend's identity and catalog.shop", wanted, identity, service, ok)
	}
	answered, err := xds.Build(xds.WithDemand(m, identity, service))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(node, answered); err != nil {
		t.Fatal(err)
	}
	// The delta server answers the subscription change at once with what the snapshot held (no
	// cluster of that name); the published answer follows. Envoy waits through the first.
	var c *clusterv3.Cluster
	for i := 0; c == nil; i++ {
		u := d.next(t)
		if u.typ != servertest.Clusters || len(u.removed) > 0 || i == 2 {
			t.Fatalf("after the answer the stream sent %s %v (removed %v), want the cluster %s", u.typ, u.names, u.removed, wanted)
		}
		c, _ = u.resources[wanted].(*clusterv3.Cluster)
	}
	assignment := c.GetEdsClusterConfig().GetServiceName()
	d.subscribe(t, servertest.Endpoints, assignment)
	if u := d.next(t); u.typ != servertest.Endpoints || !slices.Equal(u.names, []string{assignment}) {
		t.Fatalf("asked for %s, the stream sent %s %v", assignment, u.typ, u.names)
	}
}

// TestOnDemandNamesOnlyForClusters: the server hands over cluster names only, never the wildcard,
// and nothing of another type (a load assignment asked for by name is ordinary EDS).
func TestOnDemandNamesOnlyForClusters(t *testing.T) {
	s := New(Options{Log: logr.Discard()})
	var got [][]string
	s.OnClusterDemand(func(_ string, clusters []string) { got = append(got, clusters) })
	s.clusterDemand("n", servertest.Endpoints, []string{"a:1"})
	s.clusterDemand("n", servertest.Clusters, []string{"*"})
	s.clusterDemand("n", servertest.Clusters, []string{"*", "b:1|ns/sa"})
	if len(got) != 1 || !slices.Equal(got[0], []string{"b:1|ns/sa"}) {
		t.Errorf("handed over %q, want only [b:1|ns/sa]", got)
	}
}

// TestProxylessSentOnlyWhatItAsks: a proxyless gRPC client (grpc-go's xds:/// resolver) fetches
// what it dials, by name, type after type: the listener of its target, that listener's route
// configuration, the clusters the routes name, their load assignments. Whatever the node carries
// and whatever the rendering holds (every HTTP/2 port of every service), each answer carries the
// names asked for and nothing more: the proxyless rendering needs no on-demand path, as the
// client's own requests are its demand. The rendering here holds the declared-upstreams mesh:
// the h2 9090 of payments (routed by a GRPCRoute to itself and its canary) and of payments-canary;
// the client dials the canary.
func TestProxylessSentOnlyWhatItAsks(t *testing.T) {
	s, _, changes := startProxylessServer(t)
	m := xdstest.DeclaredUpstreams()
	res, err := xds.BuildProxyless(m, xds.ProxylessClient{Identity: xdstest.Identity("shop", "client"), SNI: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Listeners) < 2 || len(res.Clusters) < 2 {
		t.Fatalf("the rendering holds %d listeners and %d clusters: too few to show that fewer are sent", len(res.Listeners), len(res.Clusters))
	}
	stream := rawStream(t, s.ProxylessAddress())
	ask := func(typeURL string, names []string) map[string]proto.Message {
		t.Helper()
		if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: proxylessNode(testPodID, true), TypeUrl: typeURL, ResourceNames: names}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]proto.Message{}
		for _, r := range resp.GetResources() {
			msg, err := r.UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			got[nameOf(msg)] = msg
		}
		if resp.GetTypeUrl() != typeURL || !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(slices.Values(names))) {
			t.Fatalf("asked for %s %q, the answer carries %s %q", typeURL, names, resp.GetTypeUrl(), slices.Sorted(maps.Keys(got)))
		}
		// Acknowledged, as grpc-go does, so that the next request is a new subscription.
		if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: proxylessNode(testPodID, true), TypeUrl: typeURL,
			ResourceNames: names, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	target := xds.ProxylessListener("payments-canary.shop.aether.internal", 9090)
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: proxylessNode(testPodID, true), TypeUrl: servertest.Listeners,
		ResourceNames: []string{target}}); err != nil {
		t.Fatal(err)
	}
	<-changes
	if published, err := s.PublishProxyless(testPodID, res); err != nil || !published {
		t.Fatalf("PublishProxyless: %v, %v", published, err)
	}
	first, err := stream.Recv()
	if err != nil || len(first.GetResources()) != 1 {
		t.Fatalf("the listener answer: %d resources, %v; want %s alone", len(first.GetResources()), err, target)
	}
	var l listenerv3.Listener
	if err := first.GetResources()[0].UnmarshalTo(&l); err != nil {
		t.Fatal(err)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := l.GetApiListener().GetApiListener().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	routes := ask(servertest.Routes, []string{hcm.GetRds().GetRouteConfigName()})
	var clusters []string
	for _, rc := range routes {
		for _, vh := range rc.(*routev3.RouteConfiguration).GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if c := r.GetRoute().GetCluster(); c != "" {
					clusters = append(clusters, c)
				}
				for _, w := range r.GetRoute().GetWeightedClusters().GetClusters() {
					clusters = append(clusters, w.GetName())
				}
			}
		}
	}
	slices.Sort(clusters)
	clusters = slices.Compact(clusters)
	var assignments []string
	for _, c := range ask(servertest.Clusters, clusters) {
		assignments = append(assignments, cmp.Or(c.(*clusterv3.Cluster).GetEdsClusterConfig().GetServiceName(), nameOf(c)))
	}
	slices.Sort(assignments)
	ask(servertest.Endpoints, slices.Compact(assignments))
	if len(clusters) >= len(res.Clusters) {
		t.Errorf("the client dialled one target and took all %d clusters of the rendering", len(res.Clusters))
	}
}

// nameOf is a resource's name, as the cache keys it.
func nameOf(m proto.Message) string {
	switch r := m.(type) {
	case *listenerv3.Listener:
		return r.GetName()
	case *routev3.RouteConfiguration:
		return r.GetName()
	case *clusterv3.Cluster:
		return r.GetName()
	case *endpointv3.ClusterLoadAssignment:
		return r.GetClusterName()
	}
	return ""
}
