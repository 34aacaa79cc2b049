// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	httpinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

// ---- Hand-built resources: small constructors, each producing valid Envoy config. ----

// pack validates m (as the builder does) and wraps it in an Any.
func pack(m proto.Message) *anypb.Any {
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			panic(err)
		}
	}
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func socket(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
}

type listenerOpt func(*listenerv3.Listener)

// listener binds name to ip:port with chains and options.
func listener(name, ip string, port uint32, opts ...listenerOpt) *listenerv3.Listener {
	l := &listenerv3.Listener{Name: name, Address: socket(ip, port)}
	for _, o := range opts {
		o(l)
	}
	return l
}

// capture is a capture listener as the proposal has it: 127.0.0.1:18001, use_original_dst, TLS
// and HTTP inspectors.
func capture(opts ...listenerOpt) *listenerv3.Listener {
	return listener("capture", "127.0.0.1", 18001, append([]listenerOpt{originalDst, inspectors(true, true)}, opts...)...)
}

func originalDst(l *listenerv3.Listener) { l.UseOriginalDst = wrapperspb.Bool(true) }

func inspectors(tls, http bool) listenerOpt {
	return func(l *listenerv3.Listener) {
		if tls {
			l.ListenerFilters = append(l.ListenerFilters, &listenerv3.ListenerFilter{Name: "envoy.filters.listener.tls_inspector",
				ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: pack(&tlsinspectorv3.TlsInspector{})}})
		}
		if http {
			l.ListenerFilters = append(l.ListenerFilters, &listenerv3.ListenerFilter{Name: "envoy.filters.listener.http_inspector",
				ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: pack(&httpinspectorv3.HttpInspector{})}})
		}
	}
}

func chains(fcs ...*listenerv3.FilterChain) listenerOpt {
	return func(l *listenerv3.Listener) { l.FilterChains = append(l.FilterChains, fcs...) }
}

func defaultChain(fc *listenerv3.FilterChain) listenerOpt {
	return func(l *listenerv3.Listener) { l.DefaultFilterChain = fc }
}

type matchOpt func(*listenerv3.FilterChainMatch)

func chain(name string, filter *listenerv3.Filter, opts ...matchOpt) *listenerv3.FilterChain {
	m := &listenerv3.FilterChainMatch{}
	for _, o := range opts {
		o(m)
	}
	return &listenerv3.FilterChain{Name: name, FilterChainMatch: m, Filters: []*listenerv3.Filter{filter}}
}

func dport(p uint32) matchOpt {
	return func(m *listenerv3.FilterChainMatch) { m.DestinationPort = wrapperspb.UInt32(p) }
}

func prefix(ip string, bits uint32) matchOpt {
	return func(m *listenerv3.FilterChainMatch) {
		m.PrefixRanges = append(m.PrefixRanges, &corev3.CidrRange{AddressPrefix: ip, PrefixLen: wrapperspb.UInt32(bits)})
	}
}

func serverNames(names ...string) matchOpt {
	return func(m *listenerv3.FilterChainMatch) { m.ServerNames = names }
}

func transport(t string) matchOpt {
	return func(m *listenerv3.FilterChainMatch) { m.TransportProtocol = t }
}

func appProtocols(p ...string) matchOpt {
	return func(m *listenerv3.FilterChainMatch) { m.ApplicationProtocols = p }
}

func tcpProxy(cluster string) *listenerv3.Filter {
	return &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: pack(
		&tcpproxyv3.TcpProxy{StatPrefix: cluster, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}})}}
}

func tcpProxyWeighted(weights ...any) *listenerv3.Filter {
	wc := &tcpproxyv3.TcpProxy_WeightedCluster{}
	for i := 0; i < len(weights); i += 2 {
		wc.Clusters = append(wc.Clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: weights[i].(string), Weight: uint32(weights[i+1].(int))})
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: pack(
		&tcpproxyv3.TcpProxy{StatPrefix: "weighted", ClusterSpecifier: &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: wc}})}}
}

type hcmOpt func(*hcmv3.HttpConnectionManager)

// httpManager is an HCM (codec AUTO, the router) taking its routes by RDS.
func httpManager(rds string, opts ...hcmOpt) *listenerv3.Filter {
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "http",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: rds, ConfigSource: &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: pack(&routerv3.Router{})}}},
	}
	for _, o := range opts {
		o(h)
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: pack(h)}}
}

func routeConfig(name string, vhosts ...*routev3.VirtualHost) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: vhosts}
}

func vhost(name string, domains []string, routes ...*routev3.Route) *routev3.VirtualHost {
	return &routev3.VirtualHost{Name: name, Domains: domains, Routes: routes}
}

func toCluster(name, cluster string, m *routev3.RouteMatch) *routev3.Route {
	return &routev3.Route{Name: name, Match: m, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}}}
}

func byPrefix(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

func header(name, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: name, Value: value}}
}

func direct(name string, status uint32, body string, headers ...*corev3.HeaderValueOption) *routev3.Route {
	return &routev3.Route{Name: name, Match: byPrefix("/"), ResponseHeadersToAdd: headers,
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: status,
			Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}}}}}
}

// edsCluster is an EDS cluster of membership service.
func edsCluster(name, service string) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{ServiceName: service}}
}

func originalDstCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy: clusterv3.Cluster_CLUSTER_PROVIDED}
}

// staticCluster has one endpoint, ip:port (none when ip is empty: a blackhole).
func staticCluster(name, ip string, port uint32) *clusterv3.Cluster {
	c := &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	if ip != "" {
		c.LoadAssignment = cla(name, locality("", 0, 0, ep(ip, port, corev3.HealthStatus_UNKNOWN)))
	}
	return c
}

func cla(name string, localities ...*endpointv3.LocalityLbEndpoints) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: localities}
}

// locality groups endpoints at a priority; weight 0 leaves the locality weight unset.
func locality(zone string, priority, weight uint32, eps ...*endpointv3.LbEndpoint) *endpointv3.LocalityLbEndpoints {
	l := &endpointv3.LocalityLbEndpoints{Locality: &corev3.Locality{Zone: zone}, Priority: priority, LbEndpoints: eps}
	if weight > 0 {
		l.LoadBalancingWeight = wrapperspb.UInt32(weight)
	}
	return l
}

func ep(ip string, port uint32, health corev3.HealthStatus) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{HealthStatus: health,
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socket(ip, port)}}}
}

// The addresses of the tests: two service VIPs and the endpoints behind clusters a and b.
const (
	vipA = "10.96.0.10"
	vipB = "10.96.0.20"
)

// base are clusters every test may name: a and b (EDS, one healthy endpoint each) and
// passthrough (ORIGINAL_DST).
func base() xds.Resources {
	return xds.Resources{
		Clusters: []*clusterv3.Cluster{edsCluster("a", "a.svc:80"), edsCluster("b", "b.svc:80"), originalDstCluster("passthrough")},
		Endpoints: []*endpointv3.ClusterLoadAssignment{
			cla("a.svc:80", locality("z", 0, 1, ep("10.1.0.1", 18008, corev3.HealthStatus_HEALTHY))),
			cla("b.svc:80", locality("z", 0, 1, ep("10.2.0.1", 18008, corev3.HealthStatus_HEALTHY))),
		},
	}
}

// world is base plus the given listeners and route configurations.
func world(ls []*listenerv3.Listener, rcs ...*routev3.RouteConfiguration) *xdssim.Sim {
	res := base()
	res.Listeners, res.Routes = ls, rcs
	return xdssim.New(res)
}

var passthroughChain = chain("passthrough", tcpProxy("passthrough"))

