// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

// The Gateway API route tests (route_gateway.go). Requests and connections are walked through the
// built resources by xdssim, the simulator that reads them as Envoy does, so each test asserts
// what a client gets, not how the configuration is spelled. Fixtures are prefixed gw.

// The services of the route tests, all in namespace shop: payments and canary serve HTTP 8080
// (primary), HTTP2 9090 and TCP 9000 and 443; ledger serves HTTP/1.1 8080 only.
const (
	gwShop       = "shop"
	gwPaymentVIP = "10.96.0.10"
)

func gwServices(t testing.TB) []model.Service {
	ports := []string{"8080/HTTP", "9090/HTTP2", "9000/TCP", "443/TCP"}
	return []model.Service{
		fxService(t, gwShop, "payments", gwPaymentVIP, 8080, ports...),
		fxService(t, gwShop, "canary", "10.96.0.11", 8080, ports...),
		fxService(t, gwShop, "ledger", "10.96.0.12", 8080, "8080/HTTP"),
	}
}

// gwClients are the local pods: web in shop (the services' namespace) and other in team.
func gwClients(t testing.TB) []model.LocalPod {
	return []model.LocalPod{
		fxPod(t, gwShop, "web-0", "web", model.CaptureSurface, 8080, "8080/HTTP"),
		fxPod(t, "team", "other-0", "other", model.CaptureSurface, 8080, "8080/HTTP"),
	}
}

// gwMesh is the fixture mesh carrying routes.
func gwMesh(t testing.TB, routes ...model.Route) model.Mesh {
	m := fxMesh(gwClients(t), gwServices(t)...)
	m.Routes = routes
	return m
}

// gwBuild builds m, and fails the test unless every structural gate passes (every cluster a
// route or chain names exists, no two chains share a match, ...) and Envoy's own checks accept
// every listener and route configuration.
func gwBuild(t testing.TB, m model.Mesh) (xds.Resources, *xdssim.Sim) {
	t.Helper()
	res := fxBuild(t, m)
	if v := xdscheck.All(res); v != nil {
		t.Fatalf("%d gate violations:\n%s", len(v), strings.Join(v, "\n"))
	}
	sim := xdssim.New(res)
	if err := sim.Check(); err != nil {
		t.Fatalf("Envoy would refuse the configuration: %v", err)
	}
	return res, sim
}

// gwBackend is backend service:port of namespace shop with weight.
func gwBackend(service string, port, weight int32) model.Backend {
	return model.Backend{ServiceRef: model.ServiceRef{Namespace: gwShop, Name: service, Port: port}, Weight: weight}
}

// gwRoute is a route of kind named name in namespace ns, parented to shop/payments (port 0: none).
func gwRoute(kind model.RouteKind, ns, name string, port int32, rules ...model.RouteRule) model.Route {
	return model.Route{Kind: kind, Namespace: ns, Name: name,
		Parents: []model.ServiceRef{{Namespace: gwShop, Name: "payments", Port: port}}, Rules: rules}
}

// gwRule is a rule sending matches to backends.
func gwRule(backends []model.Backend, matches ...model.RouteMatch) model.RouteRule {
	return model.RouteRule{Matches: matches, Backends: backends}
}

// gwCluster is the name of the cluster a client of the pod's identity dials service:port through
// (an HTTP cluster for an HTTP-class port, a TCP one otherwise).
func gwCluster(client model.LocalPod, service string, port int32, tcp bool) string {
	fqdn := xds.FQDN(service, gwShop, fxDomain)
	if tcp {
		return xds.SourceCluster(xds.TCPCluster(fqdn, port), client.Identity)
	}
	return xds.SourceCluster(xds.HTTPCluster(fqdn, port), client.Identity)
}

// gwOutcome spells what a client gets: "<route>: <cluster>*<weight> ..." when forwarded (one term
// per weighted target, the route's name when HTTP), "<route>: <status> <body>" when Envoy answers.
func gwOutcome(out xdssim.Outcome) string {
	where := out.Route
	if where == "" {
		where = out.Chain
	}
	switch out.Verdict {
	case xdssim.Answered:
		return fmt.Sprintf("%s: %d %s", where, out.Response.Status, strings.TrimSpace(out.Response.Body))
	case xdssim.Forwarded, xdssim.Closed:
		if len(out.Targets) == 0 {
			break
		}
		var targets []string
		for _, t := range out.Targets {
			targets = append(targets, fmt.Sprintf("%s*%d", t.Cluster, t.Weight))
		}
		if out.Verdict == xdssim.Closed { // the blackhole cluster: no endpoint, the connection is closed
			targets = append(targets, "(closed)")
		}
		return where + ": " + strings.Join(targets, " ")
	}
	return fmt.Sprintf("%s: %s (%v)", where, out.Verdict, out.Err)
}

