// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// sdsSecret references a secret the agent serves itself, over the same ADS stream Envoy already
// holds (the agent is Envoy's only xDS server): a certificate (CertificateSecret) or the trust
// bundle (TrustBundleSecret). Every TLS context of the mesh names its secrets this way.
func sdsSecret(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: adsSource()}
}

// adsSource is a config source that says "over the ADS stream", in API version v3.
func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

// The secrets themselves: what the agent serves under the names the TLS contexts reference. Their
// material is inline (PEM), from the SPIRE agent; an error never quotes it.

// SVIDSecret is the SDS secret named CertificateSecret(identity): identity's X.509 SVID, its
// certificate chain (leaf first) and private key, PEM.
func SVIDSecret(identity string, chainPEM, keyPEM []byte) (*tlsv3.Secret, error) {
	s := &tlsv3.Secret{Name: CertificateSecret(identity), Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inlineBytes(chainPEM),
		PrivateKey:       inlineBytes(keyPEM),
	}}}
	if len(chainPEM) == 0 || len(keyPEM) == 0 {
		return nil, fmt.Errorf("xds: the SDS secret %q needs a certificate chain and a private key (got %d and %d bytes)", s.Name, len(chainPEM), len(keyPEM))
	}
	return s, validSecret(s)
}

// BundleSecret is the SDS secret named TrustBundleSecret(domain): the validation context whose
// trusted CAs are the trust domain's X.509 authorities (bundlePEM). Each TLS context combines it
// with its own SAN matchers (the pin).
func BundleSecret(domain string, bundlePEM []byte) (*tlsv3.Secret, error) {
	s := &tlsv3.Secret{Name: TrustBundleSecret(domain), Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: inlineBytes(bundlePEM),
	}}}
	if len(bundlePEM) == 0 {
		return nil, fmt.Errorf("xds: the SDS secret %q needs the trust bundle's certificates (got none)", s.Name)
	}
	return s, validSecret(s)
}

func inlineBytes(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}

// validSecret runs s's validator; its message names fields and rules, never their values.
func validSecret(s *tlsv3.Secret) error {
	if err := s.ValidateAll(); err != nil {
		return fmt.Errorf("xds: the SDS secret %q is invalid: %w", s.GetName(), err)
	}
	return nil
}

// SecretNames are the SDS secrets the clusters' and listeners' TLS contexts reference, sorted:
// what the node's Envoy asks for (one state-of-the-world SDS request naming them all, over ADS).
// The xDS server reads them on every publish, so the packed contexts are scanned in their wire
// form for the few fields that name secrets, never unmarshaled: unmarshaling the contexts of
// 1 000 services (BenchmarkSecretNames) took a quarter of their build's time, scanning takes 2 %.
func SecretNames(clusters []*clusterv3.Cluster, listeners []*listenerv3.Listener) ([]string, error) {
	names := map[string]bool{}
	var errs []error
	add := func(ts *corev3.TransportSocket) {
		config := ts.GetTypedConfig()
		common := upstreamCommonTLSField
		switch config.GetTypeUrl() {
		case upstreamTLSTypeURL:
		case downstreamTLSTypeURL:
			common = downstreamCommonTLSField
		default:
			return
		}
		if err := eachField(config.GetValue(), common, func(b []byte) error { return sdsNamesOfCommon(b, names) }); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range clusters {
		add(c.GetTransportSocket())
		for _, m := range c.GetTransportSocketMatches() {
			add(m.GetTransportSocket())
		}
	}
	for _, l := range listeners {
		for _, fc := range l.GetFilterChains() {
			add(fc.GetTransportSocket())
		}
		add(l.GetDefaultFilterChain().GetTransportSocket())
	}
	delete(names, "")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("xds: reading the TLS contexts' SDS references: %w", err)
	}
	return slices.Sorted(maps.Keys(names)), nil
}

// The numbers of the fields SecretNames reads, from the messages' descriptors.
var (
	downstreamCommonTLSField = fieldNumber(&tlsv3.DownstreamTlsContext{}, "common_tls_context")
	validationSDSField       = fieldNumber(&tlsv3.CommonTlsContext{}, "validation_context_sds_secret_config")
	combinedSDSField         = fieldNumber(&tlsv3.CommonTlsContext_CombinedCertificateValidationContext{}, "validation_context_sds_secret_config")
	sdsNameField             = fieldNumber(&tlsv3.SdsSecretConfig{}, "name")
)

// sdsNamesOfCommon adds to names the secrets a CommonTlsContext's wire form names: its
// certificates', its validation context's, its combined validation context's.
func sdsNamesOfCommon(common []byte, names map[string]bool) error {
	addName := func(sds []byte) error {
		return eachField(sds, sdsNameField, func(name []byte) error {
			if !names[string(name)] { // no allocation unless the name is new
				names[string(name)] = true
			}
			return nil
		})
	}
	return errors.Join(
		eachField(common, certificatesField, addName),
		eachField(common, validationSDSField, addName),
		eachField(common, combinedField, func(combined []byte) error {
			return eachField(combined, combinedSDSField, addName)
		}),
	)
}

// eachField calls f with the bytes of every occurrence of length-delimited field number in the
// wire form of a message, b.
func eachField(b []byte, number protowire.Number, f func([]byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num == number && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if err := f(v); err != nil {
				return err
			}
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}

// downstreamTLSTypeURL is the type URL of a packed DownstreamTlsContext, as anypb spells it.
var downstreamTLSTypeURL = typeURLPrefix + string((&tlsv3.DownstreamTlsContext{}).ProtoReflect().Descriptor().FullName())
