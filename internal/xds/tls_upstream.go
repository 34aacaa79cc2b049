// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
)

// hop is one upstream TLS connection's parameters: who dials, whom it must reach, which chain of
// the destination's inbound it asks for, and whether it speaks HTTP.
type hop struct {
	// source is the SPIFFE ID of the dialing pod: its certificate is presented.
	source string
	// destination is the SPIFFE ID the server's certificate must carry as a URI SAN.
	destination string
	// sni selects the destination's inbound chain: SNI(port, primary).
	sni string
	// http offers ALPN h2; a TCP hop offers no ALPN (proposal 037: "nothing means TCP").
	http bool
}

// upstreamTLS is the transport socket of a mesh upstream cluster: mTLS with the source's
// certificate, the mesh trust bundle, and the server pinned to the destination's SPIFFE ID.
// Both secrets come by SDS (sdsSecret). One per hop per build, shared by the clusters that make
// the hop (a TCP port's cluster and the default TCP cluster); what names the first.
func (b *builder) upstreamTLS(what about, h hop) *corev3.TransportSocket {
	if ts, ok := b.shared.upstreamTLS[h]; ok {
		return ts
	}
	ctx := &tlsv3.UpstreamTlsContext{Sni: h.sni}
	// Checked without its common context, which is shared and was checked when made
	// (UpstreamTlsContext sets no rule on common_tls_context); packed whole.
	b.checkAbout(what.part("upstream TLS context"), ctx)
	ctx.CommonTlsContext = b.upstreamCommonTLS(what, h)
	ts := &corev3.TransportSocket{
		Name:       wellknown.TransportSocketTls,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: b.packChecked(what.part("upstream TLS context"), ctx)},
	}
	b.checkAbout(what.part("transport socket"), ts)
	b.shared.upstreamTLS = store(b.shared.upstreamTLS, h, ts)
	return ts
}

// upstreamCommonTLS is the common TLS context of hop h: the source's certificate, the validation
// context pinned to the destination, and ALPN h2 for an HTTP hop. One per source, destination
// and ALPN per build; each part validated once (shared).
func (b *builder) upstreamCommonTLS(what about, h hop) *tlsv3.CommonTlsContext {
	k := commonTLSKey{source: h.source, destination: h.destination, http: h.http}
	if c, ok := b.shared.commonTLS[k]; ok {
		return c
	}
	c := &tlsv3.CommonTlsContext{}
	if h.http {
		// The mesh hop of an HTTP port is always HTTP/2, and the destination's inbound tells HTTP
		// from TCP by the ALPN ("h2 means HTTP, nothing means TCP").
		c.AlpnProtocols = alpnH2
	}
	// Checked without its secrets and validation context, shared and checked when made
	// (CommonTlsContext sets no rule on tls_certificate_sds_secret_configs, and the oneof's one
	// rule, no typed nil, holds: pinnedValidation never returns one).
	b.checkAbout(what.part("common TLS context"), c)
	c.TlsCertificateSdsSecretConfigs = b.certificate(what, h.source)
	c.ValidationContextType = b.pinnedValidation(what, h.destination)
	b.shared.commonTLS = store(b.shared.commonTLS, k, c)
	return c
}

// pinnedTo accepts only a peer certificate whose URI SAN is exactly identity: a certificate the
// trust bundle signed for another workload is refused (the SAN pin every mesh cluster carries).
func pinnedTo(identity string) *tlsv3.CertificateValidationContext {
	return &tlsv3.CertificateValidationContext{
		MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
			SanType: tlsv3.SubjectAltNameMatcher_URI,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: identity}},
		}},
	}
}
