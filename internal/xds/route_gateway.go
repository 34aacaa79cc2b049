// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/routes"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// Gateway API routes on the capture listener (DESIGN section 6; GAMMA: GEP-1294 and its
// conformance GEP-1686). model.Mesh.Routes holds only what the controller accepted
// (ResolvedRefs=True, each parent Accepted=True); Build still checks every parent and backend
// against its own selection, so a route never names a cluster that does not exist.
//
// Attachment. A parent with a port attaches the route to that port of the service; a parent
// without one to every port the route's kind carries (GEP-1294 "Ports": "If port is not set, the
// implementation MUST associate the route with all ports defined in the Service"). Which kind
// carries which protocol is routes.Carries, the controller's own rule: HTTPRoute every HTTP-class
// port, GRPCRoute every HTTP2 port, TCPRoute and TLSRoute every TCP port. The TCP mesh port
// (cap_tcp_<svc>, VIP:18082) reaches the default TCP port, so it carries that port's routes.
//
// Who a route applies to (GEP-1294 "Namespace boundaries"): a producer route (in its parent's
// namespace) applies to every client; a consumer route (in another namespace) only to clients of
// its own namespace, and for them it replaces the producer routes of that port (GEP-1686:
// "Consumer routes have priority over producer routes"). A client's namespace is its identity's
// (the route configurations and capture chains are per source identity already), so no namespace
// can reshape another namespace's traffic to a service it does not own.
//
// One kind per port (GEP-1294 "Route types": "only a single route type should be applied"):
// GRPCRoute, then HTTPRoute, then TLSRoute, then TCPRoute; routes of a later kind on the same
// port are left out (Resources.Skipped names them).
//
// HTTP (HTTPRoute, GRPCRoute). The routes replace the port's default route (GEP-1294 "Route
// presence": "you are replacing that implicit logic - not adding to it"): every match of every
// rule of every applied route becomes one Envoy route (the match's conditions ANDed, the matches
// of a rule ORed), in Gateway API's precedence order, stably (HTTPRouteRule.Matches: exact path,
// then the longest prefix, then a method, then the most headers; GRPCRouteRule.Matches: the
// longest service, then the longest method, then the most headers; then the oldest route, then
// "{namespace}/{name}", then rule order). model.Route carries no creation time, so the cross-route
// tie goes to namespace/name alone. A request no rule matches gets 404 (HTTPRouteRule.Matches:
// "When no rules matching a request have been successfully attached to the parent a request is
// coming from, a HTTP 404 status code MUST be returned"; GEP-1686: "Given an HTTPRoute with
// matches, unmatched requests are dropped with a 404"): no route falls back to the port's own
// cluster. Hostnames are ignored (GEP-1294: GAMMA implementations "SHOULD NOT infer any
// functionality from the hostnames field"). Filters, query-parameter and regular-expression
// matches are not carried; a match the mesh cannot carry is left out (never widened to "every
// request"), and a rule none of whose matches can be carried is left out whole.
//
// TCP (TCPRoute, TLSRoute). A TCPRoute's one rule replaces the chain's cluster with its weighted
// backends. TLSRoutes add, beside the port's chains, one chain per route matching its hostnames
// as SNI (transport tls); a hostname two routes name is the first route's. A connection no
// TLSRoute hostname matches is closed: the routes replace the implicit route, as for HTTP.
//
// Backends. Each backendRef is the cluster of its service's port (HTTPCluster for the HTTP kinds,
// TCPCluster for the TCP kinds), qualified by the client's identity, with its weight (0: left out,
// "no traffic should be forwarded for this entry"). A backend Build does not carry (its service
// left out of the selection or without that port, or a port the kind cannot carry) keeps its
// weight on the blackhole cluster: its share fails (503, or a closed connection), as the spec asks
// of an invalid backend ("the proportion of requests that would otherwise have been routed to an
// invalid backend MUST receive a 500"; TCPRoute: "Connection rejections must respect weight"),
// instead of silently moving to the others. A rule with no backend to send to (all weights 0, none
// carried, or none listed) answers 500 (HTTP: "all traffic which matches this rule MUST receive a
// 500 status code") or closes the connection (TCP).

