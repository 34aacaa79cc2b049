// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// TestEndpointTimesFollowThePublishedSnapshots: an endpoint is held from the first published
// load assignment that holds it Healthy, dropped at the first one without it (or with it not
// Healthy), held again when it comes back; an address no member of the mesh has is not named.
func TestEndpointTimesFollowThePublishedSnapshots(t *testing.T) {
	services := []model.Service{{Namespace: "shop", Name: "ledger", Ports: []model.Port{{Number: 8080, Pairs: []model.Pair{{
		Members: []model.Member{{Namespace: "shop", Name: "ledger-0", Address: "10.0.0.1"}, {Namespace: "shop", Name: "ledger-1", Address: "10.0.0.2"}},
	}}}}}}
	cla := func(hosts map[string]corev3.HealthStatus) []*endpointv3.ClusterLoadAssignment {
		locality := &endpointv3.LocalityLbEndpoints{}
		for address, health := range hosts {
			locality.LbEndpoints = append(locality.LbEndpoints, &endpointv3.LbEndpoint{HealthStatus: health,
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
					Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: address}}}}}})
		}
		return []*endpointv3.ClusterLoadAssignment{{ClusterName: "ledger:8080", Endpoints: []*endpointv3.LocalityLbEndpoints{locality}}}
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	times := NewEndpointTimes()
	times.healthy("shop/ledger-1", at(0))

	times.published(at(1), services, cla(map[string]corev3.HealthStatus{"10.0.0.1": corev3.HealthStatus_HEALTHY,
		"10.0.0.2": corev3.HealthStatus_UNHEALTHY, "10.0.0.9": corev3.HealthStatus_HEALTHY}))
	times.published(at(2), services, cla(map[string]corev3.HealthStatus{"10.0.0.1": corev3.HealthStatus_HEALTHY,
		"10.0.0.2": corev3.HealthStatus_HEALTHY}))
	times.published(at(3), services, cla(map[string]corev3.HealthStatus{"10.0.0.2": corev3.HealthStatus_HEALTHY}))

	got := times.Snapshot()
	want := map[string]EndpointTime{
		"shop/ledger-0": {Held: at(1), Dropped: at(3), Address: "10.0.0.1"},
		"shop/ledger-1": {Healthy: at(0), Held: at(2), Address: "10.0.0.2"},
	}
	if len(got) != len(want) {
		t.Fatalf("recorded %v, want %v", got, want)
	}
	for key, w := range want {
		g := got[key]
		if !g.Healthy.Equal(w.Healthy) || !g.Held.Equal(w.Held) || !g.Dropped.Equal(w.Dropped) || g.Address != w.Address {
			t.Errorf("%s: %+v, want %+v", key, g, w)
		}
	}

	// Held again after its drop: a new held time, the drop cleared.
	fourth := cla(map[string]corev3.HealthStatus{"10.0.0.1": corev3.HealthStatus_HEALTHY})
	times.published(at(4), services, fourth)
	if g := times.Snapshot()["shop/ledger-0"]; !g.Held.Equal(at(4)) || !g.Dropped.IsZero() {
		t.Errorf("shop/ledger-0 back in the snapshot: %+v, want held at %v and no drop", g, at(4))
	}

	// The same message published again (the builder reused it) holds what it held.
	times.published(at(5), services, fourth)
	if g := times.Snapshot()["shop/ledger-0"]; !g.Held.Equal(at(4)) || !g.Dropped.IsZero() {
		t.Errorf("shop/ledger-0 in a reused message: %+v, want still held since %v", g, at(4))
	}
	// Moved to another message in one publish: never dropped in between; dropped once none holds it.
	moved := cla(map[string]corev3.HealthStatus{"10.0.0.1": corev3.HealthStatus_HEALTHY})
	moved[0].ClusterName = "ledger:9000"
	times.published(at(6), services, moved)
	if g := times.Snapshot()["shop/ledger-0"]; !g.Held.Equal(at(4)) || !g.Dropped.IsZero() {
		t.Errorf("shop/ledger-0 moved to another load assignment: %+v, want still held since %v", g, at(4))
	}
	times.published(at(7), services, nil)
	if g := times.Snapshot()["shop/ledger-0"]; !g.Dropped.Equal(at(7)) {
		t.Errorf("shop/ledger-0 in no load assignment: %+v, want dropped at %v", g, at(7))
	}
}

// TestEndpointTimesServeSince: the served answer counts the endpoints held now and lists all of
// them, or with ?since those with a time at or after it; a since that is no time is a 400 naming
// the value and the form wanted.
func TestEndpointTimesServeSince(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	times := NewEndpointTimes()
	times.byEP = map[string]*EndpointTime{
		"shop/old":     {Held: at(1), Address: "10.0.0.1"},
		"shop/dropped": {Held: at(1), Dropped: at(5), Address: "10.0.0.2"},
		"shop/new":     {Healthy: at(4), Held: at(6), Address: "10.0.0.3"},
		"shop/probed":  {Healthy: at(5)},
	}
	serve := func(query string) (int, EndpointTimesAnswer, string) {
		w := httptest.NewRecorder()
		times.ServeHTTP(w, httptest.NewRequest(http.MethodGet, EndpointTimesPath+query, nil))
		var answer EndpointTimesAnswer
		if w.Code == http.StatusOK {
			if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
				t.Fatalf("%s: %v: %s", query, err, w.Body)
			}
		}
		return w.Code, answer, w.Body.String()
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"shop/dropped", "shop/new", "shop/old", "shop/probed"}},
		{"?since=" + at(5).Format(time.RFC3339Nano), []string{"shop/dropped", "shop/new", "shop/probed"}},
		{"?since=" + at(6).Format(time.RFC3339Nano), []string{"shop/new"}},
		{"?since=" + at(7).Format(time.RFC3339Nano), nil},
	} {
		code, answer, body := serve(tc.query)
		if code != http.StatusOK {
			t.Fatalf("%q: status %d: %s", tc.query, code, body)
		}
		if got := slices.Sorted(maps.Keys(answer.Endpoints)); !slices.Equal(got, tc.want) {
			t.Errorf("%q lists %v, want %v", tc.query, got, tc.want)
		}
		if answer.Held != 2 {
			t.Errorf("%q: held %d, want 2 (shop/old and shop/new)", tc.query, answer.Held)
		}
	}
	if code, _, body := serve("?since=yesterday"); code != http.StatusBadRequest || !strings.Contains(body, `since="yesterday"`) || !strings.Contains(body, "RFC 3339") {
		t.Errorf("since=yesterday: status %d, %q; want 400 naming the value and the form", code, body)
	}
}

