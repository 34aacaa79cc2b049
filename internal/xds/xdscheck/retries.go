// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"slices"
	"strings"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// What the retry gates hold the rendering to. They are written from the workload page's table
// ("What the mesh retries for you") and Envoy's retry_on conditions, not read from the builder:
// the page allows a retry after a request was delivered only on the outcome header, never on a
// status alone, and never for a response carrying x-envoy-ratelimited.
var (
	// requiredRetryOn are the conditions every outbound route must retry on: the caller's proxy
	// could not send the request (row 1), and the outcome header (rows 2 to 5).
	requiredRetryOn = []string{"connect-failure", "refused-stream", "reset-before-request", "retriable-headers"}
	// outcomeValues are the outcome header values a caller may retry on, with whether the page
	// allows them for every method (false: the idempotent ones only).
	outcomeValues = map[string]bool{"unreachable": true, "app-503": true, "refused-stream": true, "app-reset": false}
	// clientRetryHeaders are the request headers Envoy's router reads for retries.
	clientRetryHeaders = []string{"x-envoy-retry-on", "x-envoy-retry-grpc-on", "x-envoy-max-retries",
		"x-envoy-retriable-status-codes", "x-envoy-retriable-header-names"}
	// idempotent are the methods the page lets be replayed after the application received them,
	// and QUERY, safe and idempotent by its own definition.
	idempotent = []string{"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE", "QUERY"}
)

const (
	outcomeHeader       = "x-aether-outcome"
	rateLimitedHeader   = "x-envoy-ratelimited"
	wantRetries         = 2
	wantBaseInterval    = 25 * time.Millisecond
	wantMaxInterval     = 250 * time.Millisecond
	previousHostsFilter = "envoy.retry_host_predicates.previous_hosts"
)

// Retries checks every route configuration served by RDS (the callers' side: the capture routes)
// against the page's table: each route that forwards to a mesh cluster (every cluster but the
// passthrough, whose destinations are not the mesh's) carries a retry policy with
//   - retry_on exactly connect-failure, refused-stream, reset-before-request and
//     retriable-headers: no 5xx, gateway-error, reset or retriable-4xx (a delivered request
//     retried on its status alone), no envoy-ratelimited (x-envoy-ratelimited is never retried),
//     no retriable-status-codes; retriable_status_codes, if any, 503 alone;
//   - two retries, 25–250 ms apart, on another host (the previous_hosts predicate);
//   - retriable_headers on x-aether-outcome only, each an exact value the page allows, and
//     "app-reset" (the application had the request) only on a route whose match admits only
//     GET, HEAD, OPTIONS, TRACE, PUT, DELETE or QUERY;
//
// and the route configuration removes x-aether-outcome from the responses it forwards and from
// the requests, and the request headers by which a client asks Envoy's router for more retries
// (x-envoy-retry-on and kin: Envoy's router documentation, "HTTP headers consumed").
func Retries(res xds.Resources) []string {
	var out []string
	for _, rc := range res.Routes {
		at := resourceAt("route configuration", rc.GetName())
		if !slices.Contains(rc.GetResponseHeadersToRemove(), outcomeHeader) {
			out = append(out, fmt.Sprintf("%s: does not remove %s from responses: it reaches the client application", at, outcomeHeader))
		}
		if !slices.Contains(rc.GetRequestHeadersToRemove(), outcomeHeader) {
			out = append(out, fmt.Sprintf("%s: does not remove %s from requests", at, outcomeHeader))
		}
		for _, h := range clientRetryHeaders {
			if !slices.Contains(rc.GetRequestHeadersToRemove(), h) {
				out = append(out, fmt.Sprintf("%s: does not remove %s from requests: a client can ask for retries the table does not allow", at, h))
			}
		}
		for _, vh := range rc.GetVirtualHosts() {
			for i, r := range vh.GetRoutes() {
				action := r.GetRoute()
				if action == nil || action.GetCluster() == xds.PassthroughCluster {
					continue
				}
				routeAt := fmt.Sprintf("%s: virtual_hosts[%s].routes[%d]", at, vh.GetName(), i)
				out = append(out, retryPolicy(routeAt, r.GetMatch(), action.GetRetryPolicy())...)
			}
		}
	}
	return out
}

