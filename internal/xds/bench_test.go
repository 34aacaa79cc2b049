// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"strconv"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// BenchmarkBuild: a full build of a node's configuration for 100 and 1 000 services of 10
// endpoints serving HTTP 8080, h2 9090 and TCP 9000, with 2 local pods (xdstest.Fleet), the
// acceptance's figure (target: under 100 ms at 1 000).
func BenchmarkBuild(b *testing.B) {
	for _, services := range []int{100, 1000} {
		b.Run(strconv.Itoa(services), func(b *testing.B) {
			m := xdstest.Fleet(services, 10).Mesh()
			if _, err := xds.Build(m); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := xds.Build(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEndpointChange: one endpoint's health flips (Healthy, Unhealthy, in turn) and the
// node's configuration is rebuilt: the changed service's model (model.BuildService over its
// endpoints) and the full Build, the work of one endpoint event in the agent.
func BenchmarkEndpointChange(b *testing.B) {
	for _, services := range []int{100, 1000} {
		b.Run(strconv.Itoa(services), func(b *testing.B) {
			fleet := xdstest.Fleet(services, 10)
			m, inputs := fleet.Mesh(), fleet.Inputs() // the same order: by namespace and name
			changed := len(inputs) / 2
			target := &inputs[changed].Endpoints[3].Status.Health
			flip := func() error {
				if *target == meshv1alpha1.HealthHealthy {
					*target = meshv1alpha1.HealthUnhealthy
				} else {
					*target = meshv1alpha1.HealthHealthy
				}
				m.Services[changed] = model.BuildService(inputs[changed])
				_, err := xds.Build(m)
				return err
			}
			if err := flip(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := flip(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
