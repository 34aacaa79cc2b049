// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck_test

import (
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbacnetworkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// inboundChain is payments-0's inbound chain of that name (the floor when name is
// xds.InboundFloorChain) in the access-policy scenario's build.
func inboundChain(t testing.TB, res xds.Resources, name string) *listenerv3.FilterChain {
	t.Helper()
	return podChain(t, res, xds.InboundListener(xds.PodKey("shop", "payments-0")), name)
}

// podChain is listener's chain of that name (its default chain too).
func podChain(t testing.TB, res xds.Resources, listener, name string) *listenerv3.FilterChain {
	t.Helper()
	for _, l := range res.Listeners {
		if l.GetName() != listener {
			continue
		}
		for _, fc := range append(slices.Clone(l.GetFilterChains()), l.GetDefaultFilterChain()) {
			if fc.GetName() == name {
				return fc
			}
		}
	}
	t.Fatalf("listener %q has no chain %q", listener, name)
	return nil
}

// chainHCM repacks the connection manager of an inbound chain.
func chainHCM(t testing.TB, res xds.Resources, name string, change func(*hcmv3.HttpConnectionManager)) {
	t.Helper()
	fc := inboundChain(t, res, name)
	repack(t, fc.GetFilters()[len(fc.GetFilters())-1].GetTypedConfig(), func(m proto.Message) { change(m.(*hcmv3.HttpConnectionManager)) })
}

func dropHTTPRBAC(hcm *hcmv3.HttpConnectionManager) {
	hcm.HttpFilters = slices.DeleteFunc(hcm.HttpFilters, func(f *hcmv3.HttpFilter) bool { return f.GetName() == xds.HTTPRBACFilter })
}

// TestAuthorizationRejectsBrokenCopies: the access-policy build, and every other scenario's,
// passes; a copy with one chain's authorization missing, misplaced, widened or put on an open
// port fails with the line naming it.
func TestAuthorizationRejectsBrokenCopies(t *testing.T) {
	for name, m := range xdstest.All() {
		res, err := xds.Build(m)
		if err != nil {
			t.Fatal(err)
		}
		if v := xdscheck.Authorization(res); v != nil {
			t.Errorf("%s: %q", name, v)
		}
	}
	for name, tc := range map[string]struct {
		breakIt func(testing.TB, xds.Resources)
		want    string
	}{
		"the HTTP port's RBAC filter removed": {func(t testing.TB, res xds.Resources) {
			chainHCM(t, res, xds.InboundHTTPChain(8080), dropHTTPRBAC)
		}, `chain "in_8080": port 8080 is governed by shop/payments-api, and the chain carries 0 RBAC filters`},
		"the floor's RBAC filter removed (a peer without SNI passes)": {func(t testing.TB, res xds.Resources) {
			chainHCM(t, res, xds.InboundFloorChain, dropHTTPRBAC)
		}, `chain "in_floor": port 8080 is governed by shop/payments-api, and the chain carries 0 RBAC filters`},
		"the TCP port's RBAC filter removed": {func(t testing.TB, res xds.Resources) {
			fc := inboundChain(t, res, xds.InboundTCPChain(9000))
			fc.Filters = slices.DeleteFunc(fc.Filters, func(f *listenerv3.Filter) bool { return f.GetName() == xds.NetworkRBACFilter })
		}, `chain "in_tcp_9000": port 9000 is governed by shop/payments-tcp, and the chain carries 0 RBAC filters`},
		"the TCP port's RBAC filter after tcp_proxy": {func(t testing.TB, res xds.Resources) {
			fc := inboundChain(t, res, xds.InboundTCPChain(9000))
			fc.Filters[1], fc.Filters[2] = fc.Filters[2], fc.Filters[1]
		}, `the RBAC filter is network filter 2 of 3, want the one right before tcp_proxy`},
		"the TCP port's handshake admitting every identity (a denied caller is greeted)": {func(t testing.TB, res xds.Resources) {
			fc := inboundChain(t, res, xds.InboundTCPChain(9000))
			repack(t, fc.GetTransportSocket().GetTypedConfig(), func(m proto.Message) {
				m.(*tlsv3.DownstreamTlsContext).GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{{
					SanType: tlsv3.SubjectAltNameMatcher_URI, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://aether.internal/"}}}}
			})
		}, `chain "in_tcp_9000": the handshake admits peers ["prefix:spiffe://aether.internal/"], want the RBAC filter's principals`},
		"the TCP port's tcp_proxy connecting before the handshake": {func(t testing.TB, res xds.Resources) {
			fc := inboundChain(t, res, xds.InboundTCPChain(9000))
			repack(t, fc.GetFilters()[len(fc.GetFilters())-1].GetTypedConfig(), func(m proto.Message) {
				m.(*tcpproxyv3.TcpProxy).UpstreamConnectMode = tcpproxyv3.UpstreamConnectMode_IMMEDIATE
			})
		}, `chain "in_tcp_9000": tcp_proxy connects to the application IMMEDIATE, want ON_DOWNSTREAM_TLS_HANDSHAKE`},
		"the open h2 port given the HTTP port's filter": {func(t testing.TB, res xds.Resources) {
			var rbac *hcmv3.HttpFilter
			chainHCM(t, res, xds.InboundHTTPChain(8080), func(h *hcmv3.HttpConnectionManager) { rbac = h.HttpFilters[len(h.HttpFilters)-2] })
			chainHCM(t, res, xds.InboundHTTPChain(9090), func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = slices.Insert(h.HttpFilters, 0, rbac)
			})
		}, `chain "in_9090": port 9090 is open (no AccessPolicy governs it), but the chain carries an RBAC filter`},
		"a principal widened to every identity": {func(t testing.TB, res xds.Resources) {
			chainHCM(t, res, xds.InboundHTTPChain(8080), func(h *hcmv3.HttpConnectionManager) {
				repack(t, h.HttpFilters[len(h.HttpFilters)-2].GetTypedConfig(), func(m proto.Message) {
					for _, p := range m.(*rbachttpv3.RBAC).GetRules().GetPolicies() {
						p.Principals = []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{
							PrincipalName: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://"}}}}}}
					}
				})
			})
		}, `policy shop/payments-api#0 has a principal that is no exact or regex peer identity`},
		"a namespace regex without its anchor": {func(t testing.TB, res xds.Resources) {
			fc := inboundChain(t, res, xds.InboundTCPChain(9000))
			repack(t, fc.GetFilters()[1].GetTypedConfig(), func(m proto.Message) {
				for _, p := range m.(*rbacnetworkv3.RBAC).GetRules().GetPolicies() {
					p.Principals[0].GetAuthenticated().GetPrincipalName().GetSafeRegex().Regex = `^spiffe://aether\.internal/ns/web/sa/.*`
				}
			})
		}, `policy shop/payments-tcp#0 admits identities by`},
		"a path rule widened": {func(t testing.TB, res xds.Resources) {
			chainHCM(t, res, xds.InboundHTTPChain(8080), func(h *hcmv3.HttpConnectionManager) {
				repack(t, h.HttpFilters[len(h.HttpFilters)-2].GetTypedConfig(), func(m proto.Message) {
					for _, p := range m.(*rbachttpv3.RBAC).GetRules().GetPolicies() {
						p.Permissions = []*rbacv3.Permission{{Rule: &rbacv3.Permission_Any{Any: true}}}
					}
				})
			})
		}, `policy shop/payments-api#0 admits methods [] and paths [], want ["GET"] and ["/api/" "=/api"]`},
		"paths not normalized": {func(t testing.TB, res xds.Resources) {
			chainHCM(t, res, xds.InboundHTTPChain(8080), func(h *hcmv3.HttpConnectionManager) { h.NormalizePath = nil })
		}, `port 8080 is governed by paths, and the connection manager does not normalize them`},
		"denials not marked": {func(t testing.TB, res xds.Resources) {
			chainHCM(t, res, xds.InboundHTTPChain(8080), func(h *hcmv3.HttpConnectionManager) {
				h.LocalReplyConfig.Mappers = h.LocalReplyConfig.Mappers[1:]
			})
		}, `the first local reply mapper does not add x-aether-error: access-denied`},
	} {
		t.Run(name, func(t *testing.T) {
			broken, err := xds.Build(xdstest.AccessPolicy())
			if err != nil {
				t.Fatal(err)
			}
			tc.breakIt(t, broken)
			v := xdscheck.Authorization(broken)
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Errorf("violations %q, want one saying %q", v, tc.want)
			}
			t.Log(strings.Join(v, "\n"))
			if all := strings.Join(xdscheck.All(broken), "\n"); !strings.Contains(all, "authorization: ") {
				t.Errorf("All does not run Authorization: %q", all)
			}
		})
	}
}
