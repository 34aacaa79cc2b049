// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package capture_test

import (
	"testing"

	"github.com/aether-mesh/aether-operator/internal/capture"
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
