// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	celfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/cel-go/cel"
)

// Retries, on both sides of a mesh hop, as Envoy decides them:
//   - the destination's side, Respond: what the inbound connection manager sends back for what
//     the application did (its response, or the failure Envoy met reaching it): the route
//     configuration's response headers (with the one formatter operator the mesh uses,
//     %RESP(:STATUS)%), then, for a reply Envoy generates itself, the first local reply mapper
//     whose filter matches (response flags, and/or, not_health_check, and a CEL expression
//     evaluated by cel-go over response.code, response.code_details and response.flags);
//   - the caller's side, Retried: whether the router retries an attempt, read from the retry
//     policy of the route that forwarded the request (RetryStateImpl: retriable_request_headers
//     gate everything; a response with x-envoy-ratelimited is retried only on
//     envoy-ratelimited; then the retry_on conditions, retriable status codes and retriable
//     headers; a reset by its reason).
//
// Neither reads the mesh's retry table: a test holds their answers to the table.

// routed is what an HTTP request's routing chose, kept for Retried and Respond.
type routed struct {
	hcm     *hcmv3.HttpConnectionManager
	rc      *routev3.RouteConfiguration
	vh      *routev3.VirtualHost
	route   *routev3.Route
	request map[string]string
}

// Attempt is what one attempt of a forwarded request met, as the caller's proxy sees it: a reset
// before any response, or a response.
type Attempt struct {
	// Reset is why the attempt ended without a response: ResetConnectFailure,
	// ResetRefusedStream, ResetBeforeRequest or ResetAfterRequest; "" when a response came.
	Reset Reset
	// Status and Headers are the response's (header names lower-case).
	Status  int
	Headers map[string][]string
}

// Reset is how an upstream stream ended before its response began.
type Reset string

const (
	// ResetConnectFailure is a connect failure: the connection to the endpoint was not established.
	ResetConnectFailure Reset = "connect failure"
	// ResetRefusedStream is a refused stream: the endpoint refused the HTTP/2 or HTTP/3 stream (REFUSED_STREAM).
	ResetRefusedStream Reset = "refused stream"
	// ResetBeforeRequest is a reset before the request: the connection or stream was reset before the request was sent whole.
	ResetBeforeRequest Reset = "reset before request"
	// ResetAfterRequest is a reset after the request: it was reset after the request was sent, before any response.
	ResetAfterRequest Reset = "reset after request"
)

// Retry is the caller's proxy's decision on an attempt.
type Retry struct {
	// Retried says another attempt follows (the first of NumRetries).
	Retried bool
	// NumRetries is how many retries the policy allows in all.
	NumRetries uint32
	// OtherEndpoint says a retry avoids the endpoints that failed (the previous_hosts
	// predicate).
	OtherEndpoint bool
}

// Retried is the caller's proxy's decision on attempt a of the request o forwarded. It is an
// error to ask for an outcome that forwarded no HTTP request.
func (o Outcome) Retried(a Attempt) (Retry, error) {
	if o.routed == nil || o.routed.route.GetRoute() == nil {
		return Retry{}, fmt.Errorf("xdssim: %s forwarded no HTTP request", o)
	}
	p := o.routed.route.GetRoute().GetRetryPolicy()
	if p == nil {
		p = o.routed.vh.GetRetryPolicy()
	}
	if p == nil {
		return Retry{}, nil
	}
	out := Retry{NumRetries: 1} // Envoy's default when num_retries is unset
	if n := p.GetNumRetries(); n != nil {
		out.NumRetries = n.GetValue()
	}
	out.OtherEndpoint = slices.ContainsFunc(p.GetRetryHostPredicate(), func(h *routev3.RetryPolicy_RetryHostPredicate) bool {
		return h.GetName() == "envoy.retry_host_predicates.previous_hosts"
	})
	// The request's own retry headers, as the router reads them (after the route's request
	// headers are finalized): x-envoy-retry-on and x-envoy-retry-grpc-on add conditions,
	// x-envoy-max-retries replaces num_retries.
	sent := o.Sends()
	conditions := strings.Join([]string{p.GetRetryOn(), sent["x-envoy-retry-on"], sent["x-envoy-retry-grpc-on"]}, ",")
	on, err := retryOn(conditions)
	if err != nil {
		return Retry{}, err
	}
	if v, ok := sent["x-envoy-max-retries"]; ok {
		if n, err := strconv.ParseUint(v, 10, 32); err == nil {
			out.NumRetries = uint32(n)
		}
	}
	if out.NumRetries == 0 {
		return out, nil
	}
	if hs := p.GetRetriableRequestHeaders(); len(hs) > 0 {
		matched := false
		for _, h := range hs {
			ok, err := headerMatches(h, o.routed.request)
			if err != nil {
				return Retry{}, err
			}
			matched = matched || ok
		}
		if !matched {
			return out, nil
		}
	}
	if a.Reset != "" {
		out.Retried = retriedReset(on, a.Reset)
		return out, nil
	}
	out.Retried, err = retriedResponse(on, p, a)
	return out, err
}

