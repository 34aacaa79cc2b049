// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"reflect"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// TestServiceBuilder: the builder's mesh equals BuildServices' after every change, and a service
// whose objects kept their resourceVersions is not built again (its model's slices are the
// previous build's), while a changed one is.
func TestServiceBuilder(t *testing.T) {
	services, endpoints := meshObjects(3, 4)
	var sb model.ServiceBuilder
	check := func(step string) []model.Service {
		t.Helper()
		got, want := sb.Build(services, pointers(endpoints)), model.BuildServices(services, endpoints)
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

	// svc-0001's endpoint 2 turns Unhealthy, with a new resourceVersion.
	endpoints[6].Status.Health, endpoints[6].ResourceVersion = meshv1alpha1.HealthUnhealthy, "900"
	second := check("an endpoint of svc-0001 turned Unhealthy")
	if !sameSlices(first[0], second[0]) || !sameSlices(first[2], second[2]) {
		t.Errorf("svc-0000 and svc-0002 did not change, but were built again")
	}
	if sameSlices(first[1], second[1]) {
		t.Errorf("svc-0001's endpoint changed (resourceVersion 900), but its previous model was reused")
	}
	if second[1].Ready != 3 {
		t.Errorf("svc-0001 has %d endpoints ready, want 3", second[1].Ready)
	}

	// The lister's order does not matter; a MeshService change rebuilds its service alone.
	endpoints[0], endpoints[11] = endpoints[11], endpoints[0]
	services[2].Status.VIP, services[2].ResourceVersion = "10.96.0.99", "901"
	third := check("the endpoints reordered, svc-0002's VIP changed")
	if !sameSlices(second[0], third[0]) || !sameSlices(second[1], third[1]) {
		t.Errorf("reordering the endpoints rebuilt services that did not change")
	}
	if third[2].VIP != "10.96.0.99" {
		t.Errorf("svc-0002's VIP is %q, want the new 10.96.0.99", third[2].VIP)
	}

	// An endpoint leaves its service (no longer verified), and a service goes.
	endpoints[4].Status.Conditions = nil
	endpoints[4].ResourceVersion = "902"
	services = services[:2]
	fourth := check("an endpoint of svc-0001 unverified, svc-0002 deleted")
	if fourth[1].Endpoints != 3 {
		t.Errorf("svc-0001 counts %d endpoints, want 3", fourth[1].Endpoints)
	}

	// Objects without a resourceVersion are always built: a change to one is never missed.
	for i := range endpoints {
		endpoints[i].ResourceVersion = ""
	}
	check("no resourceVersions")
	endpoints[1].Status.Health = meshv1alpha1.HealthUnhealthy
	if got := check("no resourceVersions, an endpoint of svc-0000 Unhealthy"); got[0].Ready != 3 {
		t.Errorf("svc-0000 has %d endpoints ready without resourceVersions, want 3", got[0].Ready)
	}
}
