// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck_test

import (
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// inboundBuild is a real build with inbound listeners (mixed-http-primary: a pod serving HTTP and
// TCP ports), and its first inbound listener.
func inboundBuild(t *testing.T) (xds.Resources, *listenerv3.Listener) {
	t.Helper()
	res, err := xds.Build(xdstest.All()["mixed-http-primary"])
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Listeners {
		if l.GetTrafficDirection() == corev3.TrafficDirection_INBOUND {
			return res, l
		}
	}
	t.Fatal("mixed-http-primary builds no inbound listener")
	return res, nil
}

// TestInboundLimitsRejectBrokenCopies: the real build passes; each copy with one bound removed or
// loosened fails with the line naming it.
func TestInboundLimitsRejectBrokenCopies(t *testing.T) {
	res, _ := inboundBuild(t)
	if v := xdscheck.InboundLimits(res); v != nil {
		t.Fatalf("the build fails:\n%s", strings.Join(v, "\n"))
	}
	for name, tc := range map[string]struct {
		breakIt func(l *listenerv3.Listener)
		want    string
	}{
		"no buffer limit":       {func(l *listenerv3.Listener) { l.PerConnectionBufferLimitBytes = nil }, "no per_connection_buffer_limit_bytes"},
		"Envoy's 1 MiB default": {func(l *listenerv3.Listener) { l.PerConnectionBufferLimitBytes = wrapperspb.UInt32(1 << 20) }, "per_connection_buffer_limit_bytes 1048576, want 1..65536"},
		"no listener filters timeout": {func(l *listenerv3.Listener) { l.ListenerFiltersTimeout = nil },
			"no listener_filters_timeout"},
		"listener filters wait for ever": {func(l *listenerv3.Listener) { l.ListenerFiltersTimeout = durationpb.New(0) },
			"listener_filters_timeout 0"},
		"served without a ClientHello": {func(l *listenerv3.Listener) { l.ContinueOnListenerFiltersTimeout = true },
			"continue_on_listener_filters_timeout"},
		"no handshake timeout on a port's chain": {func(l *listenerv3.Listener) { l.GetFilterChains()[0].TransportSocketConnectTimeout = nil },
			"no transport_socket_connect_timeout"},
		"no handshake timeout on the floor": {func(l *listenerv3.Listener) { l.GetDefaultFilterChain().TransportSocketConnectTimeout = nil },
			`chain "in_floor": no transport_socket_connect_timeout`},
		"a handshake of a minute": {func(l *listenerv3.Listener) {
			l.GetFilterChains()[0].TransportSocketConnectTimeout = durationpb.New(time.Minute)
		}, "want at most 30s"},
		"no connection limit on a port's chain": {func(l *listenerv3.Listener) {
			l.GetFilterChains()[0].Filters = l.GetFilterChains()[0].Filters[1:]
		}, "no connection_limit filter first"},
		"no connection limit on the floor": {func(l *listenerv3.Listener) {
			l.GetDefaultFilterChain().Filters = l.GetDefaultFilterChain().Filters[1:]
		}, `chain "in_floor": no connection_limit filter first`},
		"outside the connection cap": {func(l *listenerv3.Listener) { l.IgnoreGlobalConnLimit = true }, "ignore_global_conn_limit"},
	} {
		t.Run(name, func(t *testing.T) {
			broken, l := inboundBuild(t)
			tc.breakIt(l)
			v := xdscheck.InboundLimits(broken)
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Errorf("violations %q, want one saying %q", v, tc.want)
			}
			t.Log(strings.Join(v, "\n"))
			if all := strings.Join(xdscheck.All(broken), "\n"); !strings.Contains(all, "inbound limits: ") {
				t.Errorf("All does not run InboundLimits: %q", all)
			}
		})
	}
}

