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
// node's configuration is rebuilt as the agent rebuilds it: the changed service's model
// (model.BuildService over its endpoints) and a build by the agent's one Builder, which reuses
// what the change left alone (the work of one endpoint event in the agent).
func BenchmarkEndpointChange(b *testing.B) {
	benchmarkEndpointChange(b, new(xds.Builder).Build)
}

// BenchmarkEndpointChangeFullBuild is BenchmarkEndpointChange with a full build (xds.Build)
// after each change, which is what the agent did before it kept a Builder.
func BenchmarkEndpointChangeFullBuild(b *testing.B) {
	benchmarkEndpointChange(b, xds.Build)
}

func benchmarkEndpointChange(b *testing.B, build func(model.Mesh) (xds.Resources, error)) {
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
				_, err := build(m)
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

// BenchmarkSecretNames: what the xDS server adds to each publish of a node's configuration to
// choose the SDS secrets it serves (xds.SecretNames over the clusters and listeners), for the
// fleets of BenchmarkBuild; compare with BenchmarkBuild's time.
func BenchmarkSecretNames(b *testing.B) {
	for _, services := range []int{100, 1000} {
		b.Run(strconv.Itoa(services), func(b *testing.B) {
			res, err := xds.Build(xdstest.Fleet(services, 10).Mesh())
			if err != nil {
				b.Fatal(err)
			}
			names, err := xds.SecretNames(res.Clusters, res.Listeners)
			if err != nil || len(names) == 0 {
				b.Fatalf("SecretNames: %q, %v", names, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := xds.SecretNames(res.Clusters, res.Listeners); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