// tcpTo dials ip:port with raw bytes through the capture listener.
func tcpTo(ip string, port uint32) xdssim.Conn {
	return xdssim.Conn{Listener: "capture", DstIP: ip, DstPort: port}
}

// httpTo dials ip:port with an HTTP/1.1 request for host.
func httpTo(ip string, port uint32, host string) xdssim.Conn {
	return xdssim.Conn{Listener: "capture", DstIP: ip, DstPort: port, HTTP: &xdssim.Request{Host: host}}
}

// tlsTo dials ip:port with a TLS ClientHello.
func tlsTo(ip string, port uint32, sni string, alpn ...string) xdssim.Conn {
	return xdssim.Conn{Listener: "capture", DstIP: ip, DstPort: port, TLS: true, SNI: sni, ALPN: alpn}
}

// wantChain fails unless c lands on chain.
func wantChain(t *testing.T, s *xdssim.Sim, c xdssim.Conn, chain string) xdssim.Outcome {
	t.Helper()
	out := s.Dial(c)
	if out.Chain != chain {
		t.Errorf("dial %s:%d (tls=%t sni=%q alpn=%v): chain %q, want %q\n%s", c.DstIP, c.DstPort, c.TLS, c.SNI, c.ALPN, out.Chain, chain, out)
	}
	return out
}

// ---- Filter-chain matching ----

// The destination port is the first level: a chain naming the port takes the connection even
// when another chain names its exact IP.
func TestPortBeatsIP(t *testing.T) {
	s := world([]*listenerv3.Listener{capture(chains(
		chain("by_ip", tcpProxy("a"), prefix(vipA, 32)),
		chain("by_port", tcpProxy("b"), dport(9000)),
	), defaultChain(passthroughChain))})

	out := wantChain(t, s, tcpTo(vipA, 9000), "by_port")
	if len(out.Targets) != 1 || out.Targets[0].Cluster != "b" {
		t.Errorf("targets %v, want cluster b", out.Targets)
	}
	wantChain(t, s, tcpTo(vipA, 9001), "by_ip")
	wantChain(t, s, tcpTo(vipB, 9000), "by_port")
}

// Among the destination ranges that hold the address, the longest wins, whichever chain lists it.
func TestLongestPrefixWins(t *testing.T) {
	s := world([]*listenerv3.Listener{capture(chains(
		// Listed out of order of specificity: the order of chains does not matter.
		chain("host", tcpProxy("b"), prefix("10.0.0.7", 32)),
		chain("two", tcpProxy("a"), prefix("192.168.0.0", 16), prefix("10.0.0.0", 28)),
		chain("wide", tcpProxy("a"), prefix("10.0.0.0", 8)),
		chain("narrow", tcpProxy("a"), prefix("10.0.0.0", 24)),
	), defaultChain(passthroughChain))})

	wantChain(t, s, tcpTo("10.0.0.7", 80), "host")
	wantChain(t, s, tcpTo("10.0.0.8", 80), "two") // /28 beats /24
	wantChain(t, s, tcpTo("10.0.0.20", 80), "narrow")
	wantChain(t, s, tcpTo("10.1.2.3", 80), "wide")
	wantChain(t, s, tcpTo("192.168.4.4", 80), "two")
	if out := wantChain(t, s, tcpTo("11.0.0.1", 80), "passthrough"); !out.DefaultChain {
		t.Errorf("11.0.0.1 should fall to the default chain: %s", out)
	}
}

// Envoy does not backtrack: once a level picks its exact entry, a failure below it gives the
// default chain, never a sibling (FilterChainManagerImpl::findFilterChain).
func TestNoBacktracking(t *testing.T) {
	t.Run("port level", func(t *testing.T) {
		// cap_tcp for VIP A on port 9000, and a port-less HCM chain. A dial to VIP B on 9000
		// enters the port-9000 subtree, finds no range for B there, and takes the default
		// chain: the HCM chain would match, but it sits in the port-0 subtree.
		s := world([]*listenerv3.Listener{capture(chains(
			chain("cap_tcp_a_9000", tcpProxy("a"), prefix(vipA, 32), dport(9000)),
			chain("cap_http", httpManager("routes")),
		), defaultChain(passthroughChain))},
			routeConfig("routes", vhost("all", []string{"*"}, toCluster("", "b", byPrefix("/")))))

		out := wantChain(t, s, httpTo(vipB, 9000, "b.svc"), "passthrough")
		if !out.DefaultChain || out.Verdict != xdssim.Passthrough || out.Targets[0].Passthrough != vipB+":9000" {
			t.Errorf("VIP B:9000 should pass through on the default chain: %s", out)
		}
		if out := wantChain(t, s, httpTo(vipB, 8080, "b.svc"), "cap_http"); out.Verdict != xdssim.Forwarded || out.Targets[0].Cluster != "b" {
			t.Errorf("VIP B:8080 should reach b through the HCM: %s", out)
		}
		wantChain(t, s, tcpTo(vipA, 9000), "cap_tcp_a_9000")
	})
	t.Run("destination IP level", func(t *testing.T) {
		// A /32 chain that wants SNI x.test, and a range-less chain. TLS with SNI y.test to the
		// /32 address enters the /32 subtree, fails its server names, and takes the default.
		s := world([]*listenerv3.Listener{capture(chains(
			chain("sni_x", tcpProxy("a"), prefix(vipA, 32), serverNames("x.test")),
			chain("any", tcpProxy("b")),
		), defaultChain(passthroughChain))})

		if out := wantChain(t, s, tlsTo(vipA, 443, "y.test"), "passthrough"); !out.DefaultChain {
			t.Errorf("want the default chain: %s", out)
		}
		wantChain(t, s, tlsTo(vipA, 443, "x.test"), "sni_x")
		wantChain(t, s, tlsTo(vipB, 443, "y.test"), "any")
	})
}

// Server names: the exact name (SNI lower-cased by tls_inspector), else the longest "*."
// wildcard, else the chains with no server_names; a wildcard needs a label before it.
func TestServerNames(t *testing.T) {
	s := world([]*listenerv3.Listener{capture(chains(
		chain("exact", tcpProxy("a"), serverNames("api.example.com")),
		chain("wild", tcpProxy("a"), serverNames("*.example.com")),
		chain("deeper", tcpProxy("a"), serverNames("*.b.example.com")),
		chain("none", tcpProxy("b")),
	), defaultChain(passthroughChain))})

	for sni, want := range map[string]string{
		"api.example.com":   "exact",
		"API.Example.COM":   "exact",
		"x.example.com":     "wild",
		"x.b.example.com":   "deeper",
		"y.x.b.example.com": "deeper",
		"b.example.com":     "wild",
		"example.com":       "none",
		"":                  "none",
	} {
		out := wantChain(t, s, tlsTo(vipA, 443, sni), want)
		if out.ServerName != strings.ToLower(sni) {
			t.Errorf("tls_inspector reported SNI %q for %q", out.ServerName, sni)
		}
	}

	// Without a chain free of server names, an unknown SNI takes the default chain; without a
	// default chain too, the connection is closed.
	onlyNamed := chains(chain("exact", tcpProxy("a"), serverNames("api.example.com")))
	s = world([]*listenerv3.Listener{capture(onlyNamed, defaultChain(passthroughChain))})
	if out := wantChain(t, s, tlsTo(vipA, 443, "other.test"), "passthrough"); !out.DefaultChain {
		t.Errorf("want the default chain: %s", out)
	}
	s = world([]*listenerv3.Listener{capture(onlyNamed)})
	if out := s.Dial(tlsTo(vipA, 443, "other.test")); out.Verdict != xdssim.Closed || !errors.Is(out.Err, xdssim.ErrNoChain) {
		t.Errorf("no chain and no default chain should close: %s", out)
	}
}

