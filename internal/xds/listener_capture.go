// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	httpinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	originaldstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// The capture listener (proposal 037 design (d), DESIGN section 5). Envoy picks a filter chain in
// a fixed order of criteria: destination port, destination IP (longest prefix), server name,
// transport protocol, application protocols; then, when nothing matched, the default chain. It
// never backtracks: FilterChainManagerImpl::findFilterChain (envoy
// source/common/listener_manager/filter_chain_manager_impl.cc; findFilterChainForDestinationPort
// in older releases) returns the default chain, not the port-less chains, when a connection's
// destination port has chains of its own and none of them matches further down; and
// findFilterChainForDestinationIP, ...ForTransportProtocol and ...ForApplicationProtocols each
// descend only into the most specific entry that matched. So the chains are designed per level:
//
//   - cap_tcp_<svc> (<VIP>/32, port 18082) and cap_tcp_<svc>_<p> (<VIP>/32, port p, p TCP): every
//     byte to that (VIP, port) is the TCP port's. A service without a VIP gets none.
//   - cap_http (no port, no IP): HTTP, by the inspectors' verdict (raw_buffer; http/1.0,
//     http/1.1 or h2c), routed by its Host header (CaptureRoutes).
//   - cap_http_<svc>_<p> (<VIP>/32, port p, p HTTP-class, and 80 unless declared TCP): the same
//     HCM for every cleartext byte, whatever http_inspector found; cap_http_18081 (any IP) the
//     proxy port's HCM (ProxyRoutes: absolute-form requests, 404 for a host that is not the
//     mesh's) likewise. Only HTTP is served there, and the inspectors' verdict comes late or never: a pooled
//     client whose first request comes after listenerFiltersTimeout continues as raw_buffer with
//     no application protocol, and on a chain that asked for http/1.1 or h2c it fell to the
//     passthrough, which the selectorless VIP refuses.
//   - cap_http_<p>, one per port some chain above claims (port p, any IP): the same HCM. Without
//     it, HTTP to another address on p would match port p, miss every /32 of p and fall to the
//     passthrough instead of the Host rule. None on a port whose inspectors are off (below):
//     nothing would be detected there to match it.
//   - port 80 declared TCP: http://<name>/ dials port 80 and resolve answers it 421 (port 80 is
//     not HTTP), while a TCP connection to <name>:80 reaches the port. So that (VIP, 80) has three
//     chains: cap_http_<svc>_80 (HTTP bytes → the HCM), cap_tcp_<svc>_80 (other cleartext) and
//     cap_tcp_<svc>_80_tls (TLS). The transport protocol splits them: once the HCM chain claims
//     raw_buffer there, a transport-less TCP chain would no longer see cleartext.
//   - Gateway API routes (route_gateway.go): a TCPRoute weights the tcp_proxy of its port's
//     chains; a TLSRoute adds <chain>_tlsroute_<route> beside them (same VIP and port, transport
//     tls, server_names its hostnames: a more specific match than theirs), and closes theirs.
//   - without a workload-identity issuer (model.Mesh.Issuer): the same cap_tcp chains, each to the
//     blackhole cluster (tcpRouting), and no TLSRoute chain: raw TCP rides mTLS only, so a dial of
//     a mesh VIP's TCP port is closed, never passed through in plaintext (the passthrough would
//     take it without those chains). The HTTP chains are as ever.
//   - scoped mode: cap_tcp_blackhole (port 18082, any IP, any bytes): what no service claims is
//     closed, TLS included (no inspection is needed to tell it apart).
//   - the default chain: the passthrough (the original destination, untouched).
//
// The HCM chains require transport protocol raw_buffer: tls_inspector reports a TLS client's
// ALPN (often http/1.1) as its application protocols, and TLS must never reach the HCM.
//
// The inspectors (tls_inspector, http_inspector) are skipped on the destination ports whose
// chains all take any bytes (uninspectedPorts: the TCP ports no service declares HTTP-class and
// no TLSRoute reads the SNI of, and 18082 likewise): the mesh knows what those bytes are, so a
// server-first client (MySQL, SMTP), which sends nothing, is not held listenerFiltersTimeout.
// filter_disabled names destination ports only, and a port is shared by every VIP: a TCP port
// that another service declares HTTP keeps its inspectors (there TLS must be told from HTTP),
// and its server-first clients still wait the timeout.
// No two chains share a match: the TCP chains are keyed by (VIP, port), each VIP held by one
// service, the TLSRoute chains by (VIP, port, server name), each name on a port held by one
// route, and the HCM chains by port.

// captureListenerAddress is where a pod's capture listener listens, in the pod's netns: the
// nftables redirect's target for IPv4. A redirect keeps the family (on the output hook the kernel
// rewrites the destination to the loopback address of the connection's own family), so IPv6 is
// redirected to captureListenerAddressIPv6, where the listener listens too (an additional
// address) when the mesh uses IPv6 (listenerInputs.ipv6).
const (
	captureListenerAddress     = "127.0.0.1"
	captureListenerAddressIPv6 = "::1"
)

// listenerFiltersTimeout bounds how long the inspectors wait for a client's first bytes; a
// server-first protocol (the client sends nothing) then continues with what is known (TCP), and
// a late HTTP client with nothing detected (the HTTP ports' chains serve it all the same).
const listenerFiltersTimeout = time.Second

// Transport protocols as Envoy's filter chain match names them: tls_inspector sets "tls"; a
// connection no listener filter classified is "raw_buffer".
const (
	transportRawBuffer = "raw_buffer"
	transportTLS       = "tls"
)

// httpInspectorProtocols are the application protocols http_inspector reports for cleartext HTTP
// the HCM serves (codec AUTO): http/1.0 for any request line that is not HTTP/1.1, http/1.1, and
// h2c for the HTTP/2 preface. HTTP/1.0 is served (acceptHTTP10): left out, it matched no chain and
// took the passthrough, where a mesh VIP resets it.
var httpInspectorProtocols = []string{"http/1.0", "http/1.1", "h2c"}

// websocketUpgrade is the upgrade type of WebSocket (RFC 6455), as upgrade_configs names it.
const websocketUpgrade = "websocket"

