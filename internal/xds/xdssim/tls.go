// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// The ALPN names of HTTP (Http::Utility::AlpnNames).
const (
	alpnH2     = "h2"
	alpnHTTP11 = "http/1.1"
)

// httpProtocolOptionsKey is where a cluster carries its upstream HTTP protocol options.
const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// inline stands for a certificate or validation context given inline rather than by SDS.
const inline = "inline"

// upstreamHTTP is what the router may speak to the cluster, in the order of the HTTP pool's
// ALPN fallback (HttpConnPoolImplBase's wrapTransportSocketOptions): explicit HTTP/2 [h2],
// explicit HTTP/1.1 or nothing configured [http/1.1], auto [h2 http/1.1], the downstream's
// protocol when use_downstream_protocol_config.
func upstreamHTTP(cl *clusterv3.Cluster, downstreamH2 bool) ([]string, *upstreamhttpv3.HttpProtocolOptions, error) {
	a, ok := cl.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]
	if !ok {
		//nolint:staticcheck // Envoy 1.40 still honours the deprecated field: without it, HTTP/2 would read as HTTP/1.1.
		if cl.GetHttp2ProtocolOptions() != nil {
			return []string{alpnH2}, nil, nil
		}
		return []string{alpnHTTP11}, nil, nil
	}
	opts := &upstreamhttpv3.HttpProtocolOptions{}
	if !unpack(a, opts) {
		return nil, nil, fmt.Errorf("%w: cluster %q: %s is a %s", ErrUnsupported, cl.GetName(), httpProtocolOptionsKey, a.GetTypeUrl())
	}
	switch p := opts.GetUpstreamProtocolOptions().(type) {
	case *upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_:
		switch p.ExplicitHttpConfig.GetProtocolConfig().(type) {
		case *upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions:
			return []string{alpnH2}, opts, nil
		case *upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http3ProtocolOptions:
			return nil, nil, fmt.Errorf("%w: cluster %q speaks HTTP/3", ErrUnsupported, cl.GetName())
		}
	case *upstreamhttpv3.HttpProtocolOptions_UseDownstreamProtocolConfig:
		if downstreamH2 {
			return []string{alpnH2}, opts, nil
		}
	case *upstreamhttpv3.HttpProtocolOptions_AutoConfig:
		return []string{alpnH2, alpnHTTP11}, opts, nil
	}
	return []string{alpnHTTP11}, opts, nil
}

// upstreamTLS is the cluster's TLS context as its ClientHello sees it: the SNI (auto_sni: the
// request's host, without its port), the ALPN (the context's list, else the HTTP pool's
// fallback; tcp_proxy has none), and how the peer is verified.
func upstreamTLS(cl *clusterv3.Cluster, up upstream, protocols []string, opts *upstreamhttpv3.HttpProtocolOptions) (*TLS, error) {
	ts := cl.GetTransportSocket()
	if ts == nil || isRawBuffer(ts) {
		return nil, nil
	}
	ctx := &tlsv3.UpstreamTlsContext{}
	// An HTTP/3 hop's QUIC transport wraps the context its HTTP/2 leg uses: the simulator walks
	// that leg (a connection over TCP), which the hop falls back to and which takes the same
	// chains and certificate checks.
	quic := &quicv3.QuicUpstreamTransport{}
	if tc := ts.GetTypedConfig(); tc != nil && unpack(tc, quic) {
		ctx = quic.GetUpstreamTlsContext()
	} else if tc == nil || !unpack(tc, ctx) {
		return nil, fmt.Errorf("%w: cluster %q has transport socket %q", ErrUnsupported, cl.GetName(), ts.GetName())
	}
	if ctx.GetAutoHostSni() {
		return nil, fmt.Errorf("%w: cluster %q sets auto_host_sni", ErrUnsupported, cl.GetName())
	}
	t := commonTLS(ctx.GetCommonTlsContext())
	t.SNI = ctx.GetSni()
	if o := opts.GetUpstreamHttpProtocolOptions(); up.http && o.GetAutoSni() {
		if o.GetOverrideAutoSniHeader() != "" {
			return nil, fmt.Errorf("%w: cluster %q takes its SNI from header %q", ErrUnsupported, cl.GetName(), o.GetOverrideAutoSniHeader())
		}
		host := up.request.Host
		if i := portStart(host); i >= 0 {
			host = host[:i]
		}
		t.SNI = host
	}
	if len(t.ALPN) == 0 && up.http {
		t.ALPN = protocols
	}
	return t, nil
}

// commonTLS reads what both sides of a TLS context share.
func commonTLS(c *tlsv3.CommonTlsContext) *TLS {
	t := &TLS{ALPN: c.GetAlpnProtocols()}
	for _, s := range c.GetTlsCertificateSdsSecretConfigs() {
		t.Certificates = append(t.Certificates, s.GetName())
	}
	if len(c.GetTlsCertificates()) > 0 {
		t.Certificates = append(t.Certificates, inline)
	}
	if p := c.GetTlsCertificateProviderInstance(); p != nil {
		t.Certificates = append(t.Certificates, "provider:"+p.GetInstanceName())
	}
	switch v := c.GetValidationContextType().(type) {
	case *tlsv3.CommonTlsContext_ValidationContext:
		t.TrustBundle, t.SANs = inline, sans(v.ValidationContext)
	case *tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig:
		t.TrustBundle = v.ValidationContextSdsSecretConfig.GetName()
	case *tlsv3.CommonTlsContext_CombinedValidationContext:
		t.TrustBundle = v.CombinedValidationContext.GetValidationContextSdsSecretConfig().GetName()
		t.SANs = sans(v.CombinedValidationContext.GetDefaultValidationContext())
	case nil:
	default: // a certificate provider: named by its kind, never silently empty
		t.TrustBundle = fmt.Sprintf("%T", v)
	}
	return t
}

// sans are a validation context's subject-alternative-name matchers.
func sans(vc *tlsv3.CertificateValidationContext) []SAN {
	var out []SAN
	for _, m := range vc.GetMatchTypedSubjectAltNames() {
		match, value := describe(m.GetMatcher())
		out = append(out, SAN{Type: m.GetSanType().String(), Match: match, Value: value})
	}
	//nolint:staticcheck // Envoy 1.40 still pins to the deprecated matchers: dropping them would hide a pin.
	for _, m := range vc.GetMatchSubjectAltNames() {
		match, value := describe(m)
		out = append(out, SAN{Match: match, Value: value})
	}
	return out
}

// describe spells a StringMatcher as its kind and value.
func describe(m *matcherv3.StringMatcher) (string, string) {
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return "exact", p.Exact
	case *matcherv3.StringMatcher_Prefix:
		return "prefix", p.Prefix
	case *matcherv3.StringMatcher_Suffix:
		return "suffix", p.Suffix
	case *matcherv3.StringMatcher_Contains:
		return "contains", p.Contains
	case *matcherv3.StringMatcher_SafeRegex:
		return "regex", p.SafeRegex.GetRegex()
	}
	return fmt.Sprintf("%T", m.GetMatchPattern()), ""
}

// isRawBuffer says the transport socket is plaintext.
func isRawBuffer(ts *corev3.TransportSocket) bool {
	if tc := ts.GetTypedConfig(); tc != nil {
		return tc.MessageName() == (&rawbufferv3.RawBuffer{}).ProtoReflect().Descriptor().FullName()
	}
	return ts.GetName() == "envoy.transport_sockets.raw_buffer"
}