// gwRequest sends an HTTP request from client to Host payments.shop.aether.internal:<port>.
func gwRequest(sim *xdssim.Sim, client model.LocalPod, port uint32, req xdssim.Request) string {
	req.Host = fmt.Sprintf("%s:%d", xds.FQDN("payments", gwShop, fxDomain), port)
	return gwOutcome(sim.Dial(xdssim.Conn{Listener: xds.CaptureListener(xds.PodKey(client.Namespace, client.Name)),
		DstIP: gwPaymentVIP, DstPort: port, HTTP: &req}))
}

// gwConnect opens a TCP connection (TLS with sni when tls is set) from client to payments' VIP.
func gwConnect(sim *xdssim.Sim, client model.LocalPod, port uint32, tls bool, sni string) string {
	return gwOutcome(sim.Dial(xdssim.Conn{Listener: xds.CaptureListener(xds.PodKey(client.Namespace, client.Name)),
		DstIP: gwPaymentVIP, DstPort: port, TLS: tls, SNI: sni}))
}

func gwSkippedMentions(res xds.Resources, parts ...string) bool {
	return slices.ContainsFunc(res.Skipped, func(s string) bool {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				return false
			}
		}
		return true
	})
}

// An HTTPRoute's matches land in Gateway API's precedence order: an exact path before any prefix,
// a longer prefix before a shorter one, a method before none, more headers before fewer, then the
// route first by namespace and name, then rule order; a request no rule matches gets 404 (GAMMA:
// the route replaces the Service's implicit route, it does not add to it).
func TestHTTPRouteMatchesInPrecedenceOrder(t *testing.T) {
	stable, canary := []model.Backend{gwBackend("payments", 8080, 1)}, []model.Backend{gwBackend("canary", 8080, 1)}
	prefix := func(p string) model.RouteMatch { return model.RouteMatch{PathType: "PathPrefix", Path: p} }
	api := gwRoute(model.HTTPRoute, gwShop, "api", 8080,
		gwRule(canary, prefix("/api")),                                                                                                         // rule 0
		gwRule(stable, model.RouteMatch{PathType: "Exact", Path: "/api/health"}),                                                               // rule 1
		gwRule(canary, model.RouteMatch{PathType: "PathPrefix", Path: "/api/v2", Method: "POST"}),                                              // rule 2
		gwRule(stable, model.RouteMatch{PathType: "PathPrefix", Path: "/api", Headers: []model.HeaderMatch{{Name: "X-Stable", Value: "yes"}}}), // rule 3
		gwRule(stable, prefix("/shared")),                                                                                                      // rule 4: ties with route "zeta"'s, and wins (namespace/name)
	)
	zeta := gwRoute(model.HTTPRoute, gwShop, "zeta", 8080, gwRule(canary, prefix("/shared/")), gwRule(canary, prefix("/zeta")))
	web := gwClients(t)[0]
	_, sim := gwBuild(t, gwMesh(t, zeta, api))
	payments, toCanary := gwCluster(web, "payments", 8080, false)+"*1", gwCluster(web, "canary", 8080, false)+"*1"
	name := func(route string, rule int) string {
		return xds.GatewayRoute("HTTPRoute", gwShop, route, rule, 0) + ": "
	}
	noMatch := xds.GatewayNoMatchRoute + ": 404 no rule of the routes attached to payments.shop.aether.internal:8080 matches this request"
	for _, tc := range []struct {
		req  xdssim.Request
		want string
	}{
		{xdssim.Request{Path: "/api/health"}, name("api", 1) + payments},
		{xdssim.Request{Path: "/api/health/deep"}, name("api", 0) + toCanary}, // exact is exact
		{xdssim.Request{Path: "/api/v2/pay", Method: "POST"}, name("api", 2) + toCanary},
		{xdssim.Request{Path: "/api/v2/pay"}, name("api", 0) + toCanary}, // GET: rule 2 wants POST
		{xdssim.Request{Path: "/api/v2/pay", Headers: map[string]string{"x-stable": "yes"}}, name("api", 3) + payments},
		{xdssim.Request{Path: "/api", Headers: map[string]string{"X-STABLE": "no"}}, name("api", 0) + toCanary},
		{xdssim.Request{Path: "/api/"}, name("api", 0) + toCanary},
		{xdssim.Request{Path: "/apix"}, noMatch}, // a prefix matches whole path elements
		{xdssim.Request{Path: "/shared/x"}, name("api", 4) + payments},
		{xdssim.Request{Path: "/zeta?q=1"}, name("zeta", 1) + toCanary},
		{xdssim.Request{Path: "/"}, noMatch},
		{xdssim.Request{Path: "/other"}, noMatch},
	} {
		if got := gwRequest(sim, web, 8080, tc.req); got != tc.want {
			t.Errorf("%s %s %v:\n got %s\nwant %s", tc.req.Method, tc.req.Path, tc.req.Headers, got, tc.want)
		}
	}
	// The other HTTP port of payments carries no route: its own cluster, every path.
	if got, want := gwRequest(sim, web, 9090, xdssim.Request{Path: "/anything", HTTP2: true}), "#0: "+gwCluster(web, "payments", 9090, false)+"*1"; got != want {
		t.Errorf("payments:9090, no route attached:\n got %s\nwant %s", got, want)
	}
}

