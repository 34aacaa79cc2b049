// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// The HTTP/3 hop (model.Mesh.HopHTTP3, the agent's --hop-http3; DESIGN section 8: an option of the
// hop, HTTP/2 the default). With it on:
//
//   - every local pod's inbound also listens for QUIC on UDP 18008, in its netns, beside TCP
//     18008 (inboundQUICListener): one HTTP/3 chain per HTTP-class port the pod serves,
//     selected by the same SNI (server_names [p]), terminating the same mTLS (the pod's
//     certificate, a client certificate of the trust domain required) and serving the very
//     connection manager of the port's TCP chain (inboundHTTPManager) but for its codec: the
//     same route, caller identity, outcome replies and authorization. A TCP port has no QUIC
//     chain (raw TCP rides TLS over TCP), and there is no floor: every QUIC client of the mesh
//     is a node proxy of a release that names its port.
//   - every HTTP upstream cluster (upstreamCluster) uses Envoy's connectivity grid (auto_config
//     with HTTP/3): it tries HTTP/3 first, over a QUIC transport socket wrapping the very TLS
//     context of the HTTP/2 hop (the source's certificate, the destination pinned by its SPIFFE
//     ID, the port's SNI), and HTTP/2 over TLS when QUIC fails or does not answer within the
//     grid's delay (300 ms, twice the measured round trip once there is one); a failure marks
//     HTTP/3 broken for that origin for a while (Envoy backs off, from 5 minutes), so later
//     requests go straight to HTTP/2.
//
// The grid tries HTTP/3 only to an origin its alternate protocols cache lists; the mesh knows
// every inbound listens for QUIC on the same port, so each cluster's cache is prepopulated with
// its origin (hopCache). Envoy keys the origin by the SNI and the host's port ("https", <p>,
// 18008): every pod that serves port p shares it, so HTTP/3 marked broken to one such pod is
// skipped for the others too until Envoy retries it; their requests ride HTTP/2 meanwhile.

// alpnH3 is what an inbound QUIC chain negotiates: HTTP/3.
var alpnH3 = []string{"h3"}

// inboundQUICListener is pod p's inbound QUIC listener, when the hop prefers HTTP/3 and p serves
// an HTTP-class port: UDP on the inbound listener's addresses (inboundListenerAddress), in its
// netns; nil otherwise.
func (b *builder) inboundQUICListener(p model.LocalPod, domain string) *listenerv3.Listener {
	if !b.mesh.HopHTTP3 {
		return nil
	}
	pod := PodKey(p.Namespace, p.Name)
	var chains []*listenerv3.FilterChain
	for _, pp := range p.Ports { // sorted by port, each once (podProblem)
		if !pp.Protocol.IsHTTP() {
			continue
		}
		chains = append(chains, b.inboundHTTP3Chain(pp.Port, HopServerName(pp.Port, FQDN(p.Service, p.Namespace, domain)), domain, p.Identity,
			AppCluster(pod, pp.Port), p.AccessOf(pp.Port)))
	}
	if len(chains) == 0 {
		return nil
	}
	for _, c := range chains {
		b.limitConnections(c)
	}
	address, also := inboundListenerAddress(p, b.podIPv6(p))
	overUDP(address)
	for _, a := range also {
		overUDP(a.GetAddress())
	}
	return &listenerv3.Listener{
		Name:                InboundQUICListener(pod),
		Address:             address,
		AdditionalAddresses: also,
		EnableReusePort:     reusePort(),
		UdpListenerConfig: &listenerv3.UdpListenerConfig{QuicOptions: &listenerv3.QuicProtocolOptions{
			QuicProtocolOptions: quicOptions(),
		}},
		// The inbound TCP listener's bounds, for the same peers.
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(ConnectionBufferLimit),
		FilterChains:                  chains,
		TrafficDirection:              corev3.TrafficDirection_INBOUND,
	}
}

// overUDP makes a socket address UDP.
func overUDP(a *corev3.Address) { a.GetSocketAddress().Protocol = corev3.SocketAddress_UDP }

// inboundHTTP3Chain is the QUIC listener's chain for HTTP-class port: the port's SNI, mTLS over
// QUIC, and inboundHTTPManager's connection manager with the HTTP/3 codec.
func (b *builder) inboundHTTP3Chain(port int32, sni, domain, identity, cluster string, access authz.Port) *listenerv3.FilterChain {
	name := InboundHTTP3Chain(port)
	hcm := b.inboundHTTPManager(name, domain, cluster, access)
	hcm.CodecType = hcmv3.HttpConnectionManager_HTTP3
	hcm.Http3ProtocolOptions = http3Options()
	transport := &quicv3.QuicDownstreamTransport{DownstreamTlsContext: downstreamTLSContext(domain, identity, alpnH3, nil)}
	return &listenerv3.FilterChain{
		Name:             name,
		FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{sni}},
		TransportSocket: &corev3.TransportSocket{
			Name:       wellknown.TransportSocketQuic,
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: b.pack("the downstream QUIC transport of "+identity, transport)},
		},
		TransportSocketConnectTimeout: durationpb.New(InboundHandshakeTimeout),
		Filters:                       []*listenerv3.Filter{b.networkFilter(wellknown.HTTPConnectionManager, name, hcm)},
	}
}

