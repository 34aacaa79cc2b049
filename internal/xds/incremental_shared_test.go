// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// withService is m with its service i replaced by s; every other service, and every list of
// theirs, is shared with m (as the agent's model.ServiceBuilder shares an unchanged service's).
func withService(m model.Mesh, i int, s model.Service) model.Mesh {
	m.Services = slices.Clone(m.Services)
	m.Services[i] = s
	return m
}

// TestBuilderSharedServices is the Builder's contract on services (xds.Builder): a service whose
// lists are the very arrays of the last build's is taken as unchanged. For every scenario, every
// service and every change of one of its fields (xds.Changes), made as the contract allows (a
// field of the service's own set on a copy that shares its lists; a change within a list made on
// a copy with lists of its own, Service.Clone), the other services shared, a Builder builds what
// Build does, byte for byte, and then the scenario again; and so it does when local identities
// leave and come back (each service's clusters are kept per source). The negative control breaks
// the contract: a member's health changed in place is not seen, and the comparison catches it.
func TestBuilderSharedServices(t *testing.T) {
	all := xdstest.All()
	scenarios := map[string]model.Mesh{}
	for _, name := range []string{"mixed-http-primary", "tcp-primary-http-secondary", "rollout-conflict", "subsets"} {
		scenarios[name] = all[name]
	}
	builds := 0
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		base := scenarios[name]
		bl := new(xds.Builder)
		builtAsBuild(t, bl, base, name)
		for i, svc := range base.Services {
			for _, c := range xds.Changes(&svc) {
				changed := svc // its lists shared: a change of a field of its own
				if strings.Contains(c.Field, "[") || strings.Contains(c.String(), ":") {
					changed = svc.Clone() // lists of its own for a change within them
				}
				c.Apply(&changed)
				what := fmt.Sprintf("%s: service %s/%s: %s", name, svc.Namespace, svc.Name, c)
				builtAsBuild(t, bl, withService(base, i, changed), what)
				builtAsBuild(t, bl, base, what+", and back")
				builds += 2
			}
		}
	}
	// Local identities leave and come back: each service's clusters are kept per source.
	m := xdstest.DeclaringFleet(8, 2, 4, 2, model.UpstreamsAll).Mesh()
	bl := new(xds.Builder)
	builtAsBuild(t, bl, m, "a fleet of 4 identities")
	for _, pods := range [][]model.LocalPod{m.Pods[1:], m.Pods[:2], m.Pods, m.Pods[2:], m.Pods} {
		fewer := m
		fewer.Pods = pods
		builtAsBuild(t, bl, fewer, fmt.Sprintf("a fleet of %d of its 4 identities", len(pods)))
		builds++
	}
	t.Logf("%d builds compared", builds)

	// The negative control: a member's health flipped in place (the counts made right), against
	// the contract. The service's lists are the same arrays, so the Builder keeps its load
	// assignments; Build reads the new health.
	m = xdstest.Fleet(6, 3).Mesh()
	bl = new(xds.Builder)
	builtAsBuild(t, bl, m, "the negative control's base")
	s := &m.Services[2]
	for _, p := range s.Ports {
		pr := &p.Pairs[0]
		if pr.Members[0].Health != meshv1alpha1.HealthHealthy {
			t.Fatalf("negative control: %s/%s's first member is not healthy", s.Namespace, s.Name)
		}
		pr.Members[0].Health = meshv1alpha1.HealthUnhealthy
		pr.Ready--
	}
	s.Ready--
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	got, gotErr := bl.Build(m)
	want, wantErr := xds.Build(m)
	d := differences(got, gotErr, want, wantErr)
	if d == nil {
		t.Fatal("negative control: a load assignment kept across a change made in place was not caught")
	}
	t.Logf("negative control (a member's health changed in place): %s", d[0])
}