// A GRPCRoute matches the gRPC path /<service>/<method>: service and method exactly, a service
// alone by the prefix /<service>/, a method alone under any service; the longest service first,
// then the longest method. Without a parent port it attaches to the HTTP2 ports only, and where
// it applies an HTTPRoute on the same port does not (one route kind per port; GRPCRoute first).
func TestGRPCRouteMatchesByServiceAndMethod(t *testing.T) {
	stable, canary := []model.Backend{gwBackend("payments", 9090, 1)}, []model.Backend{gwBackend("canary", 9090, 1)}
	grpc := gwRoute(model.GRPCRoute, gwShop, "ledger-rpc", 0,
		gwRule(canary, model.RouteMatch{GRPCService: "pkg.Ledger"}),
		gwRule(stable, model.RouteMatch{GRPCService: "pkg.Ledger", GRPCMethod: "Get"}),
		gwRule(canary, model.RouteMatch{GRPCMethod: "Ping"}),
		gwRule(stable, model.RouteMatch{GRPCService: "pkg.Ledger.v2", Headers: []model.HeaderMatch{{Name: "tenant", Value: "a"}}}),
	)
	http := gwRoute(model.HTTPRoute, gwShop, "also-9090", 9090, gwRule(canary))
	web := gwClients(t)[0]
	res, sim := gwBuild(t, gwMesh(t, grpc, http))
	payments, toCanary := gwCluster(web, "payments", 9090, false)+"*1", gwCluster(web, "canary", 9090, false)+"*1"
	name := func(rule int) string { return xds.GatewayRoute("GRPCRoute", gwShop, "ledger-rpc", rule, 0) + ": " }
	call := func(path string, headers map[string]string) xdssim.Request {
		h := map[string]string{"content-type": "application/grpc"}
		maps.Copy(h, headers)
		return xdssim.Request{Path: path, Method: "POST", HTTP2: true, Headers: h}
	}
	for _, tc := range []struct {
		req  xdssim.Request
		want string
	}{
		{call("/pkg.Ledger/Get", nil), name(1) + payments},
		{call("/pkg.Ledger/List", nil), name(0) + toCanary},
		{call("/pkg.Ledger.v2/List", map[string]string{"tenant": "a"}), name(3) + payments},
		{call("/pkg.Ledger.v2/Ping", nil), name(2) + toCanary}, // no tenant header: the method-only rule
		{call("/pkg.Other/Ping", nil), name(2) + toCanary},
		{call("/pkg.Other/Call", nil), xds.GatewayNoMatchRoute + ": 404 no rule of the routes attached to payments.shop.aether.internal:9090 matches this request"},
	} {
		if got := gwRequest(sim, web, 9090, tc.req); got != tc.want {
			t.Errorf("%s %v:\n got %s\nwant %s", tc.req.Path, tc.req.Headers, got, tc.want)
		}
	}
	if got, want := gwRequest(sim, web, 8080, xdssim.Request{Path: "/pkg.Ledger/Get"}), "#0: "+gwCluster(web, "payments", 8080, false)+"*1"; got != want {
		t.Errorf("payments:8080 (HTTP/1.1, which a GRPCRoute cannot carry):\n got %s\nwant %s", got, want)
	}
	if !gwSkippedMentions(res, "HTTPRoute shop/also-9090 is not applied on payments.shop.aether.internal:9090", "a GRPCRoute applies there") {
		t.Errorf("Skipped does not name the HTTPRoute the GRPCRoute displaced: %q", res.Skipped)
	}
}

