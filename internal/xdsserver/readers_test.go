// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"slices"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// TestANewReaderGetsItsLoadAssignmentAgain, over a real delta ADS stream subscribed as Envoy
// subscribes: a publish that adds a cluster reading a load assignment the stream already holds (a
// second identity's cluster of one service, fetched on demand or brought by a new pod) sends that
// load assignment again, unchanged, after the cluster. Envoy subscribes to a name once, whichever
// clusters read it, and a new cluster warms only on a delivery: without it, the live Envoy held
// such a cluster warming for its initial_fetch_timeout (15 s), and every request for it failed at
// the on-demand timeout (test/envoy's live walk, declared-upstreams and on-demand). The control:
// a publish that changes the listener alone sends the listener alone, never the load assignment
// again.
func TestANewReaderGetsItsLoadAssignmentAgain(t *testing.T) {
	const node = "node-a"
	s, _ := startServer(t)
	res := baseFixture().resources(t)
	if _, err := s.Publish(node, res); err != nil {
		t.Fatal(err)
	}
	d, _ := openDelta(t, s, node, nil)

	second := res
	second.Clusters = append(slices.Clone(res.Clusters), cloneCluster(res.Clusters[0], "second-reader"))
	if _, err := s.Publish(node, second); err != nil {
		t.Fatal(err)
	}
	if u := d.next(t); u.typ != xdstest.Clusters || !slices.Equal(u.names, []string{"second-reader"}) {
		t.Fatalf("after a second reader was added the stream sent %s %v, want the cluster second-reader", u.typ, u.names)
	}
	u := d.next(t)
	if u.typ != xdstest.Endpoints || !slices.Equal(u.names, []string{assignment}) {
		t.Fatalf("after the new reader the stream sent %s %v, want the load assignment %s again", u.typ, u.names, assignment)
	}
	if got, _ := u.resources[assignment].(*endpointv3.ClusterLoadAssignment); !proto.Equal(got, res.Endpoints[0]) {
		t.Errorf("the load assignment sent again is %v, want it unchanged: %v", got, res.Endpoints[0])
	}

	f := baseFixture()
	f.statPrefix = "changed"
	listenerOnly := second
	listenerOnly.Listeners = f.resources(t).Listeners
	if _, err := s.Publish(node, listenerOnly); err != nil {
		t.Fatal(err)
	}
	if u := d.next(t); u.typ != xdstest.Listeners || !slices.Equal(u.names, []string{listenerN}) {
		t.Fatalf("after a listener change the stream sent %s %v, want the listener %s alone", u.typ, u.names, listenerN)
	}
}
