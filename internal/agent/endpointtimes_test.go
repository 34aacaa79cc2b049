// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
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