// transport_protocol is what tls_inspector detected: "tls" for a ClientHello, "raw_buffer"
// otherwise, and "raw_buffer" for everything when no tls_inspector runs.
func TestTransportProtocol(t *testing.T) {
	tcpChains := chains(chain("tls", tcpProxy("a"), transport("tls")), chain("raw", tcpProxy("b"), transport("raw_buffer")))
	s := world([]*listenerv3.Listener{capture(tcpChains)})
	wantChain(t, s, tlsTo(vipA, 443, "x.test"), "tls")
	wantChain(t, s, tcpTo(vipA, 443), "raw")

	bare := listener("capture", "127.0.0.1", 18001, originalDst, tcpChains)
	s = world([]*listenerv3.Listener{bare})
	out := wantChain(t, s, tlsTo(vipA, 443, "x.test"), "raw")
	if out.ServerName != "" || out.Transport != "raw_buffer" {
		t.Errorf("without tls_inspector nothing is detected: %s", out)
	}
}

// application_protocols: http_inspector's "http/1.1" or "h2c" for cleartext HTTP, the
// ClientHello's ALPN for TLS, tried in the client's order; else the chains naming none.
func TestApplicationProtocols(t *testing.T) {
	protocolChains := chains(
		chain("h2c", tcpProxy("a"), appProtocols("h2c")),
		chain("h1", tcpProxy("a"), appProtocols("http/1.1")),
		chain("other", tcpProxy("b")),
	)
	s := world([]*listenerv3.Listener{capture(protocolChains)})

	wantChain(t, s, httpTo(vipA, 8080, "a"), "h1")
	h2 := httpTo(vipA, 8080, "a")
	h2.HTTP.HTTP2 = true
	wantChain(t, s, h2, "h2c")
	wantChain(t, s, tcpTo(vipA, 8080), "other")
	wantChain(t, s, tlsTo(vipA, 443, "", "h2", "http/1.1"), "h1")
	wantChain(t, s, tlsTo(vipA, 443, "", "h2c", "http/1.1"), "h2c")
	wantChain(t, s, tlsTo(vipA, 443, "", "h2"), "other")

	s = world([]*listenerv3.Listener{listener("capture", "127.0.0.1", 18001, originalDst, inspectors(true, false), protocolChains)})
	wantChain(t, s, httpTo(vipA, 8080, "a"), "other")
}

// The source levels: the longest source range, then the exact source port, else the chains with
// no source_ports, and no backtracking to a shorter range; the source type splits local peers
// (loopback, or the destination's own IP) from external ones before ANY applies.
func TestSourceMatching(t *testing.T) {
	fromPods := func(m *listenerv3.FilterChainMatch) {
		m.SourcePrefixRanges = []*corev3.CidrRange{{AddressPrefix: "10.244.0.0", PrefixLen: wrapperspb.UInt32(16)}}
	}
	fromOne := func(m *listenerv3.FilterChainMatch) {
		m.SourcePrefixRanges = []*corev3.CidrRange{{AddressPrefix: "10.244.1.5", PrefixLen: wrapperspb.UInt32(32)}}
		m.SourcePorts = []uint32{5555}
	}
	s := world([]*listenerv3.Listener{capture(chains(
		chain("from_one", tcpProxy("a"), fromOne),
		chain("from_pods", tcpProxy("a"), fromPods),
		chain("any_source", tcpProxy("b")),
	), defaultChain(passthroughChain))})
	from := func(ip string, port uint32) xdssim.Conn {
		c := tcpTo(vipA, 9000)
		c.SrcIP, c.SrcPort = ip, port
		return c
	}
	wantChain(t, s, from("10.244.1.5", 5555), "from_one")
	wantChain(t, s, from("10.244.1.5", 1234), "passthrough") // the /32 subtree has no port-less chain
	wantChain(t, s, from("10.244.2.2", 1234), "from_pods")
	wantChain(t, s, from("192.168.1.1", 1234), "any_source")
	wantChain(t, s, from("", 0), "any_source")

	ofType := func(st listenerv3.FilterChainMatch_ConnectionSourceType) matchOpt {
		return func(m *listenerv3.FilterChainMatch) { m.SourceType = st }
	}
	s = world([]*listenerv3.Listener{capture(chains(
		chain("local", tcpProxy("a"), ofType(listenerv3.FilterChainMatch_SAME_IP_OR_LOOPBACK)),
		chain("external", tcpProxy("b"), ofType(listenerv3.FilterChainMatch_EXTERNAL)),
	))})
	wantChain(t, s, from("127.0.0.1", 1234), "local")
	wantChain(t, s, from(vipA, 1234), "local") // the peer is the destination's own IP
	wantChain(t, s, from("10.244.1.5", 1234), "external")
}

// A listener that does not restore the original destination sees a redirected connection's
// destination as its own address: the VIP chains never match.
func TestOriginalDestination(t *testing.T) {
	vipChain := chains(chain("cap_tcp_a_9000", tcpProxy("a"), prefix(vipA, 32), dport(9000)))
	s := world([]*listenerv3.Listener{listener("capture", "127.0.0.1", 18001, inspectors(true, true), vipChain, defaultChain(passthroughChain))})
	out := wantChain(t, s, tcpTo(vipA, 9000), "passthrough")
	if out.Destination.String() != "127.0.0.1:18001" {
		t.Errorf("destination %s, want the listener's own 127.0.0.1:18001", out.Destination)
	}

	s = world([]*listenerv3.Listener{capture(vipChain, defaultChain(passthroughChain))})
	out = wantChain(t, s, tcpTo(vipA, 9000), "cap_tcp_a_9000")
	if out.Destination.String() != vipA+":9000" || out.Verdict != xdssim.Forwarded {
		t.Errorf("with use_original_dst the VIP chain forwards: %s", out)
	}
}

// A server-first client sends nothing: the inspectors time out, and the listener closes or
// continues with nothing detected, or waits forever when the timeout is 0.
func TestServerFirst(t *testing.T) {
	c := tcpTo(vipA, 3306)
	c.ServerFirst = true
	for name, tc := range map[string]struct {
		timeout  *durationpb.Duration
		cont     bool
		verdict  xdssim.Verdict
		filterEr bool
	}{
		"continue": {durationpb.New(time.Second), true, xdssim.Passthrough, false},
		"close":    {durationpb.New(time.Second), false, xdssim.Closed, true},
		"forever":  {durationpb.New(0), true, xdssim.Stalled, true},
	} {
		t.Run(name, func(t *testing.T) {
			l := capture(defaultChain(passthroughChain), chains(chain("tls", tcpProxy("a"), transport("tls"))))
			l.ListenerFiltersTimeout, l.ContinueOnListenerFiltersTimeout = tc.timeout, tc.cont
			out := world([]*listenerv3.Listener{l}).Dial(c)
			if out.Verdict != tc.verdict || errors.Is(out.Err, xdssim.ErrListenerFilters) != tc.filterEr {
				t.Errorf("verdict %s err %v, want %s (listener-filter error %t)", out.Verdict, out.Err, tc.verdict, tc.filterEr)
			}
		})
	}
}

