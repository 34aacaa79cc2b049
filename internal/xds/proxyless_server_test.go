// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
)

// proxylessServerScenario is the gRPC mesh with payments' gRPC port 9090 governed: web/frontend
// may call pkg.Ledger's methods, every identity of namespace ops may call any; h2 9091 is open.
// The server is payments-0, on this node at 10.244.1.10; the node's addresses (where its agent's
// probes come from) are nodeAddrs.
func proxylessServerScenario(t testing.TB) (model.Mesh, model.LocalPod) {
	t.Helper()
	s := grpcScenario()
	s.Policies = []configv1.AccessPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ledger"}, Spec: configv1.AccessPolicySpec{
		TargetRef: &configv1.TargetRef{Kind: "Service", Name: "payments"}, Ports: []int32{9090},
		Rules: []configv1.AccessRule{
			{From: []configv1.AccessSource{{ServiceAccount: &configv1.ServiceAccountRef{Namespace: "web", Name: "frontend"}}}, PathPrefixes: []string{"/pkg.Ledger"}},
			{From: []configv1.AccessSource{{Namespace: "ops"}}},
		},
	}}}
	m := s.Mesh()
	for _, a := range nodeAddrs {
		m.Node.Addrs = append(m.Node.Addrs, netip.MustParseAddr(a))
	}
	i := slices.IndexFunc(m.Pods, func(p model.LocalPod) bool { return p.Name == "payments-0" })
	if i < 0 || !m.Pods[i].AccessOf(9090).Governed {
		t.Fatalf("the scenario has no governed payments-0: %+v", m.Pods)
	}
	return m, m.Pods[i]
}

// nodeAddrs are the node's addresses of proxylessServerScenario: its bridge's and its own, each
// family.
var nodeAddrs = []string{"10.0.0.5", "10.244.1.1", "fd00::5"}

func buildProxylessServer(t testing.TB, m model.Mesh, pod model.LocalPod) xds.Resources {
	t.Helper()
	res, err := xds.BuildProxylessServer(m, pod)
	if err != nil {
		t.Fatalf("BuildProxylessServer: %v", err)
	}
	return res
}

// TestProxylessServerGolden compares the server listeners of payments-0 with
// testdata/proxyless-server/ (regenerate with -update), and runs the proxyless gates over them.
func TestProxylessServerGolden(t *testing.T) {
	m, pod := proxylessServerScenario(t)
	res := buildProxylessServer(t, m, pod)
	if v := xdscheck.Proxyless(res); v != nil {
		t.Errorf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
	}
	if v := xdscheck.Identical(res, buildProxylessServer(t, m, pod)); v != nil {
		t.Errorf("two builds differ:\n%s", strings.Join(v, "\n"))
	}
	golden.Compare(t, filepath.Join("testdata", "proxyless-server"), "listeners", ".yaml", render(t, res.Listeners), *xds.Update)
}

// TestProxylessServerListeners: a listener per HTTP2 port (never HTTP/1.1) and per address a
// server may listen on, named as grpc-go asks; the governed port's mTLS chain carries the RBAC
// filter, with the very rules the Envoy rendering puts on the same pod's inbound chain of that
// port (one builder); the open port's carries none; the pod's cleartext chain admits the pod's own
// address only, and has no RBAC filter; the node's probe chain, on the primary port (9090) alone,
// admits the node's addresses only, and the health probe's RPC alone.
func TestProxylessServerListeners(t *testing.T) {
	m, pod := proxylessServerScenario(t)
	res := buildProxylessServer(t, m, pod)
	var want []string
	for _, port := range []int32{9090, 9091} {
		for _, host := range []string{"10.244.1.10", "0.0.0.0", "::"} {
			want = append(want, xds.ProxylessServerListener(host, port))
		}
	}
	slices.Sort(want)
	if got := names(res.Listeners, (*listenerv3.Listener).GetName); !slices.Equal(got, want) {
		t.Fatalf("listeners\n %q\nwant\n %q", got, want)
	}
	if want := "grpc/server?xds.resource.listening_address=[::]:9090"; xds.ProxylessServerListener("::", 9090) != want {
		t.Errorf("the [::]:9090 listener is %q, want %q", xds.ProxylessServerListener("::", 9090), want)
	}
	envoyRules := rbacRulesOf(t, build(t, m).Listeners)
	if len(envoyRules) == 0 {
		t.Fatal("the Envoy rendering carries no RBAC filter: the scenario governs nothing")
	}
	for _, l := range res.Listeners {
		governed := strings.HasSuffix(l.GetName(), ":9090")
		for _, fc := range l.GetFilterChains() {
			rules := rbacRulesOf(t, []*listenerv3.Listener{{Name: l.GetName(), FilterChains: []*listenerv3.FilterChain{fc}}})
			switch {
			case fc.GetName() == xds.ProxylessServerNodeChain:
				var sources []string
				for _, r := range fc.GetFilterChainMatch().GetSourcePrefixRanges() {
					sources = append(sources, r.GetAddressPrefix()+"/"+strconv.Itoa(int(r.GetPrefixLen().GetValue())))
				}
				want := []string{"10.0.0.5/32", "10.244.1.1/32", "fd00::5/128"}
				probe := rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{
					MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "/grpc.health.v1.Health/Check"}}}}}}
				if !governed || fc.GetTransportSocket() != nil || !slices.Equal(sources, want) || len(rules) != 1 || len(rules[0].GetPolicies()) != 1 ||
					!proto.Equal(rules[0].GetPolicies()[xds.ProbePolicy].GetPermissions()[0], &probe) {
					t.Errorf("%s: the node's probe chain %v, want on 9090 only, from %q, admitting Health/Check alone", l.GetName(), fc, want)
				}
			case fc.GetName() == xds.ProxylessServerLocalChain:
				r := fc.GetFilterChainMatch().GetSourcePrefixRanges()
				if fc.GetTransportSocket() != nil || len(rules) != 0 || len(r) != 1 || r[0].GetAddressPrefix() != "10.244.1.10" || r[0].GetPrefixLen().GetValue() != 32 {
					t.Errorf("%s: the local chain %v", l.GetName(), fc)
				}
			case governed && (len(rules) != 1 || !slices.ContainsFunc(envoyRules, func(r *rbacv3.RBAC) bool { return proto.Equal(r, rules[0]) })):
				t.Errorf("%s: RBAC rules %v, want the Envoy inbound chain's, one of %v", l.GetName(), rules, envoyRules)
			case !governed && len(rules) != 0:
				t.Errorf("%s: open port, RBAC rules %v", l.GetName(), rules)
			}
		}
	}
}

