// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// The proxyless rendering: the same mesh, for a gRPC client that speaks xDS itself (grpc-go's
// xds:/// resolver) instead of sending its traffic through the node's Envoy. Per HTTP2 port p of
// every service:
//
//   - an API listener per name of resolve.Names the service holds, <name>:<p> (what grpc-go asks
//     for when it dials xds:///<name>:<p>), and its bare name's for a client of its namespace
//     (namesFor), whose HCM (router filter last) takes its routes by
//     RDS; the same HCM sits in the listener's one filter chain, where go-control-plane's
//     Consistent() finds the RDS name (it does not read api_listener; grpc-go ignores a client
//     listener's filter chains, and its own test resources do the same);
//   - a route configuration with one virtual host for those names: the port's cluster, or the
//     GRPCRoutes (or HTTPRoutes) the controller accepted, their matches and weights, scoped to the
//     client's namespace for consumer routes, exactly as the capture routes (httpPortRoutes);
//   - an EDS cluster (ROUND_ROBIN) on the Envoy rendering's load assignment of the port,
//     LoadAssignment(<fqdn>, p), with the same health (only HEALTHY endpoints receive RPCs),
//     localities and priorities.
//
// Where the client connects is where the node's Envoy would: the destination pod's inbound,
// <pod IP>:18008, over mTLS with the client's certificate, the server pinned to the destination's
// SPIFFE ID, SNI the port (ServerName, the primary too, as every mesh hop). A proxyless client and
// a sidecar-fronted server interoperate.
//
// What grpc-go v1.85 reads differs from Envoy (internal/xds/xdsclient/xdsresource/unmarshal_cds.go):
//
//   - certificates: only certificate provider instances (tls_certificate_provider_instance,
//     ca_certificate_provider_instance), never SDS (it NACKs tls_certificate_sds_secret_configs):
//     both name proxyless.CertificateProvider, the bootstrap's file_watcher instance;
//   - the SAN pin: it reads match_subject_alt_names (exact, against every SAN of the leaf) and
//     ignores match_typed_subject_alt_names, so the pin is the former, an exact SPIFFE ID;
//   - SNI: it sends UpstreamTlsContext.sni only with GRPC_EXPERIMENTAL_XDS_SNI=true (gRFC A101),
//     otherwise none, and a connection without SNI lands on the destination's floor chain: that
//     pod's own primary port, which during a rollout that moves the primary is not the
//     service's. So a client that does not announce it (proxyless.MetadataSNI) is served the
//     services' primary ports only, each by the pods whose own primary it is (noSNIMembers):
//     another port, or another pod, would silently reach another port;
//   - clusters: EDS, LOGICAL_DNS or aggregate only (no STATIC): the blackhole a route's invalid
//     backend keeps its share on is an EDS cluster whose load assignment is empty (its RPCs fail
//     UNAVAILABLE);
//   - routes: no path_separated_prefix (it NACKs the whole configuration): an HTTPRoute's path
//     prefix becomes the equivalent regular expression. A direct response (the 404 of a request
//     no rule matches, the 500 of a rule without backends) is an action grpc-go does not carry:
//     the RPC fails UNAVAILABLE.
//
// HTTP/1.1 and TCP ports are not served: a gRPC client speaks HTTP/2 only, and the destination's
// inbound speaks an HTTP/1.1 port's own protocol to its application.

// ProxylessClient is the gRPC client a proxyless rendering is for.
type ProxylessClient struct {
	// Identity is the client's SPIFFE ID (its pod's ServiceAccount's MeshService identity): the
	// clusters are qualified by it, and its namespace scopes consumer routes (GEP-1294).
	Identity string
	// SNI says the client sends the SNI its clusters name (it announced proxyless.MetadataSNI);
	// without it only the services' primary ports are served.
	SNI bool
}

// BuildProxyless renders m for client c: pure and deterministic, every message validated before
// it is packed, as Build. What it leaves out is in Resources.Skipped.
func BuildProxyless(m model.Mesh, c ProxylessClient) (Resources, error) {
	if m.Domain == "" {
		return Resources{}, fmt.Errorf("xds: the mesh domain is empty: set the agent's mesh domain (the default is %s)",
			resolve.DefaultMeshDomain)
	}
	if !meshIdentity(m.Domain, c.Identity) {
		return Resources{}, fmt.Errorf("xds: proxyless client identity %q is not of the mesh's shape %s/ns/<namespace>/sa/<serviceaccount>",
			c.Identity, TrustBundleSecret(m.Domain))
	}
	services, skipped := selectServices(m.Domain, m.Services, nil)
	b := &builder{mesh: m, in: listenerInputs{domain: m.Domain, services: services, skipped: skipped}}
	b.attached = b.attachRoutes()
	p := &proxylessBuilder{builder: b, client: c, clusters: map[string]bool{}}
	res := p.build()
	res.Skipped = b.skipNotes()
	return res, b.err
}

