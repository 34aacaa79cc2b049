// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve

import (
	"testing"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// BenchmarkSurface measures the dial surface the controller computes on every MeshService
// reconcile, for the three names of a service: a mixed service and one with the most ports.
func BenchmarkSurface(b *testing.B) {
	mixed := portspec.NewPortSet(8080, []portspec.Port{{Number: 8080, Protocol: portspec.HTTP}, {Number: 9090, Protocol: portspec.HTTP2}, {Number: 9000, Protocol: portspec.TCP}})
	var many []portspec.Port
	for i := range int32(portspec.MaxPorts) {
		many = append(many, portspec.Port{Number: 10000 + i, Protocol: []portspec.Protocol{portspec.HTTP, portspec.HTTP2, portspec.TCP}[i%3]})
	}
	hosts := Hosts("payments", "shop", DefaultMeshDomain)
	for name, set := range map[string]portspec.PortSet{"mixed": mixed, "max-ports": portspec.NewPortSet(10001, many)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(Surface(set, hosts...)) == 0 {
					b.Fatal("empty surface")
				}
			}
		})
	}
}