// A late first byte: the inspectors' one timer (listener_filters_timeout) fires before a pooled
// HTTP client's first request, and the connection continues as raw_buffer with no application
// protocol: a chain that needs http_inspector's verdict is missed. Within the timeout, or with no
// timeout, the request is inspected once it comes.
func TestLateFirstByte(t *testing.T) {
	for name, tc := range map[string]struct {
		after   time.Duration
		timeout *durationpb.Duration
		cont    bool
		chain   string
		verdict xdssim.Verdict
		waited  time.Duration
	}{
		"prompt":              {0, durationpb.New(time.Second), true, "h1", xdssim.Forwarded, 0},
		"within the timeout":  {500 * time.Millisecond, durationpb.New(time.Second), true, "h1", xdssim.Forwarded, 500 * time.Millisecond},
		"after the timeout":   {3 * time.Second, durationpb.New(time.Second), true, "passthrough", xdssim.Passthrough, time.Second},
		"at the timeout":      {time.Second, durationpb.New(time.Second), true, "passthrough", xdssim.Passthrough, time.Second},
		"closed at timeout":   {3 * time.Second, durationpb.New(time.Second), false, "", xdssim.Closed, time.Second},
		"no timeout":          {time.Minute, durationpb.New(0), true, "h1", xdssim.Forwarded, time.Minute},
		"Envoy's default 15s": {3 * time.Second, nil, true, "h1", xdssim.Forwarded, 3 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			l := capture(defaultChain(passthroughChain), chains(chain("h1", tcpProxy("a"), appProtocols("http/1.1"))))
			l.ListenerFiltersTimeout, l.ContinueOnListenerFiltersTimeout = tc.timeout, tc.cont
			c := httpTo(vipA, 8080, "a")
			c.FirstBytesAfter = tc.after
			out := world([]*listenerv3.Listener{l}).Dial(c)
			if out.Chain != tc.chain || out.Verdict != tc.verdict || out.FiltersWaited != tc.waited {
				t.Errorf("chain %q verdict %s after %s, want %q %s after %s: %s", out.Chain, out.Verdict, out.FiltersWaited,
					tc.chain, tc.verdict, tc.waited, out)
			}
			if late := tc.after >= time.Second && tc.timeout.AsDuration() > 0; late && len(out.AppProtocols) > 0 {
				t.Errorf("the timer fired first, yet %v was detected", out.AppProtocols)
			}
		})
	}
}

// filter_disabled skips an inspector for a destination port range, so a server-first client
// there is not held for listener_filters_timeout. It sees the port as it is at the filter's turn:
// after an original_dst filter listed before it, the dialled port; with use_original_dst, whose
// original_dst Envoy appends after the configured filters, the listener's own port.
func TestFilterDisabled(t *testing.T) {
	mysql := &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_DestinationPortRange{
		DestinationPortRange: &typev3.Int32Range{Start: 3306, End: 3307}}}
	disabledOn := func(p *listenerv3.ListenerFilterChainMatchPredicate) listenerOpt {
		return func(l *listenerv3.Listener) {
			for _, f := range l.ListenerFilters {
				f.FilterDisabled = p
			}
		}
	}
	explicitOriginalDst := func(l *listenerv3.Listener) {
		l.ListenerFilters = append([]*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst"}}, l.ListenerFilters...)
	}
	tcpChains := chains(chain("mysql", tcpProxy("a"), prefix(vipA, 32), dport(3306)), chain("other", tcpProxy("b"), prefix(vipA, 32), dport(3307)))
	timeout := func(l *listenerv3.Listener) {
		l.ListenerFiltersTimeout, l.ContinueOnListenerFiltersTimeout = durationpb.New(time.Second), true
	}
	serverFirst := func(port uint32) xdssim.Conn {
		c := tcpTo(vipA, port)
		c.ServerFirst = true
		return c
	}
	for name, tc := range map[string]struct {
		l      *listenerv3.Listener
		port   uint32
		waited time.Duration
	}{
		"original_dst first, disabled port": {listener("capture", "127.0.0.1", 18001, explicitOriginalDst, inspectors(true, true), disabledOn(mysql), tcpChains, timeout), 3306, 0},
		"original_dst first, other port":    {listener("capture", "127.0.0.1", 18001, explicitOriginalDst, inspectors(true, true), disabledOn(mysql), tcpChains, timeout), 3307, time.Second},
		"use_original_dst: its own port":    {capture(disabledOn(mysql), tcpChains, timeout), 3306, time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			out := world([]*listenerv3.Listener{tc.l}).Dial(serverFirst(tc.port))
			if out.Verdict != xdssim.Forwarded || out.FiltersWaited != tc.waited {
				t.Errorf("verdict %s after %s, want Forwarded after %s: %s", out.Verdict, out.FiltersWaited, tc.waited, out)
			}
		})
	}
	// With the inspectors off, nothing is detected: TLS is raw_buffer to the chains.
	l := listener("capture", "127.0.0.1", 18001, explicitOriginalDst, inspectors(true, true), disabledOn(mysql),
		chains(chain("tls", tcpProxy("a"), dport(3306), transport("tls")), chain("raw", tcpProxy("b"), dport(3306), transport("raw_buffer"))))
	wantChain(t, world([]*listenerv3.Listener{l}), tlsTo(vipA, 3306, "db.test"), "raw")
}

// A server-first client on an HTTP connection manager's chain: the codec waits for a request that
// never comes, and the client for a greeting; nothing is answered.
func TestServerFirstOnHTTP(t *testing.T) {
	l := capture(chains(chain("http", httpManager("routes"))))
	l.ListenerFiltersTimeout, l.ContinueOnListenerFiltersTimeout = durationpb.New(time.Second), true
	c := tcpTo(vipA, 8080)
	c.ServerFirst = true
	out := world([]*listenerv3.Listener{l}, routeConfig("routes", vhost("all", []string{"*"}, toCluster("", "a", byPrefix("/"))))).Dial(c)
	if out.Verdict != xdssim.Stalled || !errors.Is(out.Err, xdssim.ErrAwaitsRequest) || out.Response != nil {
		t.Errorf("a server-first client on the HCM: %s; want Stalled, nothing answered", out)
	}
}

// ---- Envoy's rejections: the Check gate and its negative controls ----

func TestCheck(t *testing.T) {
	good := capture(chains(
		chain("a", tcpProxy("a"), prefix(vipA, 32), dport(9000)),
		chain("b", tcpProxy("b"), prefix(vipB, 32), dport(9000)),
		chain("sni", tcpProxy("b"), serverNames("x.test", "*.y.test")),
	), defaultChain(passthroughChain))
	if err := xdssim.Check(good); err != nil {
		t.Fatalf("a listener with disjoint chains: %v", err)
	}
	for name, tc := range map[string]struct {
		chains []*listenerv3.FilterChain
		want   string
	}{
		"identical matches": {[]*listenerv3.FilterChain{
			chain("one", tcpProxy("a"), prefix(vipA, 32), dport(9000)),
			chain("two", tcpProxy("b"), prefix(vipA, 32), dport(9000)),
		}, `filter chain "two" has the same matching rules defined as "one"`},
		"overlapping server names": {[]*listenerv3.FilterChain{
			chain("one", tcpProxy("a"), serverNames("a.test", "b.test")),
			chain("two", tcpProxy("b"), serverNames("b.test", "c.test")),
		}, `filter chains "one" and "two" have overlapping matching rules`},
		"overlap through an unmasked range": {[]*listenerv3.FilterChain{
			chain("one", tcpProxy("a"), prefix("10.0.0.0", 8)),
			chain("two", tcpProxy("b"), prefix("10.1.2.3", 8)),
		}, "overlapping matching rules"},
		"partial wildcard": {[]*listenerv3.FilterChain{
			chain("one", tcpProxy("a"), serverNames("api*.test")),
		}, `server name "api*.test" is a partial wildcard`},
		"no chain at all": {nil, "no filter chains specified"},
	} {
		t.Run(name, func(t *testing.T) {
			l := capture(chains(tc.chains...))
			err := xdssim.Check(l)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error containing %q", err, tc.want)
			}
			// Envoy never activates such a listener: nothing is accepted through it.
			out := world([]*listenerv3.Listener{l}).Dial(tcpTo(vipA, 9000))
			if out.Verdict != xdssim.Closed || !errors.Is(out.Err, xdssim.ErrRejected) {
				t.Errorf("a dial through a rejected listener: %s", out)
			}
		})
	}
}

