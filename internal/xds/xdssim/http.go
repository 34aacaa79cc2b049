// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	h2mv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// serveHTTP is the HTTP connection manager with the router: the request's Host picks a virtual
// host, its first matching route picks the action.
func (s *Sim) serveHTTP(out *Outcome, hcm *hcmv3.HttpConnectionManager, req *Request, local netip.AddrPort, tls bool) {
	if req == nil {
		// The HTTP/1 codec fails to parse the bytes: Envoy answers 400 and closes.
		*out = out.fail(Answered, fmt.Errorf("%w", ErrNotHTTP))
		out.Response = localReply(400)
		return
	}
	if err := checkHTTPFilters(hcm); err != nil {
		*out = out.fail(Unmodelled, err)
		return
	}
	if err := checkCodec(hcm.GetCodecType(), req); err != nil {
		*out = out.fail(Closed, err)
		return
	}
	// The codec's verdicts come first: they are reached before the connection manager routes.
	target, verdict, answer, err := decodeRequest(hcm, requestTarget(req, hcm))
	if err != nil {
		*out = out.fail(verdict, err)
		out.Response = answer
		return
	}
	rc, err := s.routeConfiguration(out, hcm)
	if err != nil {
		*out = out.fail(verdictFor(err, Closed), err)
		return
	}
	if refuseConnect(out, hcm, rc, &target) {
		return
	}
	if status, err := checkRequest(target); err != nil {
		*out = out.fail(Answered, err)
		out.Response = localReply(status)
		return
	}
	path, status, err := normalizePath(hcm, target.path())
	if err != nil {
		*out = out.fail(verdictFor(err, Answered), err)
		if status != 0 {
			out.Response = localReply(status)
		}
		return
	}
	target.Path = path
	headers := requestHeaders(target, hcm, local.Port(), tls)
	s.route(out, hcm, rc, headers, &target, local, tls)
	if out.Verdict == Forwarded && out.routed != nil {
		requestDenied(out, hcm, rbacCall{peer: req.ClientCertURI, headers: headers})
	}
}

// requestTarget is the request as the codec hands it to the HCM. An HTTP/1 request whose target
// is absolute (GET http://host:port/path, as a client using the proxy port as an HTTP proxy
// sends it) takes its authority and path from the URL, replacing the Host header, while
// http_protocol_options.allow_absolute_url is on (the default).
func requestTarget(req *Request, hcm *hcmv3.HttpConnectionManager) Request {
	r := *req
	r.Path, r.Method = req.path(), req.method()
	if req.HTTP2 || !strings.HasPrefix(r.Path, "http://") && !strings.HasPrefix(r.Path, "https://") {
		return r
	}
	if allow := hcm.GetHttpProtocolOptions().GetAllowAbsoluteUrl(); allow != nil && !allow.GetValue() {
		return r
	}
	_, rest, _ := strings.Cut(r.Path, "://")
	authority, path, found := strings.Cut(rest, "/")
	r.Host, r.Path = authority, "/"+path
	if !found {
		r.Path = "/"
	}
	return r
}

// checkRequest is what the HCM answers itself before routing: 400 without a Host or with one
// nghttp2_check_authority refuses (HeaderUtility::requestHeadersValid), 404 for a path that is
// not relative.
func checkRequest(r Request) (int, error) {
	switch {
	case r.Host == "":
		return 400, fmt.Errorf("%w: no Host (HTTP/1.1 requires one; HTTP/1.0 takes default_host_for_http_10 when set)", ErrBadRequest)
	case strings.ContainsFunc(r.Host, func(c rune) bool { return !isAuthorityChar(c) }):
		return 400, fmt.Errorf("%w: the Host %q has a character an authority cannot carry", ErrBadRequest, r.Host)
	case !strings.HasPrefix(r.Path, "/"):
		return 404, fmt.Errorf("%w: the path %q is not relative", ErrBadRequest, r.Path)
	}
	return 0, nil
}

// isAuthorityChar is nghttp2's set of authority characters (RFC 3986 section 3.2).
func isAuthorityChar(c rune) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("-._~!$&'()*+,;=:@[]%", c)
}