// What every HCM of the node serves beyond plain requests:
//   - WebSocket (upgradeConfigs): without an upgrade_configs entry Envoy answers 403 to
//     Upgrade: websocket. No other upgrade is allowed: Envoy ignores an HTTP/1.1 Upgrade: h2c
//     itself (the codec drops it and serves the request as HTTP/1.1, which RFC 7540 allows), so an
//     h2c client keeps HTTP/1.1 unless it speaks HTTP/2 with prior knowledge, which the capture
//     chains serve as h2c. CONNECT is not allowed (the mesh is not an HTTP proxy for tunnels).
//   - extended CONNECT over HTTP/2 (http2Options, RFC 8441): every mesh hop is HTTP/2, so a
//     WebSocket crosses it as a CONNECT stream with :protocol websocket, and the receiving HCM
//     must advertise SETTINGS_ENABLE_CONNECT_PROTOCOL (allow_connect) for the sender to use it;
//     the destination's inbound HCM turns it back into an HTTP/1.1 Upgrade for the application
//     (an HTTP/2 application port gets the extended CONNECT). A capture HCM allows it too, for
//     an h2c client's own WebSocket.
//   - HTTP/1.0 on the capture HCMs (acceptHTTP10): without accept_http_10 Envoy answers 426.
//     A request without a Host gets Envoy's 400 (no default_host_for_http_10: the Host is what
//     routes). Envoy has no HTTP/1.0 upstream: it goes on as HTTP/1.1. So HTTP/1.0 to an address
//     that is not the mesh's (capture mode all) takes the catch-all to its original destination
//     as HTTP/1.1, no longer as raw bytes, and a Host-less one is answered 400 there too.
//   - gRPC-Web is plain HTTP (a POST of content-type application/grpc-web), routed as any
//     request and delivered as sent: the mesh does not translate it to gRPC (no grpc_web
//     filter), so a gRPC-Web client needs a server that speaks gRPC-Web, as without the mesh.

// upgradeConfigs are every HCM's upgrade_configs: WebSocket.
func upgradeConfigs() []*hcmv3.HttpConnectionManager_UpgradeConfig {
	return []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: websocketUpgrade}}
}

// HTTP/2's bounds on one connection, on every HCM and every HTTP/2 upstream, stated rather than
// left to Envoy's defaults (1.40: 1 024 streams, a 16 MiB stream window and a 24 MiB connection
// window, read live: one peer's streams could make the node's Envoy buffer gigabytes). The
// windows are Envoy's own advice for a proxy facing untrusted peers; a stream's window bounds what
// Envoy buffers of it, and its throughput to a window per round trip (64 KiB per 0.2 ms on a
// node's network: more than 300 MB/s). A peer that needs more streams opens another connection,
// as Envoy's upstream pools do by themselves.
const (
	HTTP2MaxConcurrentStreams = 1024
	HTTP2StreamWindow         = 64 << 10
	HTTP2ConnectionWindow     = 1 << 20
)

// http2Options are every HCM's and HTTP/2 upstream's HTTP/2 options: extended CONNECT allowed,
// the streams and windows bounded.
func http2Options() *corev3.Http2ProtocolOptions {
	return &corev3.Http2ProtocolOptions{
		AllowConnect:                true,
		MaxConcurrentStreams:        wrapperspb.UInt32(HTTP2MaxConcurrentStreams),
		InitialStreamWindowSize:     wrapperspb.UInt32(HTTP2StreamWindow),
		InitialConnectionWindowSize: wrapperspb.UInt32(HTTP2ConnectionWindow),
	}
}

// acceptHTTP10 are the capture HCMs' HTTP/1 options: HTTP/1.0 accepted.
func acceptHTTP10() *corev3.Http1ProtocolOptions {
	return &corev3.Http1ProtocolOptions{AcceptHttp_10: true}
}

// proxyHTTP1Options are the proxy port's HTTP/1 options: HTTP/1.0 accepted, and absolute-form
// requests (GET http://payments.shop.aether.internal:8080/x HTTP/1.1, what a client with
// HTTP_PROXY sends) normalised by the codec into :authority (the URL's, whatever Host says: RFC
// 9112 section 3.2.2) and an origin-form path, so the route's authority match picks the mesh
// service and the upstream request is origin-form. Envoy's default is the same; it is spelled
// out because the proxy port is useless as HTTP_PROXY without it.
func proxyHTTP1Options() *corev3.Http1ProtocolOptions {
	return &corev3.Http1ProtocolOptions{AcceptHttp_10: true, AllowAbsoluteUrl: wrapperspb.Bool(true)}
}

// listeners renders, per valid local pod, its capture and inbound listeners, sorted by name.
func (b *builder) listeners() []*listenerv3.Listener {
	in := b.in
	// A pod's capture chains depend on its identity (the clusters' source qualification) and on
	// whether it is scoped, not on the pod: pods alike share one list (read only).
	type chainSet struct {
		identity string
		scoped   bool
	}
	shared := map[chainSet][]*listenerv3.FilterChain{}
	out := make([]*listenerv3.Listener, 0, 2*len(in.pods))
	for _, p := range in.pods {
		set := chainSet{p.Identity, p.Capture == model.CaptureScoped}
		chains, ok := shared[set]
		if !ok {
			chains = b.captureChains(in.services, set.identity, set.scoped)
			shared[set] = chains
		}
		out = append(out, b.captureListener(p, chains), b.proxyListener(p, chains), b.inboundListener(p, in.domain))
		if quic := b.inboundQUICListener(p, in.domain); quic != nil {
			out = append(out, quic)
		}
	}
	slices.SortFunc(out, func(a, b *listenerv3.Listener) int { return cmp.Compare(a.GetName(), b.GetName()) })
	for _, l := range out {
		b.check("listener "+l.GetName(), l)
	}
	return out
}

// fail records err as the build's error, unless one is recorded already.
func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// podIPv6 says whether pod p's listeners bind IPv6 beside IPv4: when the mesh uses IPv6 and the
// pod's namespace has it (model.LocalPod.NoIPv6). In a namespace without ::1, Envoy fails the
// whole listener on its [::1] address, and the pod would lose its IPv4 capture with it.
func (b *builder) podIPv6(p model.LocalPod) bool { return b.in.ipv6 && !p.NoIPv6 }

