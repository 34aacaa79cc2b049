// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"fmt"
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
// (BuildServices), "changed" only the changed one (a ServiceBuilder).
func BenchmarkServicesEndpointChange(b *testing.B) {
	verified := []metav1.Condition{{Type: meshv1alpha1.EndpointConditionVerified, Status: metav1.ConditionTrue, ObservedGeneration: 1}}
	var services []meshv1alpha1.MeshService
	var endpoints []meshv1alpha1.MeshEndpoint
	rv := 1
	for s := range 1000 {
		name := fmt.Sprintf("svc-%04d", s)
		ms := meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, ResourceVersion: fmt.Sprint(rv)}}
		ms.Status.Identity, ms.Status.VIP = "spiffe://aether.internal/ns/fleet/sa/"+name, fmt.Sprintf("10.96.%d.%d", s/250, s%250+1)
		services = append(services, ms)
		for e := range 10 {
			rv++
			ep := meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: fmt.Sprintf("%s-%02d", name, e),
				Generation: 1, ResourceVersion: fmt.Sprint(rv)}}
			ep.Spec = meshv1alpha1.MeshEndpointSpec{ServiceName: name, NodeName: "node-a", Address: fmt.Sprintf("10.%d.%d.%d", 128+rv/62500, rv/250%250, rv%250+1),
				PrimaryPort: 8080, Weight: 1024, Ports: []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP},
					{Port: 9000, Protocol: meshv1alpha1.ProtocolTCP}, {Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2}}}
			ep.Status.Health, ep.Status.Conditions = meshv1alpha1.HealthHealthy, verified
			endpoints = append(endpoints, ep)
		}
		rv++
	}
	flip := func() {
		ep := &endpoints[len(endpoints)/2]
		if ep.Status.Health == meshv1alpha1.HealthHealthy {
			ep.Status.Health = meshv1alpha1.HealthUnhealthy
		} else {
			ep.Status.Health = meshv1alpha1.HealthHealthy
		}
		rv++
		ep.ResourceVersion = fmt.Sprint(rv)
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
		sb.Build(services, endpoints)
		b.ReportAllocs()
		for b.Loop() {
			flip()
			sb.Build(services, endpoints)
		}
	})
}