// checkHTTPFilters accepts the router, last, after header-to-metadata, on-demand and RBAC filters:
// any other filter could answer or deny a request, which this simulator would not see. The RBAC
// filter denies (rbac.go, requestDenied).
// Header-to-metadata only writes the request's metadata, which the subset decision (subset.go)
// reads; it never answers. The on-demand filter only delays the request until its route's
// cluster exists (ondemand.go); the router answers as ever.
func checkHTTPFilters(hcm *hcmv3.HttpConnectionManager) error {
	filters := hcm.GetHttpFilters()
	if len(filters) == 0 {
		return fmt.Errorf("%w: the HTTP connection manager has no HTTP filter; Envoy requires the router last", ErrUnsupported)
	}
	for _, f := range filters[:len(filters)-1] {
		if tc := f.GetTypedConfig(); tc == nil || !unpack(tc, &h2mv3.Config{}) && !unpack(tc, &ondemandv3.OnDemand{}) && !unpack(tc, &rbachttpv3.RBAC{}) {
			return fmt.Errorf("%w: HTTP filter %q (only header-to-metadata, on-demand discovery, RBAC and the router are modelled)", ErrUnsupported, f.GetName())
		}
	}
	f := filters[len(filters)-1]
	if tc := f.GetTypedConfig(); tc != nil && unpack(tc, &routerv3.Router{}) || tc == nil && f.GetName() == "envoy.filters.http.router" {
		return nil
	}
	return fmt.Errorf("%w: HTTP filter %q (only the router is modelled)", ErrUnsupported, f.GetName())
}

// checkCodec: the HTTP1 codec cannot read HTTP/2 and the HTTP2 codec cannot read HTTP/1; AUTO
// reads both.
func checkCodec(codec hcmv3.HttpConnectionManager_CodecType, req *Request) error {
	switch {
	case codec == hcmv3.HttpConnectionManager_HTTP1 && req.HTTP2:
		return fmt.Errorf("%w: codec HTTP1, client speaks HTTP/2", ErrCodec)
	case codec == hcmv3.HttpConnectionManager_HTTP2 && !req.HTTP2:
		return fmt.Errorf("%w: codec HTTP2, client speaks HTTP/1.1", ErrCodec)
	case codec == hcmv3.HttpConnectionManager_HTTP3:
		return fmt.Errorf("%w: codec HTTP3 over TCP", ErrCodec)
	}
	return nil
}

// routeConfiguration is the HCM's route configuration: by RDS name among the resources, or
// inline. It is checked as Envoy checks it on arrival.
func (s *Sim) routeConfiguration(out *Outcome, hcm *hcmv3.HttpConnectionManager) (*routev3.RouteConfiguration, error) {
	var rc *routev3.RouteConfiguration
	switch spec := hcm.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_Rds:
		name := spec.Rds.GetRouteConfigName()
		out.RouteConfig = name
		found, ok := s.routes[name]
		if !ok {
			return nil, fmt.Errorf("%w: %q (RDS of HCM %q)", ErrNoRouteConfig, name, hcm.GetStatPrefix())
		}
		rc = found
	case *hcmv3.HttpConnectionManager_RouteConfig:
		rc = spec.RouteConfig
		out.RouteConfig = rc.GetName()
	default:
		return nil, fmt.Errorf("%w: HCM %q takes its routes from %T", ErrUnsupported, hcm.GetStatPrefix(), spec)
	}
	if err := CheckRoutes(rc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRejected, err)
	}
	if rc.GetVhds() != nil || len(rc.GetClusterSpecifierPlugins()) > 0 {
		return nil, fmt.Errorf("%w: route configuration %q uses VHDS or cluster specifier plugins", ErrUnsupported, rc.GetName())
	}
	return rc, nil
}