// captureListener is pod p's capture listener: 127.0.0.1:18001 in its netns, and [::1]:18001
// when the mesh uses IPv6 and the pod's namespace has it (podIPv6).
func (b *builder) captureListener(p model.LocalPod, shared []*listenerv3.FilterChain) *listenerv3.Listener {
	passthrough := b.tcpChain(CapturePassthroughChain, nil, PassthroughCluster)
	b.leaveFromThePod(passthrough)
	// The identity's chains, shared with its other pods, and the pod's own self chain, in order.
	chains := append(slices.Clip(shared), b.selfChain(b.podIPv6(p)))
	slices.SortFunc(chains, func(a, b *listenerv3.FilterChain) int { return cmp.Compare(a.GetName(), b.GetName()) })
	var ipv6 []*listenerv3.AdditionalAddress
	if b.podIPv6(p) {
		ipv6 = []*listenerv3.AdditionalAddress{{Address: netnsAddress(captureListenerAddressIPv6, meshv1alpha1.ProxyCapturePort, p.NetNS)}}
	}
	return &listenerv3.Listener{
		Name:                CaptureListener(PodKey(p.Namespace, p.Name)),
		Address:             netnsAddress(captureListenerAddress, meshv1alpha1.ProxyCapturePort, p.NetNS),
		AdditionalAddresses: ipv6,
		EnableReusePort:     reusePort(),
		// original_dst restores the destination the nftables redirect rewrote, for chain matching
		// and the passthrough. The listener's use_original_dst (hand-off to a listener bound to
		// that destination) stays off: a 0.0.0.0:18008 inbound listener of another pod could
		// otherwise take a connection whose destination port is 18008.
		ListenerFilters: []*listenerv3.ListenerFilter{
			b.listenerFilter(wellknown.OriginalDestination, &originaldstv3.OriginalDst{}),
			b.inspector(wellknown.TLSInspector, &tlsinspectorv3.TlsInspector{}, chains),
			b.inspector(wellknown.HTTPInspector, &httpinspectorv3.HttpInspector{}, chains),
		},
		ListenerFiltersTimeout:           durationpb.New(listenerFiltersTimeout),
		ContinueOnListenerFiltersTimeout: true,
		FilterChains:                     chains,
		DefaultFilterChain:               passthrough,
		PerConnectionBufferLimitBytes:    wrapperspb.UInt32(ConnectionBufferLimit),
		TrafficDirection:                 corev3.TrafficDirection_OUTBOUND,
	}
}

// proxyListener is pod p's proxy listener: the mesh's HTTP proxy port on loopback in its netns,
// 127.0.0.1:18081 (and [::1]:18081 when the mesh uses IPv6), what an application sets as
// HTTP_PROXY. Capture never redirects loopback, so without it nothing would listen there. Its one
// chain is the capture listener's proxy port chain (chains holds it): the same HCM and routes as
// a captured connection to <name>:18081. It has no listener filters and no default chain: every
// byte there is HTTP, and nothing is passed through (the original destination is itself).
func (b *builder) proxyListener(p model.LocalPod, chains []*listenerv3.FilterChain) *listenerv3.Listener {
	i := slices.IndexFunc(chains, func(c *listenerv3.FilterChain) bool {
		return c.GetName() == CaptureHTTPPortChain(meshv1alpha1.MeshHTTPPort)
	})
	if i < 0 {
		b.fail(fmt.Errorf("xds: pod %s/%s: no chain %s for its proxy listener", p.Namespace, p.Name, CaptureHTTPPortChain(meshv1alpha1.MeshHTTPPort)))
		return &listenerv3.Listener{Name: ProxyListener(PodKey(p.Namespace, p.Name))}
	}
	var ipv6 []*listenerv3.AdditionalAddress
	if b.podIPv6(p) {
		ipv6 = []*listenerv3.AdditionalAddress{{Address: netnsAddress(captureListenerAddressIPv6, meshv1alpha1.MeshHTTPPort, p.NetNS)}}
	}
	return &listenerv3.Listener{
		Name:                          ProxyListener(PodKey(p.Namespace, p.Name)),
		Address:                       netnsAddress(captureListenerAddress, meshv1alpha1.MeshHTTPPort, p.NetNS),
		AdditionalAddresses:           ipv6,
		EnableReusePort:               reusePort(),
		FilterChains:                  []*listenerv3.FilterChain{chains[i]},
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(ConnectionBufferLimit),
		TrafficDirection:              corev3.TrafficDirection_OUTBOUND,
	}
}

// captureChains are the capture listener's chains for a pod of identity (see the comment at the
// top of this file), sorted by name; the default chain is not among them.
func (b *builder) captureChains(services []meshService, identity string, scoped bool) []*listenerv3.FilterChain {
	var chains []*listenerv3.FilterChain
	claimed := map[int32]bool{} // destination ports some chain matches
	for _, s := range services {
		if !s.vip.IsValid() {
			continue
		}
		vip := netip.PrefixFrom(s.vip, s.vip.BitLen())
		if port, ok := resolve.DefaultTCPPort(s.ports); ok {
			// :18082 reaches the default TCP port, so that port's routes apply here too.
			claimed[meshv1alpha1.MeshTCPPort] = true
			name := CaptureTCPChain(s.key)
			target, snis := b.tcpRouting(&s, port, identity, SourceCluster(TCPDefaultCluster(s.fqdn), identity))
			chains = append(chains, b.weightedTCPChain(name, chainMatch(vip, meshv1alpha1.MeshTCPPort, "", nil), target))
			chains = append(chains, b.tlsRouteChains(name, vip, meshv1alpha1.MeshTCPPort, snis)...)
		}
		for _, p := range s.ports.Ports {
			if p.Protocol != meshv1alpha1.ProtocolTCP {
				continue
			}
			claimed[p.Port] = true
			chains = append(chains, b.captureTCPPortChains(s, vip, p.Port, identity)...)
		}
	}
	// The chains of the HTTP ports share cap_http's HCM (its config and its stats): a chain per
	// port of every service must not cost a configuration and a stats scope each.
	portless := b.captureHTTPChain(CaptureHTTPChain, netip.Prefix{}, 0, identity)
	for _, s := range services {
		for _, port := range httpDialPorts(s) {
			claimed[port] = true
			chains = append(chains, uninspectedHTTPChain(CaptureHTTPServicePortChain(s.key, port),
				netip.PrefixFrom(s.vip, s.vip.BitLen()), port, portless))
		}
	}
	if scoped {
		claimed[meshv1alpha1.MeshTCPPort] = true
		chains = append(chains, b.tcpChain(CaptureBlackholeChain,
			chainMatch(netip.Prefix{}, meshv1alpha1.MeshTCPPort, "", nil), BlackholeCluster))
	}
	uninspected := uninspectedPorts(chains)
	for _, port := range slices.Sorted(maps.Keys(claimed)) {
		if !uninspected[port] {
			chains = append(chains, b.captureHTTPChain(CaptureHTTPPortChain(port), netip.Prefix{}, port, identity))
		}
	}
	chains = append(chains, b.proxyHTTPChain(CaptureHTTPPortChain(meshv1alpha1.MeshHTTPPort), identity))
	chains = append(chains, portless)
	slices.SortFunc(chains, func(a, b *listenerv3.FilterChain) int { return cmp.Compare(a.GetName(), b.GetName()) })
	b.leaveFromThePod(chains...)
	return chains
}