// Weights: each backend gets its weight's share; weight 0 is left out; a rule whose every backend
// has weight 0, or that lists none, answers 500 (Gateway API: "all traffic which matches this
// rule MUST receive a 500 status code").
func TestHTTPRouteWeights(t *testing.T) {
	route := gwRoute(model.HTTPRoute, gwShop, "split", 8080,
		gwRule([]model.Backend{gwBackend("payments", 8080, 9), gwBackend("canary", 8080, 1), gwBackend("ledger", 8080, 0)},
			model.RouteMatch{PathType: "PathPrefix", Path: "/split"}),
		gwRule([]model.Backend{gwBackend("payments", 8080, 0), gwBackend("canary", 8080, 0)},
			model.RouteMatch{PathType: "PathPrefix", Path: "/zero"}),
		gwRule(nil, model.RouteMatch{PathType: "PathPrefix", Path: "/none"}),
		gwRule([]model.Backend{gwBackend("canary", 8080, 2), gwBackend("canary", 8080, 3)},
			model.RouteMatch{PathType: "PathPrefix", Path: "/twice"}),
	)
	web := gwClients(t)[0]
	_, sim := gwBuild(t, gwMesh(t, route))
	name := func(rule int) string { return xds.GatewayRoute("HTTPRoute", gwShop, "split", rule, 0) + ": " }
	for path, want := range map[string]string{
		"/split": name(0) + gwCluster(web, "payments", 8080, false) + "*9 " + gwCluster(web, "canary", 8080, false) + "*1",
		"/zero":  name(1) + "500 every backendRef of rule 1 of HTTPRoute shop/split has weight 0",
		"/none":  name(2) + "500 rule 2 of HTTPRoute shop/split has no backendRefs",
		"/twice": name(3) + gwCluster(web, "canary", 8080, false) + "*1", // one cluster, not two entries
	} {
		if got := gwRequest(sim, web, 8080, xdssim.Request{Path: path}); got != want {
			t.Errorf("%s:\n got %s\nwant %s", path, got, want)
		}
	}
}

// A backend the build does not carry (no such service, a port the service does not list, a port
// the route's kind cannot carry) is never named as a cluster: its weight goes to the blackhole
// cluster, so its share fails (503) instead of moving to the other backends, and Skipped names
// it. A rule none of whose backends is carried answers 500.
func TestRouteBackendNotCarried(t *testing.T) {
	ghost := model.Backend{ServiceRef: model.ServiceRef{Namespace: gwShop, Name: "ghost", Port: 8080}, Weight: 2}
	route := gwRoute(model.HTTPRoute, gwShop, "partial", 8080,
		gwRule([]model.Backend{gwBackend("payments", 8080, 2), ghost, gwBackend("canary", 9000, 1), gwBackend("canary", 7777, 1)},
			model.RouteMatch{PathType: "PathPrefix", Path: "/partial"}),
		gwRule([]model.Backend{ghost}, model.RouteMatch{PathType: "PathPrefix", Path: "/broken"}),
	)
	grpc := gwRoute(model.GRPCRoute, gwShop, "to-http1", 9090, gwRule([]model.Backend{gwBackend("ledger", 8080, 1)}))
	web := gwClients(t)[0]
	res, sim := gwBuild(t, gwMesh(t, route, grpc))
	name := func(rule int) string { return xds.GatewayRoute("HTTPRoute", gwShop, "partial", rule, 0) + ": " }
	for path, want := range map[string]string{
		"/partial": name(0) + gwCluster(web, "payments", 8080, false) + "*2 " + xds.BlackholeCluster + "*4",
		"/broken":  name(1) + "500 no backendRef of rule 1 of HTTPRoute shop/partial is a port this mesh carries",
	} {
		if got := gwRequest(sim, web, 8080, xdssim.Request{Path: path}); got != want {
			t.Errorf("%s:\n got %s\nwant %s", path, got, want)
		}
	}
	if got, want := gwRequest(sim, web, 9090, xdssim.Request{Path: "/pkg.S/M", Method: "POST", HTTP2: true}),
		xds.GatewayRoute("GRPCRoute", gwShop, "to-http1", 0, 0)+": 500 no backendRef of rule 0 of GRPCRoute shop/to-http1 is a port this mesh carries"; got != want {
		t.Errorf("a GRPCRoute to an HTTP/1.1 port:\n got %s\nwant %s", got, want)
	}
	for _, want := range [][]string{
		{"HTTPRoute shop/partial: rule 0: backend shop/ghost:8080 is not a service this node's configuration carries", "(weight 2) fails"},
		{"HTTPRoute shop/partial: rule 0: backend shop/canary:9000 is a TCP port, which a HTTPRoute cannot carry"},
		{"HTTPRoute shop/partial: rule 0: backend shop/canary:7777 names port 7777, which the service does not list"},
		{"GRPCRoute shop/to-http1: rule 0: backend shop/ledger:8080 is a HTTP port, which a GRPCRoute cannot carry"},
	} {
		if !gwSkippedMentions(res, want...) {
			t.Errorf("Skipped does not say %q:\n%s", want, strings.Join(res.Skipped, "\n"))
		}
	}
}