// requestHeaders are the request's headers as the router sees them (lower-case names, the
// pseudo-headers :authority, :path, :method, :scheme), after the HCM normalized the Host
// (ConnectionManagerUtility::maybeNormalizeHost: the trailing dot, then the port).
func requestHeaders(req Request, hcm *hcmv3.HttpConnectionManager, localPort uint16, tls bool) map[string]string {
	h := make(map[string]string, len(req.Headers)+4)
	for k, v := range req.Headers {
		h[strings.ToLower(k)] = v
	}
	host := req.Host
	if hcm.GetStripTrailingHostDot() {
		host = stripTrailingHostDot(host)
	}
	switch {
	case hcm.GetStripAnyHostPort():
		host = stripPort(host, -1)
	case hcm.GetStripMatchingHostPort():
		host = stripPort(host, int(localPort))
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	h[":authority"], h[":path"], h[":method"], h[":scheme"] = host, req.path(), req.method(), scheme
	clientCert(h, hcm, tls, req.ClientCertURI)
	return h
}

// xfcc is the header by which Envoy tells the upstream the client's certificate.
const xfcc = "x-forwarded-client-cert"

// clientCert is ConnectionManagerUtility::mutateXfccRequestHeader: by
// forward_client_cert_details, a client's x-forwarded-client-cert is removed (SANITIZE, the
// default), kept (FORWARD_ONLY, ALWAYS_FORWARD_ONLY), or, on mTLS, appended to (APPEND_FORWARD)
// or replaced (SANITIZE_SET) with the fields set_current_client_cert_details asks for. Only the
// URI field is modelled (By and Hash, which Envoy always adds, are not).
func clientCert(h map[string]string, hcm *hcmv3.HttpConnectionManager, tls bool, uri string) {
	mode := hcm.GetForwardClientCertDetails()
	mtls := tls && uri != ""
	switch {
	case mode == hcmv3.HttpConnectionManager_FORWARD_ONLY || mode == hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY:
		return
	case mode == hcmv3.HttpConnectionManager_SANITIZE || !mtls:
		delete(h, xfcc)
		return
	}
	var current string
	if hcm.GetSetCurrentClientCertDetails().GetUri() {
		current = "URI=" + uri
	}
	switch {
	case mode == hcmv3.HttpConnectionManager_APPEND_FORWARD && h[xfcc] != "" && current != "":
		h[xfcc] += "," + current
	case mode == hcmv3.HttpConnectionManager_APPEND_FORWARD && current == "":
	case current == "":
		delete(h, xfcc)
	default:
		h[xfcc] = current
	}
}

// stripTrailingHostDot is HeaderUtility::stripTrailingHostDot: "a.b." and "a.b.:80" lose the dot.
func stripTrailingHostDot(host string) string {
	i := strings.LastIndexByte(host, '.')
	switch {
	case i < 0:
		return host
	case i == len(host)-1:
		return host[:i]
	case host[i+1] == ':':
		return host[:i] + host[i+1:]
	}
	return host
}

// stripPort is HeaderUtility::stripPortFromHost: the port goes when it is numeric and, with a
// listener port (>= 0), equal to it.
func stripPort(host string, listenerPort int) string {
	start := portStart(host)
	if start < 0 {
		return host
	}
	port, err := strconv.ParseUint(host[start+1:], 10, 32)
	if err != nil || listenerPort >= 0 && int(port) != listenerPort {
		return host
	}
	return host[:start]
}

// portStart is HeaderUtility::getPortStart: the last ':' unless it is inside an IPv6 literal.
func portStart(host string) int {
	colon := strings.LastIndexByte(host, ':')
	if colon < 0 {
		return -1
	}
	if bracket := strings.LastIndexByte(host, ']'); bracket >= 0 && bracket > colon {
		return -1
	}
	return colon
}

// route walks the route configuration for one request.
func (s *Sim) route(out *Outcome, hcm *hcmv3.HttpConnectionManager, rc *routev3.RouteConfiguration, h map[string]string, req *Request, local netip.AddrPort, tls bool) {
	out.Authority, out.Path = h[":authority"], h[":path"]
	vh, err := findVirtualHost(rc, h)
	if err != nil {
		*out = out.fail(Unmodelled, err)
		return
	}
	if vh == nil {
		*out = out.fail(Answered, fmt.Errorf("%w: %q in route configuration %q", ErrNoVirtualHost, h[":authority"], rc.GetName()))
		out.Response = localReply(404)
		return
	}
	out.VirtualHost = vh.GetName()
	if vh.GetRequireTls() == routev3.VirtualHost_ALL && !tls {
		if refuseUpgrade(out, hcm, nil, req) {
			return
		}
		out.Verdict, out.Response = Answered, &Response{Status: 301}
		return
	}
	r, i, err := findRoute(vh, h)
	if err != nil {
		*out = out.fail(Unmodelled, err)
		return
	}
	if r == nil {
		*out = out.fail(Answered, fmt.Errorf("%w: %s %s in virtual host %q", ErrNoRoute, h[":method"], h[":path"], vh.GetName()))
		out.Response = localReply(404)
		return
	}
	out.Route = routeName(r, i)
	out.routed = &routed{hcm: hcm, rc: rc, vh: vh, route: r, request: h}
	if refuseUpgrade(out, hcm, r.GetRoute(), req) {
		return
	}
	s.act(out, rc, vh, r, req, local)
}

// findVirtualHost is RouteMatcher::findVirtualHost: the Host (or vhost_header) lower-cased, its
// port ignored only with ignore_port_in_host_matching; an exact domain, then the suffix
// wildcards ("*.x", "*-x") longest first, then the prefix wildcards ("x.*", "x:*") longest
// first, then "*". A wildcard never matches the whole host ("*.foo.com" does not match
// ".foo.com"). nil when nothing matches.
func findVirtualHost(rc *routev3.RouteConfiguration, h map[string]string) (*routev3.VirtualHost, error) {
	host := h[":authority"]
	if name := rc.GetVhostHeader(); name != "" {
		if host = h[strings.ToLower(name)]; host == "" {
			return nil, nil
		}
	}
	if rc.GetIgnorePortInHostMatching() {
		if start := portStart(host); start >= 0 {
			host = host[:start]
		}
	}
	host = strings.ToLower(host)
	var suffix, prefix, star *routev3.VirtualHost
	suffixLen, prefixLen := -1, -1
	for _, vh := range rc.GetVirtualHosts() {
		if vh.GetMatcher() != nil {
			return nil, fmt.Errorf("%w: virtual host %q routes with a matcher tree", ErrUnsupported, vh.GetName())
		}
		for _, d := range vh.GetDomains() {
			d = strings.ToLower(d)
			switch {
			case d == "*":
				star = vh
			case d == host:
				return vh, nil
			case strings.HasPrefix(d, "*"):
				if w := d[1:]; len(w) < len(host) && strings.HasSuffix(host, w) && len(w) > suffixLen {
					suffix, suffixLen = vh, len(w)
				}
			case strings.HasSuffix(d, "*"):
				if w := d[:len(d)-1]; len(w) < len(host) && strings.HasPrefix(host, w) && len(w) > prefixLen {
					prefix, prefixLen = vh, len(w)
				}
			}
		}
	}
	switch {
	case suffix != nil:
		return suffix, nil
	case prefix != nil:
		return prefix, nil
	}
	return star, nil
}

// routeName spells a route in an Outcome: its name, else its index in its virtual host.
func routeName(r *routev3.Route, i int) string {
	if r.GetName() != "" {
		return r.GetName()
	}
	return "#" + strconv.Itoa(i)
}

// act carries out the route's action.
func (s *Sim) act(out *Outcome, rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, r *routev3.Route, req *Request, local netip.AddrPort) {
	switch a := r.GetAction().(type) {
	case *routev3.Route_DirectResponse:
		out.Verdict = Answered
		out.Response = &Response{Status: int(a.DirectResponse.GetStatus()), Body: dataSource(a.DirectResponse.GetBody()),
			Headers: responseHeaders(rc, vh, r)}
	case *routev3.Route_Redirect:
		out.Verdict = Answered
		out.Response = &Response{Status: redirectStatus(a.Redirect.GetResponseCode()), Headers: responseHeaders(rc, vh, r)}
	case *routev3.Route_Route:
		s.forward(out, a.Route, req, local)
	default:
		*out = out.fail(Unmodelled, fmt.Errorf("%w: route %s acts by %T", ErrUnsupported, out.Route, a))
	}
}

// forward sends the request to the route's cluster, or to one of its weighted clusters. A
// chosen cluster that is missing is Envoy's cluster_not_found answer (503 unless configured).
func (s *Sim) forward(out *Outcome, ra *routev3.RouteAction, req *Request, local netip.AddrPort) {
	up := upstream{http: true, request: req, local: local, state: out.state}
	onDemand := httpOnDemand(out.routed.hcm)
	to := func(name string, weight uint32) bool {
		if err := s.discover(out, name, onDemand); err != nil {
			*out = out.fail(Unmodelled, err)
			return false
		}
		out.Targets = append(out.Targets, s.target(name, weight, up))
		return true
	}
	switch spec := ra.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		if !to(spec.Cluster, 1) {
			return
		}
	case *routev3.RouteAction_ClusterHeader:
		// The cluster the request header names (its first value); none is cluster_not_found.
		if !to(out.routed.request[strings.ToLower(spec.ClusterHeader)], 1) {
			return
		}
	case *routev3.RouteAction_WeightedClusters:
		// Envoy picks one weighted cluster per request, then the on-demand filter asks for it: the
		// simulator walks every choice, each discovered as if it were the one picked.
		for _, cw := range spec.WeightedClusters.GetClusters() {
			if cw.GetClusterHeader() != "" {
				*out = out.fail(Unmodelled, fmt.Errorf("%w: a weighted cluster named by header %q", ErrUnsupported, cw.GetClusterHeader()))
				return
			}
			if !to(cw.GetName(), cw.GetWeight().GetValue()) {
				return
			}
		}
	default:
		*out = out.fail(Unmodelled, fmt.Errorf("%w: route %s chooses its cluster by %T", ErrUnsupported, out.Route, spec))
		return
	}
	for i := range out.Targets {
		out.Targets[i].Upgrade = req.Upgrade
	}
	status := 503
	if ra.GetClusterNotFoundResponseCode() == routev3.RouteAction_NOT_FOUND {
		status = 404
	} else if ra.GetClusterNotFoundResponseCode() == routev3.RouteAction_INTERNAL_SERVER_ERROR {
		status = 500
	}
	for _, t := range out.Targets {
		if t.Weight > 0 && t.Err != nil && !errors.Is(t.Err, ErrNoCluster) {
			status = 503 // a cluster that exists but reaches nothing: no_healthy_upstream
		}
	}
	out.settle(localReply(status))
}

