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
// Both secrets come by SDS (sdsSecret). The context is validated before it is packed.
func (b *builder) upstreamTLS(what string, h hop) *corev3.TransportSocket {
	ctx := &tlsv3.UpstreamTlsContext{
		Sni: h.sni,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsSecret(CertificateSecret(h.source))},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
				CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
					DefaultValidationContext:         pinnedTo(h.destination),
					ValidationContextSdsSecretConfig: sdsSecret(TrustBundleSecret(b.mesh.Domain)),
				},
			},
		},
	}
	if h.http {
		// The mesh hop of an HTTP port is always HTTP/2, and the destination's inbound tells HTTP
		// from TCP by the ALPN ("h2 means HTTP, nothing means TCP").
		ctx.CommonTlsContext.AlpnProtocols = []string{"h2"}
	}
	return &corev3.TransportSocket{
		Name:       wellknown.TransportSocketTls,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: b.pack(what+" upstream TLS context", ctx)},
	}
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
