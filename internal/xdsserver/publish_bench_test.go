// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"strconv"
	"testing"

	"github.com/go-logr/logr"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// BenchmarkPublishEndpointChange: the publish that follows one endpoint's health flip, as the
// agent's rebuild loop makes it. Two configurations of the fleet (100 and 1 000 services of 10
// endpoints, internal/xds's BenchmarkEndpointChange's), built by one xds.Builder before and after
// the flip so that they share every resource but the changed load assignment, are published in
// turn on one node: each publish is one endpoint change. Compare with internal/xds's
// BenchmarkEndpointChange, the incremental build that precedes it.
func BenchmarkPublishEndpointChange(b *testing.B) {
	for _, services := range []int{100, 1000} {
		b.Run(strconv.Itoa(services), func(b *testing.B) {
			before, after := endpointChangePair(b, services)
			s := New(Options{Log: logr.Discard()})
			if _, err := s.Publish("node", before); err != nil {
				b.Fatal(err)
			}
			turn := []xds.Resources{after, before}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				published, err := s.Publish("node", turn[i%2])
				if err != nil || !published {
					b.Fatalf("publish %d: published %v, %v", i, published, err)
				}
				i++
			}
		})
	}
}

// endpointChangePair is a fleet's configuration before and after one endpoint's health flips,
// built by one Builder.
func endpointChangePair(tb testing.TB, services int) (before, after xds.Resources) {
	fleet := xdstest.Fleet(services, 10)
	m, inputs := fleet.Mesh(), fleet.Inputs()
	var builder xds.Builder
	before, err := builder.Build(m)
	if err != nil {
		tb.Fatal(err)
	}
	changed := len(inputs) / 2
	health := &inputs[changed].Endpoints[3].Status.Health
	*health = map[bool]meshv1alpha1.Health{true: meshv1alpha1.HealthUnhealthy, false: meshv1alpha1.HealthHealthy}[*health == meshv1alpha1.HealthHealthy]
	m.Services[changed] = model.BuildService(inputs[changed])
	if after, err = builder.Build(m); err != nil {
		tb.Fatal(err)
	}
	return before, after
}