func TestCheckRoutes(t *testing.T) {
	ok := routeConfig("r", vhost("one", []string{"a.test", "*.b.test"}), vhost("two", []string{"A.test:80", "*"}))
	if err := xdssim.CheckRoutes(ok); err != nil {
		t.Fatalf("distinct domains: %v", err)
	}
	big := strings.Repeat("x", 4097)
	for name, tc := range map[string]struct {
		rc   *routev3.RouteConfiguration
		want string
	}{
		"duplicate domain, any case": {routeConfig("r", vhost("one", []string{"A.test"}), vhost("two", []string{"a.TEST"})),
			`domain "a.TEST" is in virtual hosts "one" and "two"`},
		"two wildcards": {routeConfig("r", vhost("one", []string{"*"}), vhost("two", []string{"*"})), `are both the wildcard "*"`},
		"body too long": {routeConfig("r", vhost("one", []string{"*"}, direct("big", 421, big))), "the direct response body is 4097 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := xdssim.CheckRoutes(tc.rc); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckRoutes = %v, want an error containing %q", err, tc.want)
			}
			s := world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("r"))))}, tc.rc)
			if out := s.Dial(httpTo(vipA, 80, "a.test")); !errors.Is(out.Err, xdssim.ErrRejected) {
				t.Errorf("a request through a rejected route configuration: %s", out)
			}
		})
	}
}

// ---- HTTP: virtual hosts, routes, actions ----

// Virtual hosts: exact, then suffix wildcards longest first, then prefix wildcards, then "*";
// case-insensitive; the Host's port is part of the name.
func TestVirtualHosts(t *testing.T) {
	all := func(name string, domains ...string) *routev3.VirtualHost {
		return vhost(name, domains, toCluster("", "a", byPrefix("/")))
	}
	rc := routeConfig("routes",
		all("exact", "payments.shop.aether.internal:8080", "Payments.Shop"),
		all("suffix", "*.shop.aether.internal"),
		all("longer_suffix", "*-v2.shop.aether.internal"),
		all("prefix", "payments.*"),
		all("star", "*"),
	)
	s := world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("routes"))))}, rc)
	for host, want := range map[string]string{
		"payments.shop.aether.internal:8080": "exact",
		"PAYMENTS.SHOP":                      "exact",
		"payments.shop.aether.internal":      "suffix", // suffix wildcards beat prefix ones
		"orders-v2.shop.aether.internal":     "longer_suffix",
		"payments.other":                     "prefix",
		"payments.shop.aether.internal:9090": "prefix", // the port is part of the host: no suffix match
		".shop.aether.internal":              "star",   // a wildcard never matches the whole host
		"elsewhere":                          "star",
	} {
		if out := s.Dial(httpTo(vipA, 80, host)); out.VirtualHost != want || out.Verdict != xdssim.Forwarded {
			t.Errorf("Host %q: virtual host %q, want %q: %s", host, out.VirtualHost, want, out)
		}
	}

	// ignore_port_in_host_matching, and the HCM's strip_any_host_port, drop the port first.
	rc.IgnorePortInHostMatching = true
	s = world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("routes"))))}, rc)
	if out := s.Dial(httpTo(vipA, 80, "payments.shop:9999")); out.VirtualHost != "exact" {
		t.Errorf("ignore_port_in_host_matching: %s", out)
	}
	rc.IgnorePortInHostMatching = false
	strip := func(h *hcmv3.HttpConnectionManager) {
		h.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true}
	}
	s = world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("routes", strip))))}, rc)
	if out := s.Dial(httpTo(vipA, 80, "payments.shop:9999")); out.VirtualHost != "exact" {
		t.Errorf("strip_any_host_port: %s", out)
	}

	// No virtual host: Envoy's own 404.
	s = world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("routes"))))}, routeConfig("routes", all("exact", "a.test")))
	if out := s.Dial(httpTo(vipA, 80, "b.test")); out.Verdict != xdssim.Answered || out.Response.Status != 404 || !errors.Is(out.Err, xdssim.ErrNoVirtualHost) {
		t.Errorf("no virtual host: %s", out)
	}
}

// Routes: the first that matches, in order; the path ignores the query; headers and
// case_sensitive narrow a match.
func TestRouteOrder(t *testing.T) {
	caseless := byPrefix("/ci")
	caseless.CaseSensitive = wrapperspb.Bool(false)
	canary := byPrefix("/")
	canary.Headers = []*routev3.HeaderMatcher{{Name: "x-canary", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "1"}}}}}
	rc := routeConfig("routes", vhost("all", []string{"*"},
		toCluster("exact", "b", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/exact"}}),
		toCluster("api", "a", byPrefix("/api")),
		toCluster("api_v2", "b", byPrefix("/api/v2")), // shadowed by "api"
		toCluster("canary", "b", canary),
		toCluster("ci", "b", caseless),
		toCluster("rest", "a", byPrefix("/")),
	))
	s := world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("routes"))))}, rc)
	for _, tc := range []struct {
		path    string
		headers map[string]string
		route   string
		cluster string
	}{
		{"/exact?debug=1", nil, "exact", "b"},
		{"/exact/more", nil, "rest", "a"},
		{"/api/v2/x", nil, "api", "a"},
		{"/x", map[string]string{"X-Canary": "1"}, "canary", "b"},
		{"/x", map[string]string{"X-Canary": "2"}, "rest", "a"},
		{"/CI/Z", nil, "ci", "b"},
		{"/x", nil, "rest", "a"},
	} {
		c := httpTo(vipA, 80, "any")
		c.HTTP.Path, c.HTTP.Headers = tc.path, tc.headers
		out := s.Dial(c)
		if out.Route != tc.route || len(out.Targets) != 1 || out.Targets[0].Cluster != tc.cluster {
			t.Errorf("%s %v: route %q, want %q to %s: %s", tc.path, tc.headers, out.Route, tc.route, tc.cluster, out)
		}
	}

	s = world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("routes"))))},
		routeConfig("routes", vhost("all", []string{"*"}, toCluster("api", "a", byPrefix("/api")))))
	c := httpTo(vipA, 80, "any")
	c.HTTP.Path = "/other"
	if out := s.Dial(c); out.Verdict != xdssim.Answered || out.Response.Status != 404 || !errors.Is(out.Err, xdssim.ErrNoRoute) {
		t.Errorf("no route: %s", out)
	}
}

