// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"slices"
	"strings"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	celfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// What the mesh retries (the workload page, "What the mesh retries for you"): a caller's proxy
// retries a request on another endpoint, twice at most, 25–250 ms apart, exactly when the page's
// table says so. Which row applied is known to two different proxies: the caller's own proxy knows
// when it could not send the request at all; everything after that only the destination's proxy
// sees, and it says so in the response header x-aether-outcome (OutcomeHeader), which the
// caller's retry policy reads. The table, and what renders each row:
//
//	row (what happened)                                   destination's inbound    caller's outbound route
//	------------------------------------------------------------------------------------------------------------
//	1 the caller's proxy could not send the request        (nothing arrives)        retry_on connect-failure,
//	  (connect failure, refused stream, reset before                                 refused-stream,
//	  request): every method                                                         reset-before-request
//	2 the destination's proxy could not reach the app:     local reply, flag UF/UH  retriable_headers
//	  connection refused or timed out, no healthy host:    → "unreachable"          exact "unreachable"
//	  every method
//	3 the app answered 503 itself: every method            upstream response        exact "app-503"
//	                                                       → "app-503"
//	4 the app closed or reset the connection after it      local reply, flag UC/UR  exact "app-reset", only on
//	  received the request: GET, HEAD, OPTIONS, TRACE,     → "app-reset"            the route twin matching
//	  PUT, DELETE, QUERY only                                                        :method GET|HEAD|OPTIONS|
//	                                                                                 TRACE|PUT|DELETE|QUERY
//	5 the HTTP/2 app refused the stream (REFUSED_STREAM):  local reply, flag UR and exact "refused-stream"
//	  every method                                         details remote_refused_
//	                                                       stream_reset
//	                                                       → "refused-stream"
//	6 anything else: another status of the app, a          "app-<status>" or        no matcher: not retried
//	  timeout, a gRPC status the app returned, any other   "proxy"
//	  reply of the destination's proxy: never
//
// The destination's side (inboundOutcome, inboundLocalReplies): its inline route configuration
// adds "app-%RESP(:STATUS)%" to every response, overwriting what the application set under that
// name, so the application's own 503 reads "app-503" and a 200 "app-200". A reply the proxy
// generates itself goes through the connection manager's local reply mappers after that, and the
// first mapper whose filter matches overwrites the header: UF or UH (the connect was refused or
// timed out, no host was healthy: nothing reached the app) "unreachable"; UR with the response
// code details of a stream reset by REFUSED_STREAM (RFC 9113 section 8.7: not processed)
// "refused-stream"; UC or UR (the connection or the stream ended after the request was sent)
// "app-reset"; any other local reply "proxy". Envoy gives a refused stream and another reset the
// same flag, UR; only the details (upstream_reset_before_response_started{remote_refused_stream_
// reset}) tell them apart, hence the CEL filter there. The route's headers are added to a local
// reply of the router too (its :status then is the proxy's, 503), so the catch-all keeps a local
// reply from ever carrying "app-…". The status is read from the response's own :status, not
// %RESPONSE_CODE%, which Envoy records for a local reply only after its headers are finalized. A
// request header of that name is removed before the application sees it.
//
// The caller's side (outboundRetries): every route to a mesh cluster retries "connect-failure,
// refused-stream,reset-before-request,retriable-headers" with the retriable headers of rows 2, 3
// and 5; each such route has a twin before it, the same match plus :method in the idempotent set,
// whose policy adds row 4. Nothing else: no 5xx, gateway-error, reset or retriable status codes,
// so a 503 without the header (a destination of an older release, while the mesh is upgraded) is
// not retried; and never envoy-ratelimited, so a response carrying x-envoy-ratelimited is not
// retried (Envoy checks that header first). The capture route configuration removes the header
// from every response after the router has decided (Envoy decides on the upstream headers, then
// finalizes them), and from every request, with the headers by which a client could ask the
// router for retries of its own (RetryRequestHeaders).
//
// A gRPC call is a POST: rows 1, 2, 3 and 5 hold for it as for any POST. The destination's proxy
// answers a gRPC request's local reply as grpc-status UNAVAILABLE, with the same header; the
// application's own UNAVAILABLE is an HTTP 200 ("app-200"), never retried.
const (
	// OutcomeHeader is the response header by which the destination's proxy tells the caller's
	// which row of the table applied.
	OutcomeHeader = "x-aether-outcome"
	// OutcomeUnreachable (row 2): the destination's proxy could not reach the application.
	OutcomeUnreachable = "unreachable"
	// OutcomeApp503 (row 3): the application answered 503 itself. OutcomeAppFormat renders it.
	OutcomeApp503 = "app-503"
	// OutcomeAppReset (row 4): the application closed or reset the connection or stream after it
	// had been sent the request.
	OutcomeAppReset = "app-reset"
	// OutcomeRefusedStream (row 5): the application refused the HTTP/2 stream.
	OutcomeRefusedStream = "refused-stream"
	// OutcomeProxy is any other reply the destination's proxy generated itself (row 6).
	OutcomeProxy = "proxy"
	// OutcomeAppFormat is the value the inbound route stamps on every response: the application's
	// status after "app-".
	OutcomeAppFormat = "app-%RESP(:STATUS)%"
)

