// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	connectionlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// The inbound listener (proposal 037 design (e)): where peers' mesh mTLS arrives for the pod's own
// ports. The SNI selects the port (server_names [p], one chain per served port: an HCM for an
// HTTP-class port, a tcp_proxy for a TCP one, never both). Every chain terminates mTLS
// (downstreamTLS).
//
// Every mesh hop names its port (ServerName), the primary too, so a proxy of this release never
// needs the default chain, the floor: the pod's own primary, in its protocol. It stays for the
// peers that send no SNI, which reach the pod's own primary as they always did:
//   - a node proxy of a release before SNI on every hop, while the mesh is being upgraded: it
//     sends none for the service's primary; without the floor each such connection would be
//     closed until every node is upgraded;
//   - a proxyless gRPC client that does not send SNI (grpc-go without GRPC_EXPERIMENTAL_XDS_SNI):
//     it is served only the service's primary, and only by the pods whose own primary that is
//     (proxyless.go), since the floor is the pod's primary, not the service's.
// Envoy's server-name match cannot tell "no SNI" from "an SNI no chain names": both fall through
// the exact and wildcard lookups to the entry of chains without server_names, or, with none, to the
// default chain (FilterChainManagerImpl::findFilterChainForServerName). So a connection naming a
// port the pod does not serve lands on the floor too; a mesh client names only ports of its load
// assignment, which lists the pods that declare them.

// What one connection may hold of the inbound listener: the listener faces every peer of the
// mesh (any node's proxy, and anything that reaches the pod's IP), so a peer that opens
// connections and then sends nothing, or sends faster than the app reads, must not pin the node's
// one Envoy. How many connections there are is bounded node-wide by the overload manager
// (MaxDownstreamConnections, in the bootstrap: the listener does not ignore it).
const (
	// InboundListenerFiltersTimeout bounds the wait for the ClientHello the tls_inspector reads
	// (Envoy's default is 15 s): a mesh peer sends it at once, so a connection still silent then
	// is closed (continue_on_listener_filters_timeout false: no chain serves a client without
	// TLS).
	InboundListenerFiltersTimeout = 5 * time.Second
	// InboundHandshakeTimeout bounds the mTLS handshake after it (every chain's
	// transport_socket_connect_timeout; unset, Envoy waits as long as the peer trickles bytes).
	InboundHandshakeTimeout = 10 * time.Second
	// ConnectionBufferLimit is each connection's read and write buffer soft limit on every
	// listener of a pod, inbound, capture and proxy (per_connection_buffer_limit_bytes; Envoy's
	// default is 1 MiB): 32 KiB, Envoy's advice for a listener facing untrusted peers, so a
	// thousand slow readers hold 32 MiB, not 1 GiB, and one pod at its connection limits
	// (PodListenerConnections) holds 256 MiB, not 8 GiB. Above it Envoy stops reading from the
	// other side until the buffer drains: back-pressure, not loss.
	ConnectionBufferLimit = 32 << 10
	// InboundChainConnections is how many connections each chain of an inbound listener (one per
	// port of the pod, and the floor) holds at once (the connection_limit filter, first on every
	// chain; Envoy counts per chain); more are closed at once. Mesh peers pool their connections
	// (one per source pod and port), so 4 096 leaves room for thousands of callers while one
	// pod's listener cannot take the node's whole budget (the overload manager's cap).
	InboundChainConnections = 4096
)

// inboundListenerAddress is where pod p's inbound listener listens, in its netns: every address
// of the pod, so peers reach <pod IP>:18008 (the address its MeshEndpoint carries, the one
// address peers dial: a pod's status.podIP, of the cluster's first family). An IPv6 pod gets "::"
// with IPv4 compatibility, which takes IPv4 too; an IPv4 pod 0.0.0.0, and [::] beside it (an
// additional address, IPv6 only) when the mesh uses IPv6, so that a dual-stack pod answers on
// both of its addresses (see usesIPv6 for why not always).
func inboundListenerAddress(p model.LocalPod, ipv6 bool) (*corev3.Address, []*listenerv3.AdditionalAddress) {
	address := netnsAddress("0.0.0.0", meshv1alpha1.ProxyInboundPort, p.NetNS)
	if ip, err := netip.ParseAddr(p.Address); err == nil && ip.Is6() && !ip.Is4In6() {
		address.GetSocketAddress().Address = "::"
		address.GetSocketAddress().Ipv4Compat = true
		return address, nil
	}
	if !ipv6 {
		return address, nil
	}
	return address, []*listenerv3.AdditionalAddress{{Address: netnsAddress("::", meshv1alpha1.ProxyInboundPort, p.NetNS)}}
}

