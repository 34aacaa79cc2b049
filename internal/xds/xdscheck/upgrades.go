// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// websocket is the upgrade type of WebSocket as upgrade_configs names it (compared
// case-insensitively, as Envoy does).
const websocket = "websocket"

// http10 is what http_inspector reports for a request line that is not HTTP/1.1.
const http10 = "http/1.0"

// Upgrades checks that a WebSocket and an HTTP/1.0 client get through every HTTP path of the
// node, as Envoy treats them:
//   - every HTTP connection manager allows the websocket upgrade (an upgrade_configs entry not
//     disabled: without one Envoy answers 403) and extended CONNECT over HTTP/2
//     (http2_protocol_options.allow_connect: without it the codec never advertises
//     SETTINGS_ENABLE_CONNECT_PROTOCOL, and a WebSocket cannot cross an HTTP/2 hop to it);
//   - no route disables the websocket upgrade (a route's entry overrides its HCM's);
//   - every HTTP/2 an upstream speaks (explicit, or the downstream's) allows extended CONNECT;
//   - every HCM chain that takes http_inspector's "http/1.0" accepts it (accept_http_10: else
//     Envoy answers 426 to every such client).
func Upgrades(res xds.Resources) []string {
	var out []string
	unreadable := walk(res, func(at string, m proto.Message, _ bool) {
		switch t := m.(type) {
		case *hcmv3.HttpConnectionManager:
			out = append(out, hcmUpgrades(at, t)...)
		case *routev3.RouteAction:
			for _, u := range t.GetUpgradeConfigs() {
				if strings.EqualFold(u.GetUpgradeType(), websocket) && !enabled(u.GetEnabled()) {
					out = append(out, at+": the route disables the websocket upgrade: Envoy answers 403 to a WebSocket client there")
				}
			}
		case *httpv3.HttpProtocolOptions:
			if h2 := upstreamHTTP2(t); h2 != nil && !h2.GetAllowConnect() {
				out = append(out, at+": its HTTP/2 upstream does not allow_connect: a WebSocket cannot go to it as an extended CONNECT")
			}
			if h3 := t.GetAutoConfig().GetHttp3ProtocolOptions(); h3 != nil && !h3.GetAllowExtendedConnect() {
				out = append(out, at+": its HTTP/3 upstream does not allow_extended_connect: a WebSocket goes to it with connection-specific headers, "+
					"and the peer closes the whole QUIC connection (http3.invalid_header_field)")
			}
		}
	})
	for _, l := range res.Listeners {
		for _, fc := range listenerChains(l) {
			out = append(out, http10Chain(resourceAt("listener", l.GetName()), fc)...)
		}
	}
	return append(out, unreadable...)
}

// hcmUpgrades are the violations of one HTTP connection manager: websocket and extended CONNECT.
func hcmUpgrades(at string, hcm *hcmv3.HttpConnectionManager) []string {
	var out []string
	allowed := slices.ContainsFunc(hcm.GetUpgradeConfigs(), func(u *hcmv3.HttpConnectionManager_UpgradeConfig) bool {
		return strings.EqualFold(u.GetUpgradeType(), websocket) && enabled(u.GetEnabled())
	})
	if !allowed {
		out = append(out, fmt.Sprintf("%s: HTTP connection manager %q does not allow the websocket upgrade (upgrade_configs): Envoy answers 403 to a WebSocket client",
			at, hcm.GetStatPrefix()))
	}
	if hcm.GetCodecType() == hcmv3.HttpConnectionManager_HTTP3 {
		if !hcm.GetHttp3ProtocolOptions().GetAllowExtendedConnect() {
			out = append(out, fmt.Sprintf("%s: HTTP connection manager %q does not set http3_protocol_options.allow_extended_connect: a WebSocket cannot reach it over HTTP/3 (extended CONNECT)",
				at, hcm.GetStatPrefix()))
		}
		return out
	}
	if !hcm.GetHttp2ProtocolOptions().GetAllowConnect() {
		out = append(out, fmt.Sprintf("%s: HTTP connection manager %q does not set http2_protocol_options.allow_connect: a WebSocket cannot reach it over HTTP/2 (extended CONNECT)",
			at, hcm.GetStatPrefix()))
	}
	return out
}

// http10Chain is the violation of a chain that takes HTTP/1.0 to an HCM that refuses it.
func http10Chain(at string, fc *listenerv3.FilterChain) []string {
	if fc == nil || !slices.Contains(fc.GetFilterChainMatch().GetApplicationProtocols(), http10) {
		return nil
	}
	var out []string
	for _, f := range fc.GetFilters() {
		hcm := &hcmv3.HttpConnectionManager{}
		if unpackAs(f.GetTypedConfig(), hcm) && !hcm.GetHttpProtocolOptions().GetAcceptHttp_10() {
			out = append(out, fmt.Sprintf("%s chain %q: it takes %s, and its HTTP connection manager does not accept_http_10: Envoy answers 426",
				at, fc.GetName(), http10))
		}
	}
	return out
}

// upstreamHTTP2 is the HTTP/2 an upstream's protocol options make it speak: explicitly, or when
// the downstream does; nil when it never speaks HTTP/2 that way (HTTP/1.1 only, or auto, whose
// options are checked the same way when present).
func upstreamHTTP2(o *httpv3.HttpProtocolOptions) *corev3.Http2ProtocolOptions {
	switch p := o.GetUpstreamProtocolOptions().(type) {
	case *httpv3.HttpProtocolOptions_ExplicitHttpConfig_:
		if h2, ok := p.ExplicitHttpConfig.GetProtocolConfig().(*httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions); ok {
			return orEmpty(h2.Http2ProtocolOptions)
		}
	case *httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig:
		return orEmpty(p.UseDownstreamProtocolConfig.GetHttp2ProtocolOptions())
	case *httpv3.HttpProtocolOptions_AutoConfig:
		return orEmpty(p.AutoConfig.GetHttp2ProtocolOptions())
	}
	return nil
}

// orEmpty is o, or Envoy's defaults (no allow_connect) when unset.
func orEmpty(o *corev3.Http2ProtocolOptions) *corev3.Http2ProtocolOptions {
	if o == nil {
		return &corev3.Http2ProtocolOptions{}
	}
	return o
}

// enabled reads an upgrade's enabled: true unless set to false.
func enabled(b *wrapperspb.BoolValue) bool { return b == nil || b.GetValue() }