// servicePort is one port of one selected service: "<ns>/<name>" and the port.
type servicePort struct {
	service string
	port    int32
}

// attachedRoute is a route as the chains and virtual hosts read it: its rules resolved once per
// build (matches built and validated, backends resolved to cluster base names).
type attachedRoute struct {
	kind      model.RouteKind
	namespace string
	name      string
	// hostnames are a TLSRoute's SNI names, lower-cased, each once.
	hostnames []string
	rules     []gatewayRule
}

// label names the route in Skipped: "HTTPRoute shop/payments-split".
func (a *attachedRoute) label() string { return routeLabel(a.kind, a.namespace, a.name) }

func routeLabel(kind model.RouteKind, namespace, name string) string {
	return string(kind) + " " + namespace + "/" + name
}

// gatewayRule is one rule of a route.
type gatewayRule struct {
	// index is the rule's index in the route.
	index int
	// matches are the matches the mesh carries; none means every request (the rule had none).
	matches []gatewayMatch
	// backends are the rule's weighted clusters (base names; "" is the blackhole cluster), each
	// cluster once; nil when noBackend says why the rule has none.
	backends  []weightedBase
	noBackend string
	// timeouts are the rule's (an HTTPRoute's): 0 for none.
	timeouts model.RouteTimeouts
}

// gatewayMatch is one match: its Envoy form and what orders it.
type gatewayMatch struct {
	index int // in its rule; 0 for a rule without matches
	envoy *routev3.RouteMatch
	rank  matchRank
	// all: the match holds for every request (prefix "/", nothing else).
	all bool
}

// matchRank is what Gateway API's precedence reads of a match. HTTPRoute: exact, prefixLen,
// method, headers. GRPCRoute: service, method (the lengths of each), headers.
type matchRank struct {
	exact     bool
	prefixLen int
	method    bool
	headers   int
	service   int
	methodLen int
}

// weightedBase is a backend's cluster base name ("" for the blackhole cluster) and its weight.
type weightedBase struct {
	base   string
	weight uint32
}

// maxBackendWeight is Gateway API's bound on a backendRef's weight (the API server refuses more).
const maxBackendWeight = 1_000_000

// httpKinds and tcpKinds are the route kinds of each class, in GEP-1294's order of precedence
// (the first kind present on a port is the one applied there).
var (
	httpKinds = []model.RouteKind{model.GRPCRoute, model.HTTPRoute}
	tcpKinds  = []model.RouteKind{model.TLSRoute, model.TCPRoute}
)

// skip records note in Skipped once (the chains and virtual hosts are built per identity, so the
// same fact is met more than once).
func (b *builder) skip(note string) {
	if b.skippedOnce == nil {
		b.skippedOnce = map[string]bool{}
	}
	if !b.skippedOnce[note] {
		b.skippedOnce[note] = true
		b.skipped = append(b.skipped, note)
	}
}