// proxylessBuilder is a builder rendering for one proxyless client.
type proxylessBuilder struct {
	*builder
	client ProxylessClient
	// clusters are the names of the clusters built (route actions may name only these).
	clusters map[string]bool
	// blackhole is set when a route sends a share to BlackholeCluster.
	blackhole bool
	// grpcRetries is the routes' retry policy, made once (grpcRetryPolicy).
	grpcRetries *routev3.RetryPolicy
}

// proxylessPort is a port the client is served.
type proxylessPort struct {
	service *meshService
	port    int32
}

func (p *proxylessBuilder) build() Resources {
	var res Resources
	var served []proxylessPort
	for i := range p.in.services {
		s := &p.in.services[i]
		for _, port := range s.Ports {
			if !p.serves(s, port) {
				continue
			}
			res.Clusters = append(res.Clusters, p.cluster(s, port.Number))
			res.Endpoints = append(res.Endpoints, p.loadAssignment(LoadAssignment(s.fqdn, port.Number), p.members(s, port)))
			served = append(served, proxylessPort{s, port.Number})
		}
	}
	// Routes last: a rule may send to any service's cluster, all of which are known now.
	for _, sp := range served {
		if len(sp.service.names) == 0 {
			continue // every name is another service's (Skipped says so): nothing dials this port
		}
		res.Routes = append(res.Routes, p.routeConfiguration(sp.service, sp.port))
		for _, name := range p.namesFor(sp.service) {
			res.Listeners = append(res.Listeners, p.apiListener(ProxylessListener(name, sp.port), ProxylessRoutes(sp.service.fqdn, sp.port)))
		}
	}
	if p.blackhole {
		res.Clusters = append(res.Clusters, p.blackholeEDSCluster())
		cla := &endpointv3.ClusterLoadAssignment{ClusterName: BlackholeCluster}
		p.check("load assignment "+BlackholeCluster, cla)
		res.Endpoints = append(res.Endpoints, cla)
	}
	slices.SortFunc(res.Clusters, func(x, y *clusterv3.Cluster) int { return cmp.Compare(x.GetName(), y.GetName()) })
	slices.SortFunc(res.Endpoints, func(x, y *endpointv3.ClusterLoadAssignment) int {
		return cmp.Compare(x.GetClusterName(), y.GetClusterName())
	})
	slices.SortFunc(res.Listeners, func(x, y *listenerv3.Listener) int { return cmp.Compare(x.GetName(), y.GetName()) })
	slices.SortFunc(res.Routes, func(x, y *routev3.RouteConfiguration) int { return cmp.Compare(x.GetName(), y.GetName()) })
	requireUnique(p.builder, kindCluster, res.Clusters, (*clusterv3.Cluster).GetName)
	requireUnique(p.builder, "load assignment", res.Endpoints, (*endpointv3.ClusterLoadAssignment).GetClusterName)
	requireUnique(p.builder, "listener", res.Listeners, (*listenerv3.Listener).GetName)
	requireUnique(p.builder, "route configuration", res.Routes, (*routev3.RouteConfiguration).GetName)
	return res
}

// serves reports whether the client is served port of s: an HTTP2 port, and, unless the client
// sends SNI, the service's primary (without SNI a connection lands on the destination's primary).
func (p *proxylessBuilder) serves(s *meshService, port model.Port) bool {
	if port.Protocol != meshv1alpha1.ProtocolHTTP2 {
		return false
	}
	if !p.client.SNI && port.Number != s.Primary {
		p.skip(fmt.Sprintf("xds: proxyless: %s:%d is not served to a client that sends no SNI: its connections would land on each "+
			"destination pod's own primary port, the service's being %d (run the client with %s=true and announce %s)",
			s.fqdn, port.Number, s.Primary, proxyless.EnvSNI, proxyless.MetadataSNI))
		return false
	}
	return true
}

// members are the endpoints of port of s the client is given: the port's load assignment, the
// same as the node's Envoy reads, for a client that sends SNI; for one that sends none, only the
// members whose own primary is the port (noSNIMembers).
func (p *proxylessBuilder) members(s *meshService, port model.Port) []model.Member {
	if p.client.SNI {
		return port.Pairs[0].Members
	}
	return p.noSNIMembers(s, port)
}