// The caller's retry policy (the page: "2 retries, 25–250ms backoff").
const (
	// RetryOn are the retry_on conditions of every outbound route to a mesh cluster, in Envoy's
	// spelling (x-envoy-retry-on): row 1's three, and retriable-headers for the outcome header.
	RetryOn = "connect-failure,refused-stream,reset-before-request,retriable-headers"
	// Retries is num_retries: two more attempts after the first.
	Retries = 2
	// RetryBaseInterval and RetryMaxInterval bound the backoff between attempts.
	RetryBaseInterval = 25 * time.Millisecond
	RetryMaxInterval  = 250 * time.Millisecond
	// RetryHostSelectionAttempts is how often Envoy picks again a host the previous_hosts
	// predicate rejects (an attempt already failed there) before it takes it anyway: a service of
	// one endpoint is still retried, on that endpoint.
	RetryHostSelectionAttempts = 3
	// PreviousHostsPredicate is the retry host predicate that makes a retry pick another
	// endpoint than the attempts before it.
	PreviousHostsPredicate = "envoy.retry_host_predicates.previous_hosts"
)

// IdempotentMethods are the methods row 4 replays: idempotent by definition (RFC 9110 section
// 9.2.2), and QUERY, which its specification defines as safe and idempotent (a GET with a body:
// the request's content says what to read); its body is replayed as a PUT's is (within the
// request buffer). Envoy 1.40, as the mesh configures it, answers a QUERY 400 at the caller's
// capture (test/envoy shows it), so this applies once a QUERY passes. A method outside this list,
// one the proxy never heard of included, is not.
var IdempotentMethods = []string{"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE", "QUERY"}

// IdempotentMethodRegex is the :method matcher of a route's idempotent twin (Envoy matches a
// safe_regex against the whole value).
var IdempotentMethodRegex = strings.Join(IdempotentMethods, "|")

// AnyMethodOutcomes are the outcome values retried whatever the method (rows 2, 3, 5);
// IdempotentOnlyOutcomes those retried only for IdempotentMethods (row 4).
var (
	AnyMethodOutcomes      = []string{OutcomeUnreachable, OutcomeApp503, OutcomeRefusedStream}
	IdempotentOnlyOutcomes = []string{OutcomeAppReset}
)

