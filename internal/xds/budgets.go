// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// What each cluster may hold at once, and how long an idle connection or stream lives. Envoy's
// defaults are a sidecar's: one application's traffic. The node's Envoy carries every meshed
// pod of its node, so its defaults would bound a whole node by one pod's numbers, and cut the
// long-lived traffic a mesh must carry.

// ClusterCircuitBreaker is each cluster's limit on connections, pending requests, requests and
// concurrent retries (its default-priority thresholds). Envoy's defaults (1 024 connections,
// pending and active requests, 3 concurrent retries per cluster) made the one passthrough
// cluster a node-wide cap of 1 024 connections on every pod's non-mesh egress, and each app
// cluster a cap below its inbound chain's own limit (InboundChainConnections). The node's real
// bounds are elsewhere: its overload manager (MaxDownstreamConnections), each inbound chain's
// connection limit, and each listener's buffers. So a cluster is bounded at the node's own
// budget, never below it: MaxDownstreamConnections.
const ClusterCircuitBreaker = MaxDownstreamConnections

// Idle timeouts.
const (
	// HTTP2IdleTimeout is how long an idle HTTP/2 upstream connection is kept: every mTLS hop (its
	// pools are per downstream connection, so a connection-per-request client leaves one behind
	// per request, and this reclaims it) and an HTTP/2 application's port.
	HTTP2IdleTimeout = 30 * time.Second
	// HTTP1IdleTimeout is how long an idle HTTP/1.1 connection to an application is kept (Envoy's
	// own default, stated): an application's keep-alive timeout should be longer, or unset.
	HTTP1IdleTimeout = time.Hour
	// StreamIdleTimeout is every mesh HCM's stream_idle_timeout: none. Envoy's default (5 min)
	// resets a stream that sends nothing for five minutes: an idle gRPC stream, a Server-Sent
	// Events feed, a quiet WebSocket. The application decides how long its streams live; a dead
	// peer is found by the connection's own end (the hop's keepalive, HTTP/2 PINGs).
	StreamIdleTimeout = time.Duration(0)
	// TCPIdleTimeout is every tcp_proxy's idle_timeout: none. Envoy's default (1 h) closed a
	// database pool's idle connections under it, which the pool then found broken. A raw-TCP
	// connection through the mesh lives as long as without it.
	TCPIdleTimeout = time.Duration(0)
)

// sharedCircuitBreakers is every cluster's circuit_breakers: one message, read only.
var sharedCircuitBreakers = circuitBreakers()

// circuitBreakers are ClusterCircuitBreaker's thresholds, with the remaining capacity tracked
// (circuit_breakers.default.remaining_* gauges: how close a cluster is to its limit).
func circuitBreakers() *clusterv3.CircuitBreakers {
	limit := wrapperspb.UInt32(ClusterCircuitBreaker)
	return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		Priority:           corev3.RoutingPriority_DEFAULT,
		MaxConnections:     limit,
		MaxPendingRequests: limit,
		MaxRequests:        limit,
		MaxRetries:         limit,
		TrackRemaining:     true,
	}}}
}

// idleTimeout is an upstream HTTP connection's idle timeout in protocol: HTTP2IdleTimeout for
// HTTP/2 (the mTLS hop always is), HTTP1IdleTimeout otherwise.
func idleTimeout(protocol meshv1alpha1.Protocol) *corev3.HttpProtocolOptions {
	d := HTTP1IdleTimeout
	if protocol == meshv1alpha1.ProtocolHTTP2 {
		d = HTTP2IdleTimeout
	}
	return &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(d)}
}
