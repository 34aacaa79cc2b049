// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

// The workload page's retry table ("What the mesh retries for you"), written out here from the
// page and not from the builder: each row, and shapes no row names, with the methods the mesh
// replays it for. A request walks the caller's capture listener and the mesh hop to the
// destination's inbound listener; the destination's proxy answers for what the application did
// (xdssim Respond, from the inbound configuration), and the caller's proxy decides (xdssim
// Retried, from the route's retry policy).

// pageIdempotent are the methods row 4 replays (the page: "only GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE"), and QUERY, which its specification defines as safe and idempotent.
var pageIdempotent = []string{"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE", "QUERY"}

// pageMethods are the methods walked through every row: the idempotent ones, POST and PATCH (the
// page: "A POST or PATCH your application received is never run again"), and one Envoy passes
// on that nobody declared idempotent.
var pageMethods = append(slices.Clip(pageIdempotent), "POST", "PATCH", "PURGE")

// replays says which methods a row is retried for.
type replays int

const (
	never replays = iota
	idempotentOnly
	everyMethod
)

func (r replays) retried(method string) bool {
	return r == everyMethod || r == idempotentOnly && slices.Contains(pageIdempotent, method)
}

// retryRow is one row of the table, or a shape it answers: what happened (a reset the caller's
// proxy met, or what the application did behind the destination's proxy) and the methods the
// page says are replayed.
type retryRow struct {
	name  string
	reset xdssim.Reset
	app   xdssim.Upstream
	want  replays
}

// Envoy's response code details for the failures below (its router's wording).
const (
	detailsRefused       = "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused}"
	detailsTimeout       = "upstream_reset_before_response_started{connection_timeout}"
	detailsTerminated    = "upstream_reset_before_response_started{connection_termination}"
	detailsReset         = "upstream_reset_before_response_started{remote_reset}"
	detailsRefusedStream = "upstream_reset_before_response_started{remote_refused_stream_reset}"
)

var retryRows = []retryRow{
	// Row 1: the caller's proxy could not send the request.
	{name: "1 connect failure", reset: xdssim.ResetConnectFailure, want: everyMethod},
	{name: "1 the destination's proxy refused the stream", reset: xdssim.ResetRefusedStream, want: everyMethod},
	{name: "1 reset before the request was sent", reset: xdssim.ResetBeforeRequest, want: everyMethod},
	// Row 2: the destination's proxy could not reach the application.
	{name: "2 the application refused the connection", app: xdssim.Upstream{Flags: []string{"UF"}, Details: detailsRefused}, want: everyMethod},
	{name: "2 the connect to the application timed out", app: xdssim.Upstream{Flags: []string{"UF"}, Details: detailsTimeout}, want: everyMethod},
	{name: "2 no healthy host", app: xdssim.Upstream{Flags: []string{"UH"}, Details: "no_healthy_upstream"}, want: everyMethod},
	// Row 3: the application answered 503 itself.
	{name: "3 the application's 503", app: xdssim.Upstream{Status: 503}, want: everyMethod},
	{name: "3 the application's 503 claiming another row", app: xdssim.Upstream{Status: 503, Headers: map[string]string{"X-Aether-Outcome": "app-reset"}}, want: everyMethod},
	// Row 4: the application closed or reset the connection after it received the request.
	{name: "4 the application closed the connection", app: xdssim.Upstream{Flags: []string{"UC"}, Details: detailsTerminated}, want: idempotentOnly},
	{name: "4 the application reset the stream", app: xdssim.Upstream{Flags: []string{"UR"}, Details: detailsReset}, want: idempotentOnly},
	// Row 5: the HTTP/2 application refused the stream.
	{name: "5 the application refused the stream", app: xdssim.Upstream{Flags: []string{"UR"}, Details: detailsRefusedStream}, want: everyMethod},
	// Row 6: anything else.
	{name: "6 the application's 500", app: xdssim.Upstream{Status: 500}, want: never},
	{name: "6 the application's 502", app: xdssim.Upstream{Status: 502}, want: never},
	{name: "6 the application's 504", app: xdssim.Upstream{Status: 504}, want: never},
	{name: "6 the application's 200", app: xdssim.Upstream{Status: 200}, want: never},
	{name: "6 a timeout", app: xdssim.Upstream{Flags: []string{"UT"}, Details: "upstream_response_timeout", LocalStatus: 504}, want: never},
	{name: "6 the application's gRPC UNAVAILABLE", app: xdssim.Upstream{Status: 200,
		Headers: map[string]string{"content-type": "application/grpc", "grpc-status": "14"}}, want: never},
	{name: "6 the application's 500 claiming row 2", app: xdssim.Upstream{Status: 500, Headers: map[string]string{"x-aether-outcome": "unreachable"}}, want: never},
	{name: "6 the application's 503 rate-limited", app: xdssim.Upstream{Status: 503, Headers: map[string]string{"x-envoy-ratelimited": "true"}}, want: never},
	// Shapes no row names: the proxy's own overflow (the page lists refused, timed out, no
	// healthy host), and a reset after the request left the caller's proxy (it may have run).
	{name: "- the destination proxy's overflow", app: xdssim.Upstream{Flags: []string{"UO"}, Details: "upstream_reset_before_response_started{overflow}"}, want: never},
	{name: "- reset after the request was sent", reset: xdssim.ResetAfterRequest, want: never},
}

