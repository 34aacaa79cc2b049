// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// The capture route configuration (DESIGN section 5, proposal 043): the capture HCM routes each
// request by its Host header (:authority in HTTP/2), and the answers are resolve's, never a
// second copy of the rule. For each name a service holds (holdNames), the domains are
//
//	<name>            resolve.HTTPRequest(<name>): port 80 when HTTP-class, else 421
//	<name>:<p>        each declared port: HTTP-class → its cluster, TCP → 421 port-not-http
//	<name>:18081      421 port-not-declared (the mesh's HTTP proxy port is not a port of S)
//	<name>:*          every other port: the dial surface's "Host: <name>:*" row, 421
//	                  port-not-declared. Never a domain spelling :18082: Host <name>:18082 is
//	                  this wildcard's answer.
//
// Each answer is resolve's for the Host spelled with the service's mesh name (see
// serviceVirtualHosts): the same status and x-aether-error as for the Host itself, a body naming
// the mesh name's spellings that work. Domains with the same answer share a virtual host: one per
// reached port (all names, portless too when the port is 80), one per 421 answer. Envoy matches
// Host case-insensitively (names are lower-cased; domains are unique) and prefers exact domains
// to prefix wildcards, the longest first; so <name>:8080 beats <name>:*, and the colon keeps
// <name>:* from matching a longer name.
//
// A Host with characters an authority cannot have is refused by Envoy itself with 400 before
// routing. A well-formed Host whose port is not canonical decimal (":080", ":99999") on a mesh
// name takes the name's wildcard (421 port-not-declared), and one with nothing after the colon
// the catch-all, where resolve says 400 bad-authority; no dial surface row has such a Host.
//
// The bare name (resolve.LocalName: Host payments:8080) is the service in the caller's own
// namespace. A route configuration is one source identity's, so one namespace's: the virtual
// hosts of that namespace's services carry their bare names too (<svc>, <svc>:<p>, <svc>:18081,
// <svc>:*, the same answers), and no other namespace's configuration does, where the bare name is
// that namespace's service of the name, or none (the catch-all). A bare name that is some
// service's name of resolve.Names is left to that name (holdLocalNames), so no domain is in two
// virtual hosts, which Envoy would refuse.
//
// A Host naming no mesh service takes the catch-all, which sends the request to its original
// destination (the passthrough), exactly as the capture listener treats a connection it does not
// recognise: with capture mode "all", plain-HTTP egress to the world keeps working, and a mesh
// VIP with a foreign Host is refused by kube-proxy as it would be without the mesh. A 404 there
// would break every captured non-mesh HTTP client.
//
// So is a Host under the mesh domain that names no service, on a node that fetches on demand as
// on one that carries everything: every service has its virtual hosts, carried or not, so no
// virtual host means no service, and the answer is given at once. Such a Host never becomes an
// on-demand request: a Host is the caller's to spell, and each distinct one would be a
// subscription the node's Envoy keeps, a rebuild of the agent's, and a name in the Envoy's first
// request when it reconnects.

// The proxy route configuration (ProxyRoutes) is the capture one with another catch-all: the
// mesh's HTTP proxy port (18081) is what a client sets as HTTP_PROXY, and what it sends there is
// meant for the mesh. A Host naming no mesh service is answered 404 not-mesh-name
// (resolve.NotMeshName), never passed through: the original destination of a connection to the
// proxy port is the proxy port itself. Both configurations share their other virtual hosts (the
// same messages), so the proxy port decides a mesh name exactly as a captured request does.

