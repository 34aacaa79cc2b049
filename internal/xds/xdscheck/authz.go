// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	celfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbacnetworkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"

	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Authorization checks the AccessPolicies of each inbound listener's pod (Resources.Access, the
// model's) against its chains. A chain's port is the one its app cluster delivers to (the floor
// is the primary's):
//   - a governed port's chain carries exactly one RBAC filter: on an HTTP chain
//     envoy.filters.http.rbac right before the router, the connection manager normalizing paths
//     (normalize_path, merge_slashes, escaped slashes not kept) and its first local reply mapper
//     adding x-aether-error: access-denied to the RBAC filter's denials; on a TCP chain
//     envoy.filters.network.rbac right before tcp_proxy, after connection_limit, and the chain's
//     handshake admits the same principals, its tcp_proxy connecting only after it
//     (handshakeAuthorization);
//   - its rules ALLOW, one policy per authz rule of the port, named Rule.Name(), whose principals
//     are the rule's identities (exact) and namespaces (the one-segment regex), and, on HTTP,
//     whose permission names the rule's methods and paths;
//   - an open port's chain, and any chain of a listener the model says nothing of, carries none.
func Authorization(res xds.Resources) []string {
	var out []string
	for _, l := range res.Listeners {
		if l.GetTrafficDirection() != corev3.TrafficDirection_INBOUND {
			continue
		}
		access := res.Access[l.GetName()]
		for _, fc := range listenerChains(l) {
			at := fmt.Sprintf("%s chain %q", resourceAt("listener", l.GetName()), fc.GetName())
			port, ok := chainPort(fc)
			if !ok {
				continue // no app cluster: nothing to govern (other gates say why)
			}
			p := authz.Port{Port: port}
			if i := slices.IndexFunc(access, func(a authz.Port) bool { return a.Port == port }); i >= 0 {
				p = access[i]
			}
			out = append(out, chainAuthorization(at, fc, p)...)
		}
	}
	return out
}

// chainPort is the app port fc delivers to: its tcp_proxy's cluster, or its inline routes' first.
func chainPort(fc *listenerv3.FilterChain) (int32, bool) {
	cluster := ""
	tcp := &tcpproxyv3.TcpProxy{}
	hcm := &hcmv3.HttpConnectionManager{}
	switch {
	case slices.ContainsFunc(fc.GetFilters(), func(f *listenerv3.Filter) bool { return unpackAs(f.GetTypedConfig(), tcp) }):
		cluster = tcp.GetCluster() // wherever it stands: another check says where it must
	case lastFilterAs(fc, hcm):
		for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				cluster = cmp.Or(cluster, r.GetRoute().GetCluster())
			}
		}
	}
	t, ok := xds.ParseCluster(cluster)
	return t.Port, ok && t.Inbound
}

func chainAuthorization(at string, fc *listenerv3.FilterChain, p authz.Port) []string {
	var out []string
	hcm := &hcmv3.HttpConnectionManager{}
	if lastFilterAs(fc, hcm) {
		var rules []*rbacv3.RBAC
		filters := hcm.GetHttpFilters()
		for i, f := range filters {
			if f.GetName() != xds.HTTPRBACFilter {
				continue
			}
			r := &rbachttpv3.RBAC{}
			if !unpackAs(f.GetTypedConfig(), r) {
				out = append(out, fmt.Sprintf("%s: http filter %s is no RBAC", at, f.GetName()))
				continue
			}
			if i != len(filters)-2 || filters[len(filters)-1].GetName() != wellknown.Router {
				out = append(out, fmt.Sprintf("%s: the RBAC filter is http filter %d of %d, want the one right before the router", at, i, len(filters)))
			}
			rules = append(rules, r.GetRules())
		}
		if v, enforced := governs(at, p, rules, true); !enforced {
			return append(out, v...)
		}
		out = append(out, sameRules(at, rules[0], p, true)...)
		if !hcm.GetNormalizePath().GetValue() || !hcm.GetMergeSlashes() ||
			hcm.GetPathWithEscapedSlashesAction() <= hcmv3.HttpConnectionManager_KEEP_UNCHANGED {
			out = append(out, fmt.Sprintf("%s: port %d is governed by paths, and the connection manager does not normalize them (normalize_path %v, merge_slashes %v, escaped slashes %s): /api/../admin would pass a rule for /api",
				at, p.Port, hcm.GetNormalizePath().GetValue(), hcm.GetMergeSlashes(), hcm.GetPathWithEscapedSlashesAction()))
		}
		if mappers := hcm.GetLocalReplyConfig().GetMappers(); len(mappers) == 0 || !marksDenials(mappers[0]) {
			out = append(out, fmt.Sprintf("%s: the first local reply mapper does not add %s: %s to the RBAC filter's denials", at, resolve.ErrorHeader, authz.DeniedError))
		}
		return out
	}
	var rules []*rbacv3.RBAC
	filters := fc.GetFilters()
	for i, f := range filters {
		if f.GetName() != xds.NetworkRBACFilter {
			continue
		}
		r := &rbacnetworkv3.RBAC{}
		if !unpackAs(f.GetTypedConfig(), r) {
			out = append(out, fmt.Sprintf("%s: network filter %s is no RBAC", at, f.GetName()))
			continue
		}
		if i != len(filters)-2 || i == 0 || filters[0].GetName() != xds.ConnectionLimitFilter {
			out = append(out, fmt.Sprintf("%s: the RBAC filter is network filter %d of %d, want the one right before tcp_proxy, after connection_limit", at, i, len(filters)))
		}
		if r.GetStatPrefix() == "" {
			out = append(out, at+": the RBAC filter has no stat_prefix: its denials are not counted per chain")
		}
		rules = append(rules, r.GetRules())
	}
	if v, enforced := governs(at, p, rules, false); !enforced {
		return append(out, v...)
	}
	out = append(out, sameRules(at, rules[0], p, false)...)
	return append(out, handshakeAuthorization(at, fc, rules[0])...)
}

