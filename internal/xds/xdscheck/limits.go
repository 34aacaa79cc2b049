// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	connectionlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	downstreamconnectionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

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
	// maxPodListenerConnections is the most connections one pod's capture or proxy listener may
	// hold: its two listeners together at most a quarter of a node's cap of 50 000.
	maxPodListenerConnections = 6250
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

// PodListenerLimits checks that every pod's capture and proxy listener (the listeners a pod's own
// applications reach: the pod may be hostile) bounds what one connection buffers
// (per_connection_buffer_limit_bytes set, at most 64 KiB) and how many connections it holds: the
// runtime layer xds.ListenerLimitsLayer gives its connection-limit key a value of 1..6 250, so that
// one pod cannot take the node's downstream connections (the overload manager's cap) from the
// others, and does not ignore the node-wide cap.
func PodListenerLimits(res xds.Resources) []string {
	var out []string
	var layer map[string]*structpb.Value
	found, said := false, false
	for _, r := range res.Runtimes {
		if r.GetName() == xds.ListenerLimitsLayer {
			layer, found = r.GetLayer().GetFields(), true
		}
	}
	for _, l := range res.Listeners {
		name := l.GetName()
		if !strings.HasPrefix(name, xds.CaptureListener("")) && !strings.HasPrefix(name, xds.ProxyListener("")) {
			continue
		}
		if !found && !said {
			out = append(out, fmt.Sprintf("no runtime layer %s: no pod listener has a connection limit", xds.ListenerLimitsLayer))
			said = true
		}
		at := resourceAt("listener", name)
		switch limit := l.GetPerConnectionBufferLimitBytes(); {
		case limit == nil:
			out = append(out, fmt.Sprintf("%s: no per_connection_buffer_limit_bytes: each connection of the pod may buffer Envoy's default 1 MiB", at))
		case limit.GetValue() == 0 || limit.GetValue() > maxInboundBuffer:
			out = append(out, fmt.Sprintf("%s: per_connection_buffer_limit_bytes %d, want 1..%d", at, limit.GetValue(), maxInboundBuffer))
		}
		if l.GetIgnoreGlobalConnLimit() {
			out = append(out, fmt.Sprintf("%s: ignore_global_conn_limit: the node-wide connection cap does not count it", at))
		}
		if !found {
			continue
		}
		key := xds.ListenerConnectionLimitKey(name)
		v, ok := layer[key]
		switch n := v.GetNumberValue(); {
		case !ok:
			out = append(out, fmt.Sprintf("%s: runtime layer %s has no %s: the pod may hold every connection the node allows", at, xds.ListenerLimitsLayer, key))
		case n < 1 || n > maxPodListenerConnections || n != math.Trunc(n):
			out = append(out, fmt.Sprintf("%s: %s is %v, want a whole number 1..%d", at, key, v.AsInterface(), maxPodListenerConnections))
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
// static listener ignores it (the admin endpoint may: it must answer when the cap is reached);
// and its heap (heapLimits).
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
	out = append(out, heapLimits(bs.GetOverloadManager())...)
	if !hasListenerLimitsLayer(bs) {
		out = append(out, fmt.Sprintf("layered runtime: no RTDS layer %s over ADS: the pods' listener connection limits never reach Envoy", xds.ListenerLimitsLayer))
	}
	for _, l := range bs.GetStaticResources().GetListeners() {
		if l.GetIgnoreGlobalConnLimit() {
			out = append(out, fmt.Sprintf("%s: ignore_global_conn_limit: the node-wide connection cap does not count it", resourceAt("static listener", l.GetName())))
		}
	}
	return out
}

// The most HTTP/2 may hold on one connection under HTTP2Limits.
const (
	maxHTTP2Streams          = 1024
	maxHTTP2StreamWindow     = 1 << 20
	maxHTTP2ConnectionWindow = 16 << 20
)

// HTTP2Limits checks that every HTTP connection manager and every HTTP/2 upstream bounds what one
// HTTP/2 connection holds: max_concurrent_streams at most 1 024, initial_stream_window_size at
// most 1 MiB and initial_connection_window_size at most 16 MiB, each set, not left to Envoy's
// defaults (which have changed between releases; 1.40's windows are 16 and 24 MiB, which let one
// peer's streams make the node's Envoy buffer gigabytes). An HTTP/3 connection manager and an
// HTTP/3 upstream (the HTTP/3 hop) are held to the same bounds, in their QUIC options.
func HTTP2Limits(res xds.Resources) []string {
	var out []string
	check := func(at, options string, h2 interface {
		GetMaxConcurrentStreams() *wrapperspb.UInt32Value
		GetInitialStreamWindowSize() *wrapperspb.UInt32Value
		GetInitialConnectionWindowSize() *wrapperspb.UInt32Value
	}) {
		for _, b := range []struct {
			field string
			value *wrapperspb.UInt32Value
			most  uint32
		}{
			{"max_concurrent_streams", h2.GetMaxConcurrentStreams(), maxHTTP2Streams},
			{"initial_stream_window_size", h2.GetInitialStreamWindowSize(), maxHTTP2StreamWindow},
			{"initial_connection_window_size", h2.GetInitialConnectionWindowSize(), maxHTTP2ConnectionWindow},
		} {
			switch {
			case b.value == nil:
				out = append(out, fmt.Sprintf("%s: %s.%s unset: left to Envoy's default, which is a sidecar's", at, options, b.field))
			case b.value.GetValue() > b.most:
				out = append(out, fmt.Sprintf("%s: %s.%s %d, want at most %d", at, options, b.field, b.value.GetValue(), b.most))
			}
		}
	}
	unreadable := walk(res, func(at string, m proto.Message, _ bool) {
		switch t := m.(type) {
		case *hcmv3.HttpConnectionManager:
			if t.GetCodecType() == hcmv3.HttpConnectionManager_HTTP3 {
				check(fmt.Sprintf("%s: HTTP connection manager %q", at, t.GetStatPrefix()), "http3_protocol_options.quic_protocol_options",
					t.GetHttp3ProtocolOptions().GetQuicProtocolOptions())
				return
			}
			check(fmt.Sprintf("%s: HTTP connection manager %q", at, t.GetStatPrefix()), "http2_protocol_options", t.GetHttp2ProtocolOptions())
		case *httpv3.HttpProtocolOptions:
			if h2 := upstreamHTTP2(t); h2 != nil {
				check(at+": its HTTP/2 upstream", "http2_protocol_options", h2)
			}
			if h3 := t.GetAutoConfig().GetHttp3ProtocolOptions(); h3 != nil {
				check(at+": its HTTP/3 upstream", "http3_protocol_options.quic_protocol_options", h3.GetQuicProtocolOptions())
			}
		}
	})
	return append(out, unreadable...)
}

// hasListenerLimitsLayer reports whether bs's runtime has the RTDS layer xds.ListenerLimitsLayer
// fetched over ADS.
func hasListenerLimitsLayer(bs *bootstrapv3.Bootstrap) bool {
	for _, layer := range bs.GetLayeredRuntime().GetLayers() {
		rtds := layer.GetRtdsLayer()
		if rtds.GetName() == xds.ListenerLimitsLayer && rtds.GetRtdsConfig().GetAds() != nil {
			return true
		}
	}
	return false
}

// heapLimits are the violations of the bootstrap's overload manager on the heap: a fixed_heap
// monitor with a positive maximum, and the shrink_heap and stop_accepting_requests actions
// triggered by it at a pressure in (0, 1].
func heapLimits(om *overloadv3.OverloadManager) []string {
	var out []string
	found := false
	for _, m := range om.GetResourceMonitors() {
		if m.GetName() != xds.FixedHeapMonitor {
			continue
		}
		found = true
		cfg := &fixedheapv3.FixedHeapConfig{}
		if err := m.GetTypedConfig().UnmarshalTo(cfg); err != nil || cfg.GetMaxHeapSizeBytes() == 0 {
			out = append(out, fmt.Sprintf("overload manager: monitor %s: want a FixedHeapConfig with a positive max_heap_size_bytes (%v)", xds.FixedHeapMonitor, err))
		}
	}
	if !found {
		return append(out, fmt.Sprintf("overload manager: no %s monitor: nothing sheds load before the node's Envoy runs out of memory", xds.FixedHeapMonitor))
	}
	for _, action := range []string{xds.ShrinkHeapAction, xds.StopRequestsAction} {
		triggered := slices.ContainsFunc(om.GetActions(), func(a *overloadv3.OverloadAction) bool {
			return a.GetName() == action && slices.ContainsFunc(a.GetTriggers(), func(t *overloadv3.Trigger) bool {
				v := t.GetThreshold().GetValue()
				return t.GetName() == xds.FixedHeapMonitor && v > 0 && v <= 1
			})
		})
		if !triggered {
			out = append(out, fmt.Sprintf("overload manager: no %s triggered by %s at a pressure in (0, 1]", action, xds.FixedHeapMonitor))
		}
	}
	return out
}