// routes renders the capture and the proxy route configurations of each distinct identity of the
// valid local pods, sorted by name.
func (b *builder) routes() []*routev3.RouteConfiguration {
	in := b.in
	plan := b.captureVirtualHosts(in.services)
	identities := make([]string, 0, len(in.pods))
	for _, p := range in.pods {
		identities = append(identities, p.Identity)
	}
	slices.Sort(identities)
	catchAll := &routev3.VirtualHost{
		Name: CaptureCatchAllVirtualHost, Domains: []string{"*"}, Routes: []*routev3.Route{routeTo(PassthroughCluster)},
	}
	notMesh := &routev3.VirtualHost{
		Name: ProxyNotMeshVirtualHost, Domains: []string{"*"},
		Routes: []*routev3.Route{meshAnswer(resolve.HTTPStatus(resolve.NotMesh), resolve.NotMeshName(b.mesh.Domain))},
	}
	b.check("virtual host "+catchAll.GetName(), catchAll)
	b.check("virtual host "+notMesh.GetName(), notMesh)
	out := make([]*routev3.RouteConfiguration, 0, 2*len(identities))
	for _, id := range slices.Compact(identities) {
		vhosts := b.captureVirtualHostsOf(plan, id)
		out = append(out, b.routeConfiguration(CaptureRoutes(id), vhosts, catchAll),
			b.routeConfiguration(ProxyRoutes(id), vhosts, notMesh))
	}
	slices.SortFunc(out, func(a, b *routev3.RouteConfiguration) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return out
}

// authorityHeader is the request header Envoy routes by: the Host, HTTP/2's :authority.
const authorityHeader = ":authority"

// plannedVirtualHost is a capture virtual host before it is written for a source identity: either
// built already (a 421 answer is the same for every source), or a port of a service to route to.
type plannedVirtualHost struct {
	name    string
	domains []string
	built   *routev3.VirtualHost
	service *meshService
	port    int32
	// localDomains spell the same authorities with the service's bare name: carried only by the
	// route configurations of identities in namespace.
	localDomains []string
	namespace    string
}

// captureVirtualHostsOf are identity's virtual hosts of the mesh's names, without a catch-all.
// Their parts are validated one by one, which covers every rule of a route configuration: the
// planned virtual hosts once in serviceVirtualHosts (every identity shares their domains and 421
// answers), each route to a cluster here, then the configuration without its virtual hosts
// (routeConfiguration; RouteConfiguration sets no rule on the list).
func (b *builder) captureVirtualHostsOf(plan []plannedVirtualHost, identity string) []*routev3.VirtualHost {
	vhosts := make([]*routev3.VirtualHost, 0, len(plan)+1)
	namespace := identityNamespace(identity)
	for _, v := range plan {
		domains := v.domains
		if v.namespace == namespace && len(v.localDomains) > 0 {
			domains = append(slices.Clip(v.domains), v.localDomains...)
		}
		if v.built != nil {
			vhosts = append(vhosts, withDomains(v.built, domains))
			continue
		}
		what := about{kind: "a route of virtual host", name: v.name}
		var routes []*routev3.Route
		if len(b.attached[servicePort{v.service.Namespace + "/" + v.service.Name, v.port}]) == 0 {
			// httpPortRoutes' answer for a port no route is attached to, checked as it is made.
			routes = b.defaultPortRoutes(what, SourceCluster(HTTPCluster(v.service.fqdn, v.port), identity))
		} else {
			routes = b.withRetries(b.httpPortRoutes(v.service, v.port, identity))
			for _, r := range routes {
				b.checkAbout(what, r)
			}
		}
		vhosts = append(vhosts, &routev3.VirtualHost{Name: v.name, Domains: domains, Routes: routes,
			TypedPerFilterConfig: b.subsetHeaderConfig("virtual host "+v.name, v.service.SubsetKeys)})
	}
	return vhosts
}

// routeConfiguration is the route configuration name: vhosts and catchAll (a virtual host of
// domain "*"), sorted by name. vhosts is shared, not modified.
func (b *builder) routeConfiguration(name string, vhosts []*routev3.VirtualHost, catchAll *routev3.VirtualHost) *routev3.RouteConfiguration {
	all := append(slices.Clip(vhosts), catchAll)
	slices.SortFunc(all, func(a, b *routev3.VirtualHost) int { return cmp.Compare(a.GetName(), b.GetName()) })
	rc := &routev3.RouteConfiguration{
		Name: name,
		// The clusters a route names arrive by CDS, which may lag RDS: Envoy must not refuse the
		// configuration for a cluster it has not yet received.
		ValidateClusters: wrapperspb.Bool(false),
	}
	outboundOutcomeHeaders(rc)
	b.check("route configuration "+rc.GetName(), rc)
	rc.VirtualHosts = all
	return rc
}

// identityNamespace is the namespace of a local pod's identity, spiffe://<domain>/ns/<ns>/sa/<sa>
// (selectPods keeps only identities of that shape): its bare names are the ones that hold.
func identityNamespace(identity string) string {
	namespace, _, _ := strings.Cut(SourceKey(identity), "/")
	return namespace
}

// withDomains is built, a virtual host every identity shares, with domains: itself when they are
// its own, else a copy (an identity of the service's namespace adds the bare name's domains)
// sharing its routes and per-filter configs, which nothing modifies after the plan (a deep copy of each 421 answer
// doubled the time of a build of 1 000 services of one namespace). A planned answer has a name,
// domains and routes only (planAnswer, serviceVirtualHosts); TestBuiltVirtualHostsCopyWhole
// keeps it so.
func withDomains(built *routev3.VirtualHost, domains []string) *routev3.VirtualHost {
	if len(domains) == len(built.GetDomains()) {
		return built
	}
	return &routev3.VirtualHost{Name: built.GetName(), Domains: domains, Routes: built.GetRoutes(),
		TypedPerFilterConfig: built.GetTypedPerFilterConfig()}
}

// routeTo sends every request to cluster. No timeout: the mesh does not cut a gRPC stream or a
// slow response short (Envoy's default is 15 s); the application's own timeouts apply.
func routeTo(cluster string) *routev3.Route {
	return &routev3.Route{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
			Timeout:          durationpb.New(0),
		}},
	}
}

