// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbacnetworkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
)

// The RBAC filters (envoy.filters.http.rbac, envoy.filters.network.rbac), as Envoy's RBAC engine
// (RoleBasedAccessControlEngineImpl) decides: with action ALLOW a call is allowed when some policy
// matches it (one of its permissions and one of its principals), with DENY when none does; rules
// present but without policies match nothing; no rules, no enforcement. A principal is read from
// the peer certificate: authenticated.principal_name matches its URI SAN (Conn.ClientCertURI,
// Request.ClientCertURI). A permission of the network filter sees no request. Modelled: any,
// and_rules, or_rules, not_rule, header (exact, prefix, safe_regex string matchers), url_path
// (the path without its query); and principals any, and_ids, or_ids, not_id, authenticated.
// Anything else is Unmodelled. The network filter decides on the caller's first byte: a denied
// connection is closed with nothing forwarded (ErrDenied). Not modelled: tcp_proxy has connected
// to the application by then, so a server-first application's greeting reaches a denied caller
// that sends nothing after its TLS handshake (a Conn cannot say "TLS, then server-first").

// ErrDenied is an RBAC filter's denial: an HTTP request answered 403 (response code details
// RBACDeniedDetails, response flag RBAC), or a TCP connection closed.
var ErrDenied = errors.New("the RBAC filter denies the call")

// RBACDeniedDetails are the response code details of a request the HTTP RBAC filter denied.
const RBACDeniedDetails = "rbac_access_denied_matched_policy[none]"

// rbacCall is what the RBAC engine reads of a call: the peer's URI SAN and, on HTTP, the
// request's headers (pseudo-headers included).
type rbacCall struct {
	peer    string
	headers map[string]string
}

// rbacAllows decides rules for call; nil rules enforce nothing.
func rbacAllows(rules *rbacv3.RBAC, call rbacCall) (bool, error) {
	if rules == nil {
		return true, nil
	}
	matched := false
	for name, p := range rules.GetPolicies() {
		if p.GetCondition() != nil || p.GetCheckedCondition() != nil {
			return false, fmt.Errorf("%w: RBAC policy %q has a condition", ErrUnsupported, name)
		}
		perm, err := anyMatches(p.GetPermissions(), func(x *rbacv3.Permission) (bool, error) { return permissionMatches(x, call) })
		if err != nil {
			return false, err
		}
		princ, err := anyMatches(p.GetPrincipals(), func(x *rbacv3.Principal) (bool, error) { return principalMatches(x, call) })
		if err != nil {
			return false, err
		}
		matched = matched || perm && princ
	}
	switch rules.GetAction() {
	case rbacv3.RBAC_ALLOW:
		return matched, nil
	case rbacv3.RBAC_DENY:
		return !matched, nil
	}
	return false, fmt.Errorf("%w: RBAC action %s", ErrUnsupported, rules.GetAction())
}

