// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck_test

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The catalog service of the declared-upstreams scenario: no local identity carries it, so its
// clusters are absent and every chain and route naming them relies on on-demand discovery.
const (
	catalogTCPChain = "cap_tcp_catalog.shop_5432"
	catalogTCP      = "tcp:catalog.shop.aether.internal:5432|web/frontend"
	catalogHTTP     = "catalog.shop.aether.internal:8080|web/frontend"
	frontendCapture = "capture_web/frontend-0"
)

// declared is the declared-upstreams scenario's build: it passes every gate (TestGates), with
// catalog's clusters absent.
func declared(t testing.TB) xds.Resources {
	t.Helper()
	res, err := xds.Build(xdstest.DeclaredUpstreams())
	if err != nil {
		t.Fatal(err)
	}
	if v := xdscheck.All(res); v != nil {
		t.Fatalf("the declared-upstreams build fails the gates:\n%s", strings.Join(v, "\n"))
	}
	return res
}

// listenerChain is the named listener's chain of that name.
func listenerChain(t testing.TB, res xds.Resources, listener, name string) *listenerv3.FilterChain {
	t.Helper()
	for _, l := range res.Listeners {
		for _, c := range l.GetFilterChains() {
			if l.GetName() == listener && c.GetName() == name {
				return c
			}
		}
	}
	t.Fatalf("no chain %q in listener %q", name, listener)
	return nil
}

// TestReferencesAcceptOnDemandOnlyWhereConfigured: the references gate takes a missing mesh
// cluster only where Envoy fetches it on demand (a tcp_proxy's on_demand over ADS; a route of a
// configuration whose every connection manager runs the on-demand filter). Each copy below takes
// that away in one place, and the gate must name the cluster.
func TestReferencesAcceptOnDemandOnlyWhereConfigured(t *testing.T) {
	for _, tc := range []struct {
		name      string
		breakCopy func(t testing.TB, res *xds.Resources)
		want      string
	}{
		{"a tcp_proxy without on_demand", func(t testing.TB, res *xds.Resources) {
			repack(t, terminal(listenerChain(t, *res, frontendCapture, catalogTCPChain)).GetTypedConfig(), func(m proto.Message) {
				m.(*tcpproxyv3.TcpProxy).OnDemand = nil
			})
		}, `filter_chains[` + catalogTCPChain + `].filters[envoy.filters.network.tcp_proxy].typed_config<TcpProxy>: cluster "` + catalogTCP + `" is not among the clusters`},
		{"a tcp_proxy asking another source than ADS", func(t testing.TB, res *xds.Resources) {
			repack(t, terminal(listenerChain(t, *res, frontendCapture, catalogTCPChain)).GetTypedConfig(), func(m proto.Message) {
				m.(*tcpproxyv3.TcpProxy).OnDemand.OdcdsConfig = &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3,
					ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{Path: "/etc/cds.yaml"}}}
			})
		}, `cluster "` + catalogTCP + `" is not among the clusters`},
		{"one connection manager of the route configuration without the on-demand filter", func(t testing.TB, res *xds.Resources) {
			repack(t, terminal(listenerChain(t, *res, frontendCapture, xds.CaptureHTTPChain)).GetTypedConfig(), func(m proto.Message) {
				hcm := m.(*hcmv3.HttpConnectionManager)
				var kept []*hcmv3.HttpFilter
				for _, f := range hcm.GetHttpFilters() {
					if f.GetName() != xds.OnDemandFilter {
						kept = append(kept, f)
					}
				}
				hcm.HttpFilters = kept
			})
		}, `route configuration "capture|web/frontend": virtual_hosts[catalog.shop.aether.internal:8080].routes[1].route: cluster "` + catalogHTTP + `" is not among the clusters`},
		{"a missing cluster that is no mesh cluster", func(_ testing.TB, res *xds.Resources) {
			dropCluster(res, xds.PassthroughCluster)
		}, `cluster "passthrough" is not among the clusters`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := clone(declared(t))
			tc.breakCopy(t, &broken)
			got := xdscheck.References(broken)
			for _, v := range got {
				t.Logf("violation: %s", v)
			}
			if !containsLine(got, tc.want) {
				t.Errorf("the gate did not report\n  %s\nit reported:\n  %s", tc.want, strings.Join(got, "\n  "))
			}
		})
	}
}

// TestProxyPortCatchAllSubscribesNothing: the proxy port's catch-all answers every route 404; a
// route there that names its cluster by the Host (an on-demand fetch of whatever name a caller
// spells: a subscription of the node's Envoy per distinct Host) is a violation, first or last.
func TestProxyPortCatchAllSubscribesNothing(t *testing.T) {
	byHost := &routev3.Route{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_ClusterHeader{ClusterHeader: ":authority"},
		}},
	}
	for _, tc := range []struct {
		name   string
		change func(vh *routev3.VirtualHost)
	}{
		{"first", func(vh *routev3.VirtualHost) { vh.Routes = append([]*routev3.Route{byHost}, vh.Routes...) }},
		{"last", func(vh *routev3.VirtualHost) { vh.Routes = append(vh.Routes, byHost) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			intact := declared(t)
			if got := xdscheck.ProxyPort(intact); len(got) != 0 {
				t.Fatalf("the intact configuration has violations: %q", got)
			}
			broken := clone(intact)
			found := false
			for _, rc := range broken.Routes {
				for _, vh := range rc.GetVirtualHosts() {
					if rc.GetName() == "proxy|web/frontend" && vh.GetName() == xds.ProxyNotMeshVirtualHost {
						tc.change(vh)
						found = true
					}
				}
			}
			if !found {
				t.Fatal("no proxy_not_mesh virtual host in proxy|web/frontend")
			}
			got := xdscheck.ProxyPort(broken)
			for _, v := range got {
				t.Logf("violation: %s", v)
			}
			if !containsLine(got, `route configuration "proxy|web/frontend" (the proxy port's): virtual_hosts[proxy_not_mesh].routes[`) {
				t.Errorf("the gate did not report the proxy_not_mesh route; it reported:\n  %s", strings.Join(got, "\n  "))
			}
		})
	}
}