// TestPodListenerLimitsRejectBrokenCopies: the real build passes; each copy with a pod listener's
// bound removed or loosened fails with the line naming it, in All too.
func TestPodListenerLimitsRejectBrokenCopies(t *testing.T) {
	build := func(t *testing.T) xds.Resources {
		res, err := xds.Build(xdstest.All()["mixed-http-primary"])
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if v := xdscheck.PodListenerLimits(build(t)); v != nil {
		t.Fatalf("the build fails:\n%s", strings.Join(v, "\n"))
	}
	listener := func(res xds.Resources, name string) *listenerv3.Listener {
		for _, l := range res.Listeners {
			if l.GetName() == name {
				return l
			}
		}
		t.Fatalf("no listener %s", name)
		return nil
	}
	capture, proxy := xds.CaptureListener("web/frontend-0"), xds.ProxyListener("web/frontend-0")
	for name, tc := range map[string]struct {
		breakIt func(res *xds.Resources)
		want    string
	}{
		"no runtime layer": {func(res *xds.Resources) { res.Runtimes = nil }, "no runtime layer aether_listener_limits"},
		"a capture listener without its key": {func(res *xds.Resources) {
			delete(res.Runtimes[0].GetLayer().GetFields(), xds.ListenerConnectionLimitKey(capture))
		}, "has no envoy.resource_limits.listener.capture_web/frontend-0.connection_limit"},
		"a proxy listener at the node's whole budget": {func(res *xds.Resources) {
			res.Runtimes[0].GetLayer().GetFields()[xds.ListenerConnectionLimitKey(proxy)] = structpb.NewNumberValue(xds.MaxDownstreamConnections)
		}, "connection_limit is 50000, want a whole number 1..6250"},
		"a limit of nothing": {func(res *xds.Resources) {
			res.Runtimes[0].GetLayer().GetFields()[xds.ListenerConnectionLimitKey(capture)] = structpb.NewStringValue("many")
		}, `connection_limit is many`},
		"no buffer limit on the capture listener": {func(res *xds.Resources) {
			listener(*res, capture).PerConnectionBufferLimitBytes = nil
		}, "no per_connection_buffer_limit_bytes"},
		"Envoy's 1 MiB default on the proxy listener": {func(res *xds.Resources) {
			listener(*res, proxy).PerConnectionBufferLimitBytes = wrapperspb.UInt32(1 << 20)
		}, "per_connection_buffer_limit_bytes 1048576, want 1..65536"},
		"outside the connection cap": {func(res *xds.Resources) { listener(*res, proxy).IgnoreGlobalConnLimit = true }, "ignore_global_conn_limit"},
	} {
		t.Run(name, func(t *testing.T) {
			res := build(t)
			tc.breakIt(&res)
			v := xdscheck.PodListenerLimits(res)
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Errorf("violations %q, want one saying %q", v, tc.want)
			}
			if all := strings.Join(xdscheck.All(res), "\n"); !strings.Contains(all, "pod listener limits: ") {
				t.Errorf("All does not run the gate: %s", all)
			}
		})
	}
}