// handshakeAuthorization checks that a governed TCP chain decides in its handshake: the chain's
// client-certificate SAN matchers are its RBAC filter's principals, exactly (URI SANs; no
// principal, the matcher of no one), and its tcp_proxy connects to the application only after
// the handshake, so neither a denied caller's connection nor the application's greeting crosses.
func handshakeAuthorization(at string, fc *listenerv3.FilterChain, r *rbacv3.RBAC) []string {
	var out []string
	var want []string
	for _, policy := range r.GetPolicies() {
		for _, pr := range policy.GetPrincipals() {
			want = append(want, matcherText(pr.GetAuthenticated().GetPrincipalName()))
		}
	}
	if len(want) == 0 {
		want = []string{"regex:" + xds.NoPeer}
	}
	ctx := &tlsv3.DownstreamTlsContext{}
	unpackAs(fc.GetTransportSocket().GetTypedConfig(), ctx)
	var got []string
	for _, m := range ctx.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().GetMatchTypedSubjectAltNames() {
		if m.GetSanType() != tlsv3.SubjectAltNameMatcher_URI {
			got = append(got, m.GetSanType().String()+":"+matcherText(m.GetMatcher()))
			continue
		}
		got = append(got, matcherText(m.GetMatcher()))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(slices.Compact(got), slices.Compact(want)) {
		out = append(out, fmt.Sprintf("%s: the handshake admits peers %q, want the RBAC filter's principals %q: a denied caller's connection reaches the application before the filter sees a byte, and a server-first application greets it", at, got, want))
	}
	tcp := &tcpproxyv3.TcpProxy{}
	if lastFilterAs(fc, tcp) && tcp.GetUpstreamConnectMode() != tcpproxyv3.UpstreamConnectMode_ON_DOWNSTREAM_TLS_HANDSHAKE {
		out = append(out, fmt.Sprintf("%s: tcp_proxy connects to the application %s, want ON_DOWNSTREAM_TLS_HANDSHAKE: the application sees every caller's connection, admitted or not", at, tcp.GetUpstreamConnectMode()))
	}
	return out
}

// matcherText spells a string matcher as kind:value.
func matcherText(m *matcherv3.StringMatcher) string {
	switch {
	case m.GetExact() != "":
		return "exact:" + m.GetExact()
	case m.GetSafeRegex() != nil:
		return "regex:" + m.GetSafeRegex().GetRegex()
	case m.GetPrefix() != "":
		return "prefix:" + m.GetPrefix()
	}
	return fmt.Sprintf("%v", m)
}

// governs checks that a chain of port p carries one RBAC filter (rules) when p is governed and
// none when it is open; enforced says there is one to compare with p's rules.
func governs(at string, p authz.Port, rules []*rbacv3.RBAC, http bool) (violations []string, enforced bool) {
	switch {
	case !p.Governed && len(rules) > 0:
		return []string{fmt.Sprintf("%s: port %d is open (no AccessPolicy governs it), but the chain carries an RBAC filter", at, p.Port)}, false
	case !p.Governed:
		return nil, false
	case len(rules) != 1:
		what := "connections"
		if http {
			what = "calls"
		}
		return []string{fmt.Sprintf("%s: port %d is governed by %s, and the chain carries %d RBAC filters, want 1: its %s are not authorized",
			at, p.Port, strings.Join(p.Policies, ", "), len(rules), what)}, false
	}
	return nil, true
}

// marksDenials reports whether mapper m picks out the RBAC filter's denials (a CEL filter on
// their response code details) and adds the access-denied error header.
func marksDenials(m *hcmv3.ResponseMapper) bool {
	ext := m.GetFilter().GetExtensionFilter()
	cel := &celfilterv3.ExpressionFilter{}
	if ext == nil || !unpackAs(ext.GetTypedConfig(), cel) || !strings.Contains(cel.GetExpression(), xds.RBACDeniedDetail) {
		return false
	}
	return slices.ContainsFunc(m.GetHeadersToAdd(), func(h *corev3.HeaderValueOption) bool {
		return h.GetHeader().GetKey() == resolve.ErrorHeader && h.GetHeader().GetValue() == authz.DeniedError
	})
}

// sameRules compares the filter's rules with the port's: ALLOW, one policy per rule by name,
// the same principals, and, on HTTP, the same methods and paths.
func sameRules(at string, r *rbacv3.RBAC, p authz.Port, http bool) []string {
	var out []string
	if r == nil {
		return []string{fmt.Sprintf("%s: the RBAC filter has no rules: Envoy enforces nothing on governed port %d", at, p.Port)}
	}
	if r.GetAction() != rbacv3.RBAC_ALLOW {
		out = append(out, fmt.Sprintf("%s: the RBAC rules' action is %s, want ALLOW", at, r.GetAction()))
	}
	want := map[string]authz.Rule{}
	for _, rule := range p.Rules {
		want[rule.Name()] = rule
	}
	if got := slices.Sorted(maps.Keys(r.GetPolicies())); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		return append(out, fmt.Sprintf("%s: RBAC policies %q, want port %d's rules %q", at, got, p.Port, slices.Sorted(maps.Keys(want))))
	}
	for name, rule := range want {
		policy := r.GetPolicies()[name]
		var ids, regexes []string
		for _, pr := range policy.GetPrincipals() {
			m := pr.GetAuthenticated().GetPrincipalName()
			switch {
			case m.GetExact() != "":
				ids = append(ids, m.GetExact())
			case m.GetSafeRegex() != nil:
				regexes = append(regexes, m.GetSafeRegex().GetRegex())
			default:
				out = append(out, fmt.Sprintf("%s: policy %s has a principal that is no exact or regex peer identity: %v", at, name, pr))
			}
		}
		if slices.Sort(ids); !slices.Equal(ids, rule.Identities) {
			out = append(out, fmt.Sprintf("%s: policy %s admits identities %q, want %q", at, name, ids, rule.Identities))
		}
		if !sameNamespaces(regexes, rule.Namespaces) {
			out = append(out, fmt.Sprintf("%s: policy %s admits identities by %q, want one regex per namespace of %q, each ^spiffe://<trust domain>/ns/<namespace>/sa/[^/]+$",
				at, name, regexes, rule.Namespaces))
		}
		var methods, paths []string
		for _, perm := range policy.GetPermissions() {
			permissionParts(perm, &methods, &paths)
		}
		slices.Sort(methods)
		slices.Sort(paths)
		wantMethods, wantPaths := []string(nil), []string(nil)
		if http {
			wantMethods = rule.Methods
			if !slices.Contains(rule.PathPrefixes, "/") {
				for _, pre := range rule.PathPrefixes {
					wantPaths = append(wantPaths, "="+pre, pre+"/")
				}
			}
			slices.Sort(wantPaths)
		}
		if !slices.Equal(methods, wantMethods) || !slices.Equal(paths, wantPaths) {
			out = append(out, fmt.Sprintf("%s: policy %s admits methods %q and paths %q, want %q and %q", at, name, methods, paths, wantMethods, wantPaths))
		}
	}
	return out
}