// selfChain closes what reaches the capture listener with the listener itself as its original
// destination: a direct dial of 127.0.0.1:18001 (or [::1]:18001) from the pod, which no redirect
// made. The passthrough would send it to its original destination, the listener again, and each
// pass opens another of the node proxy's connections (measured live: about 10 000 for one dial).
// Its port and addresses are the most specific match there is, so it wins over the HTTP chains
// too.
// It is the pod's own (its addresses are the listener's: IPv6 too when it binds [::1]).
func (b *builder) selfChain(ipv6 bool) *listenerv3.FilterChain {
	addresses := []string{captureListenerAddress}
	if ipv6 {
		addresses = append(addresses, captureListenerAddressIPv6)
	}
	match := chainMatch(netip.Prefix{}, meshv1alpha1.ProxyCapturePort, "", nil)
	for _, a := range addresses {
		bits := netip.MustParseAddr(a).BitLen()
		match.PrefixRanges = append(match.PrefixRanges, &corev3.CidrRange{AddressPrefix: a, PrefixLen: wrapperspb.UInt32(uint32(bits))})
	}
	self := b.tcpChain(CaptureSelfChain, match, BlackholeCluster)
	b.leaveFromThePod(self)
	return self
}

// captureTCPPortChains are the chains of <VIP>:<port>, port a TCP port of s: one, or three when an
// HTTP dial of the port has an HTTP answer (port 80, the port http://<name>/ dials); and one per
// TLSRoute that applies there (route_gateway.go).
func (b *builder) captureTCPPortChains(s meshService, vip netip.Prefix, port int32, identity string) []*listenerv3.FilterChain {
	name := CaptureTCPPortChain(s.key, port)
	target, snis := b.tcpRouting(&s, port, identity, SourceCluster(TCPCluster(s.fqdn, port), identity))
	sniChains := b.tlsRouteChains(name, vip, port, snis)
	if port != resolve.HTTPPort {
		return append([]*listenerv3.FilterChain{b.weightedTCPChain(name, chainMatch(vip, port, "", nil), target)}, sniChains...)
	}
	return append([]*listenerv3.FilterChain{
		b.captureHTTPChain(CaptureHTTPServicePortChain(s.key, port), vip, port, identity),
		b.weightedTCPChain(name, chainMatch(vip, port, transportRawBuffer, nil), target),
		b.weightedTCPChain(CaptureTCPPortTLSChain(s.key, port), chainMatch(vip, port, transportTLS, nil), target),
	}, sniChains...)
}

// httpDialPorts are the ports of s's VIP whose every cleartext byte is HTTP: its HTTP-class
// ports, and 80 unless declared TCP (http://<name>/ dials it, and the mesh answers it). None
// without a VIP.
func httpDialPorts(s meshService) []int32 {
	if !s.vip.IsValid() {
		return nil
	}
	var ports []int32
	if _, declared := s.ports.Lookup(resolve.HTTPPort); !declared {
		ports = append(ports, resolve.HTTPPort)
	}
	for _, p := range s.ports.Ports {
		if p.Protocol.IsHTTP() {
			ports = append(ports, p.Port)
		}
	}
	return ports
}

// uninspectedHTTPChain is a chain named name with the filters of the HCM chain http, for
// cleartext to vip (any when invalid) and port whatever http_inspector found: HTTP whose first
// request came after the listener filters' timeout (a pooled client), or HTTP/1.0, is still HTTP
// where only HTTP is served. It asks for transport raw_buffer, so TLS, which tls_inspector reports
// at once, still never reaches the HCM.
func uninspectedHTTPChain(name string, vip netip.Prefix, port int32, http *listenerv3.FilterChain) *listenerv3.FilterChain {
	return &listenerv3.FilterChain{
		Name:             name,
		FilterChainMatch: chainMatch(vip, port, transportRawBuffer, nil),
		Filters:          slices.Clip(http.GetFilters()),
	}
}

// uninspectedPorts are the destination ports whose chains all take a connection whatever the
// inspectors find (no transport, server name or application protocol in their match): the
// inspectors can be skipped there (inspectorsDisabled), so a server-first client of the port is
// not held for listenerFiltersTimeout.
func uninspectedPorts(chains []*listenerv3.FilterChain) map[int32]bool {
	out := map[int32]bool{}
	inspected := map[int32]bool{}
	for _, c := range chains {
		m := c.GetFilterChainMatch()
		port := int32(m.GetDestinationPort().GetValue())
		if port == 0 {
			continue
		}
		if m.GetTransportProtocol() != "" || len(m.GetServerNames()) > 0 || len(m.GetApplicationProtocols()) > 0 {
			inspected[port] = true
		}
		out[port] = true
	}
	for port := range inspected {
		delete(out, port)
	}
	return out
}