// A TCPRoute weights the TCP chain of its port; without a parent port it attaches to every TCP
// port, and to :18082 (cap_tcp_<svc>), which reaches the default TCP port (443 here: the lowest).
// A port carries one TCPRoute (the first by namespace and name); all weights 0 close the
// connection.
func TestTCPRouteWeightsTheChains(t *testing.T) {
	web := gwClients(t)[0]
	own := func(port int32) string { return gwCluster(web, "payments", port, true) + "*1" }
	split := func(port int32) string {
		return gwCluster(web, "payments", port, true) + "*3 " + gwCluster(web, "canary", port, true) + "*1"
	}
	defaultTCP := xds.SourceCluster(xds.TCPDefaultCluster(xds.FQDN("payments", gwShop, fxDomain)), web.Identity) + "*1"
	chain := func(port int32) string {
		return xds.CaptureTCPPortChain(xds.ServiceKey("payments", gwShop), port) + ": "
	}
	meshChain := xds.CaptureTCPChain(xds.ServiceKey("payments", gwShop)) + ": "
	for _, tc := range []struct {
		name   string
		routes []model.Route
		want   map[uint32]string
	}{
		{"port 9000", []model.Route{gwRoute(model.TCPRoute, gwShop, "db", 9000,
			model.RouteRule{Backends: []model.Backend{gwBackend("payments", 9000, 3), gwBackend("canary", 9000, 1)}})},
			map[uint32]string{9000: chain(9000) + split(9000), 443: chain(443) + own(443), 18082: meshChain + defaultTCP}},
		{"no port: every TCP port and :18082", []model.Route{gwRoute(model.TCPRoute, gwShop, "all", 0,
			model.RouteRule{Backends: []model.Backend{gwBackend("canary", 443, 1)}})},
			map[uint32]string{9000: chain(9000) + gwCluster(web, "canary", 443, true) + "*1", 443: chain(443) + gwCluster(web, "canary", 443, true) + "*1",
				18082: meshChain + gwCluster(web, "canary", 443, true) + "*1"}},
		{"port 443, the default TCP port", []model.Route{gwRoute(model.TCPRoute, gwShop, "tls-app", 443,
			model.RouteRule{Backends: []model.Backend{gwBackend("payments", 443, 3), gwBackend("canary", 443, 1)}})},
			map[uint32]string{443: chain(443) + split(443), 18082: meshChain + split(443), 9000: chain(9000) + own(9000)}},
		{"two on one port: the first by name", []model.Route{
			gwRoute(model.TCPRoute, gwShop, "b-second", 9000, model.RouteRule{Backends: []model.Backend{gwBackend("payments", 9000, 1)}}),
			gwRoute(model.TCPRoute, gwShop, "a-first", 9000, model.RouteRule{Backends: []model.Backend{gwBackend("canary", 9000, 1)}})},
			map[uint32]string{9000: chain(9000) + gwCluster(web, "canary", 9000, true) + "*1"}},
		{"all weights 0", []model.Route{gwRoute(model.TCPRoute, gwShop, "off", 9000,
			model.RouteRule{Backends: []model.Backend{gwBackend("payments", 9000, 0)}})},
			map[uint32]string{9000: chain(9000) + xds.BlackholeCluster + "*1 (closed)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, sim := gwBuild(t, gwMesh(t, tc.routes...))
			for port, want := range tc.want {
				if got := gwConnect(sim, web, port, false, ""); got != want {
					t.Errorf("raw TCP to :%d:\n got %s\nwant %s", port, got, want)
				}
			}
			if tc.name == "two on one port: the first by name" &&
				!gwSkippedMentions(res, "TCPRoute shop/b-second is not applied on payments.shop.aether.internal:9000: TCPRoute shop/a-first is") {
				t.Errorf("Skipped does not name the TCPRoute left out:\n%s", strings.Join(res.Skipped, "\n"))
			}
		})
	}
}