// noSNIMembers are the members of port of s whose own primary is the port. A connection without
// SNI takes the destination's floor chain, the pod's own primary: a pod that declares another
// primary (a rollout that moves the primary) would serve the client's RPCs on that other port,
// so it is left out, and Skipped says so.
func (p *proxylessBuilder) noSNIMembers(s *meshService, port model.Port) []model.Member {
	members := port.Pairs[0].Members
	kept := make([]model.Member, 0, len(members))
	for _, m := range members {
		if m.Primary == port.Number {
			kept = append(kept, m)
			continue
		}
		p.skip(fmt.Sprintf("xds: proxyless: endpoint %s/%s is not served to a client that sends no SNI for %s:%d: its own primary is %d, "+
			"where such a client's connections would land (run the client with %s=true and announce %s)",
			m.Namespace, m.Name, s.fqdn, port.Number, m.Primary, proxyless.EnvSNI, proxyless.MetadataSNI))
	}
	return kept
}

// cluster is the EDS cluster that reaches port of s for the client: its hosts the port's load
// assignment, its TLS pinned to the service's identity.
func (p *proxylessBuilder) cluster(s *meshService, port int32) *clusterv3.Cluster {
	name := SourceCluster(HTTPCluster(s.fqdn, port), p.client.Identity)
	p.clusters[name] = true
	sni := ""
	if p.client.SNI {
		sni = ServerName(port)
	}
	c := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{ServiceName: LoadAssignment(s.fqdn, port), EdsConfig: adsSource()},
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
		TransportSocket:      p.proxylessTLS("cluster "+name, s.Identity, sni),
	}
	p.check("cluster "+name, c)
	return c
}

// blackholeEDSCluster is where a route's backend the client cannot reach keeps its share: an
// EDS cluster without endpoints (grpc-go has no STATIC cluster), whose RPCs fail UNAVAILABLE.
func (p *proxylessBuilder) blackholeEDSCluster() *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 BlackholeCluster,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{ServiceName: BlackholeCluster, EdsConfig: adsSource()},
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
	p.check("cluster "+BlackholeCluster, c)
	return c
}

// proxylessTLS is a proxyless cluster's transport socket: mTLS with the client's certificate and
// the mesh's trust bundle, both from the bootstrap's certificate provider, the server pinned to
// destination (an exact SPIFFE ID), sni sent (when the client sends SNI at all).
func (p *proxylessBuilder) proxylessTLS(what, destination, sni string) *corev3.TransportSocket {
	provider := &tlsv3.CertificateProviderPluginInstance{InstanceName: proxyless.CertificateProvider}
	ctx := &tlsv3.UpstreamTlsContext{
		Sni: sni,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateProviderInstance: provider,
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				CaCertificateProviderInstance: provider,
				// grpc-go v1.85 reads this field and not match_typed_subject_alt_names. It matches
				// an exact string against every SAN of the leaf; a SPIFFE ID can only be a URI SAN.
				MatchSubjectAltNames: []*matcherv3.StringMatcher{{ //nolint:staticcheck // see above
					MatchPattern: &matcherv3.StringMatcher_Exact{Exact: destination},
				}},
			}},
		},
	}
	return &corev3.TransportSocket{
		Name:       wellknown.TransportSocketTLS,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: p.pack(what+" upstream TLS context", ctx)},
	}
}

// apiListener is the API listener name, routed by RDS routes.
func (p *proxylessBuilder) apiListener(name, routes string) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: adsSource(), RouteConfigName: routes,
		}},
		HttpFilters: p.routerFilters(),
	}
	packed := p.pack("the HCM of listener "+name, hcm)
	l := &listenerv3.Listener{
		Name:        name,
		ApiListener: &listenerv3.ApiListener{ApiListener: packed},
		FilterChains: []*listenerv3.FilterChain{{
			Name: ProxylessRDSChain,
			Filters: []*listenerv3.Filter{{
				Name: wellknown.HTTPConnectionManager, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: packed},
			}},
		}},
	}
	p.check("listener "+name, l)
	return l
}

