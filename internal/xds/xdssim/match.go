// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// findRoute is the virtual host's first route, in order, whose match holds
// (VirtualHostImpl::getRouteFromEntries). nil when none does.
func findRoute(vh *routev3.VirtualHost, h map[string]string) (*routev3.Route, int, error) {
	for i, r := range vh.GetRoutes() {
		ok, err := routeMatches(r.GetMatch(), h)
		if err != nil {
			return nil, 0, fmt.Errorf("virtual host %q, route %s: %w", vh.GetName(), routeName(r, i), err)
		}
		if ok {
			return r, i, nil
		}
	}
	return nil, 0, nil
}

// routeMatches is RouteEntryImplBase::matchRoute and the path check of the route's kind: every
// condition holds.
func routeMatches(m *routev3.RouteMatch, h map[string]string) (bool, error) {
	if m.GetRuntimeFraction() != nil || m.GetTlsContext() != nil || len(m.GetDynamicMetadata()) > 0 ||
		len(m.GetFilterState()) > 0 || len(m.GetCookies()) > 0 {
		return false, fmt.Errorf("%w: a route match on runtime, TLS context, metadata, filter state or cookies", ErrUnsupported)
	}
	ok, err := pathMatches(m, h)
	if err != nil || !ok {
		return false, err
	}
	for _, hm := range m.GetHeaders() {
		if ok, err := headerMatches(hm, h); err != nil || !ok {
			return false, err
		}
	}
	if len(m.GetQueryParameters()) > 0 {
		if ok, err := queryMatches(m.GetQueryParameters(), h[":path"]); err != nil || !ok {
			return false, err
		}
	}
	if m.GetGrpc() != nil && !isGrpc(h["content-type"]) {
		return false, nil
	}
	return true, nil
}

// pathMatches is the path specifier, on the path without its query and fragment
// (PathUtil::removeQueryAndFragment); case_sensitive (default true) applies to prefix, path and
// path_separated_prefix.
func pathMatches(m *routev3.RouteMatch, h map[string]string) (bool, error) {
	raw := h[":path"]
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	fold := m.GetCaseSensitive() != nil && !m.GetCaseSensitive().GetValue()
	path := raw
	if fold {
		path = strings.ToLower(raw)
	}
	norm := func(s string) string {
		if fold {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		return strings.HasPrefix(path, norm(p.Prefix)), nil
	case *routev3.RouteMatch_Path:
		return path == norm(p.Path), nil
	case *routev3.RouteMatch_PathSeparatedPrefix:
		prefix := norm(p.PathSeparatedPrefix)
		return strings.HasPrefix(path, prefix) && (len(path) == len(prefix) || path[len(prefix)] == '/'), nil
	case *routev3.RouteMatch_SafeRegex:
		re, err := fullRegexp(p.SafeRegex.GetRegex())
		if err != nil {
			return false, err
		}
		return re.MatchString(raw), nil
	case *routev3.RouteMatch_ConnectMatcher_:
		return h[":method"] == "CONNECT", nil
	}
	return false, fmt.Errorf("%w: path specifier %T", ErrUnsupported, m.GetPathSpecifier())
}

// headerMatches is HeaderUtility::matchHeaders for one matcher: an absent header matches only a
// present_match false (true when inverted), unless treat_missing_header_as_empty; otherwise the
// specifier's result, inverted by invert_match. The deprecated specifiers (exact_match, ...) are
// not modelled.
func headerMatches(hm *routev3.HeaderMatcher, h map[string]string) (bool, error) {
	value, present := h[strings.ToLower(hm.GetName())]
	present = present || isPseudo(hm.GetName())
	spec := hm.GetHeaderMatchSpecifier()
	if !present && !hm.GetTreatMissingHeaderAsEmpty() {
		pm, isPresent := spec.(*routev3.HeaderMatcher_PresentMatch)
		if hm.GetInvertMatch() {
			return isPresent && pm.PresentMatch, nil
		}
		return isPresent && !pm.PresentMatch, nil
	}
	var match bool
	switch s := spec.(type) {
	case nil:
		match = true // no specifier: the header is present
	case *routev3.HeaderMatcher_PresentMatch:
		match = s.PresentMatch
	case *routev3.HeaderMatcher_RangeMatch:
		n, err := strconv.ParseInt(value, 10, 64)
		match = err == nil && n >= s.RangeMatch.GetStart() && n < s.RangeMatch.GetEnd()
	case *routev3.HeaderMatcher_StringMatch:
		var err error
		if match, err = stringMatches(s.StringMatch, value); err != nil {
			return false, err
		}
	default: // the deprecated exact, prefix, suffix, contains and regex forms: use string_match
		return false, fmt.Errorf("%w: header matcher %T (deprecated: use string_match)", ErrUnsupported, spec)
	}
	return match != hm.GetInvertMatch(), nil
}

// isPseudo: the pseudo-headers are always present on a request.
func isPseudo(name string) bool {
	switch name {
	case ":authority", ":path", ":method", ":scheme":
		return true
	}
	return false
}

// queryMatches is ConfigUtility::matchQueryParams: every parameter is present with its first
// value matching (present_match, or no matcher: present is enough).
func queryMatches(params []*routev3.QueryParameterMatcher, path string) (bool, error) {
	_, raw, _ := strings.Cut(path, "?")
	raw, _, _ = strings.Cut(raw, "#")
	query, _ := url.ParseQuery(raw)
	for _, p := range params {
		values, ok := query[p.GetName()]
		if !ok {
			return false, nil
		}
		if sm := p.GetStringMatch(); sm != nil && !p.GetPresentMatch() {
			if ok, err := stringMatches(sm, values[0]); err != nil || !ok {
				return false, err
			}
		}
	}
	return true, nil
}

// stringMatches is a StringMatcher (StringMatcherImpl): exact, prefix, suffix, contains (with
// ignore_case) or a full-match RE2 regex.
func stringMatches(sm *matcherv3.StringMatcher, value string) (bool, error) {
	fold := func(s string) string {
		if sm.GetIgnoreCase() {
			return strings.ToLower(s)
		}
		return s
	}
	v := fold(value)
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return v == fold(p.Exact), nil
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(v, fold(p.Prefix)), nil
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(v, fold(p.Suffix)), nil
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(v, fold(p.Contains)), nil
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := fullRegexp(p.SafeRegex.GetRegex())
		if err != nil {
			return false, err
		}
		return re.MatchString(value), nil
	}
	return false, fmt.Errorf("%w: string matcher %T", ErrUnsupported, sm.GetMatchPattern())
}

// fullRegexp compiles an RE2 pattern that must match the whole value (Envoy's safe_regex).
func fullRegexp(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	if err != nil {
		return nil, fmt.Errorf("%w: regex %q: %v", ErrUnsupported, pattern, err)
	}
	return re, nil
}

// isGrpc is Grpc::Common::hasGrpcContentType: application/grpc, alone or followed by '+' or ';'.
func isGrpc(contentType string) bool {
	rest, ok := strings.CutPrefix(contentType, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}