// A TLSRoute adds one chain per route on its port, matching its hostnames as SNI (wildcards
// included); a hostname a route earlier by namespace and name holds stays that route's. A
// connection no TLSRoute hostname matches (other SNI, or not TLS) is closed: the routes replace
// the port's implicit route. Where a TLSRoute applies, a TCPRoute on the same port does not.
func TestTLSRouteSNIChains(t *testing.T) {
	web := gwClients(t)[0]
	tlsA := gwRoute(model.TLSRoute, gwShop, "tls-a", 443, model.RouteRule{Backends: []model.Backend{gwBackend("canary", 443, 1)}})
	tlsA.Hostnames = []string{"API.example.com", "*.internal.example.com"}
	tlsB := gwRoute(model.TLSRoute, gwShop, "tls-b", 443, model.RouteRule{Backends: []model.Backend{gwBackend("payments", 443, 1), gwBackend("canary", 443, 1)}})
	tlsB.Hostnames = []string{"api.example.com", "other.example.com"}
	tcp := gwRoute(model.TCPRoute, gwShop, "tcp-443", 443, model.RouteRule{Backends: []model.Backend{gwBackend("payments", 9000, 1)}})
	res, sim := gwBuild(t, gwMesh(t, tlsB, tcp, tlsA))
	base := xds.CaptureTCPPortChain(xds.ServiceKey("payments", gwShop), 443)
	chainA, chainB := xds.CaptureTLSRouteChain(base, gwShop, "tls-a")+": ", xds.CaptureTLSRouteChain(base, gwShop, "tls-b")+": "
	toCanary := gwCluster(web, "canary", 443, true) + "*1"
	for _, tc := range []struct {
		tls  bool
		sni  string
		want string
	}{
		{true, "api.example.com", chainA + toCanary},
		{true, "x.internal.example.com", chainA + toCanary},
		{true, "other.example.com", chainB + gwCluster(web, "payments", 443, true) + "*1 " + toCanary},
		{true, "unknown.example.com", base + ": " + xds.BlackholeCluster + "*1 (closed)"},
		{true, "", base + ": " + xds.BlackholeCluster + "*1 (closed)"},
		{false, "", base + ": " + xds.BlackholeCluster + "*1 (closed)"},
	} {
		if got := gwConnect(sim, web, 443, tc.tls, tc.sni); got != tc.want {
			t.Errorf("TLS %v, SNI %q:\n got %s\nwant %s", tc.tls, tc.sni, got, tc.want)
		}
	}
	// :18082 reaches the default TCP port, 443: the same SNI chains there.
	meshChain := xds.CaptureTCPChain(xds.ServiceKey("payments", gwShop))
	if got, want := gwConnect(sim, web, 18082, true, "api.example.com"), xds.CaptureTLSRouteChain(meshChain, gwShop, "tls-a")+": "+toCanary; got != want {
		t.Errorf("TLS to :18082:\n got %s\nwant %s", got, want)
	}
	// 9000 carries no route: its own cluster, TLS or not.
	if got, want := gwConnect(sim, web, 9000, true, "api.example.com"), xds.CaptureTCPPortChain(xds.ServiceKey("payments", gwShop), 9000)+": "+gwCluster(web, "payments", 9000, true)+"*1"; got != want {
		t.Errorf("TLS to :9000:\n got %s\nwant %s", got, want)
	}
	for _, want := range []string{
		`TLSRoute shop/tls-b: hostname "api.example.com" on payments.shop.aether.internal:443 is TLSRoute shop/tls-a's`,
		"TCPRoute shop/tcp-443 is not applied on payments.shop.aether.internal:443: a TLSRoute applies there",
	} {
		if !gwSkippedMentions(res, want) {
			t.Errorf("Skipped does not say %q:\n%s", want, strings.Join(res.Skipped, "\n"))
		}
	}
}