// attachRoutes resolves every route of the mesh once and attaches it to the ports of its
// parents, each port's routes in kind, namespace and name order.
func (b *builder) attachRoutes() map[servicePort][]*attachedRoute {
	if len(b.mesh.Routes) == 0 {
		return nil
	}
	services := make(map[string]*meshService, len(b.in.services))
	for i := range b.in.services {
		s := &b.in.services[i]
		services[s.Namespace+"/"+s.Name] = s
	}
	sorted := slices.Clone(b.mesh.Routes)
	slices.SortStableFunc(sorted, func(x, y model.Route) int {
		return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	out := map[servicePort][]*attachedRoute{}
	listed := map[string]bool{}
	for i := range sorted {
		r := &sorted[i]
		label := routeLabel(r.Kind, r.Namespace, r.Name)
		switch {
		case !slices.Contains(httpKinds, r.Kind) && !slices.Contains(tcpKinds, r.Kind):
			b.skip(fmt.Sprintf("xds: %s: kind %q is none of HTTPRoute, GRPCRoute, TCPRoute, TLSRoute; it is not carried", label, r.Kind))
			continue
		case listed[label]:
			b.skip(fmt.Sprintf("xds: %s is listed twice; only its first listing counts", label))
			continue
		}
		listed[label] = true
		a := b.resolveRoute(r, services)
		if a == nil {
			continue
		}
		for _, sp := range b.routePorts(r, services) {
			out[sp] = append(out[sp], a)
		}
	}
	return out
}

// routePorts are the ports r attaches to: per parent, its port, or every port of the service
// that r's kind carries; each once, sorted.
func (b *builder) routePorts(r *model.Route, services map[string]*meshService) []servicePort {
	label := routeLabel(r.Kind, r.Namespace, r.Name)
	var out []servicePort
	for _, parent := range r.Parents {
		key := parent.Namespace + "/" + parent.Name
		s := services[key]
		if s == nil {
			b.skip(fmt.Sprintf("xds: %s: parent %s is not a service this node's configuration carries (see its own note; a service without endpoints has no ports): the route does not attach there",
				label, key))
			continue
		}
		found := false
		for _, p := range s.Ports {
			if (parent.Port == 0 || p.Number == parent.Port) && routes.Carries(routes.Kind(r.Kind), p.Protocol) {
				out = append(out, servicePort{key, p.Number})
				found = true
			}
		}
		switch {
		case found:
		case parent.Port != 0:
			b.skip(fmt.Sprintf("xds: %s: parent %s:%d: the service has no port %d that a %s carries: the route does not attach there",
				label, key, parent.Port, parent.Port, r.Kind))
		default:
			b.skip(fmt.Sprintf("xds: %s: parent %s has no port that a %s carries: the route attaches to nothing there", label, key, r.Kind))
		}
	}
	slices.SortFunc(out, func(x, y servicePort) int {
		return cmp.Or(cmp.Compare(x.service, y.service), cmp.Compare(x.port, y.port))
	})
	return slices.Compact(out)
}

// resolveRoute is r with its rules resolved; nil when nothing of it can be carried.
func (b *builder) resolveRoute(r *model.Route, services map[string]*meshService) *attachedRoute {
	a := &attachedRoute{kind: r.Kind, namespace: r.Namespace, name: r.Name}
	http := slices.Contains(httpKinds, r.Kind)
	if r.Kind == model.TLSRoute {
		a.hostnames = b.sniNames(a, r.Hostnames)
		if len(a.hostnames) == 0 {
			b.skip(fmt.Sprintf("xds: %s has no hostname an SNI match can carry (the API requires at least one): it is not carried", a.label()))
			return nil
		}
	}
	rules := r.Rules
	if !http && len(rules) > 1 {
		b.skip(fmt.Sprintf("xds: %s has %d rules; a %s has one (the API allows one): only rule 0 is carried", a.label(), len(rules), r.Kind))
		rules = rules[:1]
	}
	for i, rule := range rules {
		gr := gatewayRule{index: i, timeouts: rule.Timeouts}
		if http {
			for j, m := range rule.Matches {
				gm, err := buildMatch(r.Kind, m)
				if err != nil {
					b.skip(fmt.Sprintf("xds: %s: rule %d: match %d is left out: %v", a.label(), i, j, err))
					continue
				}
				gm.index = j
				gr.matches = append(gr.matches, gm)
			}
			if len(rule.Matches) > 0 && len(gr.matches) == 0 {
				b.skip(fmt.Sprintf("xds: %s: rule %d is left out: none of its matches can be carried (it matches no request, not every one)", a.label(), i))
				continue
			}
		}
		gr.backends, gr.noBackend = b.resolveBackends(a, i, rule.Backends, services)
		a.rules = append(a.rules, gr)
	}
	return a
}

// sniNameRE is a TLSRoute hostname Envoy's server_names can match: a DNS name, or one whose first
// label is the wildcard "*" (Envoy refuses a listener with a partial wildcard).
var sniNameRE = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// sniNames are a TLSRoute's hostnames as server_names: lower-cased (an SNI is matched
// case-insensitively), each once, those Envoy cannot match left out.
func (b *builder) sniNames(a *attachedRoute, hostnames []string) []string {
	var out []string
	for _, h := range hostnames {
		h = strings.ToLower(h)
		switch {
		case !sniNameRE.MatchString(h):
			b.skip(fmt.Sprintf("xds: %s: hostname %q is not a DNS name (or *.<DNS name>): it is left out", a.label(), h))
		case !slices.Contains(out, h):
			out = append(out, h)
		}
	}
	return out
}

// resolveBackends are the weighted clusters of rule i of a, each cluster once; nil and the reason
// when the rule has nothing to send to.
func (b *builder) resolveBackends(a *attachedRoute, i int, backends []model.Backend, services map[string]*meshService) ([]weightedBase, string) {
	var out []weightedBase
	carried := false
	for _, be := range backends {
		if be.Weight <= 0 {
			continue // "If weight is set to 0, no traffic should be forwarded for this entry"
		}
		weight := uint32(min(be.Weight, maxBackendWeight))
		base, why := backendCluster(a.kind, be.ServiceRef, services)
		if why != "" {
			b.skip(fmt.Sprintf("xds: %s: rule %d: backend %s/%s:%d %s: its share of the rule's traffic (weight %d) fails",
				a.label(), i, be.Namespace, be.Name, be.Port, why, weight))
		} else {
			carried = true
		}
		if j := slices.IndexFunc(out, func(w weightedBase) bool { return w.base == base }); j >= 0 {
			out[j].weight += weight
			continue
		}
		out = append(out, weightedBase{base: base, weight: weight})
	}
	switch {
	case carried:
		return out, ""
	case len(backends) == 0:
		return nil, fmt.Sprintf("rule %d of %s has no backendRefs", i, a.label())
	case len(out) == 0:
		return nil, fmt.Sprintf("every backendRef of rule %d of %s has weight 0", i, a.label())
	}
	return nil, fmt.Sprintf("no backendRef of rule %d of %s is a port this mesh carries", i, a.label())
}

// backendCluster is the base name of the cluster that reaches ref for a route of kind, or why
// there is none.
func backendCluster(kind model.RouteKind, ref model.ServiceRef, services map[string]*meshService) (string, string) {
	s := services[ref.Namespace+"/"+ref.Name]
	if s == nil {
		return "", "is not a service this node's configuration carries"
	}
	i := slices.IndexFunc(s.Ports, func(p model.Port) bool { return p.Number == ref.Port })
	switch {
	case i < 0:
		return "", fmt.Sprintf("names port %d, which the service does not list", ref.Port)
	case !routes.Carries(routes.Kind(kind), s.Ports[i].Protocol):
		return "", fmt.Sprintf("is a %s port, which a %s cannot carry", s.Ports[i].Protocol, kind)
	case slices.Contains(httpKinds, kind):
		return HTTPCluster(s.fqdn, ref.Port), ""
	}
	return TCPCluster(s.fqdn, ref.Port), ""
}

// buildMatch is m as an Envoy route match for a route of kind, validated, with its rank.
func buildMatch(kind model.RouteKind, m model.RouteMatch) (gatewayMatch, error) {
	var gm gatewayMatch
	rm := &routev3.RouteMatch{}
	if kind == model.GRPCRoute {
		if err := grpcPath(rm, m); err != nil {
			return gm, err
		}
		gm.rank = matchRank{service: len(m.GRPCService), methodLen: len(m.GRPCMethod)}
	} else {
		rank, err := httpPath(rm, m)
		if err != nil {
			return gm, err
		}
		gm.rank = rank
		if m.Method != "" {
			rm.Headers = append(rm.Headers, exactHeader(methodHeader, m.Method))
		}
	}
	seen := map[string]bool{}
	for _, h := range m.Headers {
		name := strings.ToLower(h.Name)
		if seen[name] {
			continue // "only the first entry with an equivalent name MUST be considered"
		}
		seen[name] = true
		rm.Headers = append(rm.Headers, exactHeader(name, h.Value))
	}
	gm.rank.headers = len(seen)
	if err := rm.ValidateAll(); err != nil {
		return gm, fmt.Errorf("the proxy cannot carry it: %w", err)
	}
	gm.envoy = rm
	gm.all = rm.GetPrefix() == "/" && len(rm.GetHeaders()) == 0
	return gm, nil
}

// httpPath sets rm's path from an HTTPRoute match: Exact is the path; PathPrefix matches whole
// path elements ("/abc" matches /abc and /abc/def, not /abcd; a trailing "/" is ignored), which is
// Envoy's path_separated_prefix; no path is PathPrefix "/", the API's default.
func httpPath(rm *routev3.RouteMatch, m model.RouteMatch) (matchRank, error) {
	var rank matchRank
	path := m.Path
	switch m.PathType {
	case "Exact":
		if !strings.HasPrefix(path, "/") {
			return rank, fmt.Errorf("exact path %q does not start with /", path)
		}
		rm.PathSpecifier = &routev3.RouteMatch_Path{Path: path}
		rank.exact = true
	case "", "PathPrefix":
		if path == "" {
			path = "/"
		}
		if !strings.HasPrefix(path, "/") {
			return rank, fmt.Errorf("path prefix %q does not start with /", path)
		}
		// The prefix's length as matched (without the trailing "/" the spec ignores): "/a" and
		// "/a/" are one match, and tie, so the route order decides between them.
		if trimmed := strings.TrimRight(path, "/"); trimmed != "" {
			rm.PathSpecifier = &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: trimmed}
			rank.prefixLen = len(trimmed)
		} else {
			rm.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
			rank.prefixLen = 1
		}
	default:
		return rank, fmt.Errorf("path type %q is not carried (Exact and PathPrefix are)", m.PathType)
	}
	return rank, nil
}

// grpcPath sets rm's path from a GRPCRoute method match: gRPC calls POST /<service>/<method>.
// Service and method: that path; a service alone: the prefix /<service>/; a method alone: any
// service's method (a regular expression over the path, which Envoy matches whole).
func grpcPath(rm *routev3.RouteMatch, m model.RouteMatch) error {
	if strings.Contains(m.GRPCService+m.GRPCMethod, "/") {
		return fmt.Errorf("gRPC service %q or method %q contains /", m.GRPCService, m.GRPCMethod)
	}
	switch {
	case m.GRPCService != "" && m.GRPCMethod != "":
		rm.PathSpecifier = &routev3.RouteMatch_Path{Path: "/" + m.GRPCService + "/" + m.GRPCMethod}
	case m.GRPCService != "":
		rm.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/" + m.GRPCService + "/"}
	case m.GRPCMethod != "":
		rm.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{
			Regex: "/[^/]+/" + regexp.QuoteMeta(m.GRPCMethod)}}
	default:
		rm.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
	}
	return nil
}

