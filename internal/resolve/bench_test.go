// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve

import (
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// benchSets are a mixed service and one with the most ports an endpoint may declare.
func benchSets() map[string]portspec.PortSet {
	mixed := portspec.NewPortSet(8080, []portspec.Port{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}, {Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2}, {Port: 9000, Protocol: meshv1alpha1.ProtocolTCP}})
	var many []portspec.Port
	for i := range int32(portspec.MaxPorts) {
		many = append(many, portspec.Port{Port: 10000 + i, Protocol: []meshv1alpha1.Protocol{meshv1alpha1.ProtocolHTTP, meshv1alpha1.ProtocolHTTP2, meshv1alpha1.ProtocolTCP}[i%3]})
	}
	return map[string]portspec.PortSet{"mixed": mixed, "max-ports": portspec.NewPortSet(10001, many)}
}

// BenchmarkDialSurface measures the dial surface the controller computes on every MeshService
// reconcile.
func BenchmarkDialSurface(b *testing.B) {
	for name, set := range benchSets() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(DialSurface(set, workloadidentity.SPIRE)) == 0 {
					b.Fatal("empty surface")
				}
			}
		})
	}
}

// BenchmarkHTTPRequest measures one answer: a request that reaches its port, and one the mesh
// answers 421 (which spells the working ports).
func BenchmarkHTTPRequest(b *testing.B) {
	for name, set := range benchSets() {
		for kind, authority := range map[string]string{
			"reaches": hostPort("payments.shop.aether.internal", set.Ports[0].Port), // HTTP in both
			"421":     "payments.shop.aether.internal:1",
		} {
			b.Run(name+"/"+kind, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if HTTPRequest(set, authority).Reason == "" {
						b.Fatal("no reason")
					}
				}
			})
		}
	}
}
