// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck_test

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// firstHCM repacks the HTTP connection manager of the first chain of direction's listeners
// that has one.
func firstHCM(t testing.TB, res xds.Resources, direction corev3.TrafficDirection, change func(*hcmv3.HttpConnectionManager)) {
	t.Helper()
	for _, l := range res.Listeners {
		if l.GetTrafficDirection() != direction {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				if f.GetTypedConfig().MessageIs(&hcmv3.HttpConnectionManager{}) {
					repack(t, f.GetTypedConfig(), func(m proto.Message) { change(m.(*hcmv3.HttpConnectionManager)) })
					return
				}
			}
		}
	}
	t.Fatalf("no %s listener has an HTTP connection manager", direction)
}

// clusterOptions repacks the HTTP protocol options of the cluster named name.
func clusterOptions(t testing.TB, res xds.Resources, name string, change func(*httpv3.HttpProtocolOptions)) {
	t.Helper()
	for _, c := range res.Clusters {
		if c.GetName() != name {
			continue
		}
		for _, a := range c.GetTypedExtensionProtocolOptions() {
			repack(t, a, func(m proto.Message) { change(m.(*httpv3.HttpProtocolOptions)) })
			return
		}
	}
	t.Fatalf("cluster %q has no HTTP protocol options", name)
}

// TestUpgradesRejectBrokenCopies: every scenario's build passes; a copy with one setting a
// WebSocket or an HTTP/1.0 client needs removed fails with the line naming it.
func TestUpgradesRejectBrokenCopies(t *testing.T) {
	for name, m := range xdstest.All() {
		res, err := xds.Build(m)
		if err != nil {
			t.Fatal(err)
		}
		if v := xdscheck.Upgrades(res); v != nil {
			t.Errorf("scenario %s fails:\n%s", name, strings.Join(v, "\n"))
		}
	}
	const http2Cluster = "payments.shop.aether.internal:9090|web/frontend"
	for name, tc := range map[string]struct {
		breakIt func(t testing.TB, res xds.Resources)
		want    string
	}{
		"a capture HCM without upgrade_configs": {func(t testing.TB, res xds.Resources) {
			firstHCM(t, res, corev3.TrafficDirection_OUTBOUND, func(h *hcmv3.HttpConnectionManager) { h.UpgradeConfigs = nil })
		}, `does not allow the websocket upgrade (upgrade_configs): Envoy answers 403`},
		"websocket disabled on an inbound HCM": {func(t testing.TB, res xds.Resources) {
			firstHCM(t, res, corev3.TrafficDirection_INBOUND, func(h *hcmv3.HttpConnectionManager) {
				h.UpgradeConfigs[0].Enabled = wrapperspb.Bool(false)
			})
		}, `does not allow the websocket upgrade`},
		"an inbound HCM without allow_connect": {func(t testing.TB, res xds.Resources) {
			firstHCM(t, res, corev3.TrafficDirection_INBOUND, func(h *hcmv3.HttpConnectionManager) { h.Http2ProtocolOptions = nil })
		}, `does not set http2_protocol_options.allow_connect`},
		"a chain taking http/1.0 to an HCM that refuses it": {func(t testing.TB, res xds.Resources) {
			firstHCM(t, res, corev3.TrafficDirection_OUTBOUND, func(h *hcmv3.HttpConnectionManager) { h.HttpProtocolOptions = nil })
		}, `it takes http/1.0, and its HTTP connection manager does not accept_http_10: Envoy answers 426`},
		"an HTTP/2 mesh cluster without allow_connect": {func(t testing.TB, res xds.Resources) {
			clusterOptions(t, res, http2Cluster, func(o *httpv3.HttpProtocolOptions) {
				o.GetExplicitHttpConfig().GetHttp2ProtocolOptions().AllowConnect = false
			})
		}, `its HTTP/2 upstream does not allow_connect`},
		"the passthrough's downstream HTTP/2 without allow_connect": {func(t testing.TB, res xds.Resources) {
			clusterOptions(t, res, xds.PassthroughCluster, func(o *httpv3.HttpProtocolOptions) {
				o.GetUseDownstreamProtocolConfig().Http2ProtocolOptions = nil
			})
		}, `cluster "passthrough": typed_extension_protocol_options`},
		"a route that disables websocket": {func(t testing.TB, res xds.Resources) {
			for _, vh := range res.Routes[0].GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					if ra := r.GetRoute(); ra != nil {
						ra.UpgradeConfigs = append(ra.UpgradeConfigs, &routev3.RouteAction_UpgradeConfig{UpgradeType: "WebSocket", Enabled: wrapperspb.Bool(false)})
						return
					}
				}
			}
			t.Fatal("no route forwards")
		}, `the route disables the websocket upgrade`},
	} {
		t.Run(name, func(t *testing.T) {
			broken, err := xds.Build(xdstest.MixedHTTPPrimary())
			if err != nil {
				t.Fatal(err)
			}
			tc.breakIt(t, broken)
			v := xdscheck.Upgrades(broken)
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Errorf("violations %q, want one saying %q", v, tc.want)
			}
			t.Log(strings.Join(v, "\n"))
			if all := strings.Join(xdscheck.All(broken), "\n"); !strings.Contains(all, "upgrades: ") {
				t.Errorf("All does not run Upgrades: %q", all)
			}
		})
	}
}
