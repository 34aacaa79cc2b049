// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// BenchmarkBuildService: the large service of internal/meshservice's BenchmarkTranslate (500
// endpoints of 3 ports each, mid-rollout: a fifth retype port 9000, a tenth not ready, creation
// times spread over a day), so the two figures compare: Translate = BuildService + rendering.
func BenchmarkBuildService(b *testing.B) {
	start := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	endpoints := make([]meshv1alpha1.MeshEndpoint, 0, 500)
	for i := range 500 {
		health := meshv1alpha1.HealthHealthy
		if i%10 == 9 {
			health = meshv1alpha1.HealthPending
		}
		retyped := meshv1alpha1.ProtocolTCP
		if i%5 == 4 {
			retyped = meshv1alpha1.ProtocolHTTP
		}
		name := fmt.Sprintf("payments-7f9c6d-%05d", (i*7919)%100000)
		ep := meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop",
			CreationTimestamp: metav1.NewTime(start.Add(time.Duration(i*173) * time.Second))}}
		ep.Spec = meshv1alpha1.MeshEndpointSpec{ServiceName: "payments", PodName: name, NodeName: "node-a",
			Address: "10.244.1.10", PrimaryPort: 8080, Weight: 1024, Ports: []meshv1alpha1.PortProtocol{
				{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}, {Port: 9000, Protocol: retyped},
				{Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2}}}
		ep.Status.Health = health
		endpoints = append(endpoints, ep)
	}
	in := input(endpoints...)
	if err := model.BuildService(in).Validate(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		model.BuildService(in)
	}
}

// BenchmarkServicesEndpointChange: the agent's view rebuilds the whole mesh's model on every
// change it sees. At 1 000 services of 10 verified endpoints, one endpoint's health flips per
// op (with a new resourceVersion, as the API server writes it); "all" builds every service again
// (BuildServices), "changed" only the changed one (a ServiceBuilder), still grouping and
// fingerprinting every endpoint; "kept" keeps the groups across builds, as the agent's view does,
// and regroups only the changed service (NewMembers, BuildMembers).
func BenchmarkServicesEndpointChange(b *testing.B) {
	services, endpoints := meshObjects(1000, 10)
	rv := 1 << 20
	flip := func() {
		ep := &endpoints[len(endpoints)/2]
		if ep.Status.Health == meshv1alpha1.HealthHealthy {
			ep.Status.Health = meshv1alpha1.HealthUnhealthy
		} else {
			ep.Status.Health = meshv1alpha1.HealthHealthy
		}
		rv++
		ep.ResourceVersion = strconv.Itoa(rv)
	}
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			flip()
			model.BuildServices(services, endpoints)
		}
	})
	b.Run("changed", func(b *testing.B) {
		var sb model.ServiceBuilder
		sb.Build(services, pointers(endpoints))
		b.ReportAllocs()
		for b.Loop() {
			flip()
			sb.Build(services, pointers(endpoints))
		}
	})
	b.Run("kept", func(b *testing.B) {
		var sb model.ServiceBuilder
		members := model.GroupMembers(pointers(endpoints))
		sb.BuildMembers(services, members)
		// The flipped endpoint's service: its 10 endpoints, from the first of them.
		first := len(endpoints) / 2 / 10 * 10
		group := pointers(endpoints[first : first+10])
		key := model.ServiceKey{Namespace: group[0].Namespace, Name: group[0].Spec.ServiceName}
		b.ReportAllocs()
		for b.Loop() {
			flip()
			members[key] = model.NewMembers(group)
			sb.BuildMembers(services, members)
		}
	})
}
