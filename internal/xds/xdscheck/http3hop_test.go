// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck_test

import (
	"slices"
	"strings"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestHTTP3HopGate: with the HTTP/3 hop on, every scenario's build passes, and so does the
// access-policy scenario's, whose governed HTTP port's QUIC chain carries the port's RBAC filter
// as its TCP chain does; a copy whose QUIC chain lost the filter, requires no client certificate,
// admits other peers, or whose TCP twin no longer takes the hop's SNI fails, naming the chain.
func TestHTTP3HopGate(t *testing.T) {
	build := func(t testing.TB, name string) xds.Resources {
		s := xdstest.Scenarios()[name]
		s.HopHTTP3 = true
		res, err := xds.Build(s.Mesh())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for name := range xdstest.Scenarios() {
		if v := xdscheck.All(build(t, name)); v != nil {
			t.Errorf("%s with the HTTP/3 hop: %q", name, v)
		}
	}
	h3 := xds.InboundHTTP3Chain(8080)
	quic := xds.InboundQUICListener(xds.PodKey("shop", "payments-0"))
	quicTLS := func(t testing.TB, res xds.Resources, change func(*quicv3.QuicDownstreamTransport)) {
		repack(t, podChain(t, res, quic, h3).GetTransportSocket().GetTypedConfig(), func(m proto.Message) { change(m.(*quicv3.QuicDownstreamTransport)) })
	}
	for name, tc := range map[string]struct {
		breakIt func(testing.TB, xds.Resources)
		want    string
	}{
		"the QUIC chain's RBAC filter removed (a denied caller passes over HTTP/3)": {func(t testing.TB, res xds.Resources) {
			fc := podChain(t, res, quic, h3)
			repack(t, fc.GetFilters()[len(fc.GetFilters())-1].GetTypedConfig(), func(m proto.Message) { dropHTTPRBAC(m.(*hcmv3.HttpConnectionManager)) })
		}, `chain "in_h3_8080": its connection manager differs from its twin "in_8080"'s but for the codec: http_filters`},
		"the QUIC chain requiring no client certificate": {func(t testing.TB, res xds.Resources) {
			quicTLS(t, res, func(q *quicv3.QuicDownstreamTransport) { q.DownstreamTlsContext.RequireClientCertificate = nil })
		}, `chain "in_h3_8080": requires no client certificate`},
		"the QUIC chain admitting peers its twin does not": {func(t testing.TB, res xds.Resources) {
			quicTLS(t, res, func(q *quicv3.QuicDownstreamTransport) {
				q.DownstreamTlsContext.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().MatchTypedSubjectAltNames = nil
			})
		}, `chain "in_h3_8080": its mTLS differs from its twin "in_8080"'s but for the ALPN: common_tls_context`},
		"the TCP twin no longer taking the hop's SNI (the HTTP/2 leg lands on the floor)": {func(t testing.TB, res xds.Resources) {
			fc := inboundChain(t, res, xds.InboundHTTPChain(8080))
			fc.FilterChainMatch.ServerNames = slices.DeleteFunc(fc.FilterChainMatch.ServerNames, func(n string) bool { return strings.Contains(n, ".") })
		}, `chain "in_h3_8080": no chain of "inbound_shop/payments-0" takes SNI "8080.payments.shop.aether.internal"`},
	} {
		t.Run(name, func(t *testing.T) {
			res := build(t, "access-policy")
			if v := xdscheck.HTTP3Hop(res); v != nil {
				t.Fatalf("before the break: %q", v)
			}
			tc.breakIt(t, res)
			v := xdscheck.HTTP3Hop(res)
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Errorf("got %q, want a violation containing %q", v, tc.want)
			}
		})
	}
}
