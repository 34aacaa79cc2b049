// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/go-logr/logr"

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
