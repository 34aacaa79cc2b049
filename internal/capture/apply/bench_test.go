// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply_test

import (
	"testing"

	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// fleetServices is the size of the benchmarks' mesh: xdstest's fleet of services serving HTTP
// 8080, h2 9090 and TCP 9000, six dial ports each (80, 8080, 9000, 9090, 18081, 18082), so
// surface4 holds 10 002 elements.
const fleetServices = 1667

// fleet is the benchmarks' mesh and the surface ruleset of its first local pod.
func fleet(b *testing.B, ns *nstest.NS) (model.Mesh, model.LocalPod, capture.Ruleset) {
	b.Helper()
	m := xdstest.Fleet(fleetServices, 1).Mesh()
	pod := m.Pods[0]
	pod.Capture, pod.NetNS = model.CaptureSurface, ns.Path
	want := capture.Build(m, pod, capture.Options{})
	if s, _ := want.Set(capture.SetSurface4); len(s.Elements) < 10000 {
		b.Fatalf("surface4 holds %d elements, want at least 10 000", len(s.Elements))
	}
	return m, pod, want
}

// BenchmarkProgram programs the fleet's table (10 002 set elements, 5 rules) into a namespace
// that has none: one batch. The target is under 100 ms.
func BenchmarkProgram(b *testing.B) {
	ns := nstest.New(b)
	_, _, want := fleet(b, ns)
	a := apply.New()
	var rep apply.Report
	for b.Loop() {
		b.StopTimer()
		if err := a.Remove(ns.Path); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var err error
		if rep, err = a.Sync(ns.Path, want); err != nil {
			b.Fatal(err)
		}
	}
	if rep.Batches != 1 || rep.Stats.ElementsAdded < 10000 {
		b.Fatalf("last Sync: %+v, want one batch of every element", rep)
	}
	b.ReportMetric(float64(rep.Stats.ElementsAdded), "elements/op")
}

// BenchmarkChangeOneService adds one service (ledger, four dial ports) to the fleet's
// programmed table, and removes it: each Sync is one batch of those four elements, and reads
// nothing. (The other direction runs outside the timer.)
func BenchmarkChangeOneService(b *testing.B) {
	ns := nstest.New(b)
	m, pod, base := fleet(b, ns)
	added := capture.Build(withLedger(m), pod, capture.Options{})
	a := apply.New()
	if _, err := a.Sync(ns.Path, base); err != nil {
		b.Fatal(err)
	}
	for _, step := range []struct {
		name       string
		from, to   capture.Ruleset
		wantChange apply.Stats
	}{
		{"add", base, added, apply.Stats{ElementsAdded: 4}},
		{"remove", added, base, apply.Stats{ElementsDeleted: 4}},
	} {
		b.Run(step.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				if _, err := a.Sync(ns.Path, step.from); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				rep, err := a.Sync(ns.Path, step.to)
				if err != nil {
					b.Fatal(err)
				}
				if rep.Batches != 1 || rep.Read || rep.Stats != step.wantChange {
					b.Fatalf("Sync: %+v, want one batch of %+v and no read", rep, step.wantChange)
				}
			}
			b.ReportMetric(4, "elements/op")
		})
	}
}

// BenchmarkUnchanged is a Sync of the fleet's table when nothing changed: the generation read
// and the comparison, no batch.
func BenchmarkUnchanged(b *testing.B) {
	ns := nstest.New(b)
	m, pod, want := fleet(b, ns)
	a := apply.New()
	if _, err := a.Sync(ns.Path, want); err != nil {
		b.Fatal(err)
	}
	again := capture.Build(m, pod, capture.Options{}) // equal, not the same slices
	for b.Loop() {
		rep, err := a.Sync(ns.Path, again)
		if err != nil || rep.Batches != 0 || rep.Read {
			b.Fatalf("Sync: %+v, %v; want nothing read or sent", rep, err)
		}
	}
}
