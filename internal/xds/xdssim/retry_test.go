// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim_test

import (
	"errors"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

// The router's retry decision on one attempt, as Envoy's RetryStateImpl and its documentation
// (x-envoy-retry-on) describe it, on hand-written policies: what each condition retries, that
// x-envoy-ratelimited stops a retry unless envoy-ratelimited is asked for, that
// retriable_request_headers gate every retry, that num_retries 0 retries nothing, and that a
// condition Envoy does not know is refused.
func TestRetried(t *testing.T) {
	outcome := func(v string) *routev3.HeaderMatcher {
		return &routev3.HeaderMatcher{Name: "x-outcome", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
			StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}}}
	}
	response := func(status int, headers ...string) xdssim.Attempt {
		a := xdssim.Attempt{Status: status, Headers: map[string][]string{}}
		for i := 0; i+1 < len(headers); i += 2 {
			a.Headers[headers[i]] = []string{headers[i+1]}
		}
		return a
	}
	for _, tc := range []struct {
		name    string
		policy  *routev3.RetryPolicy
		method  string
		attempt xdssim.Attempt
		want    bool
		err     error
	}{
		{"5xx retries a 500", &routev3.RetryPolicy{RetryOn: "5xx"}, "POST", response(500), true, nil},
		{"5xx retries a reset after the request", &routev3.RetryPolicy{RetryOn: "5xx"}, "POST", xdssim.Attempt{Reset: xdssim.ResetAfterRequest}, true, nil},
		{"gateway-error does not retry a 500", &routev3.RetryPolicy{RetryOn: "gateway-error"}, "GET", response(500), false, nil},
		{"gateway-error retries a 503", &routev3.RetryPolicy{RetryOn: "gateway-error"}, "GET", response(503), true, nil},
		{"connect-failure retries a connect failure", &routev3.RetryPolicy{RetryOn: "connect-failure"}, "POST", xdssim.Attempt{Reset: xdssim.ResetConnectFailure}, true, nil},
		{"connect-failure does not retry a refused stream", &routev3.RetryPolicy{RetryOn: "connect-failure"}, "POST", xdssim.Attempt{Reset: xdssim.ResetRefusedStream}, false, nil},
		{"refused-stream retries a refused stream", &routev3.RetryPolicy{RetryOn: "refused-stream"}, "POST", xdssim.Attempt{Reset: xdssim.ResetRefusedStream}, true, nil},
		{"reset-before-request retries a reset before the request", &routev3.RetryPolicy{RetryOn: "reset-before-request"}, "POST", xdssim.Attempt{Reset: xdssim.ResetBeforeRequest}, true, nil},
		{"reset-before-request does not retry a reset after it", &routev3.RetryPolicy{RetryOn: "reset-before-request"}, "GET", xdssim.Attempt{Reset: xdssim.ResetAfterRequest}, false, nil},
		{"retriable-headers retries a matching header", &routev3.RetryPolicy{RetryOn: "retriable-headers", RetriableHeaders: []*routev3.HeaderMatcher{outcome("again")}},
			"POST", response(503, "x-outcome", "again"), true, nil},
		{"retriable-headers does not retry another value", &routev3.RetryPolicy{RetryOn: "retriable-headers", RetriableHeaders: []*routev3.HeaderMatcher{outcome("again")}},
			"POST", response(503, "x-outcome", "done"), false, nil},
		{"retriable headers without their condition retry nothing", &routev3.RetryPolicy{RetryOn: "connect-failure", RetriableHeaders: []*routev3.HeaderMatcher{outcome("again")}},
			"POST", response(503, "x-outcome", "again"), false, nil},
		{"x-envoy-ratelimited stops a retry", &routev3.RetryPolicy{RetryOn: "5xx,retriable-headers", RetriableHeaders: []*routev3.HeaderMatcher{outcome("again")}},
			"GET", response(503, "x-outcome", "again", "x-envoy-ratelimited", "true"), false, nil},
		{"envoy-ratelimited retries it", &routev3.RetryPolicy{RetryOn: "envoy-ratelimited"}, "GET", response(429, "x-envoy-ratelimited", "true"), true, nil},
		{"retriable-status-codes", &routev3.RetryPolicy{RetryOn: "retriable-status-codes", RetriableStatusCodes: []uint32{418}}, "GET", response(418), true, nil},
		{"a gRPC status", &routev3.RetryPolicy{RetryOn: "unavailable"}, "POST", response(200, "grpc-status", "14"), true, nil},
		{"another gRPC status", &routev3.RetryPolicy{RetryOn: "unavailable"}, "POST", response(200, "grpc-status", "13"), false, nil},
		{"retriable_request_headers gate every retry", &routev3.RetryPolicy{RetryOn: "5xx", RetriableRequestHeaders: []*routev3.HeaderMatcher{{Name: ":method",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "GET"}}}}}},
			"POST", response(500), false, nil},
		{"num_retries 0 retries nothing", &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(0)}, "GET", response(500), false, nil},
		{"a condition Envoy does not know", &routev3.RetryPolicy{RetryOn: "5xx,retry-everything"}, "GET", response(500), false, xdssim.ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := toCluster("", "a", byPrefix("/"))
			r.GetRoute().RetryPolicy = tc.policy
			c := httpTo(vipA, 8080, "a")
			c.HTTP.Method = tc.method
			out := httpWorld(routeConfig("routes", vhost("a", []string{"a"}, r))).Dial(c)
			got, err := out.Retried(tc.attempt)
			if !errors.Is(err, tc.err) || got.Retried != tc.want {
				t.Errorf("retried %t (%v), want %t (%v)", got.Retried, err, tc.want, tc.err)
			}
		})
	}
}