// inspectorsDisabled is the filter_disabled of the capture listener's inspectors: the ports
// whose chains need no inspection (uninspectedPorts), as ranges. Envoy evaluates it on the
// destination port when the inspector's turn comes, which is the dialled one: original_dst runs
// first. It can name ports only, not (VIP, port) pairs (ListenerFilterChainMatchPredicate has no
// destination IP), so a port some service declares HTTP, or where a TLSRoute reads the SNI, keeps
// its inspectors for every VIP: there a server-first client still waits the timeout.
func inspectorsDisabled(chains []*listenerv3.FilterChain) *listenerv3.ListenerFilterChainMatchPredicate {
	ports := slices.Sorted(maps.Keys(uninspectedPorts(chains)))
	var rules []*listenerv3.ListenerFilterChainMatchPredicate
	for i := 0; i < len(ports); {
		j := i + 1
		for j < len(ports) && ports[j] == ports[j-1]+1 {
			j++
		}
		rules = append(rules, &listenerv3.ListenerFilterChainMatchPredicate{
			Rule: &listenerv3.ListenerFilterChainMatchPredicate_DestinationPortRange{
				DestinationPortRange: &typev3.Int32Range{Start: ports[i], End: ports[j-1] + 1}}})
		i = j
	}
	switch len(rules) {
	case 0:
		return nil
	case 1:
		return rules[0]
	}
	return &listenerv3.ListenerFilterChainMatchPredicate{Rule: &listenerv3.ListenerFilterChainMatchPredicate_OrMatch{
		OrMatch: &listenerv3.ListenerFilterChainMatchPredicate_MatchSet{Rules: rules}}}
}

// tlsRouteChains are the SNI chains of the TLSRoutes on (vip, port), whose TCP chain is base:
// TLS whose server name is one of a route's hostnames goes to its backends. server_names is more
// specific than the TCP chains' match (Envoy matches it before the transport protocol), so the
// other connections keep taking those.
func (b *builder) tlsRouteChains(base string, vip netip.Prefix, port int32, snis []sniRoute) []*listenerv3.FilterChain {
	out := make([]*listenerv3.FilterChain, 0, len(snis))
	for _, r := range snis {
		match := chainMatch(vip, port, transportTLS, nil)
		match.ServerNames = r.hostnames
		out = append(out, b.weightedTCPChain(CaptureTLSRouteChain(base, r.route.namespace, r.route.name), match, r.target))
	}
	return out
}

// captureHTTPChain is an HCM chain named name for cleartext HTTP to vip (any when invalid) and
// port (any when 0), routed by RDS CaptureRoutes(identity) over the ADS stream.
func (b *builder) captureHTTPChain(name string, vip netip.Prefix, port int32, identity string) *listenerv3.FilterChain {
	return &listenerv3.FilterChain{
		Name:             name,
		FilterChainMatch: chainMatch(vip, port, transportRawBuffer, httpInspectorProtocols),
		Filters:          []*listenerv3.Filter{b.httpManager(name, CaptureRoutes(identity), acceptHTTP10())},
	}
}

// proxyHTTPChain is the HCM chain named name of the mesh's HTTP proxy port (18081, any IP): every
// cleartext byte is HTTP there (uninspectedHTTPChain), routed by RDS ProxyRoutes(identity), and
// a request may be in absolute form (proxyHTTP1Options).
func (b *builder) proxyHTTPChain(name string, identity string) *listenerv3.FilterChain {
	return &listenerv3.FilterChain{
		Name:             name,
		FilterChainMatch: chainMatch(netip.Prefix{}, meshv1alpha1.MeshHTTPPort, transportRawBuffer, nil),
		Filters:          []*listenerv3.Filter{b.httpManager(name, ProxyRoutes(identity), proxyHTTP1Options())},
	}
}

// httpManager is an outbound HCM filter named name, routed by RDS routes over the ADS stream,
// with the HTTP/1 options http1.
func (b *builder) httpManager(name, routes string, http1 *corev3.Http1ProtocolOptions) *listenerv3.Filter {
	// No strip_any_host_port: the port in the Host header is the port (DESIGN section 5).
	// A trailing dot is stripped (payments.shop. is payments.shop).
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: name,
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: adsSource(), RouteConfigName: routes,
		}},
		HttpFilters:          b.captureFilters(),
		StripTrailingHostDot: true,
		UpgradeConfigs:       upgradeConfigs(),
		HttpProtocolOptions:  http1,
		Http2ProtocolOptions: http2Options(),
		AccessLog:            b.httpAccessLog(),
		StreamIdleTimeout:    durationpb.New(StreamIdleTimeout),
	}
	return b.networkFilter(wellknown.HTTPConnectionManager, name, hcm)
}

// routerFilters are an HCM's HTTP filters: the router, last (and alone until routes add filters).
func (b *builder) routerFilters() []*hcmv3.HttpFilter {
	return []*hcmv3.HttpFilter{{
		Name:       wellknown.Router,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: b.pack("the router filter", &routerv3.Router{})},
	}}
}

// tcpChain is a chain named name that proxies what match selects to cluster.
func (b *builder) tcpChain(name string, match *listenerv3.FilterChainMatch, cluster string) *listenerv3.FilterChain {
	return b.weightedTCPChain(name, match, []weightedBase{{base: cluster, weight: 1}})
}

// weightedTCPChain is a chain named name that proxies what match selects to the clusters of
// target (full names), by weight: a TCPRoute's or TLSRoute's backends, or one cluster.
func (b *builder) weightedTCPChain(name string, match *listenerv3.FilterChainMatch, target []weightedBase) *listenerv3.FilterChain {
	return b.countedTCPChain(name, name, match, target)
}

// countedTCPChain is weightedTCPChain with its bytes and connections counted under statPrefix.
func (b *builder) countedTCPChain(name, statPrefix string, match *listenerv3.FilterChainMatch, target []weightedBase) *listenerv3.FilterChain {
	return b.proxyChain(name, match, b.countedTCPProxy(statPrefix, target))
}

