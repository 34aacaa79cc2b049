// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"fmt"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// versions are the responses' versions, in order.
func versions(rs []xdstest.Response) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Version
		if r.NACKed {
			out[i] += " (NACKed)"
		}
	}
	return out
}

// publish publishes f for node, failing the test unless it was published.
func publish(t *testing.T, s *Server, node string, f fixture) map[string]string {
	t.Helper()
	published, err := s.Publish(node, f.resources(t))
	if err != nil || !published {
		t.Fatalf("Publish: published %v, %v; want a new snapshot", published, err)
	}
	return s.Versions(node)
}

// accepted waits until the client accepted version want[t] of every type t in want.
func accepted(t *testing.T, c *xdstest.Client, want map[string]string, types ...string) {
	t.Helper()
	if err := c.Await(testContext(t), func(s xdstest.State) error {
		for _, typ := range types {
			if s.Versions[typ] != want[typ] {
				return fmt.Errorf("%s at version %q, want %q", typ, s.Versions[typ], want[typ])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPublishVersionsEachType: each type's version is a hash of its content. Publishing the same
// resources again publishes nothing; an endpoint-only change bumps the EDS version and no other;
// the same content in another order is the same version.
func TestPublishVersionsEachType(t *testing.T) {
	s := New(Options{})
	base := baseFixture()
	v1 := publish(t, s, "n", base)

	if published, err := s.Publish("n", base.resources(t)); published || err != nil {
		t.Errorf("publishing the same resources again: published %v, %v; want nothing published", published, err)
	}

	moved := base
	moved.endpoints = []string{"127.0.0.12"}
	v2 := publish(t, s, "n", moved)
	for _, typ := range []string{xdstest.Clusters, xdstest.Listeners, xdstest.Routes} {
		if v1[typ] != v2[typ] {
			t.Errorf("an endpoint-only change moved %s from %s to %s", typ, v1[typ], v2[typ])
		}
	}
	if v1[xdstest.Endpoints] == v2[xdstest.Endpoints] {
		t.Errorf("an endpoint change left the EDS version at %s", v2[xdstest.Endpoints])
	}

	// Two clusters, in either order: one version.
	other := cloneCluster(base.resources(t).Clusters[0], "other")
	a, b := base.resources(t), base.resources(t)
	a.Clusters = append(a.Clusters, other)
	b.Clusters = append([]*clusterv3.Cluster{other}, b.Clusters...)
	va, err := contentVersion(resources(a.Clusters))
	if err != nil {
		t.Fatal(err)
	}
	vb, err := contentVersion(resources(b.Clusters))
	if err != nil {
		t.Fatal(err)
	}
	if va != vb {
		t.Errorf("the same clusters in another order hash to %s and %s", va, vb)
	}
}

func cloneCluster(c *clusterv3.Cluster, name string) *clusterv3.Cluster {
	out := proto.Clone(c).(*clusterv3.Cluster)
	out.Name = name
	return out
}

// TestStateOfTheWorldEndpointOnlyChange: a real ADS client receives the four types and ACKs them;
// an endpoint-only change reaches it as an EDS response and nothing else. The proof of "nothing
// else": after the EDS response, a listener change is published, and the LDS response that
// follows is the first since the initial one (a listener push caused by the endpoint change would
// have been sent before it, on the same ordered stream).
func TestStateOfTheWorldEndpointOnlyChange(t *testing.T) {
	s, _ := startServer(t)
	f := baseFixture()
	v1 := publish(t, s, "node-a", f)
	c, err := xdstest.Dial(testContext(t), s.Address(), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	all := []string{xdstest.Clusters, xdstest.Endpoints, xdstest.Listeners, xdstest.Routes}
	accepted(t, c, v1, all...)
	if cla := c.State().LoadAssignment(assignment); len(cla.GetEndpoints()[0].GetLbEndpoints()) != 1 {
		t.Fatalf("load assignment %s: %v, want the fixture's one endpoint", assignment, cla)
	}

	f.endpoints = []string{"127.0.0.11", "127.0.0.12"}
	v2 := publish(t, s, "node-a", f)
	accepted(t, c, v2, xdstest.Endpoints)

	f.statPrefix = "capture-2"
	v3 := publish(t, s, "node-a", f)
	accepted(t, c, v3, xdstest.Listeners)

	got := c.State()
	if lds := versions(got.Received(xdstest.Listeners)); !slices.Equal(lds, []string{v1[xdstest.Listeners], v3[xdstest.Listeners]}) {
		t.Errorf("LDS responses %v, want the first and the listener change's only (an endpoint change sent a listener update)", lds)
	}
	for _, typ := range []string{xdstest.Clusters, xdstest.Routes} {
		if rs := versions(got.Received(typ)); !slices.Equal(rs, []string{v1[typ]}) {
			t.Errorf("%s responses %v, want the first only", typ, rs)
		}
	}
	if eds := versions(got.Received(xdstest.Endpoints)); !slices.Equal(eds, []string{v1[xdstest.Endpoints], v2[xdstest.Endpoints]}) {
		t.Errorf("EDS responses %v, want the first and the endpoint change's", eds)
	}
	if n := len(got.LoadAssignment(assignment).GetEndpoints()[0].GetLbEndpoints()); n != 2 {
		t.Errorf("load assignment %s has %d endpoints after the change, want 2", assignment, n)
	}
}

// TestNACKLoggedCountedParked: a NACK is logged with the node, the type, the rejected resources
// and the reason, and counted; the rejected version is not sent again, and the stream delivers
// the next change: the LDS responses are the first, the rejected one, then the next change's.
func TestNACKLoggedCountedParked(t *testing.T) {
	s, logs := startServer(t)
	f := baseFixture()
	v1 := publish(t, s, "node-a", f)
	c, err := xdstest.Dial(testContext(t), s.Address(), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	accepted(t, c, v1, xdstest.Clusters, xdstest.Endpoints, xdstest.Listeners, xdstest.Routes)

	before := testutil.ToFloat64(nacks.WithLabelValues("listener"))
	c.NACKNext(xdstest.Listeners, "bad listener on purpose: unknown field")
	f.statPrefix = "rejected"
	v2 := publish(t, s, "node-a", f)
	waitFor(t, "the NACK counted", func() error {
		if n := testutil.ToFloat64(nacks.WithLabelValues("listener")); n != before+1 {
			return fmt.Errorf("aether_agent_xds_nacks_total{type=listener} = %v, want %v", n, before+1)
		}
		return nil
	})
	lines := logs.with("NACK", `"node"="node-a"`, xdstest.Listeners, listenerN, `"reason"="bad listener on purpose: unknown field"`,
		v2[xdstest.Listeners])
	if len(lines) != 1 {
		t.Errorf("want one log line naming the NACK's node, type, resource, reason and version; got %d:\n%v", len(lines), logs.with("NACK"))
	}

	f.statPrefix = "fixed"
	v3 := publish(t, s, "node-a", f)
	accepted(t, c, v3, xdstest.Listeners)
	want := []string{v1[xdstest.Listeners], v2[xdstest.Listeners] + " (NACKed)", v3[xdstest.Listeners]}
	if got := versions(c.State().Received(xdstest.Listeners)); !slices.Equal(got, want) {
		t.Errorf("LDS responses %v, want %v: the rejected version once, then the next change", got, want)
	}
}

// TestNACKResendsWithoutParking is the negative control of the parking: with it off, go-control-
// plane sends the rejected version again as soon as the NACK arrives, which the client (like
// Envoy) would reject again forever. TestNACKLoggedCountedParked's history check would catch it.
func TestNACKResendsWithoutParking(t *testing.T) {
	s, _ := startServer(t)
	s.streams.resendRejected = true
	f := baseFixture()
	v1 := publish(t, s, "node-a", f)
	c, err := xdstest.Dial(testContext(t), s.Address(), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	accepted(t, c, v1, xdstest.Clusters, xdstest.Endpoints, xdstest.Listeners, xdstest.Routes)

	c.NACKNext(xdstest.Listeners, "rejected on purpose")
	f.statPrefix = "rejected"
	v2 := publish(t, s, "node-a", f)
	if err := c.Await(testContext(t), func(st xdstest.State) error {
		if got := versions(st.Received(xdstest.Listeners)); !slices.Equal(got, []string{v1[xdstest.Listeners],
			v2[xdstest.Listeners] + " (NACKed)", v2[xdstest.Listeners]}) {
			return fmt.Errorf("LDS responses %v, want the rejected version sent again", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestInconsistentSnapshotRefused: snapshot.Consistent() gates every publish. A cluster whose
// load assignment is missing, or a load assignment no cluster names, is refused with an error, a
// log line and a count; the previous snapshot stays served; the next valid change goes out.
// Resources named twice are refused the same way.
func TestInconsistentSnapshotRefused(t *testing.T) {
	s, logs := startServer(t)
	f := baseFixture()
	v1 := publish(t, s, "node-a", f)
	c, err := xdstest.Dial(testContext(t), s.Address(), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	accepted(t, c, v1, xdstest.Clusters, xdstest.Endpoints, xdstest.Listeners, xdstest.Routes)

	missing := f.resources(t)
	missing.Endpoints = nil // the cluster names an EDS resource no one serves
	orphan := f.resources(t)
	orphan.Clusters = nil // a load assignment no cluster names
	for name, res := range map[string]struct {
		broken func() error
		result string
	}{
		"missing load assignment": {func() error { _, err := s.Publish("node-a", missing); return err }, ResultInconsistent},
		"orphan load assignment":  {func() error { _, err := s.Publish("node-a", orphan); return err }, ResultInconsistent},
		"a name twice": {func() error {
			twice := f.resources(t)
			twice.Routes = append(twice.Routes, twice.Routes[0])
			_, err := s.Publish("node-a", twice)
			return err
		}, ResultInvalid},
	} {
		before := testutil.ToFloat64(snapshots.WithLabelValues(res.result))
		err := res.broken()
		t.Logf("%s: %v", name, err)
		if err == nil {
			t.Errorf("%s: published", name)
		}
		if n := testutil.ToFloat64(snapshots.WithLabelValues(res.result)); n != before+1 {
			t.Errorf("%s: aether_agent_xds_snapshots_total{result=%q} went from %v to %v, want +1", name, res.result, before, n)
		}
		if got := s.Versions("node-a"); fmt.Sprint(got) != fmt.Sprint(v1) {
			t.Errorf("%s: served versions %v, want the previous snapshot's %v", name, got, v1)
		}
	}
	if n := len(logs.with("Refusing an inconsistent xDS snapshot", assignment)); n != 2 {
		t.Errorf("%d log lines refuse an inconsistent snapshot naming %s, want 2:\n%v", n, assignment, logs.with("Refusing"))
	}

	f.endpoints = []string{"127.0.0.12"}
	v2 := publish(t, s, "node-a", f)
	accepted(t, c, v2, xdstest.Endpoints)
	if eds := versions(c.State().Received(xdstest.Endpoints)); !slices.Equal(eds, []string{v1[xdstest.Endpoints], v2[xdstest.Endpoints]}) {
		t.Errorf("EDS responses %v: a refused snapshot reached the client", eds)
	}
}

// TestDeltaEndpointOnlyChange: the same server speaks delta xDS. An endpoint-only change is one
// delta response carrying the changed load assignment alone, and the next response after it is
// the listener change published next (nothing came in between); a delta NACK is counted and
// logged with the resource it rejected, and the stream delivers the next change.
func TestDeltaEndpointOnlyChange(t *testing.T) {
	s, logs := startServer(t)
	f := baseFixture()
	publish(t, s, "node-a", f)
	ctx := testContext(t)
	conn, err := grpc.NewClient(xdstest.Target(s.Address()), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
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
		return resp
	}
	names := func(resp *discoveryv3.DeltaDiscoveryResponse) []string {
		var out []string
		for _, r := range resp.GetResources() {
			out = append(out, r.GetName())
		}
		return out
	}

	// Every cluster and listener (wildcard), the load assignment and routes they name.
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstest.Clusters})
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstest.Listeners})
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstest.Endpoints, ResourceNamesSubscribe: []string{assignment}})
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: xdstest.Routes, ResourceNamesSubscribe: []string{routesN}})
	got := map[string][]string{}
	for range 4 {
		resp := recv()
		got[resp.GetTypeUrl()] = names(resp)
		send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
	}
	want := map[string][]string{xdstest.Clusters: {clusterN}, xdstest.Endpoints: {assignment}, xdstest.Listeners: {listenerN}, xdstest.Routes: {routesN}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first delta responses %v, want %v", got, want)
	}

	f.endpoints = []string{"127.0.0.11", "127.0.0.12"}
	publish(t, s, "node-a", f)
	resp := recv()
	if resp.GetTypeUrl() != xdstest.Endpoints || !slices.Equal(names(resp), []string{assignment}) || len(resp.GetRemovedResources()) != 0 {
		t.Fatalf("after an endpoint-only change the stream sent %s %v (removed %v), want the load assignment %s alone",
			resp.GetTypeUrl(), names(resp), resp.GetRemovedResources(), assignment)
	}
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})

	f.statPrefix = "capture-2"
	publish(t, s, "node-a", f)
	resp = recv()
	if resp.GetTypeUrl() != xdstest.Listeners || !slices.Equal(names(resp), []string{listenerN}) {
		t.Fatalf("after a listener change the stream sent %s %v, want the listener %s (anything else came from the endpoint change)",
			resp.GetTypeUrl(), names(resp), listenerN)
	}

	before := testutil.ToFloat64(nacks.WithLabelValues("listener"))
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce(),
		ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: "delta listener rejected on purpose"}})
	waitFor(t, "the delta NACK counted", func() error {
		if n := testutil.ToFloat64(nacks.WithLabelValues("listener")); n != before+1 {
			return fmt.Errorf("aether_agent_xds_nacks_total{type=listener} = %v, want %v", n, before+1)
		}
		return nil
	})
	if lines := logs.with("NACK", listenerN, "delta listener rejected on purpose"); len(lines) != 1 {
		t.Errorf("want one log line naming the delta NACK's listener and reason, got %v", logs.with("NACK"))
	}

	f.host = "changed." + fqdn
	publish(t, s, "node-a", f)
	if resp := recv(); resp.GetTypeUrl() != xdstest.Routes || !slices.Equal(names(resp), []string{routesN}) {
		t.Fatalf("after a NACK and a route change the stream sent %s %v, want the routes %s", resp.GetTypeUrl(), names(resp), routesN)
	}
}