func exactHeader(name, value string) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: value}}}}
}

// compareMatches orders two matches of routes of kind by Gateway API's precedence, the more
// specific first; 0 on a tie (the caller's stable order then decides: route, rule, match).
func compareMatches(kind model.RouteKind, x, y matchRank) int {
	if kind == model.GRPCRoute {
		return cmp.Or(-cmp.Compare(x.service, y.service), -cmp.Compare(x.methodLen, y.methodLen), -cmp.Compare(x.headers, y.headers))
	}
	return cmp.Or(-compareBool(x.exact, y.exact), -cmp.Compare(x.prefixLen, y.prefixLen),
		-compareBool(x.method, y.method), -cmp.Compare(x.headers, y.headers))
}

func compareBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case x:
		return 1
	}
	return -1
}

// clientNamespace is the namespace of a source identity (selectPods admits only the mesh's shape
// spiffe://<domain>/ns/<ns>/sa/<sa>).
func clientNamespace(identity string) string {
	ns, _, _ := strings.Cut(SourceKey(identity), "/")
	return ns
}

// appliedRoutes are the routes of one of kinds (in precedence order) that apply to a client of
// identity on port of s: the consumer routes of the client's namespace if any, else the producer
// routes; then those of the first kind present.
func (b *builder) appliedRoutes(s *meshService, port int32, identity string, kinds []model.RouteKind) []*attachedRoute {
	attached := b.attached[servicePort{s.Namespace + "/" + s.Name, port}]
	if len(attached) == 0 {
		return nil
	}
	client := clientNamespace(identity)
	var consumer, producer []*attachedRoute
	for _, a := range attached {
		switch {
		case !slices.Contains(kinds, a.kind):
		case a.namespace == s.Namespace:
			producer = append(producer, a)
		case a.namespace == client:
			consumer = append(consumer, a)
		}
	}
	applied, whose := producer, ""
	if len(consumer) > 0 {
		applied, whose = consumer, " for clients in namespace "+client
	}
	for _, k := range kinds {
		if !slices.ContainsFunc(applied, func(a *attachedRoute) bool { return a.kind == k }) {
			continue
		}
		var kept []*attachedRoute
		for _, a := range applied {
			if a.kind == k {
				kept = append(kept, a)
				continue
			}
			b.skip(fmt.Sprintf("xds: %s is not applied on %s:%d%s: a %s applies there, and one port carries one route kind (GEP-1294: GRPCRoute, HTTPRoute, TLSRoute, TCPRoute)",
				a.label(), s.fqdn, port, whose, k))
		}
		return kept
	}
	return nil
}