// routeConfiguration is port of s's routes for the client: one virtual host whose domains are
// the port's listener names (grpc-go matches the target it dials, <name>:<p>, against them).
func (p *proxylessBuilder) routeConfiguration(s *meshService, port int32) *routev3.RouteConfiguration {
	name := ProxylessRoutes(s.fqdn, port)
	names := p.namesFor(s)
	domains := make([]string, len(names))
	for i, n := range names {
		domains[i] = ProxylessListener(n, port)
	}
	routes := p.httpPortRoutes(s, port, p.client.Identity)
	for i, r := range routes {
		routes[i] = p.forGRPC(name, r)
	}
	rc := &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{Name: name, Domains: domains, Routes: routes}}}
	p.check("route configuration "+name, rc)
	return rc
}

// namesFor are the names of s the client dials it by: those it holds (resolve.Names), and its bare
// name (resolve.LocalName) when the client is of its namespace and s holds it (holdLocalNames).
func (p *proxylessBuilder) namesFor(s *meshService) []string {
	if s.localName == "" || identityNamespace(p.client.Identity) != s.Namespace {
		return s.names
	}
	return append(slices.Clip(s.names), s.localName)
}

// forGRPC is r as grpc-go reads it: a path_separated_prefix (an HTTPRoute's PathPrefix) as the
// equivalent regular expression, and a weighted cluster the client has no cluster for (an
// HTTP/1.1 port's, a port not served to it) on the blackhole, its share failing.
func (p *proxylessBuilder) forGRPC(routes string, r *routev3.Route) *routev3.Route {
	if prefix := r.GetMatch().GetPathSeparatedPrefix(); prefix != "" {
		// The match is shared with the other ports the route attaches to: a copy is rewritten.
		match := proto.Clone(r.GetMatch()).(*routev3.RouteMatch)
		match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{
			Regex: regexp.QuoteMeta(prefix) + "(/.*)?"}} // the prefix, then nothing or "/..."; grpc-go anchors it
		r.Match = match
	}
	if action := r.GetRoute(); action != nil {
		action.RetryPolicy = p.grpcRetryPolicy()
		if c := action.GetCluster(); c != "" {
			action.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: p.reachable(routes, c)}
		}
		if w := action.GetWeightedClusters(); w != nil {
			var merged []*routev3.WeightedCluster_ClusterWeight
			for _, c := range w.GetClusters() {
				name := p.reachable(routes, c.GetName())
				if i := slices.IndexFunc(merged, func(m *routev3.WeightedCluster_ClusterWeight) bool { return m.GetName() == name }); i >= 0 {
					merged[i].Weight = wrapperspb.UInt32(merged[i].GetWeight().GetValue() + c.GetWeight().GetValue())
					continue
				}
				merged = append(merged, &routev3.WeightedCluster_ClusterWeight{Name: name, Weight: c.GetWeight()})
			}
			w.Clusters = merged
		}
	}
	p.check("a route of route configuration "+routes, r)
	return r
}

// grpcRetryPolicy is the retry policy of a proxyless client's routes, as grpc-go reads it (gRFC
// A44): UNAVAILABLE retried twice, 25–250 ms apart. grpc-go knows the status codes only: it cannot
// read the outcome header, so it cannot tell the destination's UNAVAILABLE for a call it could not
// deliver from the application's own (see docs/architecture.md, "What the mesh retries"). A call that never
// left the client, or that a server refused before processing it (REFUSED_STREAM, GOAWAY), grpc-go
// retries transparently, without a policy (gRFC A6).
func (p *proxylessBuilder) grpcRetryPolicy() *routev3.RetryPolicy {
	if p.grpcRetries == nil {
		p.grpcRetries = &routev3.RetryPolicy{
			RetryOn:    GRPCRetryOn,
			NumRetries: wrapperspb.UInt32(Retries),
			RetryBackOff: &routev3.RetryPolicy_RetryBackOff{
				BaseInterval: durationpb.New(RetryBaseInterval), MaxInterval: durationpb.New(RetryMaxInterval),
			},
		}
		p.check("the proxyless retry policy", p.grpcRetries)
	}
	return p.grpcRetries
}

// GRPCRetryOn is the retry_on of the proxyless routes: the one gRPC status the mesh retries.
const GRPCRetryOn = "unavailable"

// reachable is cluster if the client has it, else the blackhole (and why, in Skipped).
func (p *proxylessBuilder) reachable(routes, cluster string) string {
	switch {
	case p.clusters[cluster]:
		return cluster
	case cluster != BlackholeCluster:
		p.skip(fmt.Sprintf("xds: proxyless: %s: backend cluster %s is not served to proxyless clients (an HTTP/1.1 port, or a port "+
			"a client without SNI cannot reach): its share of the rule's RPCs fails", routes, cluster))
	}
	p.blackhole = true
	return BlackholeCluster
}
