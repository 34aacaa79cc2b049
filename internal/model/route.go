// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model

import "time"

// RouteKind is the Gateway API kind of a route.
type RouteKind string

// The route kinds the mesh carries (DESIGN section 6).
const (
	HTTPRoute RouteKind = "HTTPRoute"
	GRPCRoute RouteKind = "GRPCRoute"
	TCPRoute  RouteKind = "TCPRoute"
	TLSRoute  RouteKind = "TLSRoute"
)

// Route is a Gateway API route the controller accepted (ResolvedRefs=True), as the data plane
// needs it: which mesh services it attaches to and where each rule sends what it matches.
type Route struct {
	Kind      RouteKind
	Namespace string
	Name      string
	// Parents are the mesh services the route attaches to (its parentRefs that are mesh Services).
	Parents []ServiceRef
	// Hostnames are a TLSRoute's SNI names (and an HTTPRoute's hostnames); empty means any.
	Hostnames []string
	Rules     []RouteRule
}

// ServiceRef names a mesh service and, optionally, one of its ports.
type ServiceRef struct {
	Namespace string
	Name      string
	// Port is the parentRef's or backendRef's port; 0 when the reference names none.
	Port int32
}

// RouteRule is one rule: requests (HTTP, gRPC) or connections (TCP, TLS) it matches, and the
// weighted backends it sends them to.
type RouteRule struct {
	// Matches are ORed; none means every request. TCPRoute and TLSRoute rules have none.
	Matches  []RouteMatch
	Backends []Backend
	// Timeouts are an HTTPRoute rule's; none for the other kinds.
	Timeouts RouteTimeouts
}

// RouteTimeouts are an HTTPRoute rule's timeouts (Gateway API's timeouts), each 0 for none: the
// mesh sets no deadline of its own on a request.
type RouteTimeouts struct {
	// Request bounds the whole request, retries included: past it the client is answered 504.
	Request time.Duration
	// BackendRequest bounds each attempt at a backend (a retry is a new attempt).
	BackendRequest time.Duration
}

// RouteMatch is one HTTPRoute or GRPCRoute match; its fields are ANDed.
type RouteMatch struct {
	// PathType is Exact or PathPrefix (HTTPRoute); empty for none.
	PathType string
	Path     string
	// Method is the HTTP method (HTTPRoute); empty for any.
	Method string
	// Headers must all match exactly.
	Headers []HeaderMatch
	// GRPCService and GRPCMethod are a GRPCRoute's method match; empty for any.
	GRPCService string
	GRPCMethod  string
}

// HeaderMatch is an exact header match.
type HeaderMatch struct {
	Name  string
	Value string
}

// Backend is a rule's backend: a mesh service's port and its weight.
type Backend struct {
	ServiceRef
	// Weight is the backendRef's weight (Gateway API default 1); 0 sends nothing.
	Weight int32
}
