// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestGates runs every structural gate of xdscheck (references, chains, pinning, consistency,
// validation inside every Any, domains, names) over every scenario's build, and builds each
// twice to check it is deterministic. The gates' negative controls are in xdscheck_test.go.
func TestGates(t *testing.T) {
	scenarios := xdstest.All()
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		t.Run(name, func(t *testing.T) {
			res := build(t, scenarios[name])
			if v := xdscheck.All(res); v != nil {
				t.Errorf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
			}
			if v := xdscheck.Identical(res, build(t, xdstest.All()[name])); v != nil {
				t.Errorf("two builds of the same mesh differ:\n%s", strings.Join(v, "\n"))
			}
		})
	}
}

// TestEndpointChangeKeepsListenersAndRoutes is the stability gate over every scenario: a copy of
// the mesh in which one member's health flipped and a new replica joined its ports
// (xdstest.EndpointChange) builds the same listeners and routes, byte for byte, and still passes
// every gate. Once Build emits load assignments, the change must reach them, or the test would
// compare two identical inputs.
func TestEndpointChangeKeepsListenersAndRoutes(t *testing.T) {
	scenarios := xdstest.All()
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		t.Run(name, func(t *testing.T) {
			changed, err := xdstest.EndpointChange(scenarios[name])
			if err != nil {
				t.Fatal(err)
			}
			before, after := build(t, scenarios[name]), build(t, changed)
			if v := xdscheck.ListenersAndRoutesEqual(before, after); v != nil {
				t.Errorf("an endpoint-only change touched listeners or routes:\n%s", strings.Join(v, "\n"))
			}
			if v := xdscheck.All(after); v != nil {
				t.Errorf("the changed mesh's build fails the gates:\n%s", strings.Join(v, "\n"))
			}
			if len(before.Endpoints) > 0 && xdscheck.Identical(before, after) == nil {
				t.Error("the endpoint change reached no load assignment: the comparison proves nothing")
			}
		})
	}
}

func build(t testing.TB, m model.Mesh) xds.Resources {
	t.Helper()
	res, err := xds.Build(m)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return res
}
