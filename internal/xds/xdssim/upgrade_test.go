// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim_test

import (
	"errors"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

// ---- HTTP versions and upgrades ----

// upgrades sets the HCM's upgrade_configs: each type enabled unless it is in disabled.
func upgrades(types []string, disabled ...string) hcmOpt {
	return func(h *hcmv3.HttpConnectionManager) {
		for _, t := range types {
			u := &hcmv3.HttpConnectionManager_UpgradeConfig{UpgradeType: t}
			if slices.Contains(disabled, t) {
				u.Enabled = wrapperspb.Bool(false)
			}
			h.UpgradeConfigs = append(h.UpgradeConfigs, u)
		}
	}
}

func allowConnect(h *hcmv3.HttpConnectionManager) {
	h.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{AllowConnect: true}
}

func acceptHTTP10(defaultHost string) hcmOpt {
	return func(h *hcmv3.HttpConnectionManager) {
		h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AcceptHttp_10: true, DefaultHostForHttp_10: defaultHost}
	}
}

// routeUpgrade sets a route's upgrade_configs entry for typ.
func routeUpgrade(r *routev3.Route, typ string, enabled bool) *routev3.Route {
	r.GetRoute().UpgradeConfigs = append(r.GetRoute().UpgradeConfigs,
		&routev3.RouteAction_UpgradeConfig{UpgradeType: typ, Enabled: wrapperspb.Bool(enabled)})
	return r
}

// httpWorld is a capture listener with one cleartext HTTP chain (every HTTP version
// http_inspector names) whose HCM has opts, routed by rc.
func httpWorld(rc *routev3.RouteConfiguration, opts ...hcmOpt) *xdssim.Sim {
	return world([]*listenerv3.Listener{capture(chains(
		chain("http", httpManager("routes", opts...), transport("raw_buffer"), appProtocols("http/1.0", "http/1.1", "h2c"))),
		defaultChain(passthroughChain))}, rc)
}

func websocketTo(host string, http2 bool) xdssim.Conn {
	c := httpTo(vipA, 8080, host)
	c.HTTP.Upgrade, c.HTTP.HTTP2 = "websocket", http2
	return c
}

func wantRefused(t *testing.T, what string, out xdssim.Outcome, status int, err error) {
	t.Helper()
	if out.Verdict != xdssim.Answered || out.Response == nil || out.Response.Status != status || !out.Response.Local || !errors.Is(out.Err, err) {
		t.Errorf("%s: want Envoy's own %d (%v): %s", what, status, err, out)
	}
}

func wantForwarded(t *testing.T, what string, out xdssim.Outcome, upgrade string) {
	t.Helper()
	if out.Verdict != xdssim.Forwarded || len(out.Targets) != 1 || out.Targets[0].Upgrade != upgrade {
		t.Errorf("%s: want forwarded with upgrade %q: %s", what, upgrade, out)
	}
}