// RefusedStreamDetail is the part of a local reply's response code details that says the
// application reset the stream with REFUSED_STREAM (Envoy: "upstream_reset_before_response_
// started{remote_refused_stream_reset}"), and the CEL expression that picks it out.
const (
	RefusedStreamDetail     = "remote_refused_stream_reset"
	refusedStreamExpression = "response.code_details.contains('" + RefusedStreamDetail + "')"
	// CELFilter is the access log extension filter that evaluates a CEL expression.
	CELFilter = "envoy.access_loggers.extension_filters.cel"
)

// The response flags of the local reply mappers (Envoy's short names).
var (
	unreachableFlags = []string{"UF", "UH"}
	resetFlags       = []string{"UC", "UR"}
)

// retryPolicies are the two retry policies of the outbound routes, made and validated once per
// build: every method's and the idempotent twins'.
type retryPolicies struct {
	anyMethod, idempotent *routev3.RetryPolicy
}

// outboundRetryPolicies returns the build's two outbound retry policies.
func (b *builder) outboundRetryPolicies() retryPolicies {
	if b.retries.anyMethod == nil {
		b.retries.anyMethod = b.retryPolicy(AnyMethodOutcomes)
		b.retries.idempotent = b.retryPolicy(append(slices.Clip(AnyMethodOutcomes), IdempotentOnlyOutcomes...))
	}
	return b.retries
}

// withPerTryTimeout is p with each attempt bounded by perTry (an HTTPRoute rule's
// timeouts.backendRequest), as copies; p itself when perTry is nil (most routes share the
// build's two policies).
func (p retryPolicies) withPerTryTimeout(perTry *durationpb.Duration) retryPolicies {
	if perTry == nil {
		return p
	}
	out := retryPolicies{anyMethod: proto.Clone(p.anyMethod).(*routev3.RetryPolicy), idempotent: proto.Clone(p.idempotent).(*routev3.RetryPolicy)}
	out.anyMethod.PerTryTimeout, out.idempotent.PerTryTimeout = perTry, perTry
	return out
}

// retryPolicy retries row 1 and the outcome values retriable.
func (b *builder) retryPolicy(retriable []string) *routev3.RetryPolicy {
	p := &routev3.RetryPolicy{
		RetryOn:    RetryOn,
		NumRetries: wrapperspb.UInt32(Retries),
		RetryHostPredicate: []*routev3.RetryPolicy_RetryHostPredicate{{
			Name:       PreviousHostsPredicate,
			ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: b.pack("the previous hosts retry predicate", &previoushostsv3.PreviousHostsPredicate{})},
		}},
		HostSelectionRetryMaxAttempts: RetryHostSelectionAttempts,
		RetryBackOff: &routev3.RetryPolicy_RetryBackOff{
			BaseInterval: durationpb.New(RetryBaseInterval), MaxInterval: durationpb.New(RetryMaxInterval),
		},
	}
	for _, v := range retriable {
		p.RetriableHeaders = append(p.RetriableHeaders, &routev3.HeaderMatcher{Name: OutcomeHeader,
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}}})
	}
	b.check("the outbound retry policy", p)
	return p
}

// withRetries gives every route of routes that forwards to a mesh cluster the retry policy and an
// idempotent twin before it (the same match, :method in IdempotentMethods, and the policy that
// adds row 4). A route whose match already names idempotent methods only takes the twin's policy
// and one naming others only every method's, with no twin. Routes that answer themselves are
// left as they are. The routes are the builder's own; their matches may be shared with other
// ports (route_gateway.go), so a twin's is a copy.
func (b *builder) withRetries(routes []*routev3.Route) []*routev3.Route {
	shared := b.outboundRetryPolicies()
	out := make([]*routev3.Route, 0, 2*len(routes))
	for _, r := range routes {
		if r.GetRoute() == nil {
			out = append(out, r)
			continue
		}
		policies := shared.withPerTryTimeout(r.GetRoute().GetRetryPolicy().GetPerTryTimeout())
		switch methodsOf(r.GetMatch()) {
		case onlyIdempotent:
			r.GetRoute().RetryPolicy = policies.idempotent
			out = append(out, r)
			continue
		case someNotIdempotent:
			r.GetRoute().RetryPolicy = policies.anyMethod
			out = append(out, r)
			continue
		}
		// The twin keeps the rule's name: it is the same rule, for some of its requests.
		twin := &routev3.Route{Name: r.GetName(), Match: proto.Clone(r.GetMatch()).(*routev3.RouteMatch)}
		twin.Match.Headers = append(twin.Match.Headers, &routev3.HeaderMatcher{Name: methodHeader,
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: IdempotentMethodRegex}}}}})
		action := proto.Clone(r.GetRoute()).(*routev3.RouteAction)
		action.RetryPolicy = policies.idempotent
		twin.Action = &routev3.Route_Route{Route: action}
		r.GetRoute().RetryPolicy = policies.anyMethod
		out = append(out, twin, r)
	}
	return out
}