// inboundListener is pod p's inbound listener: 0.0.0.0:18008 (and [::]:18008), or [::]:18008, in
// its netns. p passed podProblem: its ports are listed once each, the primary among them.
func (b *builder) inboundListener(p model.LocalPod, domain string) *listenerv3.Listener {
	pod := PodKey(p.Namespace, p.Name)
	chains := make([]*listenerv3.FilterChain, 0, len(p.Ports))
	var floor *listenerv3.FilterChain
	for _, pp := range p.Ports {
		match := &listenerv3.FilterChainMatch{ServerNames: []string{ServerName(pp.Port)}}
		access := p.AccessOf(pp.Port)
		if pp.Protocol.IsHTTP() {
			if b.mesh.HopHTTP3 {
				// The HTTP/2 leg of a hop that prefers HTTP/3 names the port so (hop_http3.go).
				match.ServerNames = append(match.ServerNames, HopServerName(pp.Port, FQDN(p.Service, p.Namespace, domain)))
			}
			chains = append(chains, b.inboundHTTPChain(InboundHTTPChain(pp.Port), match, domain, p.Identity, AppCluster(pod, pp.Port), access))
		} else {
			chains = append(chains, b.inboundTCPChain(InboundTCPChain(pp.Port), TCPPortStatPrefix(p.Namespace, p.Service, pp.Port), match, domain,
				p.Identity, AppCluster(pod, pp.Port), access))
		}
		if pp.Port == p.Primary {
			// The floor serves the primary: the primary's authorization, or a peer sending no SNI
			// would pass around it.
			floor = b.inboundFloorChain(pp, TCPPortStatPrefix(p.Namespace, p.Service, pp.Port), domain, p.Identity, AppCluster(pod, pp.Port), access)
		}
	}
	slices.SortFunc(chains, func(a, b *listenerv3.FilterChain) int { return cmp.Compare(a.GetName(), b.GetName()) })
	for _, c := range append(slices.Clip(chains), floor) {
		b.limitConnections(c)
	}
	address, also := inboundListenerAddress(p, b.podIPv6(p))
	return &listenerv3.Listener{
		Name:                          InboundListener(pod),
		Address:                       address,
		AdditionalAddresses:           also,
		EnableReusePort:               reusePort(),
		ListenerFilters:               []*listenerv3.ListenerFilter{b.listenerFilter(wellknown.TLSInspector, &tlsinspectorv3.TlsInspector{})},
		ListenerFiltersTimeout:        durationpb.New(InboundListenerFiltersTimeout),
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(ConnectionBufferLimit),
		FilterChains:                  chains,
		DefaultFilterChain:            floor,
		TrafficDirection:              corev3.TrafficDirection_INBOUND,
	}
}

// inboundFloorChain is the default chain: the primary port, in its protocol; a TCP primary's bytes
// are counted under the port's statPrefix, with its in_tcp_<p> chain's.
func (b *builder) inboundFloorChain(primary meshv1alpha1.PortProtocol, statPrefix, domain, identity, cluster string, access authz.Port) *listenerv3.FilterChain {
	if primary.Protocol.IsHTTP() {
		return b.inboundHTTPChain(InboundFloorChain, nil, domain, identity, cluster, access)
	}
	return b.inboundTCPChain(InboundFloorChain, statPrefix, nil, domain, identity, cluster, access)
}

// inboundHTTPChain terminates mTLS (ALPN h2) and serves HTTP (codec AUTO) to cluster, the app's
// port, with inboundHTTPManager's connection manager.
func (b *builder) inboundHTTPChain(name string, match *listenerv3.FilterChainMatch, domain, identity, cluster string, access authz.Port) *listenerv3.FilterChain {
	hcm := b.inboundHTTPManager(name, domain, cluster, access)
	hcm.CodecType = hcmv3.HttpConnectionManager_AUTO
	hcm.Http2ProtocolOptions = http2Options()
	return &listenerv3.FilterChain{
		Name:                          name,
		FilterChainMatch:              match,
		TransportSocket:               b.downstreamTLS(domain, identity, alpnH2, nil),
		TransportSocketConnectTimeout: durationpb.New(InboundHandshakeTimeout),
		Filters:                       []*listenerv3.Filter{b.networkFilter(wellknown.HTTPConnectionManager, name, hcm)},
	}
}