// An upgrade needs an upgrade_configs entry for its type, on the route or on the HCM; the
// route's decides when it has one; without either Envoy answers 403 (the negative control of
// everything below).
func TestUpgrade(t *testing.T) {
	rc := func(routes ...*routev3.Route) *routev3.RouteConfiguration {
		return routeConfig("routes", vhost("a", []string{"a"}, routes...))
	}
	toA := func() *routev3.Route { return toCluster("", "a", byPrefix("/")) }

	wantRefused(t, "no upgrade_configs", httpWorld(rc(toA())).Dial(websocketTo("a", false)), 403, xdssim.ErrUpgradeRejected)
	wantRefused(t, "the HCM's websocket disabled", httpWorld(rc(toA()), upgrades([]string{"websocket"}, "websocket")).Dial(websocketTo("a", false)),
		403, xdssim.ErrUpgradeRejected)
	wantRefused(t, "the HCM allows another type", httpWorld(rc(toA()), upgrades([]string{"CONNECT"})).Dial(websocketTo("a", false)),
		403, xdssim.ErrUpgradeRejected)
	wantForwarded(t, "the HCM allows websocket", httpWorld(rc(toA()), upgrades([]string{"websocket"})).Dial(websocketTo("a", false)), "websocket")
	wantForwarded(t, "types compare case-insensitively", httpWorld(rc(toA()), upgrades([]string{"WebSocket"})).Dial(websocketTo("a", false)), "websocket")
	wantForwarded(t, "the route enables what the HCM does not", httpWorld(rc(routeUpgrade(toA(), "websocket", true))).Dial(websocketTo("a", false)), "websocket")
	wantRefused(t, "the route disables what the HCM allows", httpWorld(rc(routeUpgrade(toA(), "websocket", false)), upgrades([]string{"websocket"})).Dial(websocketTo("a", false)),
		403, xdssim.ErrUpgradeRejected)

	// A route without a route entry (a direct response) leaves the upgrade to the HCM: refused
	// before the answer, or the answer.
	answer := rc(direct("", 421, "no"))
	wantRefused(t, "a direct response, the HCM without websocket", httpWorld(answer).Dial(websocketTo("a", false)), 403, xdssim.ErrUpgradeRejected)
	if out := httpWorld(answer, upgrades([]string{"websocket"})).Dial(websocketTo("a", false)); out.Response == nil || out.Response.Status != 421 {
		t.Errorf("a direct response, the HCM with websocket: want the 421: %s", out)
	}
	// No route is cached: the router's 404, not the 403.
	wantRefused(t, "no virtual host", httpWorld(rc(toA())).Dial(websocketTo("b", false)), 404, xdssim.ErrNoVirtualHost)

	// A plain request takes a websocket-enabled route as ever.
	wantForwarded(t, "a plain request", httpWorld(rc(toA()), upgrades([]string{"websocket"})).Dial(httpTo(vipA, 8080, "a")), "")
}

// HTTP/1.1's Upgrade: h2c is not supported: the codec drops it and the request goes on as
// HTTP/1.1, never refused (the control: the same request as websocket is).
func TestH2cUpgradeIsDropped(t *testing.T) {
	s := httpWorld(routeConfig("routes", vhost("a", []string{"a"}, toCluster("", "a", byPrefix("/")))))
	c := httpTo(vipA, 8080, "a")
	c.HTTP.Upgrade = "h2c"
	out := s.Dial(c)
	wantForwarded(t, "Upgrade: h2c", out, "")
	if !slices.Equal(out.AppProtocols, []string{"http/1.1"}) {
		t.Errorf("http_inspector reads the request line: http/1.1: %s", out)
	}
	wantRefused(t, "the control, Upgrade: websocket", s.Dial(websocketTo("a", false)), 403, xdssim.ErrUpgradeRejected)
}

// Over HTTP/2 an upgrade is an extended CONNECT: the HCM's codec takes it only with
// allow_connect (else the stream is reset), then it is an upgrade like HTTP/1.1's.
func TestExtendedConnect(t *testing.T) {
	rc := routeConfig("routes", vhost("a", []string{"a"}, toCluster("", "a", byPrefix("/"))))
	out := httpWorld(rc, upgrades([]string{"websocket"})).Dial(websocketTo("a", true))
	if out.Verdict != xdssim.Closed || !errors.Is(out.Err, xdssim.ErrExtendedConnect) {
		t.Errorf("no allow_connect: want the stream reset: %s", out)
	}
	wantRefused(t, "allow_connect, no upgrade_configs", httpWorld(rc, allowConnect).Dial(websocketTo("a", true)), 403, xdssim.ErrUpgradeRejected)
	out = httpWorld(rc, allowConnect, upgrades([]string{"websocket"})).Dial(websocketTo("a", true))
	wantForwarded(t, "allow_connect and websocket", out, "websocket")
	if !slices.Equal(out.AppProtocols, []string{"h2c"}) {
		t.Errorf("http_inspector reads the preface: h2c: %s", out)
	}
}