// http3Options are both ends' HTTP/3 options: quicOptions' bounds, and extended CONNECT (RFC
// 9220), which is how a WebSocket crosses an HTTP/3 hop, as it crosses an HTTP/2 one (RFC 8441,
// http2Options). Without it the caller's Envoy sends the upgrade's connection-specific headers
// (Connection, Upgrade) over HTTP/3, which forbids them: the inbound closes the whole QUIC
// connection (http3.invalid_header_field), every request on it with the WebSocket's. Envoy 1.40
// marks allow_extended_connect work in progress (it logs so at every update).
func http3Options() *corev3.Http3ProtocolOptions {
	return &corev3.Http3ProtocolOptions{QuicProtocolOptions: quicOptions(), AllowExtendedConnect: true}
}

// quicOptions bound one QUIC connection as http2Options bound an HTTP/2 one: the same streams and
// windows, on both ends of the hop.
func quicOptions() *corev3.QuicProtocolOptions {
	return &corev3.QuicProtocolOptions{
		MaxConcurrentStreams:        wrapperspb.UInt32(HTTP2MaxConcurrentStreams),
		InitialStreamWindowSize:     wrapperspb.UInt32(HTTP2StreamWindow),
		InitialConnectionWindowSize: wrapperspb.UInt32(HTTP2ConnectionWindow),
	}
}

// upstreamQUIC is the transport socket of an HTTP upstream cluster when the hop prefers HTTP/3: a
// QuicUpstreamTransport wrapping hop h's UpstreamTlsContext, byte for byte upstreamTLS's (the
// same certificate, pin and SNI), which Envoy uses for the HTTP/2 attempts too.
func (b *builder) upstreamQUIC(what about, h hop) *corev3.TransportSocket {
	if ts, ok := b.shared.upstreamQUIC[h]; ok {
		return ts
	}
	tls := b.upstreamTLS(what, h).GetTypedConfig().GetValue()
	value := protowire.AppendBytes(protowire.AppendTag(nil, quicUpstreamTLSField, protowire.BytesType), tls)
	ts := &corev3.TransportSocket{
		Name:       wellknown.TransportSocketQuic,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: quicUpstreamTypeURL, Value: value}},
	}
	b.checkAbout(what.part("QUIC transport socket"), ts)
	b.shared.upstreamQUIC = store(b.shared.upstreamQUIC, h, ts)
	return ts
}

var (
	quicUpstreamTypeURL  = typeURLPrefix + string((&quicv3.QuicUpstreamTransport{}).ProtoReflect().Descriptor().FullName())
	quicUpstreamTLSField = fieldNumber(&quicv3.QuicUpstreamTransport{}, "upstream_tls_context")
)

// hopHTTP3Options are the typed_extension_protocol_options of an HTTP upstream cluster whose hop
// prefers HTTP/3: auto_config with HTTP/3 (the connectivity grid) and HTTP/2 (over TLS, ALPN h2),
// each bounded as the HTTP/2 hop is, and the cluster's origin in its alternate protocols cache
// (hopCache), so that the first request already tries HTTP/3.
func (b *builder) hopHTTP3Options(what about, sni string) map[string]*anypb.Any {
	if options, ok := b.hopHTTP3Of[sni]; ok {
		return options
	}
	opts := &httpv3.HttpProtocolOptions{
		CommonHttpProtocolOptions: idleTimeout(meshv1alpha1.ProtocolHTTP2),
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_AutoConfig{AutoConfig: &httpv3.HttpProtocolOptions_AutoHttpConfig{
			Http2ProtocolOptions:           http2Options(),
			Http3ProtocolOptions:           http3Options(),
			AlternateProtocolsCacheOptions: hopCache(sni),
		}},
	}
	options := map[string]*anypb.Any{httpProtocolOptionsKey: b.packAbout(what.part("HTTP/3 hop protocol options"), opts)}
	b.hopHTTP3Of = store(b.hopHTTP3Of, sni, options)
	return options
}

// hopCache is the alternate protocols cache of the clusters whose hops send sni: named after it
// (Envoy requires every use of a name to configure it alike, and these depend on the SNI alone),
// and prepopulated with the origin those clusters' grids look up, (sni, 18008): HTTP/3 on the
// same port.
func hopCache(sni string) *corev3.AlternateProtocolsCacheOptions {
	return &corev3.AlternateProtocolsCacheOptions{
		Name: HopCache(sni),
		PrepopulatedEntries: []*corev3.AlternateProtocolsCacheOptions_AlternateProtocolsCacheEntry{{
			Hostname: sni, Port: uint32(meshv1alpha1.ProxyInboundPort),
		}},
	}
}

// HopCache is the name of the alternate protocols cache of the HTTP/3 hops that send sni.
func HopCache(sni string) string { return "hop_h3_" + sni }