// captureVirtualHosts plans the virtual hosts of every service's names, sorted by name; the 421
// answers are built (and validated) here, once for every identity.
func (b *builder) captureVirtualHosts(services []meshService) []plannedVirtualHost {
	var plan []plannedVirtualHost
	hostRows := map[string][]resolve.Dial{} // by port set: most services share a few shapes
	for i := range services {
		key := portSetKey(services[i].ports)
		rows, ok := hostRows[key]
		if !ok {
			rows = hostRowsOf(services[i].ports, b.mesh.Issuer)
			hostRows[key] = rows
		}
		plan = append(plan, b.serviceVirtualHosts(&services[i], rows)...)
	}
	slices.SortFunc(plan, func(a, b plannedVirtualHost) int { return cmp.Compare(a.name, b.name) })
	return plan
}

// hostRowsOf are the "Host: ..." rows of the dial surface of ports in a mesh whose identities
// issuer issues: what an HTTP request gets, by the port in its Host header (none, each declared
// port, 18081, 18082, any other).
func hostRowsOf(ports portspec.PortSet, issuer workloadidentity.Issuer) []resolve.Dial {
	var rows []resolve.Dial
	for _, d := range resolve.DialSurface(ports, issuer) {
		if strings.HasPrefix(d.Address, resolve.HostRowPrefix) {
			rows = append(rows, d)
		}
	}
	return rows
}

// portSetKey spells ports (the primary and each port's number and protocol): two port sets with
// one key have one dial surface.
func portSetKey(ports portspec.PortSet) string {
	var k strings.Builder
	k.WriteString(itoa(ports.Primary))
	for _, p := range ports.Ports {
		k.WriteString("," + itoa(p.Port) + "=" + string(p.Protocol))
	}
	return k.String()
}