// retryConditions are Envoy's retry_on conditions (x-envoy-retry-on and x-envoy-retry-grpc-on).
var retryConditions = []string{"5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "envoy-ratelimited",
	"retriable-4xx", "refused-stream", "retriable-status-codes", "retriable-headers", "http3-post-connect-failure",
	"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}

// retryOn parses retry_on; a condition Envoy does not know is an error (Envoy refuses the route).
func retryOn(s string) (map[string]bool, error) {
	on := map[string]bool{}
	for c := range strings.SplitSeq(s, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if !slices.Contains(retryConditions, c) {
			return nil, fmt.Errorf("%w: retry_on condition %q", ErrUnsupported, c)
		}
		on[c] = true
	}
	return on, nil
}

// retriedReset: 5xx, gateway-error and reset retry every reset; reset-before-request those before
// the request was sent whole (a connect failure is one; a refused stream is not, its headers were
// sent); connect-failure and refused-stream their own.
func retriedReset(on map[string]bool, r Reset) bool {
	switch {
	case on["5xx"] || on["gateway-error"] || on["reset"]:
		return true
	case on["reset-before-request"] && (r == ResetBeforeRequest || r == ResetConnectFailure):
		return true
	case on["connect-failure"] && r == ResetConnectFailure:
		return true
	case on["refused-stream"] && r == ResetRefusedStream:
		return true
	}
	return false
}

// retriedResponse is RetryStateImpl::wouldRetryFromHeaders.
func retriedResponse(on map[string]bool, p *routev3.RetryPolicy, a Attempt) (bool, error) {
	if _, limited := a.Headers["x-envoy-ratelimited"]; limited {
		return on["envoy-ratelimited"], nil
	}
	status := a.Status
	switch {
	case on["5xx"] && status >= 500:
		return true, nil
	case on["gateway-error"] && status >= 502 && status <= 504:
		return true, nil
	case on["retriable-4xx"] && status == 409:
		return true, nil
	case on["retriable-status-codes"] && slices.Contains(p.GetRetriableStatusCodes(), uint32(status)):
		return true, nil
	}
	if on["retriable-headers"] {
		response := map[string]string{":status": strconv.Itoa(status)}
		for name, values := range a.Headers {
			response[name] = strings.Join(values, ",")
		}
		for _, h := range p.GetRetriableHeaders() {
			if ok, err := responseHeaderMatches(h, response); err != nil || ok {
				return ok, err
			}
		}
	}
	if grpc := a.Headers["grpc-status"]; len(grpc) > 0 {
		for code, condition := range map[string]string{"1": "cancelled", "4": "deadline-exceeded", "13": "internal", "8": "resource-exhausted", "14": "unavailable"} {
			if grpc[0] == code && on[condition] {
				return true, nil
			}
		}
	}
	return false, nil
}

// responseHeaderMatches is headerMatches for a response: only :status is a pseudo-header there.
func responseHeaderMatches(h *routev3.HeaderMatcher, response map[string]string) (bool, error) {
	if isPseudo(h.GetName()) {
		if _, ok := response[h.GetName()]; !ok {
			return false, nil
		}
	}
	return headerMatches(h, response)
}

// Upstream is what happened to a request the destination's proxy forwarded to the application:
// the application's response (Status, Headers), or a failure Envoy met instead (Flags, its
// response flags such as "UF"; Details, the response code details; LocalStatus, the status of
// its local reply: 503 when 0).
type Upstream struct {
	Status  int
	Headers map[string]string
	Flags   []string
	Details string
	// LocalStatus is the status of Envoy's local reply when Flags are set: 503 when 0 (504 for a
	// timeout, UT).
	LocalStatus int
}

// Respond is the response the destination's inbound connection manager sends back for the
// request o routed, when the application did u. It is an error to ask for an outcome that
// forwarded no HTTP request.
func (o Outcome) Respond(u Upstream) (*Response, error) {
	if o.routed == nil || o.routed.route.GetRoute() == nil {
		return nil, fmt.Errorf("xdssim: %s forwarded no HTTP request", o)
	}
	local := len(u.Flags) > 0
	status := u.Status
	h := map[string][]string{}
	if local {
		status = u.LocalStatus
		if status == 0 {
			status = 503
		}
	} else {
		for name, value := range u.Headers {
			h[strings.ToLower(name)] = []string{value}
		}
	}
	// The route's response headers: on the application's response, and on a local reply of the
	// router too (its modify_headers finalizes them).
	if err := finalizeResponse(h, o.routed, status); err != nil {
		return nil, err
	}
	if local {
		for _, m := range o.routed.hcm.GetLocalReplyConfig().GetMappers() {
			ok, err := filterMatches(m.GetFilter(), u, status)
			if err != nil {
				return nil, err
			}
			if ok {
				for _, add := range m.GetHeadersToAdd() {
					if err := checkFormat(add.GetHeader().GetValue()); err != nil {
						return nil, err
					}
					addHeader(h, add)
				}
				if c := m.GetStatusCode(); c != nil {
					status = int(c.GetValue())
				}
				break
			}
		}
	}
	return &Response{Status: status, Headers: h, Local: local}, nil
}

// finalizeResponse applies the route configuration's, virtual host's and route's response
// headers to h, a response of status.
func finalizeResponse(h map[string][]string, r *routed, status int) error {
	type level struct {
		add    []*corev3.HeaderValueOption
		remove []string
	}
	levels := []level{
		{r.route.GetResponseHeadersToAdd(), r.route.GetResponseHeadersToRemove()},
		{r.vh.GetResponseHeadersToAdd(), r.vh.GetResponseHeadersToRemove()},
		{r.rc.GetResponseHeadersToAdd(), r.rc.GetResponseHeadersToRemove()},
	}
	if r.rc.GetMostSpecificHeaderMutationsWins() {
		levels[0], levels[2] = levels[2], levels[0]
	}
	for _, l := range levels {
		for _, name := range l.remove {
			delete(h, strings.ToLower(name))
		}
		for _, o := range l.add {
			value, err := format(o.GetHeader().GetValue(), status)
			if err != nil {
				return err
			}
			formatted := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: o.GetHeader().GetKey(), Value: value},
				AppendAction: o.GetAppendAction(), KeepEmptyValue: o.GetKeepEmptyValue()}
			//nolint:staticcheck // Envoy 1.40 still honours the deprecated append (addHeader reads it).
			formatted.Append = o.GetAppend()
			addHeader(h, formatted)
		}
	}
	return nil
}

