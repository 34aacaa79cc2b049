// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"slices"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// HTTP3Hop checks that a pod's inbound QUIC listener (the HTTP/3 hop, xds.InboundQUICListener)
// admits no more than its inbound TCP listener: each of its chains has a twin on the TCP listener
// (a chain that takes the same SNI) whose connection manager is the same but for the codec (its
// stat prefix, codec, HTTP/2 or HTTP/3 options and route configuration's name): the same routes,
// HTTP filters (the authorization's RBAC among them), caller identity, access log and local
// replies; and whose mTLS is the same but for the ALPN: the pod's certificate, a client
// certificate required, the same trust bundle and the same admitted peers. A QUIC chain that
// served a port with fewer filters would let a caller around the port's policy by speaking
// HTTP/3.
func HTTP3Hop(res xds.Resources) []string {
	listeners := map[string]*listenerv3.Listener{}
	for _, l := range res.Listeners {
		listeners[l.GetName()] = l
	}
	var out []string
	for _, l := range res.Listeners {
		if l.GetUdpListenerConfig().GetQuicOptions() == nil {
			continue
		}
		at := resourceAt("listener", l.GetName())
		pod, ok := strings.CutPrefix(l.GetName(), xds.InboundQUICListener(""))
		tcp := listeners[xds.InboundListener(pod)]
		if !ok || tcp == nil {
			out = append(out, fmt.Sprintf("%s: a QUIC listener that is no pod's inbound QUIC listener beside its inbound listener %q", at, xds.InboundListener(pod)))
			continue
		}
		if l.GetDefaultFilterChain() != nil {
			out = append(out, at+": a default chain: every HTTP/3 hop names its port, and nothing else may be served over QUIC")
		}
		for _, fc := range l.GetFilterChains() {
			out = append(out, http3Twin(fmt.Sprintf("%s chain %q", at, fc.GetName()), fc, tcp)...)
		}
	}
	return out
}

// http3Twin checks QUIC chain fc against its twin on the pod's inbound TCP listener tcp.
func http3Twin(at string, fc *listenerv3.FilterChain, tcp *listenerv3.Listener) []string {
	names := fc.GetFilterChainMatch().GetServerNames()
	if len(names) != 1 {
		return []string{fmt.Sprintf("%s: server_names %v, want the one SNI of its port's HTTP/3 hop", at, names)}
	}
	i := slices.IndexFunc(tcp.GetFilterChains(), func(c *listenerv3.FilterChain) bool {
		return slices.Contains(c.GetFilterChainMatch().GetServerNames(), names[0])
	})
	if i < 0 {
		return []string{fmt.Sprintf("%s: no chain of %q takes SNI %q: the hop's HTTP/2 leg would land on the floor", at, tcp.GetName(), names[0])}
	}
	twin := tcp.GetFilterChains()[i]
	var out []string
	h3, h2 := chainHCM(fc), chainHCM(twin)
	switch {
	case h3 == nil || h2 == nil:
		out = append(out, fmt.Sprintf("%s: it or its twin %q has no HTTP connection manager", at, twin.GetName()))
	case h3.GetCodecType() != hcmv3.HttpConnectionManager_HTTP3:
		out = append(out, fmt.Sprintf("%s: codec %s, want HTTP3", at, h3.GetCodecType()))
	case !proto.Equal(butCodec(h3), butCodec(h2)):
		out = append(out, fmt.Sprintf("%s: its connection manager differs from its twin %q's but for the codec: %s", at, twin.GetName(), firstDifference(butCodec(h3).ProtoReflect(), butCodec(h2).ProtoReflect(), "")))
	}
	quic := &quicv3.QuicDownstreamTransport{}
	tls := &tlsv3.DownstreamTlsContext{}
	switch {
	case fc.GetTransportSocket().GetName() != wellknown.TransportSocketQuic || !unpackAs(fc.GetTransportSocket().GetTypedConfig(), quic):
		out = append(out, fmt.Sprintf("%s: transport socket %q is not a QuicDownstreamTransport", at, fc.GetTransportSocket().GetName()))
	case !unpackAs(twin.GetTransportSocket().GetTypedConfig(), tls):
		out = append(out, fmt.Sprintf("%s: its twin %q has no DownstreamTlsContext", at, twin.GetName()))
	case !quic.GetDownstreamTlsContext().GetRequireClientCertificate().GetValue():
		out = append(out, at+": requires no client certificate: the caller's identity is not verified over QUIC")
	case !proto.Equal(butALPN(quic.GetDownstreamTlsContext()), butALPN(tls)):
		out = append(out, fmt.Sprintf("%s: its mTLS differs from its twin %q's but for the ALPN: %s", at, twin.GetName(),
			firstDifference(butALPN(quic.GetDownstreamTlsContext()).ProtoReflect(), butALPN(tls).ProtoReflect(), "")))
	}
	return out
}

// chainHCM is chain c's HTTP connection manager, nil when it has none.
func chainHCM(c *listenerv3.FilterChain) *hcmv3.HttpConnectionManager {
	for _, f := range c.GetFilters() {
		hcm := &hcmv3.HttpConnectionManager{}
		if f.GetName() == wellknown.HTTPConnectionManager && unpackAs(f.GetTypedConfig(), hcm) {
			return hcm
		}
	}
	return nil
}

// butCodec is a copy of hcm without what an HTTP/3 chain and its HTTP/2 twin may differ in.
func butCodec(hcm *hcmv3.HttpConnectionManager) *hcmv3.HttpConnectionManager {
	c := proto.Clone(hcm).(*hcmv3.HttpConnectionManager)
	c.StatPrefix, c.CodecType, c.Http2ProtocolOptions, c.Http3ProtocolOptions = "", 0, nil, nil
	if r := c.GetRouteConfig(); r != nil {
		r.Name = ""
	}
	return c
}

// butALPN is a copy of ctx without its ALPN.
func butALPN(ctx *tlsv3.DownstreamTlsContext) *tlsv3.DownstreamTlsContext {
	c := proto.Clone(ctx).(*tlsv3.DownstreamTlsContext)
	if c.GetCommonTlsContext() != nil {
		c.CommonTlsContext.AlpnProtocols = nil
	}
	return c
}
