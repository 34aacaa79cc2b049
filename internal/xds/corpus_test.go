// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// The choice filter_disabled forces, shown on two meshes: a server-first client of a TCP port is
// not held where the port is TCP on every VIP (mixed-http-primary's 9000), and is held for the
// timeout where another VIP serves HTTP on the same port (shared-port's 9000, catalog's), whose
// late HTTP client is served by catalog's own chain all the same.
func TestServerFirstWaitsOnlyOnSharedPorts(t *testing.T) {
	const paymentsVIP, catalogVIP = "10.96.0.10", "10.96.0.11"
	capture := xds.CaptureListener(xds.PodKey("web", "frontend-0"))
	for _, tc := range []struct {
		scenario string
		conn     xdssim.Conn
		verdict  xdssim.Verdict
		waited   time.Duration
	}{
		{"mixed-http-primary", xdssim.Conn{Listener: capture, DstIP: paymentsVIP, DstPort: 9000, ServerFirst: true}, xdssim.Forwarded, 0},
		{"shared-port", xdssim.Conn{Listener: capture, DstIP: paymentsVIP, DstPort: 9000, ServerFirst: true}, xdssim.Forwarded, time.Second},
		{"shared-port", xdssim.Conn{Listener: capture, DstIP: catalogVIP, DstPort: 9000, FirstBytesAfter: xdswalk.LateBy,
			HTTP: &xdssim.Request{Host: "catalog.shop.aether.internal:9000"}}, xdssim.Forwarded, time.Second},
	} {
		res, err := xds.Build(xdstest.All()[tc.scenario])
		if err != nil {
			t.Fatal(err)
		}
		out := xdssim.New(res).Dial(tc.conn)
		if out.Verdict != tc.verdict || out.FiltersWaited != tc.waited {
			t.Errorf("%s: %s: %s after %s, want %s after %s: %s", tc.scenario, xdswalk.Describe(tc.conn), out.Verdict, out.FiltersWaited,
				tc.verdict, tc.waited, out)
		}
	}
}