// HTTP/1.0: http_inspector names it http/1.0, so a chain must list it; its HCM answers 426
// unless accept_http_10, and a Host-less request takes default_host_for_http_10 or Envoy's 400.
func TestHTTP10(t *testing.T) {
	rc := routeConfig("routes", vhost("a", []string{"a"}, toCluster("", "a", byPrefix("/"))))
	http10 := func(host string) xdssim.Conn {
		c := httpTo(vipA, 8080, host)
		c.HTTP.HTTP10 = true
		return c
	}
	legacy := world([]*listenerv3.Listener{capture(chains(
		chain("http", httpManager("routes"), transport("raw_buffer"), appProtocols("http/1.1", "h2c"))),
		defaultChain(passthroughChain))}, rc)
	if out := legacy.Dial(http10("a")); out.Chain != "passthrough" || !slices.Equal(out.AppProtocols, []string{"http/1.0"}) {
		t.Errorf("a chain for http/1.1 and h2c does not take http/1.0: %s", out)
	}
	wantRefused(t, "no accept_http_10", httpWorld(rc).Dial(http10("a")), 426, xdssim.ErrHTTP10)
	wantForwarded(t, "accept_http_10", httpWorld(rc, acceptHTTP10("")).Dial(http10("a")), "")
	wantRefused(t, "accept_http_10, no Host", httpWorld(rc, acceptHTTP10("")).Dial(http10("")), 400, xdssim.ErrBadRequest)
	out := httpWorld(rc, acceptHTTP10("a")).Dial(http10(""))
	wantForwarded(t, "default_host_for_http_10", out, "")
	if out.VirtualHost != "a" {
		t.Errorf("the default host routes: %s", out)
	}
	// HTTP/1.1 is untouched by both.
	wantForwarded(t, "HTTP/1.1 with a Host", httpWorld(rc, acceptHTTP10("a")).Dial(httpTo(vipA, 8080, "a")), "")
	wantRefused(t, "HTTP/1.1 without a Host", httpWorld(rc, acceptHTTP10("a")).Dial(httpTo(vipA, 8080, "")), 400, xdssim.ErrBadRequest)
}

// What the router speaks to an ORIGINAL_DST cluster: HTTP/1.1 without protocol options (so h2c
// is downgraded), the downstream's protocol with use_downstream_protocol_config (HTTP/1.0 goes
// as HTTP/1.1: Envoy has no HTTP/1.0 upstream).
func TestPassthroughUpstreamProtocol(t *testing.T) {
	rc := routeConfig("routes", vhost("all", []string{"*"}, toCluster("", "passthrough", byPrefix("/"))))
	h2c := httpTo("203.0.113.7", 8080, "example.com:8080")
	h2c.HTTP.HTTP2 = true
	http10 := httpTo("203.0.113.7", 8080, "example.com:8080")
	http10.HTTP.HTTP10 = true

	s := httpWorld(rc, acceptHTTP10(""))
	if out := s.Dial(h2c); out.Verdict != xdssim.Passthrough || !slices.Equal(out.Targets[0].UpstreamHTTP, []string{"http/1.1"}) {
		t.Errorf("no protocol options: h2c goes upstream as HTTP/1.1: %s", out)
	}
	res := base()
	res.Clusters[2] = originalDstCluster("passthrough")
	res.Clusters[2].TypedExtensionProtocolOptions = map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": pack(&upstreamhttpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{UseDownstreamProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
			HttpProtocolOptions: &corev3.Http1ProtocolOptions{}, Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}})}
	res.Listeners = []*listenerv3.Listener{capture(chains(
		chain("http", httpManager("routes", acceptHTTP10("")), transport("raw_buffer"), appProtocols("http/1.0", "http/1.1", "h2c"))))}
	res.Routes = []*routev3.RouteConfiguration{rc}
	s = xdssim.New(res)
	for c, want := range map[*xdssim.Conn][]string{&h2c: {"h2"}, &http10: {"http/1.1"}} {
		out := s.Dial(*c)
		if out.Verdict != xdssim.Passthrough || !slices.Equal(out.Targets[0].UpstreamHTTP, want) ||
			out.Targets[0].Passthrough != "203.0.113.7:8080" {
			t.Errorf("use_downstream_protocol_config (http2=%t): want %v upstream: %s", c.HTTP.HTTP2, want, out)
		}
	}
}