// format renders a header value's formatter operators: %RESP(:STATUS)% (the response's status)
// and %% only; any other operator is not modelled.
func format(value string, status int) (string, error) {
	value = strings.ReplaceAll(value, "%RESP(:STATUS)%", strconv.Itoa(status))
	if err := checkFormat(value); err != nil {
		return "", err
	}
	return strings.ReplaceAll(value, "%%", "%"), nil
}

// checkFormat refuses a value with a formatter operator the simulator does not render.
func checkFormat(value string) error {
	if strings.Contains(strings.ReplaceAll(value, "%%", ""), "%") {
		return fmt.Errorf("%w: the header value %q has a formatter operator", ErrUnsupported, value)
	}
	return nil
}

// filterMatches evaluates an access log filter on a local reply of status for u.
func filterMatches(f *accesslogv3.AccessLogFilter, u Upstream, status int) (bool, error) {
	switch s := f.GetFilterSpecifier().(type) {
	case *accesslogv3.AccessLogFilter_ResponseFlagFilter:
		want := s.ResponseFlagFilter.GetFlags()
		if len(want) == 0 {
			return len(u.Flags) > 0, nil
		}
		return slices.ContainsFunc(u.Flags, func(flag string) bool { return slices.Contains(want, flag) }), nil
	case *accesslogv3.AccessLogFilter_NotHealthCheckFilter:
		return true, nil // no request is a health check: the simulator models no health check filter
	case *accesslogv3.AccessLogFilter_AndFilter:
		for _, sub := range s.AndFilter.GetFilters() {
			if ok, err := filterMatches(sub, u, status); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case *accesslogv3.AccessLogFilter_OrFilter:
		for _, sub := range s.OrFilter.GetFilters() {
			if ok, err := filterMatches(sub, u, status); err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case *accesslogv3.AccessLogFilter_ExtensionFilter:
		expr := &celfilterv3.ExpressionFilter{}
		if s.ExtensionFilter.GetTypedConfig() == nil || !unpack(s.ExtensionFilter.GetTypedConfig(), expr) {
			return false, fmt.Errorf("%w: access log extension filter %q", ErrUnsupported, s.ExtensionFilter.GetName())
		}
		return evalCEL(expr.GetExpression(), u, status)
	}
	return false, fmt.Errorf("%w: access log filter %T", ErrUnsupported, f.GetFilterSpecifier())
}

// evalCEL evaluates an expression of Envoy's CEL access log filter over the response attributes
// a local reply has: response.code, response.code_details and response.flags (as Envoy's bit
// set is not modelled, flags is the list of short names).
func evalCEL(expression string, u Upstream, status int) (bool, error) {
	env, err := cel.NewEnv(cel.Variable("response", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		return false, err
	}
	ast, issues := env.Compile(expression)
	if issues.Err() != nil {
		return false, fmt.Errorf("xdssim: CEL expression %q: %w", expression, issues.Err())
	}
	program, err := env.Program(ast)
	if err != nil {
		return false, err
	}
	value, _, err := program.Eval(map[string]any{"response": map[string]any{
		"code": int64(status), "code_details": u.Details, "flags": u.Flags,
	}})
	if err != nil {
		return false, fmt.Errorf("xdssim: CEL expression %q: %w", expression, err)
	}
	b, ok := value.Value().(bool)
	if !ok {
		return false, fmt.Errorf("xdssim: CEL expression %q is not a boolean (Envoy's filter then does not match)", expression)
	}
	return b, nil
}

// Sends is the request headers o's request is forwarded with: what the router saw (the
// connection manager's changes, x-forwarded-client-cert among them), less each level's
// request_headers_to_remove. Nil when o forwarded no HTTP request.
func (o Outcome) Sends() map[string]string {
	if o.routed == nil || o.routed.route.GetRoute() == nil {
		return nil
	}
	h := maps.Clone(o.routed.request)
	for _, names := range [][]string{o.routed.route.GetRequestHeadersToRemove(), o.routed.vh.GetRequestHeadersToRemove(), o.routed.rc.GetRequestHeadersToRemove()} {
		for _, name := range names {
			delete(h, strings.ToLower(name))
		}
	}
	return h
}

// Delivers is the response headers the client receives when attempt a, a response, is the last
// of o's request: the route's response headers applied by the caller's proxy after its retry
// decision.
func (o Outcome) Delivers(a Attempt) (map[string][]string, error) {
	if o.routed == nil || o.routed.route.GetRoute() == nil {
		return nil, fmt.Errorf("xdssim: %s forwarded no HTTP request", o)
	}
	h := make(map[string][]string, len(a.Headers))
	for k, v := range a.Headers {
		h[k] = slices.Clone(v)
	}
	return h, finalizeResponse(h, o.routed, a.Status)
}
