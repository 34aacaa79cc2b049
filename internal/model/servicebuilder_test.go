// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"reflect"
	"slices"
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

// TestServiceBuilderMembers: BuildMembers over groups kept across builds, each regrouped
// (NewMembers) only when one of its endpoints changed, as the agent's view keeps them, equals
// BuildServices after every change, an endpoint moving to another service included; a service
// whose Members were not recomputed is not built again.
func TestServiceBuilderMembers(t *testing.T) {
	services, endpoints := meshObjects(3, 4)
	members := model.GroupMembers(pointers(endpoints))
	// regroup recomputes the Members of the named services from the current endpoints.
	regroup := func(names ...string) {
		for _, name := range names {
			var eps []*meshv1alpha1.MeshEndpoint
			for i := range endpoints {
				if endpoints[i].Spec.ServiceName == name {
					eps = append(eps, &endpoints[i])
				}
			}
			members[model.ServiceKey{Namespace: "fleet", Name: name}] = model.NewMembers(eps)
		}
	}
	var sb model.ServiceBuilder
	check := func(step string) []model.Service {
		t.Helper()
		got, want := sb.BuildMembers(services, members), model.BuildServices(services, endpoints)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: BuildMembers differs from BuildServices:\n got %+v\nwant %+v", step, got, want)
		}
		return got
	}
	first := check("first build")
	sameSlices := func(a, b model.Service) bool { return &a.Ports[0] == &b.Ports[0] }

	endpoints[5].Status.Health, endpoints[5].ResourceVersion = meshv1alpha1.HealthUnhealthy, "900"
	regroup("svc-0001")
	second := check("an endpoint of svc-0001 turned Unhealthy")
	if !sameSlices(first[0], second[0]) || !sameSlices(first[2], second[2]) || sameSlices(first[1], second[1]) {
		t.Errorf("only svc-0001 changed, but the reuse was svc-0000 %v, svc-0001 %v, svc-0002 %v",
			sameSlices(first[0], second[0]), sameSlices(first[1], second[1]), sameSlices(first[2], second[2]))
	}

	// An endpoint of svc-0000 moves to svc-0002 (a spec change): both groups change.
	endpoints[0].Spec.ServiceName, endpoints[0].ResourceVersion = "svc-0002", "901"
	regroup("svc-0000", "svc-0002")
	if third := check("an endpoint moved from svc-0000 to svc-0002"); third[0].Endpoints != 3 || third[2].Endpoints != 5 {
		t.Errorf("after the move svc-0000 counts %d endpoints, svc-0002 %d; want 3 and 5", third[0].Endpoints, third[2].Endpoints)
	}

	// One unverified, one deleted, a service gone and a new one with an endpoint.
	endpoints[9].Status.Conditions, endpoints[9].ResourceVersion = nil, "902"
	endpoints = slices.Delete(endpoints, 6, 7)
	services = services[1:]
	extraServices, extraEndpoints := meshObjects(4, 1)
	services = append(services, extraServices[3])
	endpoints = append(endpoints, extraEndpoints[3])
	regroup("svc-0001", "svc-0002", "svc-0003")
	check("an endpoint unverified, one deleted, svc-0000 deleted, svc-0003 created")

	// Without resourceVersions every service is built, whatever its Members say.
	for i := range endpoints {
		endpoints[i].ResourceVersion = ""
	}
	regroup("svc-0001", "svc-0002", "svc-0003")
	endpoints[4].Status.Health = meshv1alpha1.HealthUnhealthy // not regrouped: the same objects
	check("no resourceVersions, an endpoint of svc-0001 Unhealthy")
}