func anyMatches[T any](xs []T, match func(T) (bool, error)) (bool, error) {
	for _, x := range xs {
		if ok, err := match(x); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func allMatch[T any](xs []T, match func(T) (bool, error)) (bool, error) {
	for _, x := range xs {
		if ok, err := match(x); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func permissionMatches(p *rbacv3.Permission, call rbacCall) (bool, error) {
	recurse := func(x *rbacv3.Permission) (bool, error) { return permissionMatches(x, call) }
	switch r := p.GetRule().(type) {
	case *rbacv3.Permission_Any:
		return r.Any, nil
	case *rbacv3.Permission_AndRules:
		return allMatch(r.AndRules.GetRules(), recurse)
	case *rbacv3.Permission_OrRules:
		return anyMatches(r.OrRules.GetRules(), recurse)
	case *rbacv3.Permission_NotRule:
		ok, err := recurse(r.NotRule)
		return !ok && err == nil, err
	case *rbacv3.Permission_Header:
		if call.headers == nil {
			return false, nil // a connection has no request headers
		}
		value, present := call.headers[strings.ToLower(r.Header.GetName())]
		if r.Header.GetStringMatch() == nil {
			return false, fmt.Errorf("%w: RBAC header matcher on %q without a string match", ErrUnsupported, r.Header.GetName())
		}
		ok, err := stringMatches(r.Header.GetStringMatch(), value)
		return present && ok != r.Header.GetInvertMatch(), err
	case *rbacv3.Permission_UrlPath:
		if call.headers == nil {
			return false, nil
		}
		path, _, _ := strings.Cut(call.headers[":path"], "?")
		return stringMatches(r.UrlPath.GetPath(), path)
	}
	return false, fmt.Errorf("%w: RBAC permission %T", ErrUnsupported, p.GetRule())
}

func principalMatches(p *rbacv3.Principal, call rbacCall) (bool, error) {
	recurse := func(x *rbacv3.Principal) (bool, error) { return principalMatches(x, call) }
	switch id := p.GetIdentifier().(type) {
	case *rbacv3.Principal_Any:
		return id.Any, nil
	case *rbacv3.Principal_AndIds:
		return allMatch(id.AndIds.GetIds(), recurse)
	case *rbacv3.Principal_OrIds:
		return anyMatches(id.OrIds.GetIds(), recurse)
	case *rbacv3.Principal_NotId:
		ok, err := recurse(id.NotId)
		return !ok && err == nil, err
	case *rbacv3.Principal_Authenticated_:
		if call.peer == "" {
			return false, nil // no peer certificate: nothing authenticated
		}
		if id.Authenticated.GetPrincipalName() == nil {
			return true, nil
		}
		return stringMatches(id.Authenticated.GetPrincipalName(), call.peer)
	}
	return false, fmt.Errorf("%w: RBAC principal %T", ErrUnsupported, p.GetIdentifier())
}

// httpRBAC is the HCM's RBAC filters' rules, in order.
func httpRBAC(hcm *hcmv3.HttpConnectionManager) ([]*rbacv3.RBAC, error) {
	var out []*rbacv3.RBAC
	for _, f := range hcm.GetHttpFilters() {
		config := &rbachttpv3.RBAC{}
		if tc := f.GetTypedConfig(); tc == nil || !unpack(tc, config) {
			continue
		}
		if config.GetMatcher() != nil {
			return nil, fmt.Errorf("%w: HTTP RBAC filter %q with a matcher", ErrUnsupported, f.GetName())
		}
		out = append(out, config.GetRules())
	}
	return out, nil
}

// networkRBAC is network filter f's rules when it is the RBAC filter.
func networkRBAC(f *listenerv3.Filter) (rules *rbacv3.RBAC, is bool, err error) {
	config := &rbacnetworkv3.RBAC{}
	if tc := f.GetTypedConfig(); tc == nil || !unpack(tc, config) {
		return nil, false, nil
	}
	if config.GetMatcher() != nil || config.GetEnforcementType() != rbacnetworkv3.RBAC_ONE_TIME_ON_FIRST_BYTE {
		return nil, true, fmt.Errorf("%w: network RBAC filter %q with a matcher or continuous enforcement", ErrUnsupported, f.GetName())
	}
	return config.GetRules(), true, nil
}

// normalizePath is the path as the HCM hands it to its filters and upstream
// (ConnectionManagerUtility::maybeNormalizePath): an escaped slash (%2F, %5C) refused (400) or
// kept by path_with_escaped_slashes_action (the unescaping actions are not modelled);
// normalize_path decodes the percent-encoded unreserved characters and removes the dot segments
// (RFC 3986 sections 6.2.2.2 and 5.2.4); merge_slashes then merges adjacent slashes. The query
// is left alone.
func normalizePath(hcm *hcmv3.HttpConnectionManager, target string) (string, int, error) {
	path, query, hasQuery := strings.Cut(target, "?")
	lower := strings.ToLower(path)
	switch hcm.GetPathWithEscapedSlashesAction() {
	case hcmv3.HttpConnectionManager_IMPLEMENTATION_SPECIFIC_DEFAULT, hcmv3.HttpConnectionManager_KEEP_UNCHANGED:
	case hcmv3.HttpConnectionManager_REJECT_REQUEST:
		if strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") {
			return "", 400, fmt.Errorf("%w: the path %q has an escaped slash (path_with_escaped_slashes_action REJECT_REQUEST)", ErrBadRequest, path)
		}
	default:
		return "", 0, fmt.Errorf("%w: path_with_escaped_slashes_action %s", ErrUnsupported, hcm.GetPathWithEscapedSlashesAction())
	}
	if hcm.GetNormalizePath().GetValue() {
		path = removeDotSegments(decodeUnreserved(path))
	}
	if hcm.GetMergeSlashes() {
		for strings.Contains(path, "//") {
			path = strings.ReplaceAll(path, "//", "/")
		}
	}
	if hasQuery {
		path += "?" + query
	}
	return path, 0, nil
}

// decodeUnreserved decodes %XX when XX is an unreserved character (ALPHA, DIGIT, -, ., _, ~).
func decodeUnreserved(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) {
			if s, err := url.PathUnescape(p[i : i+3]); err == nil && len(s) == 1 && isUnreserved(s[0]) {
				b.WriteByte(s[0])
				i += 2
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
}

// removeDotSegments is RFC 3986 section 5.2.4 over an absolute path.
func removeDotSegments(p string) string {
	var out []string
	segments := strings.Split(p, "/")
	for i, s := range segments {
		last := i == len(segments)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	if len(out) == 0 || out[0] != "" {
		out = append([]string{""}, out...)
	}
	if len(out) == 1 {
		return "/"
	}
	return strings.Join(out, "/")
}
