// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"testing"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestNoIPv6PodBindsIPv4Only: in a dual-stack mesh, a pod whose namespace has IPv6 off
// (LocalPod.NoIPv6) gets listeners with no IPv6 address, and the other pods keep theirs (the
// live test, test/envoy, shows Envoy refusing the listener otherwise).
func TestNoIPv6PodBindsIPv4Only(t *testing.T) {
	m := xdstest.All()["dual-stack-mesh"]
	off := -1
	for i, p := range m.Pods {
		if p.Name == "frontend-0" {
			off = i
		}
	}
	if off < 0 {
		t.Fatal("no frontend-0 in the dual-stack scenario")
	}
	ipv6Addresses := func(noIPv6 bool) map[string]int {
		m.Pods[off].NoIPv6 = noIPv6
		res, err := xds.Build(m)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, l := range res.Listeners {
			for _, a := range l.GetAdditionalAddresses() {
				if h := a.GetAddress().GetSocketAddress().GetAddress(); h == "::1" || h == "::" {
					out[l.GetName()]++
				}
			}
		}
		return out
	}
	before, after := ipv6Addresses(false), ipv6Addresses(true)
	for _, name := range []string{xds.CaptureListener("web/frontend-0"), xds.ProxyListener("web/frontend-0"), xds.InboundListener("web/frontend-0")} {
		if before[name] == 0 {
			t.Errorf("%s has no IPv6 address with IPv6 on: the test proves nothing", name)
		}
		if after[name] != 0 {
			t.Errorf("%s keeps %d IPv6 addresses in a namespace without IPv6", name, after[name])
		}
	}
	if after[xds.CaptureListener("shop/payments-0")] == 0 && before[xds.CaptureListener("shop/payments-0")] != 0 {
		t.Error("payments-0, whose namespace has IPv6, lost its IPv6 address")
	}
}
