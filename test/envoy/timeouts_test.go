// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// TestHTTPRouteTimeoutsEndAStuckRequest: an HTTPRoute rule's timeouts.request ends a request to
// an application that never answers with the mesh's 504 when it passes, and its
// timeouts.backendRequest ends each attempt (no retry: an application that had the request may
// have acted on it); both within 10 %. A rule that sets none leaves the request open: the mesh
// sets no deadline of its own. The routes scenario's payments-split gets two rules in front, for
// the hanging path and a header saying which timeout.
func TestHTTPRouteTimeoutsEndAStuckRequest(t *testing.T) {
	s := xdstest.Scenarios()["routes"]
	payments := []model.Backend{{ServiceRef: model.ServiceRef{Namespace: "shop", Name: "payments", Port: 8080}, Weight: 1}}
	hang := func(which string, timeouts model.RouteTimeouts) model.RouteRule {
		return model.RouteRule{Matches: []model.RouteMatch{{PathType: "PathPrefix", Path: testapp.HangPath,
			Headers: []model.HeaderMatch{{Name: "x-timeout", Value: which}}}}, Backends: payments, Timeouts: timeouts}
	}
	i := slices.IndexFunc(s.Routes, func(r model.Route) bool { return r.Name == "payments-split" })
	s.Routes[i].Rules = append([]model.RouteRule{
		hang("request", model.RouteTimeouts{Request: time.Second}),
		hang("backend", model.RouteTimeouts{Request: 3 * time.Second, BackendRequest: 400 * time.Millisecond}),
	}, s.Routes[i].Rules...)
	lm := startMesh(t, s, nil)
	c := client{ns: lm.fabric.pods[xds.PodKey("web", "frontend-0")], podOf: lm.fabric.pod, window: 2 * time.Second}
	send := func(which string) (xdswalk.Seen, time.Duration) {
		start := time.Now()
		seen := c.send(xdssim.Conn{DstIP: "10.96.0.10", DstPort: 8080, HTTP: &xdssim.Request{
			Host: "payments.shop.aether.internal:8080", Path: testapp.HangPath, Headers: map[string]string{"x-timeout": which},
		}}, xdswalk.ShapeHTTP11)
		return seen, time.Since(start)
	}
	for _, tc := range []struct {
		which string
		want  time.Duration
	}{{"request", time.Second}, {"backend", 400 * time.Millisecond}} {
		seen, took := send(tc.which)
		t.Logf("timeouts.%s %s: %s after %s", tc.which, tc.want, seen, took.Round(time.Millisecond))
		if seen.Kind != xdswalk.SawAnswer || seen.Status != 504 {
			t.Errorf("timeouts.%s: %s, want the mesh's 504", tc.which, seen)
		}
		if lo, hi := tc.want*9/10, tc.want*11/10; took < lo || took > hi {
			t.Errorf("timeouts.%s: answered after %s, want %s within 10 %% (%s..%s)", tc.which, took.Round(time.Millisecond), tc.want, lo, hi)
		}
	}
	// No timeout: still open when the client gives up, at three times the longest above.
	c.deadline = 3 * time.Second
	if seen, took := send("none"); seen.Kind != xdswalk.SawNothing {
		t.Errorf("a rule without timeouts: %s after %s, want the request held open (no deadline of the mesh's own)", seen, took.Round(time.Millisecond))
	}
}