// The request the HCM routes: an HTTP/1 absolute-form target (a client using the proxy port as
// its HTTP proxy) brings its own authority, unless allow_absolute_url is off; a Host an
// authority cannot carry is Envoy's 400, a path that is not relative its 404.
func TestRequestTarget(t *testing.T) {
	rc := routeConfig("routes",
		vhost("by_url", []string{"payments.shop:8080"}, toCluster("", "a", byPrefix("/v1"))),
		vhost("by_header", []string{"proxy.local"}, toCluster("", "b", byPrefix("/"))))
	absolute := xdssim.Conn{Listener: "capture", DstIP: vipA, DstPort: 18081,
		HTTP: &xdssim.Request{Host: "proxy.local", Path: "http://payments.shop:8080/v1/pay?x=1"}}

	s := world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("routes"))))}, rc)
	if out := s.Dial(absolute); out.VirtualHost != "by_url" || out.Verdict != xdssim.Forwarded {
		t.Errorf("absolute-form target: %s", out)
	}
	noAbsolute := func(h *hcmv3.HttpConnectionManager) {
		h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AllowAbsoluteUrl: wrapperspb.Bool(false)}
	}
	s2 := world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("routes", noAbsolute))))}, rc)
	if out := s2.Dial(absolute); out.Verdict != xdssim.Answered || out.Response.Status != 404 || !errors.Is(out.Err, xdssim.ErrBadRequest) {
		t.Errorf("allow_absolute_url false: the path is not relative, so 404: %s", out)
	}
	for host, status := range map[string]int{"pay ments.shop": 400, "": 400} {
		if out := s.Dial(httpTo(vipA, 80, host)); out.Verdict != xdssim.Answered || out.Response.Status != status || !errors.Is(out.Err, xdssim.ErrBadRequest) {
			t.Errorf("Host %q: want Envoy's %d: %s", host, status, out)
		}
	}
}

func TestWeightedClusters(t *testing.T) {
	weighted := func(pairs ...any) *routev3.Route {
		wc := &routev3.WeightedCluster{}
		for i := 0; i < len(pairs); i += 2 {
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: pairs[i].(string), Weight: wrapperspb.UInt32(uint32(pairs[i+1].(int)))})
		}
		return &routev3.Route{Match: byPrefix("/"), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}}}}
	}
	dial := func(route *routev3.Route) xdssim.Outcome {
		s := world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("routes"))))},
			routeConfig("routes", vhost("all", []string{"*"}, route)))
		return s.Dial(httpTo(vipA, 80, "any"))
	}

	out := dial(weighted("a", 80, "b", 20))
	if out.Verdict != xdssim.Forwarded || out.Err != nil || len(out.Targets) != 2 ||
		out.Targets[0].Cluster != "a" || out.Targets[0].Weight != 80 || out.Targets[1].Cluster != "b" || out.Targets[1].Weight != 20 {
		t.Errorf("a 80 / b 20: %s", out)
	}
	// A weight-0 cluster is never chosen: that it is missing does not matter.
	if out := dial(weighted("a", 1, "missing", 0)); out.Verdict != xdssim.Forwarded || out.Err != nil {
		t.Errorf("a missing cluster of weight 0: %s", out)
	}
	// A chosen one that is missing is named, even when another works.
	if out := dial(weighted("a", 1, "missing", 1)); out.Verdict != xdssim.Forwarded || !errors.Is(out.Err, xdssim.ErrNoCluster) {
		t.Errorf("a missing cluster of weight 1: %s", out)
	}

	s := world([]*listenerv3.Listener{capture(chains(chain("tcp", tcpProxyWeighted("a", 3, "b", 1))))})
	out = s.Dial(tcpTo(vipA, 9000))
	if out.Verdict != xdssim.Forwarded || len(out.Targets) != 2 || out.Targets[0].Weight != 3 || out.Targets[1].Weight != 1 {
		t.Errorf("tcp_proxy a 3 / b 1: %s", out)
	}
}

// A direct response carries its status, body and the response headers of route, virtual host
// and route configuration, by their append actions.
func TestDirectResponse(t *testing.T) {
	overwrite := header("x-aether-error", "port-not-declared")
	overwrite.AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	ifAbsent := header("x-aether-error", "from-the-configuration")
	ifAbsent.AppendAction = corev3.HeaderValueOption_ADD_IF_ABSENT
	rc := routeConfig("routes", vhost("payments", []string{"payments.shop:1234"}, direct("misdirected", 421, "port 1234 is not declared.\n", overwrite)))
	rc.ResponseHeadersToAdd = []*corev3.HeaderValueOption{ifAbsent, header("x-mesh", "aether")}
	s := world([]*listenerv3.Listener{capture(chains(chain("http", httpManager("routes"))))}, rc)

	out := s.Dial(httpTo(vipA, 80, "payments.shop:1234"))
	r := out.Response
	if out.Verdict != xdssim.Answered || out.Err != nil || r == nil || r.Local || r.Status != 421 ||
		r.Body != "port 1234 is not declared.\n" || len(r.Headers["x-aether-error"]) != 1 ||
		r.Header("x-aether-error") != "port-not-declared" || r.Header("X-Mesh") != "aether" {
		t.Errorf("the 421 direct response: %s", out)
	}
}

// What is missing is an error outcome, never a panic.
func TestMissingResources(t *testing.T) {
	res := base()
	res.Clusters = append(res.Clusters, edsCluster("orphan", "nobody:80"))
	res.Listeners = []*listenerv3.Listener{
		capture(chains(
			chain("tcp_gone", tcpProxy("gone"), dport(9000)),
			chain("tcp_orphan", tcpProxy("orphan"), dport(9001)),
			chain("http_nords", httpManager("absent"), dport(9002)),
			chain("http", httpManager("routes")),
		)),
	}
	res.Routes = []*routev3.RouteConfiguration{routeConfig("routes", vhost("all", []string{"*"}, toCluster("", "gone", byPrefix("/"))))}
	s := xdssim.New(res)

	for name, tc := range map[string]struct {
		conn    xdssim.Conn
		verdict xdssim.Verdict
		err     error
	}{
		"no listener":           {xdssim.Conn{Listener: "nope", DstIP: vipA, DstPort: 80}, xdssim.Closed, xdssim.ErrNoListener},
		"tcp_proxy, no cluster": {tcpTo(vipA, 9000), xdssim.Closed, xdssim.ErrNoCluster},
		"tcp_proxy, no CLA":     {tcpTo(vipA, 9001), xdssim.Closed, xdssim.ErrNoLoadAssignment},
		"HCM, no route config":  {httpTo(vipA, 9002, "a"), xdssim.Closed, xdssim.ErrNoRouteConfig},
		"route, no cluster":     {httpTo(vipA, 80, "a"), xdssim.Answered, xdssim.ErrNoCluster},
		"raw bytes on the HCM":  {tcpTo(vipA, 80), xdssim.Answered, xdssim.ErrNotHTTP},
		"TLS bytes on the HCM":  {tlsTo(vipA, 443, "a"), xdssim.Answered, xdssim.ErrNotHTTP},
	} {
		t.Run(name, func(t *testing.T) {
			out := s.Dial(tc.conn)
			if out.Verdict != tc.verdict || !errors.Is(out.Err, tc.err) {
				t.Errorf("verdict %s, err %v; want %s and %v\n%s", out.Verdict, out.Err, tc.verdict, tc.err, out)
			}
		})
	}
	if out := s.Dial(httpTo(vipA, 80, "a")); out.Response == nil || out.Response.Status != 503 || !out.Response.Local {
		t.Errorf("a missing cluster behind a route is Envoy's 503: %s", out)
	}
}

// ---- Clusters and endpoints ----