// sameNamespaces reports whether regexes admit exactly namespaces' identities: one each, of
// one ServiceAccount segment (the trust domain is the listener's, checked by its TLS).
func sameNamespaces(regexes, namespaces []string) bool {
	if len(regexes) != len(namespaces) {
		return false
	}
	var got []string
	for _, re := range regexes {
		rest, ok := strings.CutPrefix(re, "^spiffe://")
		if !ok {
			return false
		}
		for _, ns := range namespaces {
			if strings.HasSuffix(rest, regexp.QuoteMeta("/ns/"+ns+"/sa/")+"[^/]+$") {
				got = append(got, ns)
			}
		}
	}
	slices.Sort(got)
	return slices.Equal(got, namespaces)
}

// permissionParts collects the methods (exact :method) and paths ("=" exact, else prefix) a
// permission tree names.
func permissionParts(p *rbacv3.Permission, methods, paths *[]string) {
	switch {
	case p.GetAndRules() != nil:
		for _, r := range p.GetAndRules().GetRules() {
			permissionParts(r, methods, paths)
		}
	case p.GetOrRules() != nil:
		for _, r := range p.GetOrRules().GetRules() {
			permissionParts(r, methods, paths)
		}
	case p.GetHeader().GetName() == ":method":
		*methods = append(*methods, p.GetHeader().GetStringMatch().GetExact())
	case p.GetUrlPath() != nil:
		m := p.GetUrlPath().GetPath()
		if m.GetExact() != "" {
			*paths = append(*paths, "="+m.GetExact())
		} else {
			*paths = append(*paths, m.GetPrefix())
		}
	}
}
