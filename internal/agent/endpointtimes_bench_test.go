// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// BenchmarkEndpointTimesPublished: the record of a publish that follows one endpoint's health
// flip, at 1 000 services of 10 endpoints and 3 ports: one load assignment is a new message, and
// its service a new model (as a ServiceBuilder makes it); the rest are the last publish's. Each
// publish flips it back.
func BenchmarkEndpointTimesPublished(b *testing.B) {
	const services, endpoints, ports = 1000, 10, 3
	mesh := make([]model.Service, services)
	var assignments []*endpointv3.ClusterLoadAssignment
	assignment := func(s, port int, unhealthy int) *endpointv3.ClusterLoadAssignment {
		locality := &endpointv3.LocalityLbEndpoints{}
		for e := range endpoints {
			health := corev3.HealthStatus_HEALTHY
			if e == unhealthy {
				health = corev3.HealthStatus_UNHEALTHY
			}
			locality.LbEndpoints = append(locality.LbEndpoints, &endpointv3.LbEndpoint{HealthStatus: health,
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
					Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: fmt.Sprintf("10.%d.%d.%d", s/250, s%250, e+1)}}}}}})
		}
		return &endpointv3.ClusterLoadAssignment{ClusterName: fmt.Sprintf("svc-%04d:%d", s, 8080+port), Endpoints: []*endpointv3.LocalityLbEndpoints{locality}}
	}
	for s := range services {
		mesh[s] = model.Service{Namespace: "fleet", Name: fmt.Sprintf("svc-%04d", s)}
		for port := range ports {
			var pair model.Pair
			for e := range endpoints {
				pair.Members = append(pair.Members, model.Member{Namespace: "fleet", Name: fmt.Sprintf("svc-%04d-%02d", s, e),
					Address: fmt.Sprintf("10.%d.%d.%d", s/250, s%250, e+1)})
			}
			mesh[s].Ports = append(mesh[s].Ports, model.Port{Number: int32(8080 + port), Pairs: []model.Pair{pair}})
			assignments = append(assignments, assignment(s, port, -1))
		}
	}
	const changed = services / 2
	flipped := slices.Clone(assignments)
	flipped[changed*ports] = assignment(changed, 0, 3)
	flippedMesh := slices.Clone(mesh)
	flippedMesh[changed] = mesh[changed].Clone()
	turn := [2]struct {
		services    []model.Service
		assignments []*endpointv3.ClusterLoadAssignment
	}{{flippedMesh, flipped}, {mesh, assignments}}

	times := NewEndpointTimes()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	times.published(at, mesh, assignments)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		at = at.Add(time.Second)
		times.published(at, turn[i%2].services, turn[i%2].assignments)
		i++
	}
	if e := times.Snapshot()["fleet/svc-0500-03"]; e.Held.IsZero() {
		b.Fatalf("fleet/svc-0500-03 never held: %+v", e)
	}
}