// Which endpoints receive traffic: healthy ones (HEALTHY, UNKNOWN) while enough are; all of a
// priority's hosts (DRAINING included) in panic; lower priorities for what the top one cannot
// carry; degraded ones when no healthy one is left.
func TestEndpointHealth(t *testing.T) {
	const (
		healthy   = corev3.HealthStatus_HEALTHY
		unknown   = corev3.HealthStatus_UNKNOWN
		unhealthy = corev3.HealthStatus_UNHEALTHY
		draining  = corev3.HealthStatus_DRAINING
		timeout   = corev3.HealthStatus_TIMEOUT
		degraded  = corev3.HealthStatus_DEGRADED
	)
	p0 := func(hs ...corev3.HealthStatus) *endpointv3.LocalityLbEndpoints { return level(0, hs...) }
	p1 := func(hs ...corev3.HealthStatus) *endpointv3.LocalityLbEndpoints { return level(1, hs...) }
	for name, tc := range map[string]struct {
		localities []*endpointv3.LocalityLbEndpoints
		panicAt    *float64
		receiving  []string // "<priority>.<index>" of the endpoints that receive traffic
	}{
		"unhealthy, draining and timeout excluded": {[]*endpointv3.LocalityLbEndpoints{p0(healthy, unknown, healthy, healthy, unhealthy, draining, timeout)},
			nil, []string{"0.0", "0.1", "0.2", "0.3"}},
		"panic: under half healthy, every host": {[]*endpointv3.LocalityLbEndpoints{p0(healthy, unhealthy, unhealthy, draining)},
			nil, []string{"0.0", "0.1", "0.2", "0.3"}},
		"panic disabled": {[]*endpointv3.LocalityLbEndpoints{p0(healthy, unhealthy, unhealthy, draining)},
			new(0.0), []string{"0.0"}},
		"all draining: total panic sends to them": {[]*endpointv3.LocalityLbEndpoints{p0(draining, draining)},
			nil, []string{"0.0", "0.1"}},
		"spill-over to priority 1": {[]*endpointv3.LocalityLbEndpoints{p0(healthy, unhealthy), p1(healthy, healthy)},
			nil, []string{"0.0", "1.0", "1.1"}},
		"no spill-over when priority 0 is healthy": {[]*endpointv3.LocalityLbEndpoints{p0(healthy, healthy), p1(healthy)},
			nil, []string{"0.0", "0.1"}},
		"degraded when no healthy one": {[]*endpointv3.LocalityLbEndpoints{p0(degraded, unhealthy)},
			nil, []string{"0.0"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := edsCluster("svc", "svc:80")
			if tc.panicAt != nil {
				c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: *tc.panicAt}}
			}
			res := xds.Resources{Clusters: []*clusterv3.Cluster{c}, Endpoints: []*endpointv3.ClusterLoadAssignment{cla("svc:80", tc.localities...)},
				Listeners: []*listenerv3.Listener{capture(chains(chain("tcp", tcpProxy("svc"))))}}
			out := xdssim.New(res).Dial(tcpTo(vipA, 9000))
			var got []string
			for _, e := range out.Targets[0].Receiving() {
				got = append(got, e.Address[len("10.0."):])
			}
			if !slices.Equal(got, tc.receiving) || out.Verdict != xdssim.Forwarded {
				t.Errorf("receiving %v, want %v: %s", got, tc.receiving, out)
			}
		})
	}

	t.Run("locality weight 0 receives nothing", func(t *testing.T) {
		c := edsCluster("svc", "svc:80")
		c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
			LocalityWeightedLbConfig: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig{}}}
		res := xds.Resources{Clusters: []*clusterv3.Cluster{c},
			Endpoints: []*endpointv3.ClusterLoadAssignment{cla("svc:80",
				locality("near", 0, 5, ep("10.0.0.1", 18008, healthy)), locality("far", 0, 0, ep("10.0.0.2", 18008, healthy)))},
			Listeners: []*listenerv3.Listener{capture(chains(chain("tcp", tcpProxy("svc"))))}}
		out := xdssim.New(res).Dial(tcpTo(vipA, 9000))
		if r := out.Targets[0].Receiving(); len(r) != 1 || r[0].Address != "10.0.0.1" {
			t.Errorf("receiving %v: %s", r, out)
		}
	})
	t.Run("no endpoint: closed", func(t *testing.T) {
		res := xds.Resources{Clusters: []*clusterv3.Cluster{staticCluster("blackhole", "", 0)},
			Listeners: []*listenerv3.Listener{capture(chains(chain("cap_tcp_blackhole", tcpProxy("blackhole"), dport(18082))))}}
		out := xdssim.New(res).Dial(tcpTo(vipA, 18082))
		if out.Verdict != xdssim.Closed || !errors.Is(out.Err, xdssim.ErrNoHealthyUpstream) {
			t.Errorf("the blackhole: %s", out)
		}
	})
}

// level is one locality at priority p with an endpoint per health, 10.0.<p>.<i>.
func level(p uint32, hs ...corev3.HealthStatus) *endpointv3.LocalityLbEndpoints {
	eps := make([]*endpointv3.LbEndpoint, len(hs))
	for i, h := range hs {
		eps[i] = ep("10.0."+itoa(p)+"."+itoa(uint32(i)), 18008, h)
	}
	return locality("z"+itoa(p), p, 1, eps...)
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// The upstream TLS context: SNI, SAN pin, SDS names; the ALPN the ClientHello carries is the
// context's, else the HTTP pool's fallback (h2 for an HTTP/2 cluster), and none for tcp_proxy.
func TestUpstreamTLS(t *testing.T) {
	const (
		source = "spiffe://aether.internal/ns/shop/sa/web"
		dest   = "spiffe://aether.internal/ns/shop/sa/payments"
	)
	ctx := &tlsv3.UpstreamTlsContext{Sni: "9000", CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: source}},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
			DefaultValidationContext: &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
				SanType: tlsv3.SubjectAltNameMatcher_URI, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: dest}}}}},
			ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "spiffe://aether.internal"},
		}},
	}}
	c := edsCluster("a", "a.svc:80")
	c.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pack(ctx)}}
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": pack(&upstreamhttpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}}})}
	res := base()
	res.Clusters[0] = c
	res.Listeners = []*listenerv3.Listener{capture(chains(chain("tcp", tcpProxy("a"), dport(9000)), chain("http", httpManager("routes"))))}
	res.Routes = []*routev3.RouteConfiguration{routeConfig("routes", vhost("all", []string{"*"}, toCluster("", "a", byPrefix("/"))))}
	s := xdssim.New(res)

	tcp := s.Dial(tcpTo(vipA, 9000)).Targets[0].TLS
	want := []xdssim.SAN{{Type: "URI", Match: "exact", Value: dest}}
	if tcp == nil || tcp.SNI != "9000" || len(tcp.ALPN) != 0 || !slices.Equal(tcp.SANs, want) ||
		!slices.Equal(tcp.Certificates, []string{source}) || tcp.TrustBundle != "spiffe://aether.internal" {
		t.Errorf("tcp_proxy's ClientHello: %+v", tcp)
	}
	out := s.Dial(httpTo(vipA, 80, "a"))
	if h := out.Targets[0]; h.TLS == nil || !slices.Equal(h.TLS.ALPN, []string{"h2"}) || !slices.Equal(h.UpstreamHTTP, []string{"h2"}) {
		t.Errorf("the router's ClientHello to an HTTP/2 cluster offers h2: %s", out)
	}
}

// ---- The destination: the inbound listener ----

