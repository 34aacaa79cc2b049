// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"slices"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The subsets scenario's pods of payments, by address: payments-0 publishes version v1,
// payments-1 version v2 and shard s1, payments-2 version v2 and shard s2.
const (
	pay0 = "10.244.1.10"
	pay1 = "10.244.2.10"
	pay2 = "10.244.3.10"
)

// TestSubsetRouting: frontend's requests to payments:8080 with the x-aether-* headers land where
// the workload page says ("Subset routing and locality", "Provider-defined subsets"), walked
// through what Build renders by the simulator's subset decision. The expectations are the
// page's, written by hand: a pin reaches exactly its endpoint or fails 503 (both pins: the
// endpoint both name, or 503 when they name two), a subset is strict,
// headers intersect, a pin mixed with a subset balances normally, no header changes nothing,
// and a key beyond the fourth selects alone.
func TestSubsetRouting(t *testing.T) {
	all := []string{pay0, pay1, pay2}
	// Five keys: k1..k4 combine, version (the fifth, sorted) selects alone.
	five := xdstest.Scenarios()["subsets"]
	for i := range five.Workloads {
		if five.Workloads[i].Service == "payments" {
			five.Workloads[i].Metadata = map[string]string{"k1": "a", "k2": "a", "k3": "a", "k4": "a",
				"version": five.Workloads[i].Metadata["version"]}
		}
	}
	meshes := map[string]*xdssim.Sim{}
	for name, m := range map[string]xdstest.Scenario{"two keys": xdstest.Scenarios()["subsets"], "five keys": five} {
		res, err := xds.Build(m.Mesh())
		if err != nil {
			t.Fatal(err)
		}
		sim := xdssim.New(res)
		if err := sim.Check(); err != nil {
			t.Fatalf("%s: Envoy would reject the configuration: %v", name, err)
		}
		meshes[name] = sim
	}
	for _, tc := range []struct {
		name    string
		mesh    string
		headers map[string]string
		want    []string // nil: 503
	}{
		{"pin ip", "two keys", map[string]string{"x-aether-ip": pay1}, []string{pay1}},
		{"pin pod", "two keys", map[string]string{"x-aether-pod": "payments-2"}, []string{pay2}},
		{"pin to an unknown ip fails", "two keys", map[string]string{"x-aether-ip": "10.244.9.9"}, nil},
		{"pin to an unknown pod fails", "two keys", map[string]string{"x-aether-pod": "payments-7"}, nil},
		{"subset version v2", "two keys", map[string]string{"x-aether-subset-version": "v2"}, []string{pay1, pay2}},
		{"subset with no endpoint fails", "two keys", map[string]string{"x-aether-subset-version": "v3"}, nil},
		{"two headers intersect", "two keys", map[string]string{"x-aether-subset-version": "v2", "x-aether-subset-shard": "s2"}, []string{pay2}},
		{"two headers with an empty intersection fail", "two keys", map[string]string{"x-aether-subset-version": "v1", "x-aether-subset-shard": "s2"}, nil},
		{"both pins agreeing: that endpoint", "two keys", map[string]string{"x-aether-ip": pay1, "x-aether-pod": "payments-1"}, []string{pay1}},
		{"both pins disagreeing fail", "two keys", map[string]string{"x-aether-ip": pay1, "x-aether-pod": "payments-2"}, nil},
		{"pin and subset balance normally", "two keys", map[string]string{"x-aether-ip": pay1, "x-aether-subset-version": "v1"}, all},
		{"no headers: every endpoint", "two keys", nil, all},
		{"a key no endpoint publishes: every endpoint", "two keys", map[string]string{"x-aether-subset-color": "red"}, all},
		{"the fifth key alone", "five keys", map[string]string{"x-aether-subset-version": "v1"}, []string{pay0}},
		{"the fifth key alone, no endpoint", "five keys", map[string]string{"x-aether-subset-version": "v9"}, nil},
		{"four keys combine", "five keys", map[string]string{"x-aether-subset-k1": "a", "x-aether-subset-k2": "a", "x-aether-subset-k3": "a", "x-aether-subset-k4": "b"}, nil},
		{"the fifth key with another balances normally", "five keys", map[string]string{"x-aether-subset-version": "v9", "x-aether-subset-k1": "a"}, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := meshes[tc.mesh]
			out := sim.Dial(xdssim.Conn{Listener: xds.CaptureListener("web/frontend-0"), DstIP: "10.96.0.10", DstPort: 8080,
				HTTP: &xdssim.Request{Host: "payments.shop.aether.internal:8080", Headers: tc.headers}})
			if out.Verdict != xdssim.Forwarded {
				t.Fatalf("not forwarded: %s", out)
			}
			got, err := sim.Subset(out)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Hosts, tc.want) {
				t.Errorf("hosts %q (criteria %v, selector %q), want %q", got.Hosts, got.Criteria, got.Selector, tc.want)
			}
			if (tc.want == nil) != (got.Status() == 503) {
				t.Errorf("status %d with hosts %q", got.Status(), got.Hosts)
			}
		})
	}
}
