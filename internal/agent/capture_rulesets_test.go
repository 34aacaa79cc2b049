// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"reflect"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestCaptureRulesetsAreBuilds: over a run of syncs, each pod's ruleset is capture.Build's from
// that sync's mesh, whether reused from the sync before or built; a sync after an endpoint's
// health flip reuses every pod's (the same sets), one after a VIP change builds them again.
func TestCaptureRulesetsAreBuilds(t *testing.T) {
	base := xdstest.Fleet(50, 3).Mesh()
	var pods []model.LocalPod
	for _, mode := range model.CaptureModes {
		for _, dns := range []bool{false, true} {
			p := base.Pods[0]
			p.Capture, p.MeshDNS = mode, dns
			pods = append(pods, p)
		}
	}
	flipped := copyServices(base)
	health := &flipped.Services[7].Ports[0].Pairs[0].Members[0].Health
	*health = map[bool]meshv1alpha1.Health{true: meshv1alpha1.HealthUnhealthy, false: meshv1alpha1.HealthHealthy}[*health == meshv1alpha1.HealthHealthy]
	moved := copyServices(flipped)
	moved.Services[7].VIP = "10.97.0.7"
	c := &capturer{}
	for _, step := range []struct {
		name   string
		m      model.Mesh
		reused bool
	}{
		{"first", base, false},
		{"an endpoint's health flipped", flipped, true},
		{"a VIP moved", moved, false},
		{"the same again", moved, true},
		{"back", base, false},
	} {
		previous := c.built
		r := newRulesets(c, step.m)
		for _, p := range pods {
			got := r.of(p)
			if want := capture.Build(step.m, p, c.options); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: the ruleset of a %s pod is not capture.Build's", step.name, p.Capture)
			}
			// The surface sets are a slice's backing array: the same one when reused.
			reused := previous[rulesetKey(p)].rs.Sets != nil && &previous[rulesetKey(p)].rs.Sets[0] == &got.Sets[0]
			if reused != step.reused {
				t.Errorf("%s: a %s pod's ruleset reused %v, want %v", step.name, p.Capture, reused, step.reused)
			}
		}
		c.built = r.built
	}
}

// copyServices is m with services of its own to change.
func copyServices(m model.Mesh) model.Mesh {
	services := make([]model.Service, len(m.Services))
	for i, s := range m.Services {
		services[i] = s.Clone()
	}
	m.Services = services
	return m
}