// A CONNECT (the method) is an upgrade of type CONNECT: with no upgrade_configs entry for it and
// no connect_matcher route, Envoy answers 403 before any route answers, whatever the Host names
// (a known virtual host, a direct response, none). Allowed, it is not modelled.
func TestConnectMethod(t *testing.T) {
	rc := routeConfig("routes", vhost("a", []string{"a:8080"}, toCluster("", "a", byPrefix("/"))),
		vhost("rest", []string{"*"}, direct("", 404, "not the mesh's")))
	connect := func(host string, http2 bool) xdssim.Conn {
		c := httpTo(vipA, 8080, host)
		c.HTTP.Method, c.HTTP.HTTP2 = "CONNECT", http2
		return c
	}
	s := httpWorld(rc, allowConnect, upgrades([]string{"websocket"}))
	wantRefused(t, "CONNECT to a known authority", s.Dial(connect("a:8080", false)), 403, xdssim.ErrConnectRejected)
	wantRefused(t, "CONNECT over HTTP/2", s.Dial(connect("a:8080", true)), 403, xdssim.ErrConnectRejected)
	wantRefused(t, "CONNECT to the catch-all's direct response", s.Dial(connect("example.com:443", false)), 403, xdssim.ErrConnectRejected)
	if out := s.Dial(httpTo(vipA, 8080, "example.com")); out.Response == nil || out.Response.Status != 404 || out.Response.Local {
		t.Errorf("the control, a GET to the catch-all: want its direct 404: %s", out)
	}

	allowed := httpWorld(rc, allowConnect, upgrades([]string{"websocket", "CONNECT"}))
	if out := allowed.Dial(connect("a:8080", false)); out.Verdict != xdssim.Unmodelled || !errors.Is(out.Err, xdssim.ErrUnsupported) {
		t.Errorf("an HCM allowing CONNECT: want unmodelled: %s", out)
	}
	matcher := routeConfig("routes", vhost("a", []string{"a:8080"}, &routev3.Route{
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}},
		Action: toCluster("", "a", byPrefix("/")).GetAction(),
	}))
	if out := httpWorld(matcher, allowConnect).Dial(connect("a:8080", false)); out.Verdict != xdssim.Unmodelled || !errors.Is(out.Err, xdssim.ErrUnsupported) {
		t.Errorf("a connect_matcher route: want unmodelled: %s", out)
	}
}

// An absolute-form target (what an HTTP proxy client sends) is routed by the URL's authority,
// whatever the Host says, and goes on with the origin-form path; with allow_absolute_url off the
// target stays a path that is not relative, which Envoy answers 404.
func TestAbsoluteForm(t *testing.T) {
	rc := routeConfig("routes", vhost("a", []string{"a:8080"}, toCluster("", "a", byPrefix("/"))),
		vhost("rest", []string{"*"}, direct("", 404, "not the mesh's")))
	req := func(host, target string) xdssim.Conn {
		c := httpTo(vipA, 8080, host)
		c.HTTP.Path = target
		return c
	}
	s := httpWorld(rc)
	for _, c := range []struct{ host, target, authority, path string }{
		{"a:8080", "http://a:8080/x?q=1", "a:8080", "/x?q=1"},
		{"example.com", "http://a:8080/x", "a:8080", "/x"},
		{"", "http://a:8080", "a:8080", "/"},
	} {
		out := s.Dial(req(c.host, c.target))
		if out.Verdict != xdssim.Forwarded || out.Authority != c.authority || out.Path != c.path {
			t.Errorf("GET %s (Host %q): want forwarded as %s %s: %s (%s %s)", c.target, c.host, c.authority, c.path, out, out.Authority, out.Path)
		}
	}
	if out := s.Dial(req("a:8080", "http://example.com/x")); out.Response == nil || out.Response.Status != 404 || out.VirtualHost != "rest" {
		t.Errorf("the URL names another host than Host: want the catch-all's 404: %s", out)
	}
	off := httpWorld(rc, func(h *hcmv3.HttpConnectionManager) {
		h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AllowAbsoluteUrl: wrapperspb.Bool(false)}
	})
	wantRefused(t, "allow_absolute_url off", off.Dial(req("a:8080", "http://a:8080/x")), 404, xdssim.ErrBadRequest)
}