// httpPortRoutes are the routes of the virtual host that reaches HTTP-class port of s, for a
// client of identity: the port's cluster, or the rules of the HTTPRoutes or GRPCRoutes that apply
// there, most specific first, then 404.
func (b *builder) httpPortRoutes(s *meshService, port int32, identity string) []*routev3.Route {
	applied := b.appliedRoutes(s, port, identity, httpKinds)
	if len(applied) == 0 {
		return []*routev3.Route{routeTo(SourceCluster(HTTPCluster(s.fqdn, port), identity))}
	}
	type entry struct {
		route *attachedRoute
		rule  *gatewayRule
		match gatewayMatch
	}
	var entries []entry
	for _, a := range applied {
		for i := range a.rules {
			rule := &a.rules[i]
			if len(rule.matches) == 0 {
				entries = append(entries, entry{a, rule, gatewayMatch{envoy: everyRequest(), all: true, rank: matchRank{prefixLen: 1}}})
			}
			for _, m := range rule.matches {
				entries = append(entries, entry{a, rule, m})
			}
		}
	}
	kind := applied[0].kind
	slices.SortStableFunc(entries, func(x, y entry) int { return compareMatches(kind, x.match.rank, y.match.rank) })
	out := make([]*routev3.Route, 0, len(entries)+1)
	all := false
	for _, e := range entries {
		r := &routev3.Route{Name: GatewayRoute(string(e.route.kind), e.route.namespace, e.route.name, e.rule.index, e.match.index),
			Match: e.match.envoy}
		setRuleAction(r, e.rule, identity)
		out = append(out, r)
		all = all || e.match.all
	}
	if !all {
		out = append(out, &routev3.Route{Name: GatewayNoMatchRoute, Match: everyRequest(),
			Action: directResponse(404, fmt.Sprintf("no rule of the routes attached to %s:%d matches this request\n", s.fqdn, port))})
	}
	return out
}

