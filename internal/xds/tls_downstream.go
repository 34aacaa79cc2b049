// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// alpnH2 is what an inbound HTTP chain negotiates: the mesh hop of an HTTP port is HTTP/2. TCP
// chains negotiate nothing (proposal 037: "h2 means HTTP, nothing means TCP").
var alpnH2 = []string{"h2"}

// downstreamTLS is the transport socket of every inbound chain: mesh mTLS, terminated with the
// pod's own certificate (CertificateSecret(identity)), requiring a client certificate that chains
// to the mesh's trust bundle (TrustBundleSecret(domain)) and names an identity of the trust
// domain: a URI SAN starting with spiffe://<domain>/, or, when peers are given, one of peers (a
// governed TCP port's admitted callers, admittedPeers). Both secrets come by SDS over the ADS
// stream (sdsSecret).
func (b *builder) downstreamTLS(domain, identity string, alpn []string, peers []*tlsv3.SubjectAltNameMatcher) *corev3.TransportSocket {
	return &corev3.TransportSocket{
		Name: wellknown.TransportSocketTLS,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: b.pack("the downstream TLS context of "+identity,
			downstreamTLSContext(domain, identity, alpn, peers))},
	}
}

// downstreamTLSContext is downstreamTLS's context, unpacked: what an inbound QUIC chain wraps too
// (quicDownstream).
func downstreamTLSContext(domain, identity string, alpn []string, peers []*tlsv3.SubjectAltNameMatcher) *tlsv3.DownstreamTlsContext {
	if peers == nil {
		peers = []*tlsv3.SubjectAltNameMatcher{uriSAN(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{
			// The trust domain's SPIFFE ID (the bundle's name) and a slash: every ID in the domain.
			Prefix: TrustBundleSecret(domain) + "/",
		}})}
	}
	return &tlsv3.DownstreamTlsContext{
		RequireClientCertificate: wrapperspb.Bool(true),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsSecret(CertificateSecret(identity))},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
				CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
					DefaultValidationContext: &tlsv3.CertificateValidationContext{
						MatchTypedSubjectAltNames: peers,
					},
					ValidationContextSdsSecretConfig: sdsSecret(TrustBundleSecret(domain)),
				},
			},
			AlpnProtocols: alpn,
		},
	}
}

// uriSAN matches a certificate's URI SAN (a SPIFFE ID) with m.
func uriSAN(m *matcherv3.StringMatcher) *tlsv3.SubjectAltNameMatcher {
	return &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_URI, Matcher: m}
}