// retryPolicy checks one route's policy; match is the route's.
func retryPolicy(at string, match *routev3.RouteMatch, p *routev3.RetryPolicy) []string {
	if p == nil {
		return []string{at + ": no retry policy: a connect failure or an unreachable application fails the request"}
	}
	var out []string
	tokens := strings.Split(p.GetRetryOn(), ",")
	for _, want := range requiredRetryOn {
		if !slices.Contains(tokens, want) {
			out = append(out, fmt.Sprintf("%s: retry_on %q lacks %s", at, p.GetRetryOn(), want))
		}
	}
	for _, token := range tokens {
		if !slices.Contains(requiredRetryOn, token) {
			out = append(out, fmt.Sprintf("%s: retry_on %q has %s, which the page's table does not allow", at, p.GetRetryOn(), token))
		}
	}
	for _, code := range p.GetRetriableStatusCodes() {
		if code != 503 {
			out = append(out, fmt.Sprintf("%s: retriable_status_codes has %d: only 503 may be", at, code))
		}
	}
	switch n := p.GetNumRetries(); {
	case n == nil:
		out = append(out, fmt.Sprintf("%s: num_retries unset (Envoy's default, 1), want %d", at, wantRetries))
	case n.GetValue() != wantRetries:
		out = append(out, fmt.Sprintf("%s: num_retries %d, want %d", at, n.GetValue(), wantRetries))
	}
	if b := p.GetRetryBackOff(); b.GetBaseInterval().AsDuration() != wantBaseInterval || b.GetMaxInterval().AsDuration() != wantMaxInterval {
		out = append(out, fmt.Sprintf("%s: retry back-off %s–%s, want %s–%s", at,
			b.GetBaseInterval().AsDuration(), b.GetMaxInterval().AsDuration(), wantBaseInterval, wantMaxInterval))
	}
	if !slices.ContainsFunc(p.GetRetryHostPredicate(), func(h *routev3.RetryPolicy_RetryHostPredicate) bool { return h.GetName() == previousHostsFilter }) {
		out = append(out, fmt.Sprintf("%s: no %s predicate: a retry may pick the endpoint that just failed", at, previousHostsFilter))
	}
	for _, h := range p.GetRetriableHeaders() {
		value, exact := h.GetStringMatch().GetMatchPattern().(*matcherv3.StringMatcher_Exact)
		switch {
		case h.GetName() != outcomeHeader:
			out = append(out, fmt.Sprintf("%s: retriable header %s: only %s may make a response retriable", at, h.GetName(), outcomeHeader))
		case !exact || h.GetInvertMatch() || h.GetTreatMissingHeaderAsEmpty():
			out = append(out, fmt.Sprintf("%s: retriable header %s is not matched by an exact value", at, h.GetName()))
		default:
			anyMethod, known := outcomeValues[value.Exact]
			switch {
			case !known:
				out = append(out, fmt.Sprintf("%s: retriable header %s %q is no row of the page's table", at, h.GetName(), value.Exact))
			case !anyMethod && !onlyIdempotent(match):
				out = append(out, fmt.Sprintf("%s: retries %s %q for a method that is not idempotent: a request the application received is run again",
					at, h.GetName(), value.Exact))
			}
		}
	}
	return out
}

// onlyIdempotent reports whether a route match admits only idempotent methods: a :method matcher
// whose exact value, or every alternative of whose regular expression (a|b|c, matched whole), is
// one of them.
func onlyIdempotent(m *routev3.RouteMatch) bool {
	for _, h := range m.GetHeaders() {
		if h.GetName() != ":method" || h.GetInvertMatch() {
			continue
		}
		var methods []string
		switch sm := h.GetStringMatch(); {
		case sm.GetExact() != "":
			methods = []string{sm.GetExact()}
		case sm.GetSafeRegex() != nil:
			methods = strings.Split(sm.GetSafeRegex().GetRegex(), "|")
		}
		if len(methods) > 0 && !slices.ContainsFunc(methods, func(m string) bool { return !slices.Contains(idempotent, m) }) {
			return true
		}
	}
	return false
}

// InboundHTTP checks every HTTP connection manager of an inbound listener (the destination's
// side):
//   - it tells the application the caller's identity from the verified peer certificate, and
//     only that: forward_client_cert_details SANITIZE_SET (a client's own
//     x-forwarded-client-cert is replaced, never passed on) with set_current_client_cert_details
//     uri (the SPIFFE ID);
//   - it says which row of the retry table applied: its route configuration overwrites
//     x-aether-outcome on every response (OVERWRITE_IF_EXISTS_OR_ADD: the application's own is
//     replaced) and removes it from requests, and its local reply mappers end with one that
//     overwrites it on every reply the proxy generates (so none carries the application's row).
func InboundHTTP(res xds.Resources) []string {
	var out []string
	for at, fc := range inboundChains(res) {
		hcm := &hcmv3.HttpConnectionManager{}
		if lastFilterAs(fc, hcm) {
			out = append(out, inboundHCM(at, hcm)...)
		}
	}
	return out
}

func inboundHCM(at string, hcm *hcmv3.HttpConnectionManager) []string {
	var out []string
	if hcm.GetForwardClientCertDetails() != hcmv3.HttpConnectionManager_SANITIZE_SET {
		out = append(out, fmt.Sprintf("%s: forward_client_cert_details %s, want SANITIZE_SET: the application may see a caller's claimed identity",
			at, hcm.GetForwardClientCertDetails()))
	}
	if !hcm.GetSetCurrentClientCertDetails().GetUri() {
		out = append(out, at+": set_current_client_cert_details without uri: the application is not told the caller's SPIFFE ID")
	}
	rc := hcm.GetRouteConfig()
	if !slices.Contains(rc.GetRequestHeadersToRemove(), outcomeHeader) {
		out = append(out, fmt.Sprintf("%s: its routes do not remove %s from requests", at, outcomeHeader))
	}
	if !slices.ContainsFunc(rc.GetResponseHeadersToAdd(), overwritesOutcome) {
		out = append(out, fmt.Sprintf("%s: its routes do not overwrite %s on responses: the application's own value would reach the caller's proxy", at, outcomeHeader))
	}
	mappers := hcm.GetLocalReplyConfig().GetMappers()
	if len(mappers) == 0 || !catchAll(mappers[len(mappers)-1].GetFilter()) || !slices.ContainsFunc(mappers[len(mappers)-1].GetHeadersToAdd(), overwritesOutcome) {
		out = append(out, fmt.Sprintf("%s: no last local reply mapper overwrites %s on every reply: a reply of the proxy may carry the application's row", at, outcomeHeader))
	}
	return out
}

func overwritesOutcome(h *corev3.HeaderValueOption) bool {
	return h.GetHeader().GetKey() == outcomeHeader && h.GetAppendAction() == corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
}

// catchAll reports whether an access log filter matches every local reply of an inbound
// connection manager: not_health_check (no inbound chain has the health check filter).
func catchAll(f *accesslogv3.AccessLogFilter) bool {
	return f.GetNotHealthCheckFilter() != nil
}
