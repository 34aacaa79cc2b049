// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package capture_test

import (
	"slices"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// BenchmarkBuild: one pod's capture table in a mesh of 1 000 services of xdstest's fleet (HTTP
// 8080, h2 9090 and TCP 9000 each): what the node agent builds for each of its pods on every
// sync. Every service's dial ports come from its dial surface (resolve.DialPorts).
func BenchmarkBuild(b *testing.B) {
	m := xdstest.Fleet(1000, 1).Mesh()
	pod := m.Pods[0]
	if s, _ := capture.Build(m, pod, capture.Options{}).Set(capture.SetSurface4); len(s.Elements) < 6000 {
		b.Fatalf("surface4 holds %d elements, want 6 000", len(s.Elements))
	}
	b.ReportAllocs()
	for b.Loop() {
		capture.Build(m, pod, capture.Options{})
	}
}

// BenchmarkSameInputs: what the node agent now does for each capture mode of its pods on every
// sync (capture.SameInputs, after an endpoint's health flipped), in a mesh of 1 000 services of
// 10 endpoints, where it built every pod's table: it builds again only when the inputs differ.
// Its build/ runs are that build, for comparison.
func BenchmarkSameInputs(b *testing.B) {
	m := xdstest.Fleet(1000, 10).Mesh()
	flipped := m
	flipped.Services = slices.Clone(m.Services)
	flipped.Services[500] = flipped.Services[500].Clone()
	member := &flipped.Services[500].Ports[0].Pairs[0].Members[3]
	member.Health = map[bool]meshv1alpha1.Health{true: meshv1alpha1.HealthUnhealthy, false: meshv1alpha1.HealthHealthy}[member.Health == meshv1alpha1.HealthHealthy]
	for _, mode := range []model.CaptureMode{model.CaptureSurface, model.CaptureScoped} {
		b.Run(string(mode), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !capture.SameInputs(m, flipped, mode) {
					b.Fatal("an endpoint's health flip changed capture's inputs")
				}
			}
		})
		b.Run("build/"+string(mode), func(b *testing.B) { // the build it spares
			pod := m.Pods[0]
			pod.Capture = mode
			b.ReportAllocs()
			for b.Loop() {
				capture.Build(flipped, pod, capture.Options{})
			}
		})
	}
}
