// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// hop is one upstream TLS connection's parameters: who dials, whom it must reach, which chain of
// the destination's inbound it asks for, and whether it speaks HTTP.
type hop struct {
	// source is the SPIFFE ID of the dialing pod: its certificate is presented.
	source string
	// destination is the SPIFFE ID the server's certificate must carry as a URI SAN.
	destination string
	// sni selects the destination's inbound chain: ServerName(port), for every port.
	sni string
	// http offers ALPN h2; a TCP hop offers no ALPN (proposal 037: "nothing means TCP").
	http bool
}

// upstreamTLS is the transport socket of a mesh upstream cluster: mTLS with the source's
// certificate, the mesh trust bundle, and the server pinned to the destination's SPIFFE ID.
// Both secrets come by SDS (sdsSecret). One per hop per build, shared by the clusters that make
// the hop (a TCP port's cluster and the default TCP cluster); what names the first.
//
// The packed UpstreamTlsContext is
//
//	common_tls_context:
//	  alpn_protocols: [h2]                        (an HTTP hop only)
//	  tls_certificate_sds_secret_configs: [the source's certificate]
//	  combined_validation_context: the trust bundle, and the server pinned to the destination
//	sni: h.sni                                   (unless empty)
//
// Its bytes are put together from the wire forms of those fields (upstreamTLSBytes), each
// marshaled once per build: marshaling 6 000 contexts whole was a fifth of a build of 1 000
// services. Each part is validated once, when made; the context's own rule (sni at most 255
// bytes) is checked here.
func (b *builder) upstreamTLS(what about, h hop) *corev3.TransportSocket {
	if ts, ok := b.shared.upstreamTLS[h]; ok {
		return ts
	}
	// The context's own rule depends on its SNI alone, so it is checked once per SNI.
	if !b.shared.checkedSNIs[h.sni] {
		b.checkAbout(what.part("upstream TLS context"), &tlsv3.UpstreamTlsContext{Sni: h.sni})
		b.shared.checkedSNIs = store(b.shared.checkedSNIs, h.sni, true)
	}
	packed := &anypb.Any{TypeUrl: upstreamTLSTypeURL, Value: b.upstreamTLSBytes(what, h)}
	ts := &corev3.TransportSocket{
		Name:       wellknown.TransportSocketTls,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: packed},
	}
	b.checkAbout(what.part("transport socket"), ts)
	b.shared.upstreamTLS = store(b.shared.upstreamTLS, h, ts)
	return ts
}

// upstreamTLSTypeURL is the type URL of a packed UpstreamTlsContext, as anypb spells it.
var upstreamTLSTypeURL = typeURLPrefix + string((&tlsv3.UpstreamTlsContext{}).ProtoReflect().Descriptor().FullName())

// The numbers of the fields upstreamTLSBytes writes, from the messages' descriptors.
var (
	upstreamCommonTLSField = fieldNumber(&tlsv3.UpstreamTlsContext{}, "common_tls_context")
	upstreamSNIField       = fieldNumber(&tlsv3.UpstreamTlsContext{}, "sni")
	alpnField              = fieldNumber(&tlsv3.CommonTlsContext{}, "alpn_protocols")
	certificatesField      = fieldNumber(&tlsv3.CommonTlsContext{}, "tls_certificate_sds_secret_configs")
	combinedField          = fieldNumber(&tlsv3.CommonTlsContext{}, "combined_validation_context")
)

// upstreamTLSBytes is the deterministic wire form of hop h's UpstreamTlsContext (see
// upstreamTLS): what proto.Marshal writes, each set field in field-number order (alpn_protocols
// 4 < tls_certificate_sds_secret_configs 6 < combined_validation_context 8; common_tls_context
// 1 < sni 2), a tag and a length before each message. TestUpstreamTLSBytes compares it with
// proto.Marshal's for every hop of the scenarios.
func (b *builder) upstreamTLSBytes(what about, h hop) []byte {
	alpn := 0
	if h.http {
		for _, p := range alpnH2 {
			alpn += protowire.SizeTag(alpnField) + protowire.SizeBytes(len(p))
		}
	}
	certificate, pinned := b.certificateField(what, h.source), b.pinnedField(what, h.destination)
	common := alpn + len(certificate) + len(pinned)
	size := protowire.SizeTag(upstreamCommonTLSField) + protowire.SizeBytes(common)
	if h.sni != "" {
		size += protowire.SizeTag(upstreamSNIField) + protowire.SizeBytes(len(h.sni))
	}
	out := make([]byte, 0, size)
	out = protowire.AppendTag(out, upstreamCommonTLSField, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(common))
	if h.http {
		// The mesh hop of an HTTP port is always HTTP/2, and the destination's inbound tells HTTP
		// from TCP by the ALPN ("h2 means HTTP, nothing means TCP").
		for _, p := range alpnH2 {
			out = protowire.AppendTag(out, alpnField, protowire.BytesType)
			out = protowire.AppendString(out, p)
		}
	}
	out = append(append(out, certificate...), pinned...)
	if h.sni != "" {
		out = protowire.AppendTag(out, upstreamSNIField, protowire.BytesType)
		out = protowire.AppendString(out, h.sni)
	}
	return out
}

// certificateField is the common TLS context's tls_certificate_sds_secret_configs on the wire:
// the SDS reference to identity's certificate. Validated and marshaled once per build.
func (b *builder) certificateField(what about, identity string) []byte {
	if f, ok := b.shared.certificates[identity]; ok {
		return f
	}
	s := sdsSecret(CertificateSecret(identity))
	f := b.wireField(what.part("certificate SDS config"), certificatesField, s)
	b.shared.certificates = store(b.shared.certificates, identity, f)
	return f
}

// pinnedField is the common TLS context's combined_validation_context on the wire: the mesh's
// trust bundle by SDS, and the server pinned to destination's SPIFFE ID. Validated and marshaled
// once per destination per build.
func (b *builder) pinnedField(what about, destination string) []byte {
	if f, ok := b.shared.pinned[destination]; ok {
		return f
	}
	combined := &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
		DefaultValidationContext:         pinnedTo(destination),
		ValidationContextSdsSecretConfig: sdsSecret(TrustBundleSecret(b.mesh.Domain)),
	}
	f := b.wireField(what.part("validation context"), combinedField, combined)
	b.shared.pinned = store(b.shared.pinned, destination, f)
	return f
}

// wireField validates m and returns it on the wire as field number of a message: its tag, its
// length and its deterministic wire form.
func (b *builder) wireField(what about, number protowire.Number, m proto.Message) []byte {
	b.checkAbout(what, m)
	value, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil && b.err == nil {
		b.err = fmt.Errorf("xds: marshaling %s: %w", what, err)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, number, protowire.BytesType), value)
}

// fieldNumber is the number of m's field named name; it panics (at start-up) when m has none.
func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	fd := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if fd == nil {
		panic(fmt.Sprintf("xds: %s has no field %s", m.ProtoReflect().Descriptor().FullName(), name))
	}
	return fd.Number()
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
