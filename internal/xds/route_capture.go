// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"fmt"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/resolve"
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
// Each 421 answer is written for the name the Host carries (Dial.For), so its body is resolve's
// word for word. Domains with the same answer share a virtual host: one per reached port (its
// names, portless when the port is 80), one per 421 answer. Envoy matches Host case-insensitively
// (names are lower-cased; domains are unique) and prefers exact domains to prefix wildcards, the
// longest first; so <name>:8080 beats <name>:*, and the colon keeps <name>:* from matching a
// longer name.
//
// A Host with characters an authority cannot have is refused by Envoy itself with 400 before
// routing. A well-formed Host whose port is not canonical decimal (":080", ":99999", ":") on a
// mesh name takes the name's wildcard (421 port-not-declared), where resolve says 400
// bad-authority; no dial surface row has such a Host.
//
// A Host naming no mesh service takes the catch-all, which sends the request to its original
// destination (the passthrough), exactly as the capture listener treats a connection it does not
// recognise: with capture mode "all", plain-HTTP egress to the world keeps working, and a mesh
// VIP with a foreign Host is refused by kube-proxy as it would be without the mesh. A 404 there
// would break every captured non-mesh HTTP client.

// routes renders the capture route configuration of each distinct identity of the valid local
// pods, sorted by name.
func (b *builder) routes() []*routev3.RouteConfiguration {
	in, err := selectInputs(b.mesh)
	if err != nil {
		b.fail(err)
		return nil
	}
	plan := b.captureVirtualHosts(in.services)
	identities := make([]string, 0, len(in.pods))
	for _, p := range in.pods {
		identities = append(identities, p.Identity)
	}
	slices.Sort(identities)
	out := make([]*routev3.RouteConfiguration, 0, len(identities))
	for _, id := range slices.Compact(identities) {
		out = append(out, b.captureRoutes(plan, id))
	}
	slices.SortFunc(out, func(a, b *routev3.RouteConfiguration) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return out
}

// plannedVirtualHost is a capture virtual host before it is written for a source identity: either
// built already (a 421 answer is the same for every source), or a port of a service to route to.
type plannedVirtualHost struct {
	name    string
	domains []string
	built   *routev3.VirtualHost
	service *meshService
	port    int32
}

// captureRoutes is identity's capture route configuration.
func (b *builder) captureRoutes(plan []plannedVirtualHost, identity string) *routev3.RouteConfiguration {
	vhosts := make([]*routev3.VirtualHost, 0, len(plan)+1)
	for _, v := range plan {
		if v.built != nil {
			vhosts = append(vhosts, v.built)
			continue
		}
		vhosts = append(vhosts, &routev3.VirtualHost{
			Name: v.name, Domains: v.domains, Routes: httpPortRoutes(v.service, v.port, identity),
		})
	}
	vhosts = append(vhosts, &routev3.VirtualHost{
		Name: CaptureCatchAllVirtualHost, Domains: []string{"*"}, Routes: []*routev3.Route{routeTo(PassthroughCluster)},
	})
	slices.SortFunc(vhosts, func(a, b *routev3.VirtualHost) int { return cmp.Compare(a.GetName(), b.GetName()) })
	rc := &routev3.RouteConfiguration{
		Name:         CaptureRoutes(identity),
		VirtualHosts: vhosts,
		// The clusters a route names arrive by CDS, which may lag RDS: Envoy must not refuse the
		// configuration for a cluster it has not yet received.
		ValidateClusters: wrapperspb.Bool(false),
	}
	b.check("route configuration "+rc.GetName(), rc)
	return rc
}

// httpPortRoutes are the routes of the virtual host that reaches HTTP-class port of s, for a
// client of identity: every request to the port's cluster. This is the seam for HTTPRoute and
// GRPCRoute: their matches and weighted backends go here, before this default route.
func httpPortRoutes(s *meshService, port int32, identity string) []*routev3.Route {
	return []*routev3.Route{routeTo(SourceCluster(HTTPCluster(s.fqdn, port), identity))}
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
// answers are built here, once for every identity.
func (b *builder) captureVirtualHosts(services []meshService) []plannedVirtualHost {
	var plan []plannedVirtualHost
	for i := range services {
		plan = append(plan, b.serviceVirtualHosts(&services[i])...)
	}
	slices.SortFunc(plan, func(a, b plannedVirtualHost) int { return cmp.Compare(a.name, b.name) })
	return plan
}

// serviceVirtualHosts plans s's virtual hosts: each domain of each name s holds, with resolve's
// answer, domains with the same answer in one virtual host named after its first domain.
func (b *builder) serviceVirtualHosts(s *meshService) []plannedVirtualHost {
	anyOtherPort := b.wildcardRow(s)
	var plan []plannedVirtualHost
	byAnswer := map[string]int{} // an answer's key → its index in plan
	seen := map[string]bool{}
	add := func(domain string, r resolve.Result) {
		if seen[domain] {
			return
		}
		seen[domain] = true
		key := fmt.Sprintf("%s|%d|%s|%s", r.Outcome, r.Port, r.Error, r.Body)
		if i, ok := byAnswer[key]; ok {
			plan[i].domains = append(plan[i].domains, domain)
			return
		}
		byAnswer[key] = len(plan)
		plan = append(plan, b.planAnswer(s, domain, r))
	}
	for _, name := range s.names {
		add(name, resolve.HTTPRequest(s.ports, name))
		for _, p := range s.ports.Ports {
			if p.Number == meshv1alpha1.MeshTCPPort { // no pod declares it; never a domain :18082
				continue
			}
			add(authority(name, p.Number), resolve.HTTPRequest(s.ports, authority(name, p.Number)))
		}
		add(authority(name, meshv1alpha1.MeshHTTPPort), resolve.HTTPRequest(s.ports, authority(name, meshv1alpha1.MeshHTTPPort)))
		// Envoy's prefix wildcard: <name> with any port no domain above names.
		add(name+":*", anyOtherPort.For(name).Result)
	}
	// Domains were appended after the virtual host was planned: write them into the built ones.
	for i := range plan {
		if plan[i].built != nil {
			plan[i].built.Domains = plan[i].domains
		}
	}
	return plan
}

// planAnswer plans the virtual host of r, the answer for domain: a route to the port r reaches,
// or resolve's own answer (421, or 400 for a name no authority can carry).
func (b *builder) planAnswer(s *meshService, domain string, r resolve.Result) plannedVirtualHost {
	v := plannedVirtualHost{name: CaptureVirtualHost(domain), domains: []string{domain}}
	switch status := r.Outcome.HTTPStatus(); {
	case r.Outcome == resolve.Reaches:
		v.service, v.port = s, r.Port
	case status != 0:
		v.built = &routev3.VirtualHost{Name: v.name, Routes: []*routev3.Route{meshAnswer(status, r)}}
	default:
		b.fail(fmt.Errorf("xds: service %s/%s: resolve answered Host %q with outcome %q, which no virtual host can give",
			s.Namespace, s.Name, domain, r.Outcome))
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

// wildcardRow is s's dial surface row "Host: <name>:*": the answer for a port no other row names.
func (b *builder) wildcardRow(s *meshService) resolve.Dial {
	address := resolve.HostRowPrefix + resolve.NamePlaceholder + ":" + resolve.AnyOtherPort
	for _, d := range resolve.DialSurface(s.ports) {
		if d.Address == address {
			return d
		}
	}
	b.fail(fmt.Errorf("xds: service %s/%s: resolve.DialSurface has no row %q", s.Namespace, s.Name, address))
	return resolve.Dial{}
}

// authority spells host:port.
func authority(host string, port int32) string { return host + ":" + itoa(port) }