func everyRequest() *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
}

// setRuleAction gives r the rule's action for a client of identity: its backends, or 500.
func setRuleAction(r *routev3.Route, rule *gatewayRule, identity string) {
	if rule.backends == nil {
		r.Action = directResponse(500, rule.noBackend+"\n")
		return
	}
	action := &routev3.RouteAction{Timeout: durationpb.New(rule.timeouts.Request)}
	if rule.timeouts.BackendRequest > 0 {
		// Each attempt's bound goes in the retry policy, which withRetries gives the route.
		action.RetryPolicy = &routev3.RetryPolicy{PerTryTimeout: durationpb.New(rule.timeouts.BackendRequest)}
	}
	clusters := qualify(rule.backends, identity)
	if len(clusters) == 1 {
		action.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: clusters[0].base}
	} else {
		weighted := &routev3.WeightedCluster{}
		for _, c := range clusters {
			weighted.Clusters = append(weighted.Clusters, &routev3.WeightedCluster_ClusterWeight{
				Name: c.base, Weight: wrapperspb.UInt32(c.weight)})
		}
		action.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: weighted}
	}
	r.Action = &routev3.Route_Route{Route: action}
}

// qualify turns base names into the cluster names a client of identity dials through ("" is the
// blackhole cluster, which no source qualifies).
func qualify(backends []weightedBase, identity string) []weightedBase {
	out := make([]weightedBase, len(backends))
	for i, w := range backends {
		out[i] = weightedBase{base: BlackholeCluster, weight: w.weight}
		if w.base != "" {
			out[i].base = SourceCluster(w.base, identity)
		}
	}
	return out
}

