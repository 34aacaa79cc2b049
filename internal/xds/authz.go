// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"regexp"
	"slices"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	celfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbacnetworkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// Authorization (api/config/v1 AccessPolicy, read once by internal/authz): each governed port's
// inbound chains, its SNI chain and, for the primary, the floor, carry an RBAC filter whose ALLOW
// policies are the port's rules, one policy per rule named Rule.Name(). A governed port without
// rules gets the filter with no policy: Envoy then denies every call. An open port carries none.
//
//   - HTTP-class: envoy.filters.http.rbac, just before the router. It runs after the connection
//     manager has normalized the path (inboundPathNormalization), so the path it matches is the
//     one the application is sent. A denial is a local reply (403) whose response code details
//     start with "rbac_access_denied"; the inbound's first local reply mapper adds
//     x-aether-error: access-denied to it (and the outcome "proxy": never retried).
//   - TCP: decided in the TLS handshake. The chain's handshake admits only the peers the rules
//     admit (admittedPeers: the validation context's SAN matchers), and its tcp_proxy connects to
//     the application only once the handshake is done, so a denied caller's connection never
//     reaches the application and the application's first bytes (a server-first protocol's
//     greeting) never reach the caller. Envoy's network RBAC alone could not do that: it decides
//     on the caller's first byte, after tcp_proxy has connected and passed the greeting on. The
//     RBAC filter (envoy.filters.network.rbac, after connection_limit, before tcp_proxy) stays
//     behind the handshake as the same rules' second reading; the gates check both.
//
// The caller is the peer certificate's URI SAN (principal_name reads the URI SAN first), which
// downstreamTLS has verified against the mesh's trust bundle: authorization is only as strong as
// the identity issuance behind that certificate.
const (
	// HTTPRBACFilter and NetworkRBACFilter are Envoy's RBAC filters.
	HTTPRBACFilter    = "envoy.filters.http.rbac"
	NetworkRBACFilter = "envoy.filters.network.rbac"
	// RBACDeniedDetail starts the response code details of a request the HTTP RBAC filter denied
	// ("rbac_access_denied_matched_policy[none]").
	RBACDeniedDetail = "rbac_access_denied"
	// RBACStatPrefix ends a TCP chain's RBAC stat prefix: <chain>.rbac.denied counts its denials
	// (an HTTP chain's are http.<chain>.rbac.denied).
	RBACStatPrefix   = "."
	rbacDeniedFilter = "response.code_details.startsWith('" + RBACDeniedDetail + "')"
	// PeerRefusedDetail is in the downstream transport failure reason of a connection whose
	// handshake refused the caller's certificate by its SANs (Envoy's words: "verify cert failed:
	// SAN matcher, certificate SANs are [...]"); the access log still names the caller.
	PeerRefusedDetail = "verify cert failed: SAN matcher"
)

// accessRules is p's rules as Envoy's RBAC: ALLOW, one policy per rule. http says whether the
// port's requests are seen (methods and paths apply); on a TCP port the rules have none (authz
// leaves such rules out, as Inert).
func accessRules(trustDomain string, p authz.Port, http bool) *rbacv3.RBAC {
	rules := &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{}}
	for _, r := range p.Rules {
		policy := &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPermission()}}
		if http {
			policy.Permissions = []*rbacv3.Permission{requestPermission(r)}
		}
		for _, id := range r.Identities {
			policy.Principals = append(policy.Principals, authenticated(&matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_Exact{Exact: id}}))
		}
		for _, ns := range r.Namespaces {
			policy.Principals = append(policy.Principals, authenticated(&matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: NamespaceIdentityRegex(trustDomain, ns)}}}))
		}
		rules.Policies[r.Name()] = policy
	}
	return rules
}

// NamespaceIdentityRegex matches every SPIFFE ID of namespace ns in trustDomain, and no other:
// one ServiceAccount segment after its prefix (as authz.Decide reads a Namespaces source).
func NamespaceIdentityRegex(trustDomain, ns string) string {
	return "^" + regexp.QuoteMeta(authz.NamespacePrefix(trustDomain, ns)) + "[^/]+$"
}

// admittedPeers is what the handshake of a governed TCP port's chain admits: the URI SAN of one
// of p's rules' callers (an identity exactly, a namespace by NamespaceIdentityRegex). A governed
// port without rules admits no one: a matcher no URI SAN can match. nil for an open port: the
// handshake then admits every identity of the trust domain (downstreamTLS).
func admittedPeers(trustDomain string, p authz.Port) []*tlsv3.SubjectAltNameMatcher {
	if !p.Governed {
		return nil
	}
	peers := []*tlsv3.SubjectAltNameMatcher{}
	for _, r := range p.Rules {
		for _, id := range r.Identities {
			peers = append(peers, uriSAN(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: id}}))
		}
		for _, ns := range r.Namespaces {
			peers = append(peers, uriSAN(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{
				SafeRegex: &matcherv3.RegexMatcher{Regex: NamespaceIdentityRegex(trustDomain, ns)}}}))
		}
	}
	if len(peers) == 0 {
		peers = append(peers, uriSAN(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{
			SafeRegex: &matcherv3.RegexMatcher{Regex: NoPeer}}}))
	}
	return peers
}