// keyByWalk is the key of the first member at address in the services' order, read from every
// member: what memberIndex answers without reading them.
func keyByWalk(services []model.Service, address string) string {
	for _, s := range services {
		for _, p := range s.Ports {
			for _, pair := range p.Pairs {
				for _, m := range pair.Members {
					if m.Address == address {
						return m.Namespace + "/" + m.Name
					}
				}
			}
		}
	}
	return ""
}

// TestMemberIndexIsTheWalk: over random changes of a few services at a time (members that move
// between services, an address two services' members share, services that come and go), the
// index names every address as reading every member does.
func TestMemberIndexIsTheWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	addresses := make([]string, 40)
	for i := range addresses {
		addresses[i] = fmt.Sprintf("10.0.%d.%d", i/10, i%10)
	}
	service := func(n int) model.Service {
		s := model.Service{Namespace: "ns", Name: fmt.Sprintf("svc-%d", n)}
		for port := range 1 + rng.IntN(3) {
			p := model.Port{Number: int32(8080 + port)}
			for range 1 + rng.IntN(2) {
				var pair model.Pair
				for range rng.IntN(4) {
					a := rng.IntN(len(addresses))
					pair.Members = append(pair.Members, model.Member{Namespace: "ns", Name: fmt.Sprintf("ep-%d-%d", n, a), Address: addresses[a]})
				}
				p.Pairs = append(p.Pairs, pair)
			}
			s.Ports = append(s.Ports, p)
		}
		return s
	}
	services := make([]model.Service, 12)
	for i := range services {
		services[i] = service(i)
	}
	var x memberIndex
	for round := range 300 {
		services = slices.Clone(services) // the caller's list is its own, each publish
		switch {
		case round%50 == 49:
			services = append(services, service(100+round))
		case round%50 == 24 && len(services) > 2:
			services = slices.Delete(services, 1, 2)
		default:
			for range 1 + rng.IntN(3) {
				services[rng.IntN(len(services))] = service(rng.IntN(20))
			}
		}
		x.update(services)
		for _, a := range addresses {
			if got, want := x.key(a), keyByWalk(services, a); got != want {
				t.Fatalf("round %d: address %s is %q in the index, %q by reading every member", round, a, got, want)
			}
		}
	}
}

// TestPatchedHeldIsTheReplaced: over random publishes (a load assignment replaced by a new
// message, two swapped, one message at two positions, the list longer or shorter), the record
// that patches what the last snapshot held by position is the record that builds it again from
// every message on every publish.
func TestPatchedHeldIsTheReplaced(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	services := []model.Service{{Namespace: "ns", Name: "svc", Ports: []model.Port{{Number: 8080, Pairs: []model.Pair{{}}}}}}
	for i := range 30 {
		services[0].Ports[0].Pairs[0].Members = append(services[0].Ports[0].Pairs[0].Members,
			model.Member{Namespace: "ns", Name: fmt.Sprintf("ep-%d", i), Address: fmt.Sprintf("10.0.0.%d", i)})
	}
	message := func() *endpointv3.ClusterLoadAssignment {
		locality := &endpointv3.LocalityLbEndpoints{}
		for range 1 + rng.IntN(4) {
			locality.LbEndpoints = append(locality.LbEndpoints, &endpointv3.LbEndpoint{HealthStatus: corev3.HealthStatus(rng.IntN(3)),
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
					Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: fmt.Sprintf("10.0.0.%d", rng.IntN(32))}}}}}})
		}
		return &endpointv3.ClusterLoadAssignment{Endpoints: []*endpointv3.LocalityLbEndpoints{locality}}
	}
	list := make([]*endpointv3.ClusterLoadAssignment, 8)
	for i := range list {
		list[i] = message()
	}
	patched, replaced := NewEndpointTimes(), NewEndpointTimes()
	replaced.alwaysReplace = true
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for round := range 500 {
		list = slices.Clone(list)
		switch op := rng.IntN(10); {
		case op < 5:
			list[rng.IntN(len(list))] = message()
		case op < 7:
			i, j := rng.IntN(len(list)), rng.IntN(len(list))
			list[i], list[j] = list[j], list[i]
		case op < 8:
			list[rng.IntN(len(list))] = list[rng.IntN(len(list))]
		case op < 9 && len(list) < 12:
			list = append(list, message())
		case len(list) > 2:
			list = slices.Delete(list, 0, 1)
		}
		at = at.Add(time.Duration(rng.IntN(30)) * time.Second)
		patched.published(at, services, list)
		replaced.published(at, services, list)
		if got, want := patched.Snapshot(), replaced.Snapshot(); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: patched %+v, want %+v", round, got, want)
		}
	}
}
