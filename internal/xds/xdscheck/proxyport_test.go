// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck_test

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
)

// proxyChain is the proxy port's chain of the first listener (a capture listener of a build).
var proxyChain = xds.CaptureHTTPPortChain(18081)

// proxyManager lets change edit the HTTP connection manager of the proxy port's chain.
func proxyManager(t testing.TB, res *xds.Resources, change func(*hcmv3.HttpConnectionManager)) {
	t.Helper()
	for _, f := range chain(t, *res, proxyChain).GetFilters() {
		if f.GetTypedConfig().MessageIs(&hcmv3.HttpConnectionManager{}) {
			repack(t, f.GetTypedConfig(), func(m proto.Message) { change(m.(*hcmv3.HttpConnectionManager)) })
			return
		}
	}
	t.Fatalf("chain %s has no HTTP connection manager", proxyChain)
}

// proxyRoutes is the route configuration named name, copied into res so that editing it leaves
// the virtual hosts it shares with the capture route configuration alone.
func proxyRoutes(t testing.TB, res *xds.Resources, name string) *routev3.RouteConfiguration {
	t.Helper()
	for i, rc := range res.Routes {
		if rc.GetName() == name {
			res.Routes[i] = proto.Clone(rc).(*routev3.RouteConfiguration)
			return res.Routes[i]
		}
	}
	t.Fatalf("no route configuration %q", name)
	return nil
}

// TestProxyPortRejectsBrokenCopies: the proxy port gate, through the gates' runner, on a build
// of pure HTTP (capture_shop/payments-0 first) broken in one place each.
func TestProxyPortRejectsBrokenCopies(t *testing.T) {
	const listener = `listener "capture_shop/payments-0" chain "cap_http_18081"`
	const routes = "proxy|shop/payments"
	for _, tc := range []negative{
		{"proxy port: absolute-form requests not allowed", xdscheck.ProxyPort, onBuilt(func(t testing.TB, res *xds.Resources) {
			proxyManager(t, res, func(h *hcmv3.HttpConnectionManager) { h.HttpProtocolOptions.AllowAbsoluteUrl = nil })
		}), listener + `: its HTTP connection manager does not set http_protocol_options.allow_absolute_url: a client using the proxy port as HTTP_PROXY sends absolute-form requests`},
		{"proxy port: routed by the capture routes, whose catch-all passes through", xdscheck.ProxyPort, onBuilt(func(t testing.TB, res *xds.Resources) {
			proxyManager(t, res, func(h *hcmv3.HttpConnectionManager) { h.GetRds().RouteConfigName = "capture|shop/payments" })
		}), `route configuration "capture|shop/payments" (the proxy port's): virtual_hosts[cap_catch_all].routes[0] (domain *) does not answer 404: a host that is not the mesh's must be answered 404, never passed through`},
		{"proxy port: the not-mesh answer turned into a 421", xdscheck.ProxyPort, onBuilt(func(t testing.TB, res *xds.Resources) {
			rc := proxyRoutes(t, res, routes)
			i := slices.IndexFunc(rc.GetVirtualHosts(), func(v *routev3.VirtualHost) bool { return v.GetName() == xds.ProxyNotMeshVirtualHost })
			rc.GetVirtualHosts()[i].GetRoutes()[0].GetDirectResponse().Status = 421
		}), `route configuration "proxy|shop/payments" (the proxy port's): virtual_hosts[proxy_not_mesh].routes[0] (domain *) does not answer 404`},
		{"proxy port: the CONNECT upgrade allowed", xdscheck.ProxyPort, onBuilt(func(t testing.TB, res *xds.Resources) {
			proxyManager(t, res, func(h *hcmv3.HttpConnectionManager) {
				h.UpgradeConfigs = append(h.UpgradeConfigs, &hcmv3.HttpConnectionManager_UpgradeConfig{UpgradeType: "connect"})
			})
		}), listener + `: its HTTP connection manager allows the CONNECT upgrade: the proxy port must refuse tunnels (the mesh originates TLS)`},
		{"proxy port: a connect_matcher route", xdscheck.ProxyPort, onBuilt(func(t testing.TB, res *xds.Resources) {
			rc := proxyRoutes(t, res, routes)
			vh := proto.Clone(rc.GetVirtualHosts()[0]).(*routev3.VirtualHost)
			vh.Routes = append([]*routev3.Route{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{
				ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}}, Action: vh.GetRoutes()[0].GetAction()}}, vh.GetRoutes()...)
			rc.VirtualHosts[0] = vh
		}), `(the proxy port's): virtual_hosts[frontend.web.aether.internal] has a connect_matcher route: the proxy port must refuse tunnels`},
		{"proxy port: no proxy port chain", xdscheck.ProxyPort, onBuilt(func(t testing.TB, res *xds.Resources) {
			l := res.Listeners[0]
			l.FilterChains = slices.DeleteFunc(l.FilterChains, func(c *listenerv3.FilterChain) bool { return c.GetName() == proxyChain })
		}), `listener "capture_shop/payments-0": no chain for the proxy port 18081: a client using it as HTTP_PROXY is not served`},
		{"proxy port: nothing listens at 127.0.0.1:18081", xdscheck.ProxyPort, onBuilt(func(t testing.TB, res *xds.Resources) {
			res.Listeners = slices.DeleteFunc(res.Listeners, func(l *listenerv3.Listener) bool { return l.GetName() == xds.ProxyListener("shop/payments-0") })
		}), `listener "capture_shop/payments-0": no listener binds port 18081 in its network namespace "/var/run/netns/cni-shop-payments-0": HTTP_PROXY=http://127.0.0.1:18081 is refused`},
	} {
		tc.run(t)
	}
}