// TestBootstrapLimitsRejectBrokenCopies: the node's bootstrap passes; without the overload
// manager's monitor, with a cap of 0, or with a static listener outside the cap, it fails.
func TestBootstrapLimitsRejectBrokenCopies(t *testing.T) {
	bs, err := xds.Bootstrap(xds.BootstrapConfig{NodeID: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if v := xdscheck.BootstrapLimits(bs); v != nil {
		t.Fatalf("the bootstrap fails:\n%s", strings.Join(v, "\n"))
	}
	for name, tc := range map[string]struct {
		breakIt func(bs *bootstrapv3.Bootstrap)
		want    string
	}{
		"no overload manager": {func(bs *bootstrapv3.Bootstrap) { bs.OverloadManager = nil }, "no envoy.resource_monitors.global_downstream_max_connections monitor"},
		"another monitor only": {func(bs *bootstrapv3.Bootstrap) {
			bs.GetOverloadManager().GetResourceMonitors()[0].Name = "envoy.resource_monitors.fixed_heap"
		}, "nothing caps the node's downstream connections"},
		"a static listener outside the cap": {func(bs *bootstrapv3.Bootstrap) {
			bs.StaticResources.Listeners = append(bs.StaticResources.Listeners, &listenerv3.Listener{Name: "side-door", IgnoreGlobalConnLimit: true})
		}, `static listener "side-door": ignore_global_conn_limit`},
		"no listener limits layer": {func(bs *bootstrapv3.Bootstrap) {
			bs.LayeredRuntime.Layers = bs.LayeredRuntime.Layers[1:]
		}, "no RTDS layer aether_listener_limits over ADS"},
		"no heap monitor": {func(bs *bootstrapv3.Bootstrap) {
			bs.OverloadManager.ResourceMonitors = bs.OverloadManager.ResourceMonitors[:1]
		}, "no envoy.resource_monitors.fixed_heap monitor"},
		"no shrink_heap action": {func(bs *bootstrapv3.Bootstrap) {
			bs.OverloadManager.Actions = bs.OverloadManager.Actions[1:]
		}, "no envoy.overload_actions.shrink_heap triggered by envoy.resource_monitors.fixed_heap"},
		"stop_accepting_requests never triggered": {func(bs *bootstrapv3.Bootstrap) {
			bs.OverloadManager.Actions[1].GetTriggers()[0].GetThreshold().Value = 1.5
		}, "no envoy.overload_actions.stop_accepting_requests triggered by envoy.resource_monitors.fixed_heap at a pressure in (0, 1]"},
	} {
		t.Run(name, func(t *testing.T) {
			broken := proto.Clone(bs).(*bootstrapv3.Bootstrap)
			tc.breakIt(broken)
			v := xdscheck.BootstrapLimits(broken)
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Errorf("violations %q, want one saying %q", v, tc.want)
			}
			t.Log(strings.Join(v, "\n"))
		})
	}
}

// TestHTTP2LimitsRejectBrokenCopies: the real build passes; a connection manager without its
// stream bound, and an HTTP/2 upstream with a window above the cap, fail it.
func TestHTTP2LimitsRejectBrokenCopies(t *testing.T) {
	res, _ := inboundBuild(t)
	if v := xdscheck.HTTP2Limits(res); v != nil {
		t.Fatalf("the build fails:\n%s", strings.Join(v, "\n"))
	}
	for name, tc := range map[string]struct {
		breakIt func(res xds.Resources)
		want    string
	}{
		"an HCM with Envoy's default streams": {func(res xds.Resources) {
			firstHCM(t, res, corev3.TrafficDirection_INBOUND, func(h *hcmv3.HttpConnectionManager) { h.Http2ProtocolOptions.MaxConcurrentStreams = nil })
		}, "http2_protocol_options.max_concurrent_streams unset"},
		"an upstream window of 256 MiB": {func(res xds.Resources) {
			firstHTTP2Upstream(t, res, func(o *httpv3.HttpProtocolOptions) {
				o.GetExplicitHttpConfig().GetHttp2ProtocolOptions().InitialStreamWindowSize = wrapperspb.UInt32(256 << 20)
			})
		}, "its HTTP/2 upstream: http2_protocol_options.initial_stream_window_size 268435456, want at most 1048576"},
	} {
		t.Run(name, func(t *testing.T) {
			broken := clone(res)
			tc.breakIt(broken)
			v := xdscheck.HTTP2Limits(broken)
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Errorf("violations %q, want one saying %q", v, tc.want)
			}
			if v := xdscheck.HTTP2Limits(res); v != nil {
				t.Errorf("breaking the copy broke the original: %q", v)
			}
		})
	}
}

// firstHTTP2Upstream changes the protocol options of res's first cluster that speaks HTTP/2
// explicitly (a mesh hop's), in place.
func firstHTTP2Upstream(t testing.TB, res xds.Resources, change func(*httpv3.HttpProtocolOptions)) {
	t.Helper()
	for _, c := range res.Clusters {
		o := &httpv3.HttpProtocolOptions{}
		a := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
		if a != nil && a.UnmarshalTo(o) == nil && o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil {
			clusterOptions(t, res, c.GetName(), change)
			return
		}
	}
	t.Fatal("no cluster speaks HTTP/2 explicitly")
}