// serviceVirtualHosts plans s's virtual hosts from its dial surface's Host rows: per row, the
// domains that spell its authority with each name s holds, and the row's answer. Domains with the
// same answer share a virtual host, named after its first domain. The row "Host: <name>:18082"
// gets no domain (HTTP to the TCP mesh port must never reach an HTTP cluster): such a Host takes
// the row "Host: <name>:*", Envoy's prefix wildcard <name>:*, whose answer is the same 421
// port-not-declared.
//
// The answers are written for the service's mesh name (Dial.For), whichever name the Host
// carries: they name the mesh name's working spellings, and the configuration stays one answer
// per authority (written per name, the 421 bodies tripled the route configuration: 4.3 MB per
// identity at 1 000 services of 3 ports). Status and x-aether-error are those for the Host itself.
func (b *builder) serviceVirtualHosts(s *meshService, hostRows []resolve.Dial) []plannedVirtualHost {
	if len(s.names) == 0 {
		return nil
	}
	rowPrefix := resolve.HostRowPrefix + resolve.NamePlaceholder
	meshName := strings.ToLower(FQDN(s.Name, s.Namespace, b.mesh.Domain))
	var plan []plannedVirtualHost
	byAnswer := map[resolve.Result]int{} // what a virtual host does → its index in plan
	var meshTCP resolve.Result           // the answer to Host <name>:18082
	wildcard := -1                       // the index in plan of the <name>:* virtual host
	for _, row := range hostRows {
		suffix := strings.TrimPrefix(row.Address, rowPrefix) // "", ":8080", ":18081", ":18082", ":*"
		switch suffix {
		case ":" + itoa(meshv1alpha1.MeshTCPPort):
			meshTCP = row.For(meshName).Result
			continue
		case ":" + resolve.AnyOtherPort:
			suffix = ":*" // Envoy's prefix wildcard: any port no other domain names
			wildcard = len(plan)
		}
		r := row.For(meshName).Result
		domains := make([]string, len(s.names))
		for i, name := range s.names {
			domains[i] = name + suffix
		}
		var local []string
		if s.localName != "" {
			local = []string{s.localName + suffix}
		}
		// What the virtual host does: the port it reaches, or the answer (the reason is not sent).
		key := resolve.Result{Outcome: r.Outcome, Port: r.Port}
		if r.Outcome != resolve.Reaches {
			key = resolve.Result{Outcome: r.Outcome, Error: r.Error, Body: r.Body}
		}
		if i, ok := byAnswer[key]; ok {
			plan[i].domains = append(plan[i].domains, domains...)
			plan[i].localDomains = append(plan[i].localDomains, local...)
			if wildcard == len(plan) {
				wildcard = i
			}
			continue
		}
		byAnswer[key] = len(plan)
		v := b.planAnswer(s, domains, r)
		v.localDomains, v.namespace = local, s.Namespace
		plan = append(plan, v)
	}
	// Host <name>:18082 reaches the wildcard's virtual host (no domain spells :18082); a first
	// route there, matched on the authority's port, gives it resolve's own words for :18082.
	if wildcard >= 0 && plan[wildcard].built != nil && resolve.HTTPStatus(meshTCP.Outcome) != 0 {
		answer := b.answerRoute(b.answers.meshTCPMatch(), resolve.HTTPStatus(meshTCP.Outcome), meshTCP)
		plan[wildcard].built.Routes = append([]*routev3.Route{answer}, plan[wildcard].built.Routes...)
	}
	// Each virtual host is validated here, once for every identity, without its routes
	// (VirtualHost sets no rule on the list): a route to a port has none yet (captureRoutes
	// validates each route it adds), and an answer's were validated when made (answerRoute).
	//
	// VirtualHost's rule on a domain is per character (an HTTP header value), so the domains are
	// checked once per name: the first virtual host's spell every name s holds, and every other
	// domain is one of those names with another port suffix (":<port>", ":*"), which the rule
	// cannot refuse; a virtual host after the first is checked with its first domain (the list
	// must not be empty). Checked whole, the domains were a third of the plan's time. The bare
	// name's domains need no check of their own either: each is a checked domain,
	// <name>.<ns><suffix>, without its ".<ns>".
	for i := range plan {
		v := plan[i].built
		if v != nil {
			v.Domains = plan[i].domains
		} else {
			v = &routev3.VirtualHost{Name: plan[i].name, Domains: plan[i].domains}
		}
		routes, domains := v.Routes, v.Domains
		v.Routes = nil
		if i > 0 {
			v.Domains = domains[:1]
		}
		b.checkAbout(about{kind: "virtual host", name: v.GetName()}, v)
		v.Routes, v.Domains = routes, domains
	}
	return plan
}