func directResponse(status uint32, body string) *routev3.Route_DirectResponse {
	return &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
		Status: status,
		Body:   &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}},
	}}
}

// sniRoute is a TLSRoute's chain on a port: the SNI names it holds and where it sends.
type sniRoute struct {
	route     *attachedRoute
	hostnames []string
	target    []weightedBase
}

// tcpRouting is where the TCP chains of port of s send a client of identity (own: the port's
// own cluster, already qualified): own, a TCPRoute's backends, or, with TLSRoutes, the blackhole
// cluster beside one SNI chain per TLSRoute.
//
// Without a workload-identity issuer (model.Mesh.Issuer) it is the blackhole cluster whatever the
// routes say: raw TCP rides mTLS only, so no raw-TCP cluster exists and a captured TCP dial of a
// mesh VIP is closed, never passed through in plaintext (the routes are named in Skipped).
func (b *builder) tcpRouting(s *meshService, port int32, identity, own string) ([]weightedBase, []sniRoute) {
	applied := b.appliedRoutes(s, port, identity, tcpKinds)
	if !b.mesh.Issuer.Issues() {
		for _, a := range applied {
			b.skip(fmt.Sprintf("xds: %s is not applied on %s:%d: no workload identity: %s", a.label(), s.fqdn, port, workloadidentity.NoIssuerTCP))
		}
		return []weightedBase{{base: BlackholeCluster, weight: 1}}, nil
	}
	if len(applied) == 0 {
		return []weightedBase{{base: own, weight: 1}}, nil
	}
	if applied[0].kind == model.TCPRoute {
		for _, a := range applied[1:] {
			b.skip(fmt.Sprintf("xds: %s is not applied on %s:%d: %s is, and a port carries one TCPRoute (the first by namespace and name)",
				a.label(), s.fqdn, port, applied[0].label()))
		}
		return tcpRuleTarget(applied[0], identity), nil
	}
	taken := map[string]*attachedRoute{}
	var snis []sniRoute
	for _, a := range applied {
		var names []string
		for _, h := range a.hostnames {
			if holder, ok := taken[h]; ok {
				b.skip(fmt.Sprintf("xds: %s: hostname %q on %s:%d is %s's, which comes first by namespace and name", a.label(), h, s.fqdn, port, holder.label()))
				continue
			}
			taken[h] = a
			names = append(names, h)
		}
		if len(names) > 0 {
			snis = append(snis, sniRoute{route: a, hostnames: names, target: tcpRuleTarget(a, identity)})
		}
	}
	return []weightedBase{{base: BlackholeCluster, weight: 1}}, snis
}

// tcpRuleTarget is where a TCPRoute's or TLSRoute's one rule sends a client of identity: its
// backends, or the blackhole cluster when it has none.
func tcpRuleTarget(a *attachedRoute, identity string) []weightedBase {
	if len(a.rules) == 0 || a.rules[0].backends == nil {
		return []weightedBase{{base: BlackholeCluster, weight: 1}}
	}
	return qualify(a.rules[0].backends, identity)
}