// localReply is an answer Envoy makes itself; its body is not modelled.
func localReply(status int) *Response { return &Response{Status: status, Local: true} }

// redirectStatus is RedirectAction.response_code as a status.
func redirectStatus(c routev3.RedirectAction_RedirectResponseCode) int {
	switch c {
	case routev3.RedirectAction_FOUND:
		return 302
	case routev3.RedirectAction_SEE_OTHER:
		return 303
	case routev3.RedirectAction_TEMPORARY_REDIRECT:
		return 307
	case routev3.RedirectAction_PERMANENT_REDIRECT:
		return 308
	}
	return 301
}

// responseHeaders are the headers response_headers_to_add sets on an answer: the route's, the
// virtual host's and the route configuration's, applied in that order (so the least specific
// wins an overwrite) unless most_specific_header_mutations_wins reverses it; at each level
// response_headers_to_remove first, then the additions (HeaderParser::evaluateHeaders).
func responseHeaders(rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, r *routev3.Route) map[string][]string {
	type level struct {
		add    []*corev3.HeaderValueOption
		remove []string
	}
	levels := []level{
		{r.GetResponseHeadersToAdd(), r.GetResponseHeadersToRemove()},
		{vh.GetResponseHeadersToAdd(), vh.GetResponseHeadersToRemove()},
		{rc.GetResponseHeadersToAdd(), rc.GetResponseHeadersToRemove()},
	}
	if rc.GetMostSpecificHeaderMutationsWins() {
		levels[0], levels[2] = levels[2], levels[0]
	}
	h := map[string][]string{}
	for _, l := range levels {
		for _, name := range l.remove {
			delete(h, strings.ToLower(name))
		}
		for _, o := range l.add {
			addHeader(h, o)
		}
	}
	return h
}

