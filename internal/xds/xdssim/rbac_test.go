// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim_test

import (
	"errors"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestRBACAsEnvoyDecides: on the access-policy scenario's inbound listener, the simulator denies
// what the rendered chains deny (the RBAC filter's 403 access-denied on HTTP, the handshake's
// refusal on TCP), forwards what they admit.
func TestRBACAsEnvoyDecides(t *testing.T) {
	res, err := xds.Build(xdstest.AccessPolicy())
	if err != nil {
		t.Fatal(err)
	}
	sim := xdssim.New(res)
	inbound := xds.InboundListener(xds.PodKey("shop", "payments-0"))
	frontend, batch := xdstest.Identity("web", "frontend"), xdstest.Identity("ops", "batch")
	get := func(path string) *xdssim.Request {
		return &xdssim.Request{Host: "payments.shop.aether.internal:8080", Path: path, HTTP2: true}
	}
	for _, tc := range []struct {
		name, caller, sni string
		req               *xdssim.Request
		denied            bool
	}{
		{"frontend GET /api/x", frontend, "8080", get("/api/x"), false},
		{"batch GET /api/x", batch, "8080", get("/api/x"), true},
		{"frontend GET /api/../admin", frontend, "8080", get("/api/../admin"), true},
		{"frontend GET //api/x", frontend, "8080", get("//api/x"), false},
		{"batch on the floor (no SNI)", batch, "", get("/api/x"), true},
		{"frontend TCP", frontend, "9000", nil, false},
		{"batch TCP", batch, "9000", nil, true},
		{"batch on the open h2 port", batch, "9090", get("/admin"), false},
	} {
		alpn := []string{"h2"}
		if tc.req == nil {
			alpn = nil
		}
		out := sim.ArriveAs(tc.caller, inbound, tc.sni, alpn, tc.req)
		switch {
		case !tc.denied && out.Verdict != xdssim.Forwarded:
			t.Errorf("%s: %s, want it forwarded", tc.name, out)
		case tc.denied && tc.req == nil && !errors.Is(out.Err, xdssim.ErrPeerRefused):
			t.Errorf("%s: %s, want the handshake to refuse the caller", tc.name, out)
		case tc.denied && tc.req != nil && !errors.Is(out.Err, xdssim.ErrDenied):
			t.Errorf("%s: %s, want the RBAC filter's denial", tc.name, out)
		case tc.denied && tc.req != nil && (out.Response.Status != 403 || out.Response.Header(resolve.ErrorHeader) != authz.DeniedError):
			t.Errorf("%s: %s, want 403 %s: %s", tc.name, out, resolve.ErrorHeader, authz.DeniedError)
		case tc.denied && tc.req == nil && out.Verdict != xdssim.Closed:
			t.Errorf("%s: %s, want the connection closed", tc.name, out)
		}
	}
}