// GAMMA's namespace boundaries: a producer route (in the service's namespace) applies to every
// client; a consumer route (in another namespace) only to clients of its namespace, for whom it
// replaces the producer route. A route in one namespace cannot reshape another's traffic.
func TestConsumerRoutesApplyToTheirNamespaceOnly(t *testing.T) {
	producer := gwRoute(model.HTTPRoute, gwShop, "producer", 8080, gwRule([]model.Backend{gwBackend("canary", 8080, 1)}))
	consumer := gwRoute(model.HTTPRoute, "team", "consumer", 8080, gwRule([]model.Backend{gwBackend("ledger", 8080, 1)}))
	intruder := gwRoute(model.TCPRoute, "ops", "intruder", 9000, model.RouteRule{Backends: []model.Backend{gwBackend("canary", 9000, 1)}})
	clients := append(gwClients(t), fxPod(t, "ops", "tool-0", "tool", model.CaptureSurface, 8080, "8080/HTTP"))
	m := fxMesh(clients, gwServices(t)...)
	m.Routes = []model.Route{producer, consumer, intruder}
	_, sim := gwBuild(t, m)
	web, other, tool := clients[0], clients[1], clients[2]
	for _, tc := range []struct {
		client model.LocalPod
		want   string
	}{
		{web, xds.GatewayRoute("HTTPRoute", gwShop, "producer", 0, 0) + ": " + gwCluster(web, "canary", 8080, false) + "*1"},
		{other, xds.GatewayRoute("HTTPRoute", "team", "consumer", 0, 0) + ": " + gwCluster(other, "ledger", 8080, false) + "*1"},
		{tool, xds.GatewayRoute("HTTPRoute", gwShop, "producer", 0, 0) + ": " + gwCluster(tool, "canary", 8080, false) + "*1"},
	} {
		if got := gwRequest(sim, tc.client, 8080, xdssim.Request{Path: "/"}); got != tc.want {
			t.Errorf("client in %s:\n got %s\nwant %s", tc.client.Namespace, got, tc.want)
		}
	}
	chain := xds.CaptureTCPPortChain(xds.ServiceKey("payments", gwShop), 9000) + ": "
	for _, tc := range []struct {
		client model.LocalPod
		want   string
	}{
		{tool, chain + gwCluster(tool, "canary", 9000, true) + "*1"},
		{web, chain + gwCluster(web, "payments", 9000, true) + "*1"},
	} {
		if got := gwConnect(sim, tc.client, 9000, false, ""); got != tc.want {
			t.Errorf("raw TCP to :9000 from %s:\n got %s\nwant %s", tc.client.Namespace, got, tc.want)
		}
	}
}

// A match the mesh cannot carry is left out, never widened: a rule whose only match is a regular
// expression matches nothing (404), not everything. A parent the build does not carry, or a
// parent port the route's kind cannot carry, attaches nothing; Skipped says why.
func TestUncarriedMatchesAndParents(t *testing.T) {
	route := gwRoute(model.HTTPRoute, gwShop, "regex", 8080,
		gwRule([]model.Backend{gwBackend("canary", 8080, 1)}, model.RouteMatch{PathType: "RegularExpression", Path: "/v[0-9]+"}),
		gwRule([]model.Backend{gwBackend("canary", 8080, 1)},
			model.RouteMatch{PathType: "RegularExpression", Path: "/x.*"}, model.RouteMatch{PathType: "Exact", Path: "/exact"}))
	elsewhere := model.Route{Kind: model.HTTPRoute, Namespace: gwShop, Name: "elsewhere", Parents: []model.ServiceRef{
		{Namespace: gwShop, Name: "ghost"}, {Namespace: gwShop, Name: "payments", Port: 9000}}, Rules: []model.RouteRule{gwRule([]model.Backend{gwBackend("canary", 8080, 1)})}}
	web := gwClients(t)[0]
	res, sim := gwBuild(t, gwMesh(t, route, elsewhere))
	noMatch := xds.GatewayNoMatchRoute + ": 404 no rule of the routes attached to payments.shop.aether.internal:8080 matches this request"
	for path, want := range map[string]string{
		"/v2":    noMatch,
		"/exact": xds.GatewayRoute("HTTPRoute", gwShop, "regex", 1, 1) + ": " + gwCluster(web, "canary", 8080, false) + "*1",
		"/xyz":   noMatch,
	} {
		if got := gwRequest(sim, web, 8080, xdssim.Request{Path: path}); got != want {
			t.Errorf("%s:\n got %s\nwant %s", path, got, want)
		}
	}
	if got, want := gwConnect(sim, web, 9000, false, ""), xds.CaptureTCPPortChain(xds.ServiceKey("payments", gwShop), 9000)+": "+gwCluster(web, "payments", 9000, true)+"*1"; got != want {
		t.Errorf("an HTTPRoute parented to TCP port 9000 changed it:\n got %s\nwant %s", got, want)
	}
	for _, want := range []string{
		`HTTPRoute shop/regex: rule 0: match 0 is left out: path type "RegularExpression" is not carried`,
		"HTTPRoute shop/regex: rule 0 is left out: none of its matches can be carried (it matches no request, not every one)",
		`HTTPRoute shop/regex: rule 1: match 0 is left out`,
		"HTTPRoute shop/elsewhere: parent shop/ghost is not a service this node's configuration carries",
		"HTTPRoute shop/elsewhere: parent shop/payments:9000: the service has no port 9000 that a HTTPRoute carries",
	} {
		if !gwSkippedMentions(res, want) {
			t.Errorf("Skipped does not say %q:\n%s", want, strings.Join(res.Skipped, "\n"))
		}
	}
}