// On the destination, the inbound listener picks the chain by the SNI the mesh hop carries: the
// port's chain, or the floor (the default chain) when there is no SNI or an unknown one.
func TestArrive(t *testing.T) {
	const pod = "shop/payments-0"
	tlsSocket := &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pack(
		&tlsv3.DownstreamTlsContext{RequireClientCertificate: wrapperspb.Bool(true), CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "spiffe://aether.internal/ns/shop/sa/payments"}}}})}}
	withTLS := func(fc *listenerv3.FilterChain) *listenerv3.FilterChain { fc.TransportSocket = tlsSocket; return fc }
	inbound := listener(xds.InboundListener(pod), "0.0.0.0", 18008, inspectors(true, false),
		chains(
			withTLS(chain(xds.InboundHTTPChain(8080), httpManager("inbound"), serverNames("8080"))),
			withTLS(chain(xds.InboundTCPChain(9000), tcpProxy(xds.AppCluster(pod, 9000)), serverNames("9000"))),
		),
		defaultChain(withTLS(chain(xds.InboundFloorChain, tcpProxy(xds.AppCluster(pod, 5432))))))
	res := xds.Resources{
		Listeners: []*listenerv3.Listener{inbound},
		Clusters: []*clusterv3.Cluster{staticCluster(xds.AppCluster(pod, 8080), "127.0.0.1", 8080),
			staticCluster(xds.AppCluster(pod, 9000), "127.0.0.1", 9000), staticCluster(xds.AppCluster(pod, 5432), "127.0.0.1", 5432)},
		Routes: []*routev3.RouteConfiguration{routeConfig("inbound", vhost("app", []string{"*"}, toCluster("", xds.AppCluster(pod, 8080), byPrefix("/"))))},
	}
	s := xdssim.New(res)
	for _, tc := range []struct {
		sni   string
		alpn  []string
		req   *xdssim.Request
		chain string
		port  uint32
	}{
		{"9000", nil, nil, xds.InboundTCPChain(9000), 9000},
		{"", nil, nil, xds.InboundFloorChain, 5432},
		{"7777", nil, nil, xds.InboundFloorChain, 5432},
		{"8080", []string{"h2"}, &xdssim.Request{Host: "payments.shop.aether.internal:8080", HTTP2: true}, xds.InboundHTTPChain(8080), 8080},
	} {
		out := s.Arrive(xds.InboundListener(pod), tc.sni, tc.alpn, tc.req)
		if out.Chain != tc.chain || out.Verdict != xdssim.Forwarded || out.ChainTLS == nil || !out.ChainTLS.RequireClientCertificate {
			t.Errorf("SNI %q: chain %q, want %q (forwarded, mTLS): %s", tc.sni, out.Chain, tc.chain, out)
			continue
		}
		if r := out.Targets[0].Receiving(); len(r) != 1 || r[0].Port != tc.port {
			t.Errorf("SNI %q reaches %v, want 127.0.0.1:%d: %s", tc.sni, r, tc.port, out)
		}
	}
	// Plaintext on a chain that terminates TLS fails the handshake.
	out := s.Dial(xdssim.Conn{Listener: xds.InboundListener(pod), DstIP: "10.1.0.1", DstPort: 18008})
	if out.Verdict != xdssim.Closed || !errors.Is(out.Err, xdssim.ErrHandshake) {
		t.Errorf("plaintext to the inbound listener: %s", out)
	}
}

// ---- Agrees: the comparison with resolve, and its negative controls ----

func TestAgrees(t *testing.T) {
	const (
		fqdn   = "payments.shop.aether.internal"
		source = "spiffe://aether.internal/ns/shop/sa/web"
	)
	httpCluster := xds.SourceCluster(xds.HTTPCluster(fqdn, 8080), source)
	tcpCluster := xds.SourceCluster(xds.TCPCluster(fqdn, 9000), source)
	notDeclared := header(resolve.ErrorHeader, string(resolve.PortNotDeclared))
	res := xds.Resources{
		Clusters: []*clusterv3.Cluster{edsCluster(httpCluster, xds.LoadAssignment(fqdn, 8080)), edsCluster(tcpCluster, xds.LoadAssignment(fqdn, 9000)),
			originalDstCluster(xds.PassthroughCluster), staticCluster(xds.BlackholeCluster, "", 0)},
		Endpoints: []*endpointv3.ClusterLoadAssignment{
			cla(xds.LoadAssignment(fqdn, 8080), locality("z", 0, 1, ep("10.1.0.1", 18008, corev3.HealthStatus_HEALTHY))),
			cla(xds.LoadAssignment(fqdn, 9000), locality("z", 0, 1, ep("10.1.0.1", 18008, corev3.HealthStatus_HEALTHY))),
		},
		Listeners: []*listenerv3.Listener{capture(chains(
			chain(xds.CaptureTCPPortChain("payments.shop", 9000), tcpProxy(tcpCluster), prefix(vipA, 32), dport(9000)),
			chain(xds.CaptureTCPPortChain("payments.shop", 9001), tcpProxy("deleted"), prefix(vipA, 32), dport(9001)),
			chain(xds.CaptureBlackholeChain, tcpProxy(xds.BlackholeCluster), dport(18082)),
			chain(xds.CaptureHTTPChain, httpManager(xds.CaptureRoutes(source)), appProtocols("http/1.1", "h2c")),
		), defaultChain(chain(xds.CapturePassthroughChain, tcpProxy(xds.PassthroughCluster))))},
		Routes: []*routev3.RouteConfiguration{routeConfig(xds.CaptureRoutes(source),
			vhost("payments:8080", []string{fqdn + ":8080"}, toCluster("", httpCluster, byPrefix("/"))),
			vhost("payments:1234", []string{fqdn + ":1234"}, direct("", 421, "not declared.\n", notDeclared)))},
	}
	s := xdssim.New(res)
	reaches := func(port int32, p meshv1alpha1.Protocol) resolve.Result {
		return resolve.Result{Port: port, Protocol: p, Outcome: resolve.Reaches}
	}
	misdirected := resolve.Result{Protocol: meshv1alpha1.ProtocolHTTP, Outcome: resolve.Misdirected, Error: resolve.PortNotDeclared, Body: "not declared.\n"}
	refused := resolve.Result{Outcome: resolve.Refused}

	for name, tc := range map[string]struct {
		conn  xdssim.Conn
		want  resolve.Result
		agree bool
	}{
		"HTTP reaches 8080":             {httpTo(vipA, 18081, fqdn+":8080"), reaches(8080, meshv1alpha1.ProtocolHTTP), true},
		"TCP reaches 9000":              {tcpTo(vipA, 9000), reaches(9000, meshv1alpha1.ProtocolTCP), true},
		"421 port-not-declared":         {httpTo(vipA, 18081, fqdn+":1234"), misdirected, true},
		"refused: passthrough":          {tcpTo(vipA, 7777), refused, true},
		"wrong port":                    {httpTo(vipA, 18081, fqdn+":8080"), reaches(9090, meshv1alpha1.ProtocolHTTP), false},
		"wrong protocol":                {tcpTo(vipA, 9000), reaches(9000, meshv1alpha1.ProtocolHTTP2), false},
		"wrong x-aether-error":          {httpTo(vipA, 18081, fqdn+":1234"), resolve.Result{Outcome: resolve.Misdirected, Error: resolve.PortNotHTTP, Body: "not declared.\n"}, false},
		"wrong body":                    {httpTo(vipA, 18081, fqdn+":1234"), resolve.Result{Outcome: resolve.Misdirected, Error: resolve.PortNotDeclared, Body: "other"}, false},
		"forwarded where refused":       {tcpTo(vipA, 9000), refused, false},
		"refused where it should reach": {tcpTo(vipA, 7777), reaches(7777, meshv1alpha1.ProtocolTCP), false},
		"HostDecides is no one outcome": {httpTo(vipA, 18081, fqdn+":8080"), resolve.Result{Outcome: resolve.HostDecides}, false},
		"refused: the blackhole":        {tcpTo(vipA, 18082), refused, true},
		"closed by a missing cluster":   {tcpTo(vipA, 9001), refused, false},
		"Envoy's own 404 is no 421":     {httpTo(vipA, 18081, "unknown:1"), misdirected, false},
	} {
		t.Run(name, func(t *testing.T) {
			out := s.Dial(tc.conn)
			if err := xdssim.Agrees(out, tc.want, fqdn); (err == nil) != tc.agree {
				t.Errorf("Agrees = %v, want agreement %t\n%s", err, tc.agree, out)
			}
		})
	}
	if err := s.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}