// defaultRouteParts are what the routes of every port no route is attached to share
// (defaultPortRoutes): their two matches, their timeout and the build's retry policies.
type defaultRouteParts struct {
	every, idempotent *routev3.RouteMatch
	noTimeout         *durationpb.Duration
	retries           retryPolicies
}

// defaultPortRoutes are withRetries' routes for routeTo(cluster), the routes of a port no route
// is attached to: the idempotent twin, then every method. Every port of every service has them,
// once per source identity (8 000 at 1 000 services of two HTTP ports and two identities), and
// all of them differ in their cluster alone, so they share the rest (made by the first call,
// never modified). The first pair is checked whole, which checks the shared parts and every rule
// of a Route; each pair after it has its actions checked without the shared parts (RouteAction
// sets no rule on timeout or retry_policy), which checks what is its own: the cluster.
func (b *builder) defaultPortRoutes(what about, cluster string) []*routev3.Route {
	first := b.defaultRoutes == nil
	if first {
		twin := everyRequest()
		twin.Headers = []*routev3.HeaderMatcher{{Name: methodHeader,
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: IdempotentMethodRegex}}}}}}
		b.defaultRoutes = &defaultRouteParts{every: everyRequest(), idempotent: twin, noTimeout: durationpb.New(0),
			retries: b.outboundRetryPolicies()}
	}
	p := b.defaultRoutes
	routes := make([]*routev3.Route, 2)
	for i, r := range []struct {
		match  *routev3.RouteMatch
		policy *routev3.RetryPolicy
	}{{p.idempotent, p.retries.idempotent}, {p.every, p.retries.anyMethod}} {
		action := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}
		if !first {
			b.checkAbout(what, action)
		}
		action.Timeout, action.RetryPolicy = p.noTimeout, r.policy
		routes[i] = &routev3.Route{Match: r.match, Action: &routev3.Route_Route{Route: action}}
		if first {
			b.checkAbout(what, routes[i])
		}
	}
	return routes
}

// methodHeader is the request's method, as HTTP/2 spells it and Envoy matches it in any version.
const methodHeader = ":method"

// methodSet is what a route match says of the request's method.
type methodSet int

const (
	anyMethod methodSet = iota
	onlyIdempotent
	someNotIdempotent
)

// methodsOf reads an exact :method matcher (an HTTPRoute's method match): the one method it
// names, idempotent or not. Any other match leaves the method open.
func methodsOf(m *routev3.RouteMatch) methodSet {
	for _, h := range m.GetHeaders() {
		if h.GetName() != methodHeader || h.GetInvertMatch() {
			continue
		}
		if exact := h.GetStringMatch().GetExact(); exact != "" {
			if slices.Contains(IdempotentMethods, exact) {
				return onlyIdempotent
			}
			return someNotIdempotent
		}
	}
	return anyMethod
}