// countedTCPProxy proxies to the clusters of target (full names), by weight, its bytes and
// connections counted under statPrefix.
func (b *builder) countedTCPProxy(statPrefix string, target []weightedBase) *tcpproxyv3.TcpProxy {
	proxy := &tcpproxyv3.TcpProxy{StatPrefix: statPrefix, AccessLog: b.tcpAccessLog(), IdleTimeout: durationpb.New(TCPIdleTimeout)}
	if len(target) == 1 {
		proxy.ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: target[0].base}
		if t, mesh := ParseCluster(target[0].base); mesh && !t.Inbound && b.onDemand() {
			proxy.OnDemand = tcpOnDemand() // a service the source may not carry (warm.go)
		}
	} else {
		weighted := &tcpproxyv3.TcpProxy_WeightedCluster{}
		for _, t := range target {
			weighted.Clusters = append(weighted.Clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: t.base, Weight: t.weight})
		}
		proxy.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: weighted}
	}
	return proxy
}

// proxyChain is a chain named name whose one filter is proxy, for what match selects.
func (b *builder) proxyChain(name string, match *listenerv3.FilterChainMatch, proxy *tcpproxyv3.TcpProxy) *listenerv3.FilterChain {
	return &listenerv3.FilterChain{
		Name:             name,
		FilterChainMatch: match,
		Filters:          []*listenerv3.Filter{b.networkFilter(wellknown.TCPProxy, name, proxy)},
	}
}

// chainMatch matches destination vip (any when invalid), destination port (any when 0), transport
// protocol (any when empty) and one of the application protocols (any when none).
func chainMatch(vip netip.Prefix, port int32, transport string, apps []string) *listenerv3.FilterChainMatch {
	m := &listenerv3.FilterChainMatch{TransportProtocol: transport, ApplicationProtocols: apps}
	if port != 0 {
		m.DestinationPort = wrapperspb.UInt32(uint32(port))
	}
	if vip.IsValid() {
		m.PrefixRanges = []*corev3.CidrRange{{
			AddressPrefix: vip.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(vip.Bits())),
		}}
	}
	return m
}

// networkFilter is a chain's network filter named name with config, packed (what names the config
// in an error).
func (b *builder) networkFilter(name, what string, config proto.Message) *listenerv3.Filter {
	return &listenerv3.Filter{
		Name:       name,
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: b.pack(name+" of "+what, config)},
	}
}

// listenerFilter is a listener filter named name with config, packed.
func (b *builder) listenerFilter(name string, config proto.Message) *listenerv3.ListenerFilter {
	return &listenerv3.ListenerFilter{
		Name:       name,
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: b.pack(name, config)},
	}
}

// inspector is the listener filter named name with config, skipped on the ports where chains
// need no inspection (inspectorsDisabled).
func (b *builder) inspector(name string, config proto.Message, chains []*listenerv3.FilterChain) *listenerv3.ListenerFilter {
	f := b.listenerFilter(name, config)
	f.FilterDisabled = inspectorsDisabled(chains)
	return f
}

// netnsAddress is address:port in the network namespace at path netns.
func netnsAddress(address string, port int32, netns string) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:                  address,
		PortSpecifier:            &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
		NetworkNamespaceFilepath: netns,
	}}}
}

// listenerInputs are the pods and services the listeners and routes are built from.
type listenerInputs struct {
	domain   string
	pods     []model.LocalPod
	services []meshService
	// ipv6 says the mesh uses IPv6 (usesIPv6): the listeners listen on IPv6 too.
	ipv6 bool
	// skipped says what was left out and why (Skipped).
	skipped []error
}

// meshService is a valid service as the listeners and routes read it.
type meshService struct {
	model.Service
	key   string // ServiceKey
	fqdn  string
	ports portspec.PortSet
	// vip is the service's VIP when valid and held by it alone; invalid otherwise.
	vip netip.Addr
	// names are the names of resolve.Names the service holds, lower-cased: the mesh name, the
	// Kubernetes names, minus those another service holds.
	names []string
	// localName is its bare name (resolve.LocalName), lower-cased, which holds from its own
	// namespace only: the capture routes of that namespace's identities carry it. Empty when
	// another service holds it as one of its names (holdNames).
	localName string
}

// What Build leaves out of the node's configuration, and why (Resources.Skipped, one sentence each). Build does not fail for these (one pod's or service's bad facts must not take
// the node's other pods down); the agent logs each and puts it in an Event on the pod:
//   - a local pod whose facts a proxy cannot use (model.LocalPod.Validate, its ports, an identity
//     not of the shape spiffe://<domain>/ns/<ns>/sa/<sa>), listed twice, or sharing another pod's
//     netns: it gets no listeners, so its captured connections are refused (fail closed, never
//     unprotected);
//   - a service that fails model.Service.Validate or lists a port of the mesh's own: no chains,
//     virtual hosts or routes; a service listed twice: its first listing counts;
//   - a service VIP that is not an IP address, or that an earlier service (by namespace and name)
//     holds: no TCP capture chains for the service (its HTTP still routes by Host);
//   - a name (resolve.Names) that a service earlier in the order (mesh names first, then the
//     Kubernetes names; by namespace and name) holds: no virtual hosts for it; a bare name
//     (resolve.LocalName) that is any service's name of resolve.Names: no domains for it;
//   - without a workload-identity issuer (model.Mesh.Issuer), a service's raw TCP: no raw-TCP
//     clusters, its TCP capture chains closed (withoutRawTCP).
//
// selectInputs sorts and checks the mesh's pods and services, reusing what mm (a Builder's memo,
// or nil) kept of the last build's selection. Its error is a fault of the whole mesh.
func selectInputs(m model.Mesh, mm *memo) (listenerInputs, error) {
	if m.Domain == "" {
		return listenerInputs{}, fmt.Errorf("xds: the mesh domain is empty: set the agent's mesh domain (the default is %s)",
			resolve.DefaultMeshDomain)
	}
	in := listenerInputs{domain: m.Domain, ipv6: usesIPv6(m)}
	in.pods, in.skipped = selectPods(m.Domain, m.Pods)
	var skipped []error
	in.services, skipped = selectServices(m.Domain, m.Services, mm)
	in.skipped = append(in.skipped, skipped...)
	if !m.Issuer.Issues() {
		in.skipped = append(in.skipped, withoutRawTCP(in.services)...)
	}
	return in, nil
}

