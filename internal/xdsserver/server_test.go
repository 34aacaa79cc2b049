// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"fmt"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/testenv"
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

// TestNACKResendsWithoutParking is the negative control of the parking: with it off, go-control-
// plane sends the rejected version again as soon as the NACK arrives, which the client (like
// Envoy) would reject again forever. TestChangesReachTheClient's state-of-the-world case would catch it: the response after
// the NACK would be the rejected version again, not the next change.
func TestNACKResendsWithoutParking(t *testing.T) {
	s, _ := startServer(t)
	s.streams.resendRejected = true
	f := baseFixture()
	v1 := publish(t, s, "node-a", f)
	c := dial(t, s, "node-a", v1, fixtureTypes...)

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
	c := dial(t, s, "node-a", v1, fixtureTypes...)

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

// TestChangesReachTheClient, over both protocols: a client receives the four types and ACKs
// them; an endpoint-only change reaches it as the load assignment and nothing else (the proof of
// "nothing else": the next response is the listener change published after it, on the same
// ordered stream). A NACK is counted and logged with the node, the type, the rejected resource,
// the reason and (state of the world) the version; the rejected version is not sent again, and
// the stream delivers the next changes: the listener's, then the routes'.
func TestChangesReachTheClient(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			s, logs := startServer(t)
			f := baseFixture()
			v1 := publish(t, s, "node-a", f)
			c, first := p.open(t, s, "node-a", v1)
			want := map[string][]string{xdstest.Clusters: {clusterN}, xdstest.Endpoints: {assignment}, xdstest.Listeners: {listenerN}, xdstest.Routes: {routesN}}
			for typ, names := range want {
				if u := first[typ]; !slices.Equal(u.names, names) || (p.versioned && u.version != v1[typ]) {
					t.Fatalf("first %s response %v at version %q, want %v at %q", typ, u.names, u.version, names, v1[typ])
				}
			}
			if n := endpointCount(t, first[xdstest.Endpoints], assignment); n != 1 {
				t.Fatalf("load assignment %s has %d endpoints, want the fixture's one", assignment, n)
			}

			f.endpoints = []string{"127.0.0.11", "127.0.0.12"}
			v2 := publish(t, s, "node-a", f)
			u := p.expect(t, c, "an endpoint-only change", xdstest.Endpoints, []string{assignment}, v2[xdstest.Endpoints])
			if n := endpointCount(t, u, assignment); n != 2 {
				t.Errorf("load assignment %s has %d endpoints after the change, want 2", assignment, n)
			}
			f.statPrefix = "capture-2"
			v3 := publish(t, s, "node-a", f)
			p.expect(t, c, "a listener change", xdstest.Listeners, []string{listenerN}, v3[xdstest.Listeners])

			before := testutil.ToFloat64(nacks.WithLabelValues("listener"))
			c.nackNext(xdstest.Listeners, "bad listener on purpose: unknown field")
			f.statPrefix = "rejected"
			v4 := publish(t, s, "node-a", f)
			p.expect(t, c, "a listener change", xdstest.Listeners, []string{listenerN}, v4[xdstest.Listeners])
			testenv.Eventually(t, "the NACK counted", func() error {
				if n := testutil.ToFloat64(nacks.WithLabelValues("listener")); n != before+1 {
					return fmt.Errorf("aether_agent_xds_nacks_total{type=listener} = %v, want %v", n, before+1)
				}
				return nil
			})
			parts := []string{"NACK", `"node"="node-a"`, xdstest.Listeners, listenerN, `"reason"="bad listener on purpose: unknown field"`}
			if p.versioned {
				parts = append(parts, v4[xdstest.Listeners])
			}
			if lines := logs.with(parts...); len(lines) != 1 {
				t.Errorf("want one log line naming the NACK's node, type, resource, reason and version; got %d:\n%v", len(lines), logs.with("NACK"))
			}

			f.statPrefix = "fixed"
			v5 := publish(t, s, "node-a", f)
			p.expect(t, c, "a NACK and a listener change", xdstest.Listeners, []string{listenerN}, v5[xdstest.Listeners])
			f.host = "changed." + fqdn
			v6 := publish(t, s, "node-a", f)
			p.expect(t, c, "a route change", xdstest.Routes, []string{routesN}, v6[xdstest.Routes])
		})
	}
}