// RetryRequestHeaders are the request headers by which a client asks Envoy's router for retries
// of its own: they would widen the table (x-envoy-retry-on: 5xx replays a POST the application
// had received). The router reads them after the route's request headers are finalized, so
// removing them there leaves the route's policy alone in force.
var RetryRequestHeaders = []string{"x-envoy-max-retries", "x-envoy-retriable-header-names", "x-envoy-retriable-status-codes",
	"x-envoy-retry-grpc-on", "x-envoy-retry-on"}

// outboundOutcomeHeaders makes a capture route configuration remove the outcome header from
// every response it forwards (after the retry decision) and every request (no client sends it),
// and the client's own retry headers from every request.
func outboundOutcomeHeaders(rc *routev3.RouteConfiguration) {
	rc.ResponseHeadersToRemove = []string{OutcomeHeader}
	rc.RequestHeadersToRemove = append([]string{OutcomeHeader}, RetryRequestHeaders...)
}

// inboundOutcome makes an inbound route configuration stamp every response with the outcome
// (OutcomeAppFormat, overwriting what the application set) and remove a request header of that
// name before the application sees it.
func inboundOutcome(rc *routev3.RouteConfiguration) {
	rc.ResponseHeadersToAdd = []*corev3.HeaderValueOption{outcomeHeader(OutcomeAppFormat)}
	rc.RequestHeadersToRemove = []string{OutcomeHeader}
}

func outcomeHeader(value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: OutcomeHeader, Value: value},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

// inboundLocalReplies are the inbound connection manager's local reply mappers: each reply the
// destination's proxy generates gets the outcome of the first mapper that matches (see the table).
// Only the header changes: status and body are Envoy's.
func (b *builder) inboundLocalReplies() *hcmv3.LocalReplyConfig {
	if b.localReplies != nil {
		return b.localReplies
	}
	flags := func(f []string) *accesslogv3.AccessLogFilter {
		return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
			ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: f}}}
	}
	refused := &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_AndFilter{AndFilter: &accesslogv3.AndFilter{
		Filters: []*accesslogv3.AccessLogFilter{flags([]string{"UR"}), {FilterSpecifier: &accesslogv3.AccessLogFilter_ExtensionFilter{
			ExtensionFilter: &accesslogv3.ExtensionFilter{Name: CELFilter, ConfigType: &accesslogv3.ExtensionFilter_TypedConfig{
				TypedConfig: b.pack("the refused stream filter", &celfilterv3.ExpressionFilter{Expression: refusedStreamExpression})}}}}},
	}}}
	// Every request passes the health check filter's negation: no inbound chain has the health
	// check filter, so this is the catch-all (a mapper needs a filter).
	every := &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_NotHealthCheckFilter{
		NotHealthCheckFilter: &accesslogv3.NotHealthCheckFilter{}}}
	mapper := func(f *accesslogv3.AccessLogFilter, outcome string) *hcmv3.ResponseMapper {
		return &hcmv3.ResponseMapper{Filter: f, HeadersToAdd: []*corev3.HeaderValueOption{outcomeHeader(outcome)}}
	}
	b.localReplies = &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{
		// First: a request the RBAC filter denied (authz.go) says so, whatever else matches.
		b.deniedMapper(),
		mapper(flags(unreachableFlags), OutcomeUnreachable),
		mapper(refused, OutcomeRefusedStream),
		mapper(flags(resetFlags), OutcomeAppReset),
		mapper(every, OutcomeProxy),
	}}
	b.check("the inbound local reply mappers", b.localReplies)
	return b.localReplies
}

// callerIdentity is how the inbound connection manager tells the application who calls: it sets
// x-forwarded-client-cert from the verified peer certificate (its URI SAN: the caller's SPIFFE
// ID), replacing any such header the client sent (SANITIZE_SET), so the application never sees
// a claim of the caller's own.
func callerIdentity(hcm *hcmv3.HttpConnectionManager) {
	hcm.ForwardClientCertDetails = hcmv3.HttpConnectionManager_SANITIZE_SET
	hcm.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Uri: true}
}