// usesIPv6 says a VIP of the mesh (any service's, as the capture rules read them) or a local
// pod's address is IPv6. Then the pods' capture rules redirect IPv6 (to [::1]) and the pods have
// IPv6, so the listeners listen on IPv6 beside IPv4. Otherwise they do not: a socket Envoy cannot
// bind (a namespace without IPv6, whose lo has no ::1) fails the whole listener, IPv4 with it.
// Endpoint addresses are not read: an endpoint-only change leaves the listeners as they are (the
// stability gate), and a mesh whose endpoints are IPv6 has IPv6 VIPs (a generated Service takes
// the cluster's first family, as its pods' addresses do).
func usesIPv6(m model.Mesh) bool {
	is6 := func(s string) bool {
		a, err := netip.ParseAddr(s)
		return err == nil && a.Unmap().Is6()
	}
	return slices.ContainsFunc(m.Services, func(s model.Service) bool { return is6(s.VIP) }) ||
		slices.ContainsFunc(m.Pods, func(p model.LocalPod) bool { return is6(p.Address) })
}

// withoutRawTCP names each service with a TCP port, in a mesh without a workload-identity issuer:
// it gets no raw-TCP cluster (serviceClusters), TCPRoutes and TLSRoutes are not applied to it, and
// a captured TCP dial of its VIP takes a chain to the blackhole cluster (tcpRouting): closed,
// never passed through in plaintext. Its HTTP ports are built as ever.
func withoutRawTCP(services []meshService) []error {
	var out []error
	for _, s := range services {
		var tcp []string
		for _, p := range s.ports.Ports {
			if p.Protocol == meshv1alpha1.ProtocolTCP {
				tcp = append(tcp, itoa(p.Port))
			}
		}
		if len(tcp) > 0 {
			out = append(out, fmt.Errorf("xds: no raw-TCP clusters for service %s/%s (TCP ports %s; a captured TCP dial of its VIP is closed by cluster %s): no workload identity: %s",
				s.Namespace, s.Name, strings.Join(tcp, ", "), BlackholeCluster, workloadidentity.NoIssuerTCP))
		}
	}
	return out
}

// selectPods are the pods that get listeners, sorted by namespace and name.
func selectPods(domain string, pods []model.LocalPod) (kept []model.LocalPod, skipped []error) {
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b model.LocalPod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	listed := map[string]bool{}
	netnsHolder := map[string]string{}
	for _, p := range sorted {
		key := PodKey(p.Namespace, p.Name)
		err := podProblem(domain, p)
		holder, shared := netnsHolder[p.NetNS]
		switch {
		case err != nil:
		case listed[key]:
			err = fmt.Errorf("local pod %s: it is listed twice; only its first listing counts", key)
		case shared:
			err = fmt.Errorf("local pod %s: netNS %q is also pod %s's: one capture listener per network namespace; the first pod keeps it",
				key, p.NetNS, holder)
		}
		listed[key] = true
		if err != nil {
			skipped = append(skipped, fmt.Errorf("xds: no listeners for %w", err))
			continue
		}
		netnsHolder[p.NetNS] = key
		// Its listeners are built from its TCP and HTTP ports alone (model.LocalPod.WithoutUDP):
		// the node proxy does not carry UDP yet, and a UDP primary leaves the inbound listener
		// without a floor chain.
		kept = append(kept, p.WithoutUDP())
	}
	return kept, skipped
}

// podProblem names the first fact of p a proxy cannot use: LocalPod.Validate, then an identity
// of the mesh's shape in its trust domain (the inbound listener accepts only that domain's peers)
// and what the inbound listener needs (its ports, each once, the primary among them).
func podProblem(domain string, p model.LocalPod) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if !meshIdentity(domain, p.Identity) {
		return fmt.Errorf("local pod %s/%s: identity %q is not of the mesh's shape %s/ns/<namespace>/sa/<serviceaccount>",
			p.Namespace, p.Name, p.Identity, TrustBundleSecret(domain))
	}
	primary := false
	seen := map[int32]bool{}
	for i, pp := range p.Ports {
		switch {
		case pp.Port < 1 || pp.Port > 65535:
			return fmt.Errorf("local pod %s/%s: ports[%d] is %d, not a port (1..65535)", p.Namespace, p.Name, i, pp.Port)
		case portspec.Reserved[pp.Port] != "":
			return fmt.Errorf("local pod %s/%s: ports[%d] is %d, a port of the mesh's own: %s", p.Namespace, p.Name, i, pp.Port,
				portspec.Reserved[pp.Port])
		case seen[pp.Port]:
			return fmt.Errorf("local pod %s/%s: ports[%d]: port %d is listed twice: one chain per port", p.Namespace, p.Name, i, pp.Port)
		case !pp.Protocol.IsHTTP() && pp.Protocol != meshv1alpha1.ProtocolTCP && !pp.Protocol.IsUDP():
			return fmt.Errorf("local pod %s/%s: ports[%d] (port %d) has protocol %q, none of HTTP, HTTP2, TCP, UDP",
				p.Namespace, p.Name, i, pp.Port, pp.Protocol)
		}
		seen[pp.Port] = true
		primary = primary || pp.Port == p.Primary
	}
	if !primary {
		return fmt.Errorf("local pod %s/%s: primary %d is not among its ports: the inbound floor chain serves the primary", p.Namespace, p.Name, p.Primary)
	}
	return nil
}

// selectServices are the valid services, sorted by namespace and name, each with the VIP and the
// names it holds. With a memo (a Builder's), what it derives from each service alone
// (serviceFacts) and what the services hold (holdServices) are the last build's when they derive
// from the same: at a thousand services, deriving them again was most of a build after one
// endpoint changed.
func selectServices(domain string, services []model.Service, mm *memo) (kept []meshService, skipped []error) {
	sorted := services
	if !slices.IsSortedFunc(services, compareServices) { // the agent's come sorted: no copy
		sorted = slices.Clone(services)
		slices.SortStableFunc(sorted, compareServices)
	}
	kept = make([]meshService, 0, len(sorted))
	for i := range sorted {
		s := &sorted[i]
		if i > 0 && compareServices(sorted[i-1], *s) == 0 { // sorted: a second listing follows the first
			skipped = append(skipped, fmt.Errorf("xds: service %s/%s is listed twice; only its first listing counts", s.Namespace, s.Name))
			continue
		}
		f := mm.serviceFacts(domain, s)
		if f.problem != nil {
			skipped = append(skipped, fmt.Errorf("xds: no chains, virtual hosts or routes for %w", f.problem))
			continue
		}
		// Its clusters, load assignments and chains are built from its TCP and HTTP ports alone
		// (model.Service.WithoutUDP): the node proxy does not carry UDP yet. ports keeps every
		// port, so the answers the mesh sends (421 port-not-http for a UDP port) say the surface's
		// words.
		kept = append(kept, meshService{Service: s.WithoutUDP(), key: f.key, fqdn: f.fqdn, ports: f.ports})
	}
	return kept, append(skipped, mm.holdServices(domain, kept)...)
}

