// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package capture_test

import (
	"reflect"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestSameInputsCoversBuild: in every mode, two meshes SameInputs finds alike build the same
// ruleset for a pod, over one change of each thing a service holds; and an endpoint's health,
// weight or metadata leaves them alike (so the node agent's reuse happens at all).
func TestSameInputsCoversBuild(t *testing.T) {
	base := xdstest.Fleet(20, 3).Mesh()
	changes := []struct {
		name string
		// sameKey: the meshes must stay alike in every mode.
		sameKey bool
		change  func(m *model.Mesh)
	}{
		{"an endpoint's health", true, func(m *model.Mesh) {
			member(m).Health = map[bool]meshv1alpha1.Health{true: meshv1alpha1.HealthUnhealthy, false: meshv1alpha1.HealthHealthy}[member(m).Health == meshv1alpha1.HealthHealthy]
		}},
		{"an endpoint's weight and metadata", true, func(m *model.Mesh) {
			member(m).Weight += 7
			member(m).Metadata = map[string]string{"track": "canary"}
		}},
		{"a service's ready counts", true, func(m *model.Mesh) { m.Services[3].Ready-- }},
		{"a VIP", false, func(m *model.Mesh) { m.Services[3].VIP = "10.97.0.1" }},
		{"a VIP gone", false, func(m *model.Mesh) { m.Services[3].VIP = "" }},
		{"a port's number", false, func(m *model.Mesh) { m.Services[3].Ports[0].Number = 7070 }},
		{"a port's protocol", false, func(m *model.Mesh) { m.Services[3].Ports[0].Protocol = meshv1alpha1.ProtocolTCP }},
		{"a port gone", false, func(m *model.Mesh) { m.Services[3].Ports = m.Services[3].Ports[1:] }},
		{"the primary port", false, func(m *model.Mesh) { m.Services[3].Primary = m.Services[3].Ports[len(m.Services[3].Ports)-1].Number }},
		{"the first member's app protocol", false, func(m *model.Mesh) {
			for i := range m.Services[3].Ports {
				m.Services[3].Ports[i].Pairs[0].Members[0].AppProtocol = meshv1alpha1.AppProtocolGRPC
			}
		}},
		{"an endpoint's address", false, func(m *model.Mesh) { member(m).Address = "10.244.9.9" }},
		{"an endpoint gone", false, func(m *model.Mesh) {
			pair := &m.Services[3].Ports[0].Pairs[0]
			pair.Members = pair.Members[1:]
		}},
		{"a service gone", false, func(m *model.Mesh) { m.Services = m.Services[1:] }},
		{"the issuer", false, func(m *model.Mesh) { m.Issuer = workloadidentity.NoIssuer }},
	}
	for _, mode := range model.CaptureModes {
		pod := base.Pods[0]
		pod.Capture = mode
		want := capture.Build(base, pod, capture.Options{})
		for _, c := range changes {
			t.Run(string(mode)+"/"+c.name, func(t *testing.T) {
				m := withServicesCopied(base)
				c.change(&m)
				got := capture.Build(m, pod, capture.Options{})
				same := capture.SameInputs(base, m, mode)
				if c.sameKey && !same {
					t.Errorf("the meshes differ for capture: the agent would build the ruleset again")
				}
				if same && !reflect.DeepEqual(got, want) {
					t.Errorf("the meshes are alike for capture, but the ruleset changed: the agent would program the stale one")
				}
			})
		}
	}
}

// member is a member of a service of m, in its first port's first pair.
func member(m *model.Mesh) *model.Member {
	return &m.Services[3].Ports[0].Pairs[0].Members[1]
}

// withServicesCopied is m with services of its own to change.
func withServicesCopied(m model.Mesh) model.Mesh {
	services := make([]model.Service, len(m.Services))
	for i, s := range m.Services {
		services[i] = s.Clone()
	}
	m.Services = services
	return m
}