// TestRetriesByOutcome walks every row with every method, plain HTTP (an HTTP/1.1 port) and a
// gRPC call (an h2 port, always POST).
func TestRetriesByOutcome(t *testing.T) {
	m, client, server := shapesMesh()
	sim := xdssim.New(build(t, m))
	for _, row := range retryRows {
		for _, method := range pageMethods {
			walkRetry(t, sim, m, client, server, 8080, row, &xdssim.Request{Method: method})
		}
		walkRetry(t, sim, m, client, server, 9090, row, &xdssim.Request{Method: "POST", HTTP2: true,
			Headers: map[string]string{"content-type": "application/grpc"}})
	}
}

// walkRetry sends req to port of payments from client, and checks the caller's decision on
// row against the page, and that neither application sees x-aether-outcome and the callee sees
// the caller's identity.
func walkRetry(t *testing.T, sim *xdssim.Sim, m model.Mesh, client, server model.LocalPod, port int32, row retryRow, req *xdssim.Request) {
	t.Helper()
	what := row.name + " / " + req.Method + " to :" + strconv.Itoa(int(port))
	host := xds.FQDN("payments", "shop", m.Domain) + ":" + strconv.Itoa(int(port))
	req.Host = host
	// What a client may send that the mesh must not pass on.
	// x-envoy-retry-on: 5xx would have the router replay every 5xx, POST included.
	forged := map[string]string{xds.OutcomeHeader: "unreachable", "x-forwarded-client-cert": "URI=spiffe://aether.internal/ns/evil/sa/mallory",
		"x-envoy-retry-on": "5xx,reset", "x-envoy-max-retries": "5"}
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	maps.Copy(req.Headers, forged)
	caller := sim.Dial(xdssim.Conn{Listener: xds.CaptureListener(xds.PodKey(client.Namespace, client.Name)), DstIP: vipOf(m, "payments"),
		DstPort: uint32(port), HTTP: req})
	if caller.Verdict != xdssim.Forwarded || len(caller.Targets) != 1 || caller.Targets[0].TLS == nil {
		t.Fatalf("%s: the caller's proxy does not forward it over mTLS: %s", what, caller)
	}
	attempt := xdssim.Attempt{Reset: row.reset}
	if row.reset == "" {
		target := caller.Targets[0]
		hop := &xdssim.Request{Host: host, Method: req.Method, HTTP2: slices.Equal(target.UpstreamHTTP, []string{"h2"}),
			Headers: map[string]string{}, ClientCertURI: client.Identity}
		for k, v := range caller.Sends() {
			if !strings.HasPrefix(k, ":") {
				hop.Headers[k] = v
			}
		}
		if _, ok := hop.Headers[xds.OutcomeHeader]; ok {
			t.Errorf("%s: the caller's proxy sends the client's %s on", what, xds.OutcomeHeader)
		}
		hop.Headers[xds.OutcomeHeader] = "unreachable" // as if the caller's proxy had not removed it
		dest := sim.Arrive(xds.InboundListener(xds.PodKey(server.Namespace, server.Name)), target.TLS.SNI, target.TLS.ALPN, hop)
		if dest.Verdict != xdssim.Forwarded {
			t.Fatalf("%s: the destination's proxy does not deliver it: %s", what, dest)
		}
		delivered := dest.Sends()
		if v, ok := delivered[xds.OutcomeHeader]; ok {
			t.Errorf("%s: the application receives %s: %q", what, xds.OutcomeHeader, v)
		}
		if got, want := delivered["x-forwarded-client-cert"], "URI="+client.Identity; got != want {
			t.Errorf("%s: the application receives x-forwarded-client-cert %q, want %q (the verified caller, the client's own replaced)", what, got, want)
		}
		resp, err := dest.Respond(row.app)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		attempt.Status, attempt.Headers = resp.Status, resp.Headers
	}
	decision, err := caller.Retried(attempt)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if want := row.want.retried(req.Method); decision.Retried != want {
		t.Errorf("%s: retried %t, the page says %t (attempt %+v)", what, decision.Retried, want, attempt)
	}
	if decision.Retried && (decision.NumRetries != 2 || !decision.OtherEndpoint) {
		t.Errorf("%s: retried %d times, on another endpoint %t; the page says twice, on another endpoint", what, decision.NumRetries, decision.OtherEndpoint)
	}
	if row.reset == "" {
		h, err := caller.Delivers(attempt)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if v, ok := h[xds.OutcomeHeader]; ok {
			t.Errorf("%s: the client application receives %s %v", what, xds.OutcomeHeader, v)
		}
	}
}

// vipOf is the VIP of service name in m.
func vipOf(m model.Mesh, name string) string {
	for _, s := range m.Services {
		if s.Name == name {
			return s.VIP
		}
	}
	return ""
}
