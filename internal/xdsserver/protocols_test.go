// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"fmt"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// The server speaks both xDS protocols, state of the world and delta, from one snapshot. Tests of
// what a change sends run over both through a session: a client that answers each response (an
// ACK, or a NACK where nackNext asked for one) and hands the test the responses in the order the
// stream delivered them.

// update is one response a session received and answered.
type update struct {
	typ string
	// version is the type's version (state of the world; a delta response carries none per type).
	version string
	// names are the resources it carried, sorted; removed those it took away (delta only).
	names, removed []string
	resources      map[string]proto.Message
	nacked         bool
}

type session interface {
	// next is the next response the stream delivers, once answered.
	next(t *testing.T) update
	// nackNext rejects the next response of typeURL with reason.
	nackNext(typeURL, reason string)
}

// protocol is one way a client speaks xDS to the server.
type protocol struct {
	name string
	// incremental: a response carries only the resources that changed (delta), not every
	// resource of its type (state of the world).
	incremental bool
	// versioned: a response carries its type's version, which a test compares with Versions.
	versioned bool
	// open connects as node, subscribed to every cluster and listener and to the load assignments
	// and route configurations the fixture names, and returns the first response of each type.
	// served are the node's versions when it connects.
	open func(t *testing.T, s *Server, node string, served map[string]string) (session, map[string]update)
}

var protocols = []protocol{
	{name: "state of the world", versioned: true, open: openSotW},
	{name: "delta", incremental: true, open: openDelta},
}

// fixtureTypes are the four types the fixture serves.
var fixtureTypes = []string{xdstest.Clusters, xdstest.Endpoints, xdstest.Listeners, xdstest.Routes}

// sent are the names a response carries when changed of all (a type's resources) changed.
func (p protocol) sent(changed, all []string) []string {
	if p.incremental {
		return changed
	}
	return all
}

// expect takes the next response and fails the test unless it is of type typ, carries names and
// removes nothing, and (where the protocol carries one) is at version.
func (p protocol) expect(t *testing.T, c session, what, typ string, names []string, version string) update {
	t.Helper()
	u := c.next(t)
	if u.typ != typ || !slices.Equal(u.names, names) || len(u.removed) != 0 || (p.versioned && u.version != version) {
		t.Fatalf("after %s the stream sent %s %v at version %q (removed %v), want %s %v at version %q (anything else came from an earlier change)",
			what, u.typ, u.names, u.version, u.removed, typ, names, version)
	}
	return u
}

// endpointCount is how many endpoints load assignment name holds in u.
func endpointCount(t *testing.T, u update, name string) int {
	t.Helper()
	cla, ok := u.resources[name].(*endpointv3.ClusterLoadAssignment)
	if !ok {
		t.Fatalf("the %s response carries no load assignment %s: %v", u.typ, name, u.names)
	}
	return len(cla.GetEndpoints()[0].GetLbEndpoints())
}

// dial connects a state-of-the-world client as node and waits until it accepted version want[t]
// of each of types.
func dial(t *testing.T, s *Server, node string, want map[string]string, types ...string) *xdstest.Client {
	t.Helper()
	c, err := xdstest.Dial(testContext(t), s.Address(), node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	accepted(t, c, want, types...)
	return c
}

// sotwSession reads the responses xdstest.Client (which answers them itself) recorded.
type sotwSession struct {
	c    *xdstest.Client
	seen int // responses handed to the test so far
}

func openSotW(t *testing.T, s *Server, node string, served map[string]string) (session, map[string]update) {
	t.Helper()
	c := dial(t, s, node, served, fixtureTypes...)
	st := c.State()
	first := map[string]update{}
	for _, typ := range fixtureTypes {
		first[typ] = sotwUpdate(st.Received(typ)[0])
	}
	return &sotwSession{c: c, seen: len(st.History)}, first
}

func sotwUpdate(r xdstest.Response) update {
	return update{typ: r.TypeURL, version: r.Version, names: r.Names, resources: r.Resources, nacked: r.NACKed}
}

func (s *sotwSession) next(t *testing.T) update {
	t.Helper()
	var u update
	if err := s.c.Await(testContext(t), func(st xdstest.State) error {
		if len(st.History) <= s.seen {
			return fmt.Errorf("no response after the %d received", s.seen)
		}
		u = sotwUpdate(st.History[s.seen])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.seen++
	return u
}

func (s *sotwSession) nackNext(typeURL, reason string) { s.c.NACKNext(typeURL, reason) }

// deltaSession is a delta ADS stream driven by hand.
type deltaSession struct {
	stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node   *corev3.Node
	nack   map[string]string
}

// adsClient is an ADS client of the server at address, connected until the test ends.
func adsClient(t *testing.T, address string) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(xdstest.Target(address), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
}

// dialDelta opens a delta ADS stream to s as node, subscribed to nothing yet.
func dialDelta(t *testing.T, s *Server, node string) *deltaSession {
	t.Helper()
	stream, err := adsClient(t, s.Address()).DeltaAggregatedResources(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return &deltaSession{stream: stream, node: &corev3.Node{Id: node}, nack: map[string]string{}}
}

func openDelta(t *testing.T, s *Server, node string, _ map[string]string) (session, map[string]update) {
	t.Helper()
	d := dialDelta(t, s, node)
	// Every cluster and listener (wildcard), the load assignments and routes the fixtures name.
	d.subscribe(t, xdstest.Clusters)
	d.subscribe(t, xdstest.Listeners)
	d.subscribe(t, xdstest.Endpoints, assignment, otherAssignment)
	d.subscribe(t, xdstest.Routes, routesN)
	first := map[string]update{}
	for range fixtureTypes {
		u := d.next(t)
		first[u.typ] = u
	}
	return d, first
}

// subscribe asks for names of typeURL; for none, for every resource of the type (a wildcard).
func (d *deltaSession) subscribe(t *testing.T, typeURL string, names ...string) {
	t.Helper()
	d.send(t, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: names})
}

func (d *deltaSession) send(t *testing.T, req *discoveryv3.DeltaDiscoveryRequest) {
	t.Helper()
	req.Node = d.node
	if err := d.stream.Send(req); err != nil {
		t.Fatal(err)
	}
}

func (d *deltaSession) next(t *testing.T) update {
	t.Helper()
	resp, err := d.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	u := update{typ: resp.GetTypeUrl(), removed: resp.GetRemovedResources(), resources: map[string]proto.Message{}}
	for _, r := range resp.GetResources() {
		m, err := r.GetResource().UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		u.names = append(u.names, r.GetName())
		u.resources[r.GetName()] = m
	}
	slices.Sort(u.names)
	answer := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: u.typ, ResponseNonce: resp.GetNonce()}
	if reason, ok := d.nack[u.typ]; ok {
		delete(d.nack, u.typ)
		answer.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: reason}
		u.nacked = true
	}
	d.send(t, answer)
	return u
}

func (d *deltaSession) nackNext(typeURL, reason string) { d.nack[typeURL] = reason }