// NoPeer is a regular expression no string matches (a character class of no character): the SAN
// matcher of a governed TCP port that admits no caller.
const NoPeer = `[^\x00-\x{10FFFF}]`

func authenticated(name *matcherv3.StringMatcher) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: name}}}
}

func anyPermission() *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}}
}

// requestPermission is what rule r admits of a request: one of its methods (any when none) and
// one of its path prefixes by whole segments (any when none, or "/"): the path itself, exactly,
// or below it (prefix p+"/"). url_path leaves the query out, as authz.PathMatches does.
func requestPermission(r authz.Rule) *rbacv3.Permission {
	var and []*rbacv3.Permission
	if len(r.Methods) > 0 {
		var methods []*rbacv3.Permission
		for _, m := range r.Methods {
			methods = append(methods, &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: exactHeader(methodHeader, m)}})
		}
		and = append(and, anyOf(methods))
	}
	if len(r.PathPrefixes) > 0 && !slices.Contains(r.PathPrefixes, "/") {
		var paths []*rbacv3.Permission
		for _, p := range r.PathPrefixes {
			paths = append(paths, urlPath(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: p}}),
				urlPath(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: p + "/"}}))
		}
		and = append(and, anyOf(paths))
	}
	if len(and) == 0 {
		return anyPermission()
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: and}}}
}

func anyOf(rules []*rbacv3.Permission) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_OrRules{OrRules: &rbacv3.Permission_Set{Rules: rules}}}
}

func urlPath(m *matcherv3.StringMatcher) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: m}}}}
}

// authorizeHTTP puts port p's RBAC filter before hcm's router when p is governed.
func (b *builder) authorizeHTTP(hcm *hcmv3.HttpConnectionManager, trustDomain string, p authz.Port) {
	if !p.Governed {
		return
	}
	f := &hcmv3.HttpFilter{Name: HTTPRBACFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{
		TypedConfig: b.pack("the RBAC filter of "+hcm.GetStatPrefix(), &rbachttpv3.RBAC{Rules: accessRules(trustDomain, p, true)})}}
	last := len(hcm.HttpFilters) - 1 // the router
	hcm.HttpFilters = slices.Insert(slices.Clip(hcm.HttpFilters), last, f)
}

// authorizeTCP puts port p's RBAC filter before chain c's tcp_proxy (its last filter) when p is
// governed, its denials counted under <chain name>.rbac.
func (b *builder) authorizeTCP(c *listenerv3.FilterChain, trustDomain string, p authz.Port) {
	if !p.Governed {
		return
	}
	f := b.networkFilter(NetworkRBACFilter, c.GetName(), &rbacnetworkv3.RBAC{
		StatPrefix: c.GetName() + RBACStatPrefix, Rules: accessRules(trustDomain, p, false)})
	last := len(c.Filters) - 1
	c.Filters = slices.Insert(slices.Clip(c.Filters), last, f)
}

// inboundPathNormalization makes the path the RBAC filter matches, the router routes and the
// application is sent one and the same, so a spelling cannot slip past a path rule:
// RFC 3986 normalization (/api/../admin is /admin, %2e%2e too), merged slashes (//admin is
// /admin), and an escaped slash (%2F, %5C) refused with 400: decoding it would change the
// segments the application sees, keeping it would let /api%2F..%2Fadmin pass as /api/….
func inboundPathNormalization(hcm *hcmv3.HttpConnectionManager) {
	hcm.NormalizePath = wrapperspb.Bool(true)
	hcm.MergeSlashes = true
	hcm.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_REJECT_REQUEST
}

// deniedMapper is the inbound's first local reply mapper: a request the RBAC filter denied keeps
// its 403 and carries x-aether-error: access-denied, and the outcome "proxy" (never retried).
func (b *builder) deniedMapper() *hcmv3.ResponseMapper {
	denied := &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ExtensionFilter{
		ExtensionFilter: &accesslogv3.ExtensionFilter{Name: CELFilter, ConfigType: &accesslogv3.ExtensionFilter_TypedConfig{
			TypedConfig: b.pack("the access denied filter", &celfilterv3.ExpressionFilter{Expression: rbacDeniedFilter})}}}}
	return &hcmv3.ResponseMapper{Filter: denied, HeadersToAdd: []*corev3.HeaderValueOption{
		outcomeHeader(OutcomeProxy),
		{Header: &corev3.HeaderValue{Key: resolve.ErrorHeader, Value: authz.DeniedError}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD},
	}}
}

// accessByListener is Resources.Access of pods.
func accessByListener(pods []model.LocalPod, hopHTTP3 bool) map[string][]authz.Port {
	out := make(map[string][]authz.Port, len(pods))
	for _, p := range pods {
		ports := make([]authz.Port, len(p.Ports))
		for i, pp := range p.Ports {
			ports[i] = p.AccessOf(pp.Port)
			ports[i].Protocol = pp.Protocol
		}
		out[InboundListener(PodKey(p.Namespace, p.Name))] = ports
		if hopHTTP3 {
			// Its QUIC listener serves the same ports to the same peers (hop_http3.go).
			out[InboundQUICListener(PodKey(p.Namespace, p.Name))] = ports
		}
	}
	return out
}
