// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// builderMesh is three services of four verified endpoints each, every object with a
// resourceVersion, as the agent's cache holds them.
func builderMesh(t *testing.T) ([]meshv1alpha1.MeshService, []meshv1alpha1.MeshEndpoint) {
	t.Helper()
	verified := []metav1.Condition{{Type: meshv1alpha1.EndpointConditionVerified, Status: metav1.ConditionTrue, ObservedGeneration: 1}}
	var services []meshv1alpha1.MeshService
	var endpoints []meshv1alpha1.MeshEndpoint
	rv := 100
	for s := range 3 {
		name := fmt.Sprintf("svc-%d", s)
		ms := meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, ResourceVersion: strconv.Itoa(rv)}}
		ms.Status.Identity, ms.Status.VIP = "spiffe://aether.internal/ns/shop/sa/"+name, fmt.Sprintf("10.96.0.%d", s+1)
		services = append(services, ms)
		rv++
		for e := range 4 {
			ep := endpoint(t, fmt.Sprintf("%s-%d", name, e), "09:00", 8080, meshv1alpha1.HealthHealthy, "8080/HTTP", "9000/TCP")
			ep.Spec.ServiceName, ep.Generation, ep.ResourceVersion = name, 1, strconv.Itoa(rv)
			ep.Status.Conditions = verified
			endpoints = append(endpoints, ep)
			rv++
		}
	}
	return services, endpoints
}

// TestServiceBuilder: the builder's mesh equals BuildServices' after every change, and a service
// whose objects kept their resourceVersions is not built again (its model's slices are the
// previous build's), while a changed one is.
func TestServiceBuilder(t *testing.T) {
	services, endpoints := builderMesh(t)
	var sb model.ServiceBuilder
	check := func(step string) []model.Service {
		t.Helper()
		got, want := sb.Build(services, endpoints), model.BuildServices(services, endpoints)
		if len(got) != len(want) {
			t.Fatalf("%s: the builder built %d services, BuildServices %d", step, len(got), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("%s: service %s differs from BuildServices': %d endpoints, %d ready, want %d, %d",
					step, want[i].Name, got[i].Endpoints, got[i].Ready, want[i].Endpoints, want[i].Ready)
			}
		}
		return got
	}
	first := check("first build")
	sameSlices := func(a, b model.Service) bool { return &a.Ports[0] == &b.Ports[0] }

	// svc-1's endpoint 2 turns Unhealthy, with a new resourceVersion.
	endpoints[6].Status.Health, endpoints[6].ResourceVersion = meshv1alpha1.HealthUnhealthy, "900"
	second := check("an endpoint of svc-1 turned Unhealthy")
	if !sameSlices(first[0], second[0]) || !sameSlices(first[2], second[2]) {
		t.Errorf("svc-0 and svc-2 did not change, but were built again")
	}
	if sameSlices(first[1], second[1]) {
		t.Errorf("svc-1's endpoint changed (resourceVersion 900), but its previous model was reused")
	}
	if second[1].Ready != 3 {
		t.Errorf("svc-1 has %d endpoints ready, want 3", second[1].Ready)
	}

	// The lister's order does not matter; a MeshService change rebuilds its service alone.
	endpoints[0], endpoints[11] = endpoints[11], endpoints[0]
	services[2].Status.VIP, services[2].ResourceVersion = "10.96.0.99", "901"
	third := check("the endpoints reordered, svc-2's VIP changed")
	if !sameSlices(second[0], third[0]) || !sameSlices(second[1], third[1]) {
		t.Errorf("reordering the endpoints rebuilt services that did not change")
	}
	if third[2].VIP != "10.96.0.99" {
		t.Errorf("svc-2's VIP is %q, want the new 10.96.0.99", third[2].VIP)
	}

	// An endpoint leaves its service (no longer verified), and a service goes.
	endpoints[4].Status.Conditions = nil
	endpoints[4].ResourceVersion = "902"
	services = services[:2]
	fourth := check("an endpoint of svc-1 unverified, svc-2 deleted")
	if fourth[1].Endpoints != 3 {
		t.Errorf("svc-1 counts %d endpoints, want 3", fourth[1].Endpoints)
	}

	// Objects without a resourceVersion are always built: a change to one is never missed.
	for i := range endpoints {
		endpoints[i].ResourceVersion = ""
	}
	check("no resourceVersions")
	endpoints[1].Status.Health = meshv1alpha1.HealthUnhealthy
	if got := check("no resourceVersions, an endpoint of svc-0 Unhealthy"); got[0].Ready != 3 {
		t.Errorf("svc-0 has %d endpoints ready without resourceVersions, want 3", got[0].Ready)
	}
}