// compareServices orders services by namespace and name.
func compareServices(a, b model.Service) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// serviceFacts are what selectServices derives from one service alone: serviceProblem's verdict
// and, for a valid service, its key, FQDN and port set.
type serviceFacts struct {
	problem   error
	key, fqdn string
	ports     portspec.PortSet
}

// deriveFacts are s's serviceFacts.
func deriveFacts(domain string, s *model.Service) serviceFacts {
	if err := serviceProblem(*s); err != nil {
		return serviceFacts{problem: err}
	}
	return serviceFacts{key: ServiceKey(s.Name, s.Namespace), fqdn: FQDN(s.Name, s.Namespace, domain), ports: s.PortSet()}
}

// hold gives the selected services the VIPs (holdVIP) and the names (holdNames) they hold, and
// says what it left out. What it gives derives from the services' namespaces, names and VIPs, in
// order, and the mesh domain alone.
func hold(domain string, services []meshService) (skipped []error) {
	vipHolder := map[netip.Addr]string{}
	for i := range services {
		if vip, err := holdVIP(services[i].Service, vipHolder); err != nil {
			skipped = append(skipped, err)
		} else {
			services[i].vip = vip
		}
	}
	return append(skipped, holdNames(domain, services)...)
}

// serviceProblem is model.Service.Validate's verdict, or a port of the mesh's own among s's
// ports (the API refuses them; one would make a listener ambiguous).
func serviceProblem(s model.Service) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Identity == "" {
		return fmt.Errorf("service %s/%s: identity is empty, so no TLS context can be pinned to it; "+
			"it is left out until its MeshService has an identity", s.Namespace, s.Name)
	}
	for i, p := range s.Ports {
		if why := portspec.Reserved[p.Number]; why != "" {
			return fmt.Errorf("service %s/%s: ports[%d] is %d, a port of the mesh's own: %s", s.Namespace, s.Name, i, p.Number, why)
		}
	}
	return nil
}

// holdVIP is s's VIP when it is an IP address no earlier service holds (invalid when s has none),
// recording it in holder.
func holdVIP(s model.Service, holder map[netip.Addr]string) (netip.Addr, error) {
	if s.VIP == "" {
		return netip.Addr{}, nil
	}
	vip, err := netip.ParseAddr(s.VIP)
	if err != nil || vip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("xds: no TCP capture chains for service %s/%s: VIP %q is not an IP address", s.Namespace, s.Name, s.VIP)
	}
	vip = vip.Unmap()
	if h, taken := holder[vip]; taken {
		return netip.Addr{}, fmt.Errorf("xds: no TCP capture chains for service %s/%s: VIP %s is also service %s's, which keeps it",
			s.Namespace, s.Name, vip, h)
	}
	holder[vip] = s.Namespace + "/" + s.Name
	return vip, nil
}

// holdNames gives each service the names of resolve.Names no other service holds first: a name
// is one virtual host's (Envoy refuses a domain in two). Mesh names are held first, then the
// Kubernetes names in their order, each by the first service in namespace-and-name order. Hosts
// match case-insensitively, so names are compared (and kept) lower-cased.
func holdNames(domain string, services []meshService) (skipped []error) {
	names := make([][]string, len(services))
	for i, s := range services {
		names[i] = resolve.Names(s.Name, s.Namespace, domain)
	}
	holder := map[string]int{}
	for kind := range len(resolve.Names("", "", domain)) {
		for i := range services {
			name := strings.ToLower(names[i][kind])
			h, taken := holder[name]
			switch {
			case !taken:
				holder[name] = i
				services[i].names = append(services[i].names, name)
			case h != i: // the same service twice (a mesh domain of svc.cluster.local) is no conflict
				skipped = append(skipped, fmt.Errorf("xds: no virtual hosts for name %q of service %s/%s: it is also a name of service %s/%s, which keeps it",
					name, services[i].Namespace, services[i].Name, services[h].Namespace, services[h].Name))
			}
		}
	}
	return append(skipped, holdLocalNames(services, holder)...)
}

// holdLocalNames gives each service that holds names its bare name (resolve.LocalName), unless a
// service holds it as one of its names (holder): a name that spells a namespace keeps its meaning
// everywhere, and a domain is one virtual host's. Two services of one namespace have two bare
// names, and the bare names of two namespaces are in two route configurations (one per source
// identity, so per namespace: captureRoutes), so bare names never collide with each other.
func holdLocalNames(services []meshService, holder map[string]int) (skipped []error) {
	for i := range services {
		s := &services[i]
		if len(s.names) == 0 {
			continue // a service without virtual hosts has no bare-name domains to join
		}
		name := strings.ToLower(resolve.LocalName(s.Name))
		if h, taken := holder[name]; taken {
			skipped = append(skipped, fmt.Errorf("xds: no virtual hosts for bare name %q of service %s/%s (from namespace %s): it is a name of service %s/%s, which keeps it",
				name, s.Namespace, s.Name, s.Namespace, services[h].Namespace, services[h].Name))
			continue
		}
		s.localName = name
	}
	return skipped
}

// reusePort is every listener's enable_reuse_port: true, set rather than left to Envoy's default
// (true on Linux, unless a runtime flag turns it off). The node's proxy is replaced by a new one
// that binds the same addresses in each pod's namespace beside the old one (SO_REUSEPORT) while
// the old one drains (config/envoy): without the option the second bind fails, and a pod's
// connections are refused until the old proxy lets go. Envoy rejects a listener update that
// changes it, so it is the same on every listener from the first build on.
func reusePort() *wrapperspb.BoolValue { return wrapperspb.Bool(true) }
