// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
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

// TestPatchedPublishIsTheFullOnes: a publish that replaces a few messages in place (patch) makes
// the snapshot the full path makes from nothing known: the same versions, names, resources by
// name with their versions and references, and secret names. Over a fleet of 100 services (one
// endpoint's health flipped, then back), a load assignment replaced by an equal copy (the version
// stays), and a change of the TLS fixture's load assignment (its secrets named by the clusters
// reused); and, patching nothing, the TLS fixture's clusters and listeners without TLS (secret
// names read again).
func TestPatchedPublishIsTheFullOnes(t *testing.T) {
	before, after := endpointChangePair(t, 100)
	tls := fixture{endpoints: []string{"127.0.0.11"}, statPrefix: "capture", host: fqdn, tls: true}.resources(t)
	copied := before
	copied.Endpoints = slices.Clone(before.Endpoints)
	copied.Endpoints[7] = proto.Clone(before.Endpoints[7]).(*endpointv3.ClusterLoadAssignment)
	plain := fixture{endpoints: []string{"127.0.0.11"}, statPrefix: "capture", host: fqdn}.resources(t)
	plain.Endpoints = tls.Endpoints
	for _, c := range []struct {
		name        string
		first, next xds.Resources
		patched     bool
	}{
		{"an endpoint's health flipped", before, after, true},
		{"and back", after, before, true},
		{"an equal copy of a load assignment", before, copied, true},
		{"a TLS fixture's endpoint added", tls, withEndpoint(tls, 0, "127.0.0.12"), true},
		{"the TLS fixture without TLS", tls, plain, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			last, err := newServed(c.first, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			var probe served
			if c.patched && !probe.patch(1, resources(c.next.Endpoints), &last) {
				t.Fatal("the load assignments were not patched: the test would compare the full path with itself")
			}
			got, err := newServed(c.next, false, &last)
			if err != nil {
				t.Fatal(err)
			}
			want, err := newServed(c.next, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameServed(t, got, want)
		})
	}
}

// sameServed fails t where got and want differ in what a snapshot serves or a publish reads.
func sameServed(t *testing.T, got, want served) {
	t.Helper()
	if got.versions != want.versions {
		t.Fatalf("versions %v, want %v", got.versions, want.versions)
	}
	for i, k := range kinds[:secretKind] {
		if !slices.Equal(got.names[i], want.names[i]) {
			t.Errorf("%s names %v, want %v", k.short, got.names[i], want.names[i])
		}
		if !slices.Equal(got.items[i], want.items[i]) {
			t.Errorf("%s items are not the messages given", k.short)
		}
		if !maps.Equal(got.versionMaps[i], want.versionMaps[i]) {
			t.Errorf("%s version map %v, want %v", k.short, got.versionMaps[i], want.versionMaps[i])
		}
		if g, w := got.groups[i], want.groups[i]; g.Version != w.Version || len(g.Items) != len(w.Items) {
			t.Errorf("%s resources at %s (%d), want %s (%d)", k.short, g.Version, len(g.Items), w.Version, len(w.Items))
		}
		for name, w := range want.groups[i].Items {
			if g, ok := got.groups[i].Items[name]; !ok || !proto.Equal(g.Resource, w.Resource) || g.TTL != w.TTL {
				t.Errorf("%s resource %q: %v, want %v", k.short, name, g.Resource, w.Resource)
			}
		}
		if len(got.hashes[i]) != len(want.hashes[i]) {
			t.Errorf("%s hashes %d, want %d", k.short, len(got.hashes[i]), len(want.hashes[i]))
		}
		for name, w := range want.hashes[i] {
			g := got.hashes[i][name]
			// references lists them in a map's order.
			if g.version != w.version || !slices.Equal(slices.Sorted(slices.Values(g.refs)), slices.Sorted(slices.Values(w.refs))) ||
				!proto.Equal(g.resource, w.resource) {
				t.Errorf("%s hash of %q: %s %v, want %s %v", k.short, name, g.version, g.refs, w.version, w.refs)
			}
		}
	}
	if !maps.Equal(got.secretRefs, want.secretRefs) {
		t.Errorf("secret names %v, want %v", got.secretRefs, want.secretRefs)
	}
}

// TestKindVersionIsTheWrittenHash: kindVersion, which gathers its bytes in large writes, is the
// hash of each part written on its own (as versions were computed before, and across restarts
// must stay), over names long and short, past its buffer's size.
func TestKindVersionIsTheWrittenHash(t *testing.T) {
	written := func(sortedNames []string, hashes map[string]hashed) string {
		h := sha256.New()
		for _, name := range sortedNames {
			for _, part := range []string{name, hashes[name].version} {
				_ = binary.Write(h, binary.BigEndian, uint64(len(part)))
				h.Write([]byte(part))
			}
		}
		return hex.EncodeToString(h.Sum(nil)[:8])
	}
	for _, n := range []int{0, 1, 10, 3000} {
		hashes := map[string]hashed{}
		var names []string
		for i := range n {
			name := fmt.Sprintf("outbound|%d||svc-%04d.fleet.svc.aether.internal", 8080+i%3, i)
			if i%700 == 1 {
				name += strings.Repeat("x", 20000) // longer than the buffer
			}
			names = append(names, name)
			hashes[name] = hashed{version: fmt.Sprintf("%064x", i*7919)}
		}
		slices.Sort(names)
		if got, want := kindVersion(names, hashes), written(names, hashes); got != want {
			t.Errorf("%d names: version %s, want %s", n, got, want)
		}
	}
}