// rbacRulesOf are the rules of every HTTP RBAC filter of listeners' chains.
func rbacRulesOf(t testing.TB, listeners []*listenerv3.Listener) []*rbacv3.RBAC {
	t.Helper()
	var out []*rbacv3.RBAC
	for _, l := range listeners {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if f.GetTypedConfig().UnmarshalTo(hcm) != nil {
					continue
				}
				for _, hf := range hcm.GetHttpFilters() {
					r := &rbachttpv3.RBAC{}
					if hf.GetName() == xds.HTTPRBACFilter && hf.GetTypedConfig().UnmarshalTo(r) == nil {
						out = append(out, r.GetRules())
					}
				}
			}
		}
	}
	return out
}

// TestProxylessServerGateControls: the gates reject a server listener grpc-go would NACK, not
// serve, or that would not enforce its port's policies, each from the good rendering broken once
// (the gate's negative controls).
func TestProxylessServerGateControls(t *testing.T) {
	m, pod := proxylessServerScenario(t)
	good := func() xds.Resources { return buildProxylessServer(t, m, pod) }
	if v := xdscheck.Proxyless(good()); v != nil {
		t.Fatalf("the good rendering fails: %v", v)
	}
	listener := func(res xds.Resources, port string) *listenerv3.Listener {
		return res.Listeners[slices.IndexFunc(res.Listeners, func(l *listenerv3.Listener) bool { return strings.HasSuffix(l.GetName(), port) })]
	}
	chain := func(l *listenerv3.Listener, name string) *listenerv3.FilterChain {
		return l.FilterChains[slices.IndexFunc(l.FilterChains, func(fc *listenerv3.FilterChain) bool { return fc.GetName() == name })]
	}
	mutateHCM := func(fc *listenerv3.FilterChain, f func(*hcmv3.HttpConnectionManager)) {
		hcm := &hcmv3.HttpConnectionManager{}
		if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
			panic(err)
		}
		f(hcm)
		fc.Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)}
	}
	mutateTLS := func(fc *listenerv3.FilterChain, f func(*tlsv3.DownstreamTlsContext)) {
		ctx := &tlsv3.DownstreamTlsContext{}
		if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
			panic(err)
		}
		f(ctx)
		fc.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(ctx)}
	}
	// mutateRBAC changes the rules of the first HTTP filter (an RBAC filter) of chain fc.
	mutateRBAC := func(fc *listenerv3.FilterChain, f func(*rbacv3.RBAC)) {
		mutateHCM(fc, func(h *hcmv3.HttpConnectionManager) {
			r := &rbachttpv3.RBAC{}
			if err := h.HttpFilters[0].GetTypedConfig().UnmarshalTo(r); err != nil {
				panic(err)
			}
			f(r.Rules)
			h.HttpFilters[0].ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(r)}
		})
	}
	for name, tt := range map[string]struct {
		mutate func(res xds.Resources)
		want   string
	}{
		"a governed port's RBAC filter removed": {
			mutate: func(res xds.Resources) {
				mutateHCM(chain(listener(res, ":9090"), xds.ProxylessServerMeshChain), func(h *hcmv3.HttpConnectionManager) { h.HttpFilters = h.HttpFilters[1:] })
			},
			want: "is governed by shop/ledger, and the chain carries 0 RBAC filters, want 1",
		},
		"an RBAC filter admitting a rule too many": {
			mutate: func(res xds.Resources) {
				mutateRBAC(chain(listener(res, ":9090"), xds.ProxylessServerMeshChain), func(r *rbacv3.RBAC) {
					r.Policies["extra"] = &rbacv3.Policy{Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_Any{Any: true}}},
						Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}}}
				})
			},
			want: `RBAC policies ["extra" "shop/ledger#0" "shop/ledger#1"]`,
		},
		"no client certificate required": {
			mutate: func(res xds.Resources) {
				mutateTLS(chain(listener(res, ":9090"), xds.ProxylessServerMeshChain), func(c *tlsv3.DownstreamTlsContext) { c.RequireClientCertificate = nil })
			},
			want: "require_client_certificate is off",
		},
		"a SAN matcher on the server": {
			mutate: func(res xds.Resources) {
				mutateTLS(chain(listener(res, ":9091"), xds.ProxylessServerMeshChain), func(c *tlsv3.DownstreamTlsContext) {
					c.GetCommonTlsContext().GetValidationContext().MatchSubjectAltNames = []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: frontendClient}}} //nolint:staticcheck // the field grpc-go refuses
				})
			},
			want: "names match_subject_alt_names, which grpc-go NACKs on a server",
		},
		"the cleartext chain widened to a subnet": {
			mutate: func(res xds.Resources) {
				chain(listener(res, ":9090"), xds.ProxylessServerLocalChain).FilterChainMatch.SourcePrefixRanges[0].PrefixLen = wrapperspb.UInt32(16)
			},
			want: `a chain without TLS admits ["10.244.1.10/16"], want the pod's own address ["10.244.1.10/32"] alone`,
		},
		"the node's probe chain admitting an address not the node's": {
			mutate: func(res xds.Resources) {
				fc := chain(listener(res, ":9090"), xds.ProxylessServerNodeChain)
				fc.FilterChainMatch.SourcePrefixRanges[0].AddressPrefix = "10.244.1.11"
			},
			want: `the node's probe chain admits ["10.244.1.11/32" "10.244.1.1/32" "fd00::5/128"], want the node's addresses ["10.0.0.5/32" "10.244.1.1/32" "fd00::5/128"] alone`,
		},
		"the node's probe chain admitting every RPC": {
			mutate: func(res xds.Resources) {
				mutateHCM(chain(listener(res, ":9090"), xds.ProxylessServerNodeChain), func(h *hcmv3.HttpConnectionManager) { h.HttpFilters = h.HttpFilters[1:] })
			},
			want: "the node's probe chain does not admit /grpc.health.v1.Health/Check alone",
		},
		"the node's probe chain admitting a path prefix": {
			mutate: func(res xds.Resources) {
				mutateRBAC(chain(listener(res, ":9090"), xds.ProxylessServerNodeChain), func(r *rbacv3.RBAC) {
					r.Policies[xds.ProbePolicy].Permissions[0].GetUrlPath().GetPath().MatchPattern = &matcherv3.StringMatcher_Prefix{Prefix: "/grpc.health.v1.Health/"}
				})
			},
			want: "the node's probe chain does not admit /grpc.health.v1.Health/Check alone",
		},
		"the node's probe chain missing": {
			mutate: func(res xds.Resources) {
				l := listener(res, ":9090")
				l.FilterChains = slices.DeleteFunc(l.FilterChains, func(fc *listenerv3.FilterChain) bool { return fc.GetName() == xds.ProxylessServerNodeChain })
			},
			want: "no chain takes the node's health probe from [10.0.0.5 10.244.1.1 fd00::5]",
		},
		"a third cleartext chain": {
			mutate: func(res xds.Resources) {
				l := listener(res, ":9091")
				extra := proto.Clone(chain(l, xds.ProxylessServerLocalChain)).(*listenerv3.FilterChain)
				extra.Name = "other"
				l.FilterChains = append(l.FilterChains, extra)
			},
			want: "a chain without TLS that is neither the pod's own nor the node's probe chain",
		},
		"an address the name does not spell": {
			mutate: func(res xds.Resources) {
				listener(res, ":9091").GetAddress().GetSocketAddress().Address = "10.244.1.11"
			},
			want: "whose listener grpc-go asks for is",
		},
		"a route that forwards": {
			mutate: func(res xds.Resources) {
				mutateHCM(chain(listener(res, ":9091"), xds.ProxylessServerMeshChain), func(h *hcmv3.HttpConnectionManager) {
					h.GetRouteConfig().VirtualHosts[0].Routes[0].Action = &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "x"}}}
				})
			},
			want: "is not non_forwarding_action",
		},
	} {
		t.Run(name, func(t *testing.T) {
			res := good()
			tt.mutate(res)
			v := xdscheck.Proxyless(res)
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, tt.want) }) {
				t.Errorf("violations %q, want one saying %q", v, tt.want)
			}
			t.Logf("control: %s", strings.Join(v, "; "))
		})
	}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}
