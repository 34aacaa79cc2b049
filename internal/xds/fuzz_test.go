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

// FuzzBuild: any mesh the decoder makes of the bytes (xdstest.Decode: up to four services of up
// to three pods each over a small pool of ports, protocols, health, nodes and capture modes, and
// up to three routes the controller would accept) builds without error or panic, the same bytes
// twice (two meshes decoded separately, so no state is shared), and passes every structural
// gate. The seeds are the scenarios (xdstest.Encode) and two variants of the routed one; `go test` runs
// them. To search for more:
//
//	go test ./internal/xds/ -run '^$' -fuzz FuzzBuild -fuzztime 10m
//
// A failing input is written to testdata/fuzz/FuzzBuild/ and replayed by every `go test` after.
func FuzzBuild(f *testing.F) {
	scenarios := xdstest.Scenarios()
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		f.Add(xdstest.Encode(scenarios[name]))
	}
	// Seeds the scenarios do not hold: a TLSRoute (no parent port), and the routed mesh in
	// scoped capture.
	tls := scenarios["routes"]
	tls.Routes = []model.Route{{Kind: model.TLSRoute, Namespace: "shop", Name: "payments-tls",
		Parents: []model.ServiceRef{{Namespace: "shop", Name: "payments"}},
		Rules:   []model.RouteRule{{Backends: []model.Backend{{ServiceRef: model.ServiceRef{Namespace: "shop", Name: "payments", Port: 9000}, Weight: 1}}}}}}
	f.Add(xdstest.Encode(tls))
	scoped := scenarios["routes"]
	scoped.Workloads = slices.Clone(scoped.Workloads)
	for i := range scoped.Workloads {
		scoped.Workloads[i].Capture = model.CaptureScoped
	}
	f.Add(xdstest.Encode(scoped))
	f.Fuzz(func(t *testing.T, data []byte) {
		first, err := xds.Build(xdstest.Decode(data).Mesh())
		if err != nil {
			t.Fatalf("Build refused a valid mesh: %v", err)
		}
		second, err := xds.Build(xdstest.Decode(data).Mesh())
		if err != nil {
			t.Fatalf("Build refused the same mesh the second time: %v", err)
		}
		if v := xdscheck.Identical(first, second); v != nil {
			t.Fatalf("two builds of the same mesh differ:\n%s", strings.Join(v, "\n"))
		}
		if v := xdscheck.All(first); v != nil {
			t.Fatalf("%d gate violations:\n%s", len(v), strings.Join(v, "\n"))
		}
	})
}