// addHeader applies one HeaderValueOption: append_action (or the deprecated append) and
// keep_empty_value.
func addHeader(h map[string][]string, o *corev3.HeaderValueOption) {
	name, value := strings.ToLower(o.GetHeader().GetKey()), o.GetHeader().GetValue()
	if value == "" && !o.GetKeepEmptyValue() {
		return
	}
	action := o.GetAppendAction()
	//nolint:staticcheck // Envoy 1.40 still honours the deprecated append; read it, or an overwrite looks like an append.
	if a := o.GetAppend(); a != nil {
		action = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		if a.GetValue() {
			action = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		}
	}
	_, exists := h[name]
	switch action {
	case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
		h[name] = append(h[name], value)
	case corev3.HeaderValueOption_ADD_IF_ABSENT:
		if !exists {
			h[name] = []string{value}
		}
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
		h[name] = []string{value}
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		if exists {
			h[name] = []string{value}
		}
	}
}

// dataSource is an inline body; a file or an environment variable is not read.
func dataSource(d *corev3.DataSource) string {
	switch s := d.GetSpecifier().(type) {
	case *corev3.DataSource_InlineString:
		return s.InlineString
	case *corev3.DataSource_InlineBytes:
		return string(s.InlineBytes)
	}
	return ""
}

// requestDenied runs the HCM's RBAC filters over a request the route forwards: a denial is the
// RBAC filter's local reply, 403 with response flag RBAC and details RBACDeniedDetails, through
// the route's response headers and the local reply mappers (Respond), and nothing is forwarded.
func requestDenied(out *Outcome, hcm *hcmv3.HttpConnectionManager, call rbacCall) {
	filters, err := httpRBAC(hcm)
	for _, rules := range filters {
		if err != nil {
			break
		}
		var allowed bool
		if allowed, err = rbacAllows(rules, call); err == nil && !allowed {
			resp, rerr := out.Respond(Upstream{Flags: []string{"RBAC"}, Details: RBACDeniedDetails, LocalStatus: 403})
			if rerr != nil {
				*out = out.fail(Unmodelled, rerr)
				return
			}
			*out = out.fail(Answered, fmt.Errorf("%w: HCM %q answers %q 403", ErrDenied, hcm.GetStatPrefix(), call.peer))
			out.Response, out.Targets = resp, nil
			return
		}
	}
	if err != nil {
		*out = out.fail(verdictFor(err, Unmodelled), err)
	}
}
