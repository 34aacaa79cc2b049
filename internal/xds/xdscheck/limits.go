// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	connectionlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	downstreamconnectionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Ceilings the limit gates hold the inbound listener to. They come from what a peer may cost the
// node's one Envoy, not from the values the builder picks: Envoy's defaults (a 1 MiB buffer per
// connection; 15 s for the listener filters; no handshake timeout at all) are what the gates
// exist to keep out.
const (
	// maxInboundBuffer is the largest per-connection buffer limit accepted: below Envoy's 1 MiB
	// default, so that ten thousand idle peers cannot hold gigabytes.
	maxInboundBuffer = 64 << 10
	// maxInboundWait is the longest a silent or trickling peer may hold a connection before its
	// TLS handshake completes (listener filters, then the handshake).
	maxInboundWait = 30 * time.Second
	// maxChainConnections is the most connections one inbound chain may hold at once: a tenth of
	// a node's cap of 50 000 at most, so that one pod's port cannot take the node's budget.
	maxChainConnections = 5000
	// globalConnectionsMonitor is the overload manager's connection cap (Envoy's documentation,
	// "Limiting active connections").
	globalConnectionsMonitor = "envoy.resource_monitors.global_downstream_max_connections"
)

// InboundLimits checks that every inbound listener (traffic_direction INBOUND: it faces every peer
// of the mesh) bounds how many connections each chain holds (connection_limit first, at most
// 5 000) and what one connection may hold: per_connection_buffer_limit_bytes set and at
// most 64 KiB; listener_filters_timeout set, non-zero and without continue (a connection whose
// ClientHello never comes is closed); every chain that terminates TLS, the default chain too, with
// a transport_socket_connect_timeout (the handshake), the two waits together at most 30 s; and
// the node-wide connection cap not ignored (ignore_global_conn_limit).
func InboundLimits(res xds.Resources) []string {
	var out []string
	for _, l := range res.Listeners {
		if l.GetTrafficDirection() != corev3.TrafficDirection_INBOUND {
			continue
		}
		at := resourceAt("listener", l.GetName())
		switch limit := l.GetPerConnectionBufferLimitBytes(); {
		case limit == nil:
			out = append(out, fmt.Sprintf("%s: no per_connection_buffer_limit_bytes: each connection may buffer Envoy's default 1 MiB", at))
		case limit.GetValue() == 0 || limit.GetValue() > maxInboundBuffer:
			out = append(out, fmt.Sprintf("%s: per_connection_buffer_limit_bytes %d, want 1..%d", at, limit.GetValue(), maxInboundBuffer))
		}
		filters := l.GetListenerFiltersTimeout().AsDuration()
		switch {
		case len(l.GetListenerFilters()) == 0:
			filters = 0
		case l.GetListenerFiltersTimeout() == nil:
			out = append(out, fmt.Sprintf("%s: no listener_filters_timeout: a peer that sends nothing is held Envoy's default 15 s", at))
		case filters == 0:
			out = append(out, fmt.Sprintf("%s: listener_filters_timeout 0: a peer that sends nothing is held for ever", at))
		case l.GetContinueOnListenerFiltersTimeout():
			out = append(out, fmt.Sprintf("%s: continue_on_listener_filters_timeout: a peer that sends no ClientHello is served anyway", at))
		}
		if l.GetIgnoreGlobalConnLimit() {
			out = append(out, fmt.Sprintf("%s: ignore_global_conn_limit: the node-wide connection cap does not count it", at))
		}
		chains := listenerChains(l)
		for _, fc := range chains {
			chainAt := fmt.Sprintf("%s chain %q", at, fc.GetName())
			if why := limitsConnections(fc.GetFilters()); why != "" {
				out = append(out, chainAt+": "+why)
			}
			if fc.GetTransportSocket() == nil {
				continue
			}
			handshake := fc.GetTransportSocketConnectTimeout().AsDuration()
			switch {
			case fc.GetTransportSocketConnectTimeout() == nil || handshake <= 0:
				out = append(out, fmt.Sprintf("%s: no transport_socket_connect_timeout: a peer that trickles its TLS handshake holds the connection for ever", chainAt))
			case filters+handshake > maxInboundWait:
				out = append(out, fmt.Sprintf("%s: listener_filters_timeout %s and transport_socket_connect_timeout %s let a peer wait %s before its handshake completes, want at most %s",
					chainAt, filters, handshake, filters+handshake, maxInboundWait))
			}
		}
	}
	return out
}

// limitsConnections says what is wrong with a chain's connection bound, "" when its first filter is
// connection_limit with a positive max_connections of at most maxChainConnections.
func limitsConnections(filters []*listenerv3.Filter) string {
	limit := &connectionlimitv3.ConnectionLimit{}
	if len(filters) < 2 || !unpackAs(filters[0].GetTypedConfig(), limit) {
		return "no connection_limit filter first: one chain may hold every connection the node allows"
	}
	if n := limit.GetMaxConnections().GetValue(); n == 0 || n > maxChainConnections {
		return fmt.Sprintf("connection_limit max_connections %d, want 1..%d", n, maxChainConnections)
	}
	return ""
}

// BootstrapLimits checks that the bootstrap caps the node's downstream connections: the overload
// manager runs the global_downstream_max_connections monitor with a positive maximum (the only
// limit that counts connections over every listener, however many pods the node runs), and no
// static listener ignores it (the admin endpoint may: it must answer when the cap is reached).
func BootstrapLimits(bs *bootstrapv3.Bootstrap) []string {
	var out []string
	var found bool
	for _, m := range bs.GetOverloadManager().GetResourceMonitors() {
		if m.GetName() != globalConnectionsMonitor {
			continue
		}
		found = true
		cfg := &downstreamconnectionsv3.DownstreamConnectionsConfig{}
		if err := m.GetTypedConfig().UnmarshalTo(cfg); err != nil {
			out = append(out, fmt.Sprintf("overload manager: monitor %s: typed_config is not a DownstreamConnectionsConfig: %v", globalConnectionsMonitor, err))
		} else if cfg.GetMaxActiveDownstreamConnections() <= 0 {
			out = append(out, fmt.Sprintf("overload manager: monitor %s: max_active_downstream_connections %d, want a positive cap",
				globalConnectionsMonitor, cfg.GetMaxActiveDownstreamConnections()))
		}
	}
	if !found {
		out = append(out, fmt.Sprintf("overload manager: no %s monitor: nothing caps the node's downstream connections", globalConnectionsMonitor))
	}
	for _, l := range bs.GetStaticResources().GetListeners() {
		if l.GetIgnoreGlobalConnLimit() {
			out = append(out, fmt.Sprintf("%s: ignore_global_conn_limit: the node-wide connection cap does not count it", resourceAt("static listener", l.GetName())))
		}
	}
	return out
}