// inboundHTTPManager is the connection manager of every inbound HTTP chain, over TCP
// (inboundHTTPChain) or QUIC (inboundHTTP3Chain), but for its codec, which the caller sets: every
// request to cluster, the app's port, whatever its Host (the source already routed it by Host),
// WebSocket included. It tells the app the caller's SPIFFE ID (callerIdentity) and the caller's
// proxy the outcome of each request (inboundOutcome, inboundLocalReplies). A governed port's
// calls pass its RBAC filter first, on normalized paths (authz.go). One function, so that the
// HTTP/3 chain of a port can never authorize less than its HTTP/2 chain.
func (b *builder) inboundHTTPManager(name, domain, cluster string, access authz.Port) *hcmv3.HttpConnectionManager {
	routes := &routev3.RouteConfiguration{
		Name: name,
		// An inline route configuration validates its clusters by default, and the app cluster
		// arrives by CDS, which over ADS may come after the listener (a new pod's, on a delta
		// stream): Envoy would refuse the listener and not be sent it again until it changed. Not
		// validated, the chain answers 503 (no cluster) until the cluster arrives.
		ValidateClusters: wrapperspb.Bool(false),
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    InboundVirtualHost,
			Domains: []string{"*"},
			Routes:  []*routev3.Route{routeTo(cluster)},
		}},
	}
	inboundOutcome(routes)
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix:     name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: routes},
		HttpFilters:    b.routerFilters(),
		// A WebSocket arrives as an extended CONNECT over the mesh's HTTP/2 hop
		// (listener_capture.go, upgradeConfigs).
		UpgradeConfigs: upgradeConfigs(),
		// The destination's side of the retry table (outcome.go): which row applied, for the
		// caller's proxy.
		LocalReplyConfig:  b.inboundLocalReplies(),
		AccessLog:         b.httpAccessLog(),
		StreamIdleTimeout: durationpb.New(StreamIdleTimeout),
	}
	callerIdentity(hcm)
	if access.Governed {
		b.authorizeHTTP(hcm, domain, access)
		inboundPathNormalization(hcm)
	}
	return hcm
}

// inboundTCPChain terminates mTLS (no ALPN) and proxies the bytes to cluster, the app's port,
// counting them under statPrefix (TCPPortStatPrefix: tcp.<statPrefix>.* in Envoy's stats). A
// governed port admits only its rules' callers to the handshake, connects to the application
// only once the handshake is done, and its connections pass its RBAC filter too (authz.go).
func (b *builder) inboundTCPChain(name, statPrefix string, match *listenerv3.FilterChainMatch, domain, identity, cluster string, access authz.Port) *listenerv3.FilterChain {
	proxy := b.countedTCPProxy(statPrefix, []weightedBase{{base: cluster, weight: 1}})
	if access.Governed {
		proxy.UpstreamConnectMode = tcpproxyv3.UpstreamConnectMode_ON_DOWNSTREAM_TLS_HANDSHAKE
		// Envoy requires it with a mode other than IMMEDIATE; nothing is read before the
		// handshake is done, so nothing waits in a buffer.
		proxy.MaxEarlyDataBytes = wrapperspb.UInt32(0)
	}
	chain := b.proxyChain(name, match, proxy)
	b.authorizeTCP(chain, domain, access)
	chain.TransportSocket = b.downstreamTLS(domain, identity, nil, admittedPeers(domain, access))
	chain.TransportSocketConnectTimeout = durationpb.New(InboundHandshakeTimeout)
	return chain
}

// limitConnections puts the connection_limit filter first in chain c (an inbound chain): at most
// InboundChainConnections at once, counted for that chain.
func (b *builder) limitConnections(c *listenerv3.FilterChain) {
	if c == nil {
		return
	}
	limit := &connectionlimitv3.ConnectionLimit{StatPrefix: c.GetName(), MaxConnections: wrapperspb.UInt64(InboundChainConnections)}
	c.Filters = append([]*listenerv3.Filter{b.networkFilter(ConnectionLimitFilter, c.GetName(), limit)}, c.Filters...)
}

// ConnectionLimitFilter is the network filter that bounds a chain's connections.
const ConnectionLimitFilter = "envoy.filters.network.connection_limit"