// Every note of Skipped is listed once, however many identities and chains met it.
func TestRouteNotesAreListedOnce(t *testing.T) {
	tcpA := gwRoute(model.TCPRoute, gwShop, "a", 0, model.RouteRule{Backends: []model.Backend{gwBackend("canary", 9000, 1)}})
	tcpB := gwRoute(model.TCPRoute, gwShop, "b", 0, model.RouteRule{Backends: []model.Backend{gwBackend("ghost", 9000, 1)}})
	res, _ := gwBuild(t, gwMesh(t, tcpA, tcpB))
	seen := map[string]bool{}
	for _, s := range res.Skipped {
		if seen[s] {
			t.Errorf("listed twice: %s", s)
		}
		seen[s] = true
	}
	if !gwSkippedMentions(res, "TCPRoute shop/b is not applied on payments.shop.aether.internal:9000") {
		t.Errorf("Skipped does not name the TCPRoute left out:\n%s", strings.Join(res.Skipped, "\n"))
	}
}

// Timeouts: an HTTPRoute rule's timeouts.request is its route's timeout and timeouts.backendRequest
// each attempt's (the retry policy's per_try_timeout), on the route and on its idempotent twin,
// beside the mesh's retry conditions; a rule that sets none has no timeout (0: the mesh sets no
// deadline of its own), and the other routes keep the build's shared policies.
func TestHTTPRouteTimeouts(t *testing.T) {
	timed := gwRule([]model.Backend{gwBackend("payments", 8080, 1)}, model.RouteMatch{PathType: "PathPrefix", Path: "/timed"})
	timed.Timeouts = model.RouteTimeouts{Request: 3 * time.Second, BackendRequest: time.Second}
	route := gwRoute(model.HTTPRoute, gwShop, "timeouts", 8080, timed,
		gwRule([]model.Backend{gwBackend("payments", 8080, 1)}, model.RouteMatch{PathType: "PathPrefix", Path: "/untimed"}))
	res, _ := gwBuild(t, gwMesh(t, route))
	seen := map[int]int{}
	for _, rc := range res.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				for rule, want := range []struct{ timeout, perTry time.Duration }{{3 * time.Second, time.Second}, {0, 0}} {
					if r.GetName() != xds.GatewayRoute("HTTPRoute", gwShop, "timeouts", rule, 0) {
						continue
					}
					seen[rule]++
					action := r.GetRoute()
					if got := action.GetTimeout().AsDuration(); action.GetTimeout() == nil || got != want.timeout {
						t.Errorf("%s in %s: timeout %v, want %v", r.GetName(), rc.GetName(), action.GetTimeout(), want.timeout)
					}
					policy := action.GetRetryPolicy()
					if got := policy.GetPerTryTimeout().AsDuration(); got != want.perTry || (want.perTry == 0) != (policy.GetPerTryTimeout() == nil) {
						t.Errorf("%s in %s: per-try timeout %v, want %v", r.GetName(), rc.GetName(), policy.GetPerTryTimeout(), want.perTry)
					}
					if policy.GetRetryOn() != xds.RetryOn {
						t.Errorf("%s in %s: retry_on %q, want the mesh's %q beside the per-try timeout", r.GetName(), rc.GetName(), policy.GetRetryOn(), xds.RetryOn)
					}
				}
			}
		}
	}
	if seen[0] == 0 || seen[1] == 0 {
		t.Fatalf("routes of rule 0 seen %d times, of rule 1 %d: the route was not built", seen[0], seen[1])
	}
}