// answerParts are what the capture virtual hosts' answers share (answerRoute): their matches
// and, by x-aether-error, the header that says it. Made once per build, never modified.
type answerParts struct {
	every, meshTCP *routev3.RouteMatch
	headers        map[resolve.MeshError][]*corev3.HeaderValueOption
}

// meshTCPMatch matches every request whose authority names the mesh TCP port (:18082).
func (a *answerParts) meshTCPMatch() *routev3.RouteMatch {
	if a.meshTCP == nil {
		a.meshTCP = everyRequest()
		a.meshTCP.Headers = []*routev3.HeaderMatcher{{Name: authorityHeader,
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ":" + itoa(meshv1alpha1.MeshTCPPort)}}}}}
	}
	return a.meshTCP
}

// answerRoute is meshAnswer(status, r) matching match (every request when nil), for a capture
// virtual host: every service has a few (5 000 at 1 000 services of three ports), and they
// differ in status and body alone, so they share their match and header (by r.Error). The first
// answer of each header is checked whole; every other without it (Route sets no rule on the list
// but its length, one), which checks its own parts.
func (b *builder) answerRoute(match *routev3.RouteMatch, status int, r resolve.Result) *routev3.Route {
	a := &b.answers
	if match == nil {
		if a.every == nil {
			a.every = everyRequest()
		}
		match = a.every
	}
	route := meshAnswer(status, r)
	route.Match = match
	headers, checked := a.headers[r.Error]
	if checked {
		route.ResponseHeadersToAdd = nil
	}
	b.checkAbout(about{kind: "an answer", name: string(r.Error)}, route)
	if checked {
		route.ResponseHeadersToAdd = headers
	} else {
		a.headers = store(a.headers, r.Error, route.ResponseHeadersToAdd)
	}
	return route
}

// planAnswer plans the virtual host of r, the answer for domains: a route to the port r reaches,
// or resolve's own answer (421, or 400 for a name no authority can carry).
func (b *builder) planAnswer(s *meshService, domains []string, r resolve.Result) plannedVirtualHost {
	v := plannedVirtualHost{name: CaptureVirtualHost(domains[0]), domains: domains}
	switch status := resolve.HTTPStatus(r.Outcome); {
	case r.Outcome == resolve.Reaches:
		v.service, v.port = s, r.Port
	case status != 0:
		v.built = &routev3.VirtualHost{Name: v.name, Routes: []*routev3.Route{b.answerRoute(nil, status, r)}}
	default:
		b.fail(fmt.Errorf("xds: service %s/%s: resolve answered Host %q with outcome %q, which no virtual host can give",
			s.Namespace, s.Name, domains[0], r.Outcome))
	}
	return v
}

// meshAnswer is the mesh's own HTTP answer r: status, the x-aether-error header and resolve's body.
func meshAnswer(status int, r resolve.Result) *routev3.Route {
	return &routev3.Route{
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
			Status: uint32(status),
			Body:   &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: r.Body}},
		}},
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{{
			Header:       &corev3.HeaderValue{Key: resolve.ErrorHeader, Value: string(r.Error)},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		}},
	}
}
