// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// All runs every structural gate over res (all but the stability gate, which compares two
// builds) and returns their violations, each prefixed with the gate's name.
func All(res xds.Resources) []string {
	var out []string
	for _, gate := range []struct {
		name  string
		check func(xds.Resources) []string
	}{
		{"names", Names}, {"references", References}, {"chains", Chains}, {"pinning", Pinning},
		{"consistency", Consistency}, {"validation", Validation}, {"domains", Domains}, {"from the pod", FromThePod},
		{"inbound limits", InboundLimits}, {"pod listener limits", PodListenerLimits}, {"http2 limits", HTTP2Limits}, {"upgrades", Upgrades}, {"families", Families},
		{"retries", Retries}, {"inbound http", InboundHTTP}, {"subsets", Subsets}, {"tcp stats", TCPStats},
		{"proxy port", ProxyPort}, {"reuse port", ReusePort}, {"access logs", AccessLogs}, {"uds delivery", UDSDelivery},
		{"authorization", Authorization}, {"http3 hop", HTTP3Hop},
	} {
		for _, v := range gate.check(res) {
			out = append(out, gate.name+": "+v)
		}
	}
	return out
}

// References checks that every cluster a tcp_proxy or a route action names (cluster,
// weighted_clusters) is among the clusters, every EDS cluster's load assignment (its
// service_name, else its name) is among the endpoints, and every RDS name is among the routes.
// A missing cluster is a connection killed silently, unless Envoy fetches it on demand: a mesh
// cluster (xds.ParseCluster) that a tcp_proxy with on_demand over ADS names alone, or that a
// route of a configuration names whose every connection manager runs the on-demand filter with
// on-demand CDS over ADS (Envoy's on-demand filter asks for the route's cluster). Nothing else
// has an on-demand path: a tcp_proxy's weighted_clusters, or a route of a manager without it.
func References(res xds.Resources) []string {
	onDemandRoutes := onDemandRouteConfigurations(res)
	var routeConfiguration string
	clusters, endpoints, routes := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, c := range res.Clusters {
		clusters[c.GetName()] = true
	}
	for _, e := range res.Endpoints {
		endpoints[e.GetClusterName()] = true
	}
	for _, r := range res.Routes {
		routes[r.GetName()] = true
	}
	var out []string
	need := func(at, what, name string, have map[string]bool, among string) {
		if !have[name] {
			out = append(out, fmt.Sprintf("%s: %s %q is not among the %s", at, what, name, among))
		}
	}
	// fetched reports whether Envoy asks for the missing cluster name on demand (onDemand).
	fetched := func(name string, onDemand bool) bool {
		t, mesh := xds.ParseCluster(name)
		return onDemand && mesh && !t.Inbound
	}
	unreadable := walk(res, func(at string, m proto.Message, _ bool) {
		switch t := m.(type) {
		case *routev3.RouteConfiguration:
			routeConfiguration = t.GetName()
		case *tcpproxyv3.TcpProxy:
			if c := t.GetCluster(); (c != "" || t.GetWeightedClusters() == nil) && !fetched(c, odcdsOverADS(t.GetOnDemand().GetOdcdsConfig())) {
				need(at, "cluster", c, clusters, "clusters")
			}
			for _, w := range t.GetWeightedClusters().GetClusters() {
				need(at, "weighted cluster", w.GetName(), clusters, "clusters")
			}
		case *routev3.RouteAction:
			onDemand := onDemandRoutes[routeConfiguration]
			if c := t.GetCluster(); c != "" && !fetched(c, onDemand) {
				need(at, "cluster", c, clusters, "clusters")
			}
			for _, w := range t.GetWeightedClusters().GetClusters() {
				if !fetched(w.GetName(), onDemand) {
					need(at, "weighted cluster", w.GetName(), clusters, "clusters")
				}
			}
		case *hcmv3.HttpConnectionManager:
			if rds := t.GetRds(); rds != nil {
				need(at, "RDS route configuration", rds.GetRouteConfigName(), routes, "route configurations")
			}
		case *clusterv3.Cluster:
			if t.GetType() == clusterv3.Cluster_EDS {
				need(at, "EDS load assignment", cmp.Or(t.GetEdsClusterConfig().GetServiceName(), t.GetName()), endpoints, "load assignments")
			}
		case *tlsv3.SdsSecretConfig:
			out = append(out, sdsReference(at, t)...)
		}
	})
	return append(out, unreadable...)
}

// onDemandRouteConfigurations are the RDS names whose every connection manager runs the on-demand
// filter (xds.OnDemandFilter) with on-demand CDS over ADS: Envoy fetches a cluster their routes
// name that it does not have.
func onDemandRouteConfigurations(res xds.Resources) map[string]bool {
	out := map[string]bool{}
	walk(res, func(_ string, m proto.Message, _ bool) {
		hcm, ok := m.(*hcmv3.HttpConnectionManager)
		if !ok || hcm.GetRds() == nil {
			return
		}
		name := hcm.GetRds().GetRouteConfigName()
		fetches := false
		for _, f := range hcm.GetHttpFilters() {
			var config ondemandv3.OnDemand
			if f.GetName() == xds.OnDemandFilter && f.GetTypedConfig().UnmarshalTo(&config) == nil &&
				odcdsOverADS(config.GetOdcds().GetSource()) {
				fetches = true
			}
		}
		seen, had := out[name]
		out[name] = fetches && (seen || !had)
	})
	return out
}

// odcdsOverADS reports whether on-demand CDS is asked of the ADS stream: the agent answers it
// there, and nowhere else.
func odcdsOverADS(source *corev3.ConfigSource) bool { return source.GetAds() != nil }

// sdsReference checks one SDS reference. Secrets are not among the resources (the agent serves
// them apart, as SPIRE issues them, and one not issued yet is simply absent), so what resolves it
// is where it is asked: the agent serves secrets on the ADS stream alone, and a secret asked of
// any other source, or without a name, never comes.
func sdsReference(at string, s *tlsv3.SdsSecretConfig) []string {
	switch {
	case s.GetName() == "":
		return []string{at + ": an SDS secret without a name"}
	case s.GetSdsConfig().GetAds() == nil:
		return []string{fmt.Sprintf("%s: SDS secret %q is not asked over ADS (sds_config.ads): the agent serves secrets on the ADS stream alone", at, s.GetName())}
	}
	return nil
}

// SecretReferences are the names of every SDS secret res references, anywhere (every
// SdsSecretConfig inside every Any), sorted: a reading independent of xds.SecretNames, which
// the server uses to choose the secrets it serves.
func SecretReferences(res xds.Resources) ([]string, []string) {
	names := map[string]bool{}
	unreadable := walk(res, func(_ string, m proto.Message, _ bool) {
		if s, ok := m.(*tlsv3.SdsSecretConfig); ok {
			names[s.GetName()] = true
		}
	})
	return slices.Sorted(maps.Keys(names)), unreadable
}

// Chains checks that within each listener no two filter chains share a name (nor go unnamed:
// stats and the simulator tell chains apart by name), and no two can match the same connection.
// Envoy rejects the whole listener update in that case ("multiple filter chains with the same
// matching rules"), leaving the pod on its previous listener or, for a new pod, with none.
func Chains(res xds.Resources) []string {
	var out []string
	for _, l := range res.Listeners {
		at := resourceAt("listener", l.GetName())
		if l.GetFilterChainMatcher() != nil {
			out = append(out, at+": uses filter_chain_matcher, which this gate does not read; match with filter_chain_match")
		}
		chains := listenerChains(l)
		seen := map[string]bool{}
		for i, c := range chains {
			switch {
			case c.GetName() == "":
				out = append(out, fmt.Sprintf("%s: filter chain %d has no name", at, i))
			case seen[c.GetName()]:
				out = append(out, fmt.Sprintf("%s: two filter chains are named %q", at, c.GetName()))
			}
			seen[c.GetName()] = true
		}
		matches := l.GetFilterChains()
		for i := range matches {
			for j := i + 1; j < len(matches); j++ {
				if shared, ok := overlap(matches[i].GetFilterChainMatch(), matches[j].GetFilterChainMatch()); ok {
					out = append(out, fmt.Sprintf("%s: filter chains %q and %q both match %s", at,
						matches[i].GetName(), matches[j].GetName(), shared))
				}
			}
		}
	}
	return out
}

// overlap reports whether some connection matches both a and b, and spells one such match. A
// field left empty is its own value ("*", any), not a wildcard over the others': Envoy prefers
// the more specific chain, so [] and ["9000"] do not conflict, but ["9000","9001"] and ["9000"] do.
func overlap(a, b *listenerv3.FilterChainMatch) (string, bool) {
	da, db := dimensions(a), dimensions(b)
	var shared []string
	for i, d := range da {
		common := ""
		for _, v := range d.values {
			for _, w := range db[i].values {
				if v == w && common == "" {
					common = v
				}
			}
		}
		if common == "" {
			return "", false
		}
		if common != "*" {
			shared = append(shared, d.name+" "+common)
		}
	}
	if len(shared) == 0 {
		return "every connection (no criteria)", true
	}
	return strings.Join(shared, ", "), true
}

// dimension is one criterion of a filter chain match and the values it accepts; "*" is "not set".
type dimension struct {
	name   string
	values []string
}

// dimensions lists a match's criteria in Envoy's matching order.
func dimensions(m *listenerv3.FilterChainMatch) []dimension {
	one := func(set bool, v string) []string {
		if !set {
			return []string{"*"}
		}
		return []string{v}
	}
	many := func(vs []string) []string {
		if len(vs) == 0 {
			return []string{"*"}
		}
		return vs
	}
	cidrs := func(rs []*corev3.CidrRange) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.GetAddressPrefix() + "/" + strconv.Itoa(int(r.GetPrefixLen().GetValue()))
		}
		return many(out)
	}
	ports := make([]string, len(m.GetSourcePorts()))
	for i, p := range m.GetSourcePorts() {
		ports[i] = strconv.Itoa(int(p))
	}
	return []dimension{
		{"destination_port", one(m.GetDestinationPort() != nil, strconv.Itoa(int(m.GetDestinationPort().GetValue())))},
		{"prefix_ranges", cidrs(m.GetPrefixRanges())},
		{"address_suffix", one(m.GetAddressSuffix() != "" || m.GetSuffixLen() != nil,
			m.GetAddressSuffix()+"/"+strconv.Itoa(int(m.GetSuffixLen().GetValue())))},
		{"server_names", many(m.GetServerNames())},
		{"transport_protocol", one(m.GetTransportProtocol() != "", m.GetTransportProtocol())},
		{"application_protocols", many(m.GetApplicationProtocols())},
		{"direct_source_prefix_ranges", cidrs(m.GetDirectSourcePrefixRanges())},
		{"source_type", one(m.GetSourceType() != listenerv3.FilterChainMatch_ANY, m.GetSourceType().String())},
		{"source_prefix_ranges", cidrs(m.GetSourcePrefixRanges())},
		{"source_ports", many(ports)},
	}
}

// Pinning checks that every cluster whose transport socket is an UpstreamTlsContext pins its peer (an exact
// URI SAN matcher, the destination's SPIFFE ID), trusts an anchor to verify the chain against
// (without one, Envoy checks no chain and a SAN proves nothing), and presents a certificate
// fetched by SDS (never inline key material).
func Pinning(res xds.Resources) []string {
	var out []string
	for _, c := range res.Clusters {
		at := resourceAt("cluster", c.GetName())
		sockets := []*corev3.TransportSocket{c.GetTransportSocket()}
		for _, m := range c.GetTransportSocketMatches() {
			sockets = append(sockets, m.GetTransportSocket())
		}
		for _, ts := range sockets {
			if ts.GetTypedConfig() == nil {
				continue
			}
			inner, err := ts.GetTypedConfig().UnmarshalNew()
			if err != nil {
				out = append(out, fmt.Sprintf("%s: transport socket %q: cannot unpack %q: %v", at, ts.GetName(), ts.GetTypedConfig().GetTypeUrl(), err))
				continue
			}
			if quic, ok := inner.(*quicv3.QuicUpstreamTransport); ok {
				// The HTTP/3 hop: the context it wraps is pinned as any.
				if quic.GetUpstreamTlsContext() == nil {
					out = append(out, fmt.Sprintf("%s: transport socket %q: a QUIC transport without an upstream TLS context", at, ts.GetName()))
				}
				inner = quic.GetUpstreamTlsContext()
			}
			if tls, ok := inner.(*tlsv3.UpstreamTlsContext); ok && tls != nil {
				out = append(out, pinned(at+": transport socket "+strconv.Quote(ts.GetName()), tls.GetCommonTlsContext())...)
			}
		}
	}
	return out
}

// pinned checks one upstream TLS context.
func pinned(at string, cc *tlsv3.CommonTlsContext) []string {
	var out []string
	if len(cc.GetTlsCertificates()) > 0 {
		out = append(out, at+": carries inline certificates; the mesh's certificates come by SDS (tls_certificate_sds_secret_configs)")
	}
	if len(cc.GetTlsCertificateSdsSecretConfigs()) == 0 {
		out = append(out, at+": presents no certificate: tls_certificate_sds_secret_configs is empty (the source identity's SVID, by SDS)")
	}
	for i, s := range cc.GetTlsCertificateSdsSecretConfigs() {
		if s.GetName() == "" || s.GetSdsConfig() == nil {
			out = append(out, fmt.Sprintf("%s: tls_certificate_sds_secret_configs[%d] needs a name and an sds_config (got name %q)", at, i, s.GetName()))
		}
	}
	validation := cc.GetValidationContext()
	trusted := validation.GetTrustedCa() != nil || cc.GetValidationContextSdsSecretConfig() != nil
	if combined := cc.GetCombinedValidationContext(); combined != nil {
		validation = combined.GetDefaultValidationContext()
		trusted = validation.GetTrustedCa() != nil || combined.GetValidationContextSdsSecretConfig().GetName() != ""
	}
	if !trusted {
		out = append(out, at+": trusts no anchor (no trusted_ca, no SDS validation context): the peer's chain is not verified")
	}
	for _, m := range validation.GetMatchTypedSubjectAltNames() {
		if m.GetSanType() == tlsv3.SubjectAltNameMatcher_URI && m.GetMatcher().GetExact() != "" && !m.GetMatcher().GetIgnoreCase() {
			return out
		}
	}
	return append(out, at+": is not SAN-pinned: no exact URI subject-alt-name matcher (the destination's SPIFFE ID) in its validation context")
}

// Consistency runs go-control-plane's own check of a snapshot: every load assignment and route
// configuration is referenced, and every reference is listed (what SetSnapshot's callers run).
func Consistency(res xds.Resources) []string {
	snapshot, err := cachev3.NewSnapshot("gate", map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType:  asResources(res.Clusters),
		resourcev3.EndpointType: asResources(res.Endpoints),
		resourcev3.ListenerType: asResources(res.Listeners),
		resourcev3.RouteType:    asResources(res.Routes),
	})
	if err != nil {
		return []string{"cannot build a snapshot: " + err.Error()}
	}
	if err := snapshot.Consistent(); err != nil {
		return []string{"snapshot.Consistent(): " + err.Error()}
	}
	return nil
}

func asResources[T types.Resource](list []T) []types.Resource {
	out := make([]types.Resource, len(list))
	for i, r := range list {
		out[i] = r
	}
	return out
}

// validator is what protoc-gen-validate generates for every Envoy message.
type validator interface{ ValidateAll() error }

// Validation runs ValidateAll() on every resource and on every message packed in an Any inside
// it, recursively. The generated validators stop at an Any, so a tcp_proxy with an empty
// stat_prefix inside a valid listener passes the listener's own ValidateAll; Envoy NACKs it.
func Validation(res xds.Resources) []string {
	var out []string
	unreadable := walk(res, func(at string, m proto.Message, root bool) {
		v, ok := m.(validator)
		if !root || !ok {
			return
		}
		if err := v.ValidateAll(); err != nil {
			out = append(out, fmt.Sprintf("%s: %v", at, err))
		}
	})
	return append(out, unreadable...)
}

// Domains checks that no virtual host domain spells the TCP mesh port (":18082"). An HTTP Host
// naming it is HTTP sent to the TCP port: DESIGN section 5 answers it 421 port-not-declared; a domain would
// route it instead.
func Domains(res xds.Resources) []string {
	suffix := ":" + strconv.Itoa(int(meshv1alpha1.MeshTCPPort))
	var out []string
	unreadable := walk(res, func(at string, m proto.Message, _ bool) {
		vh, ok := m.(*routev3.VirtualHost)
		if !ok {
			return
		}
		for _, d := range vh.GetDomains() {
			if strings.HasSuffix(d, suffix) {
				out = append(out, fmt.Sprintf("%s: domain %q spells the TCP mesh port %d; an HTTP Host naming it must get 421 port-not-declared",
					at, d, meshv1alpha1.MeshTCPPort))
			}
		}
	})
	return append(out, unreadable...)
}

// Names checks that each list is sorted by name, each name once and none empty (the contract
// of xds.Resources).
// A snapshot keeps resources in a map by name, so a duplicate (two owners of one load
// assignment) would silently keep one of them; this gate sees it.
func Names(res xds.Resources) []string {
	var out []string
	out = append(out, sortedNames("cluster", res.Clusters, (*clusterv3.Cluster).GetName)...)
	out = append(out, sortedNames("load assignment", res.Endpoints, (*endpointv3.ClusterLoadAssignment).GetClusterName)...)
	out = append(out, sortedNames("listener", res.Listeners, (*listenerv3.Listener).GetName)...)
	return append(out, sortedNames("route configuration", res.Routes, (*routev3.RouteConfiguration).GetName)...)
}

func sortedNames[T any](kind string, list []T, name func(T) string) []string {
	var out []string
	for i, r := range list {
		switch n := name(r); {
		case n == "":
			out = append(out, fmt.Sprintf("%s %d has no name", kind, i))
		case i > 0 && name(list[i-1]) == n:
			out = append(out, fmt.Sprintf("%s: two resources are named %q", resourceAt(kind, n), n))
		case i > 0 && name(list[i-1]) > n:
			out = append(out, fmt.Sprintf("%s comes after %q: the list must be sorted by name", resourceAt(kind, n), name(list[i-1])))
		}
	}
	return out
}

// listenerChains are a listener's filter chains, its default chain (when it has one) last: every
// chain a connection can land on, which is what a gate of chains reads.
func listenerChains(l *listenerv3.Listener) []*listenerv3.FilterChain {
	chains := l.GetFilterChains()
	if d := l.GetDefaultFilterChain(); d != nil {
		chains = append(slices.Clip(chains), d)
	}
	return chains
}

// inboundChains yields every chain of every inbound listener, the default chains too, with where
// it stands (listener "in_8080" chain "x").
func inboundChains(res xds.Resources) iter.Seq2[string, *listenerv3.FilterChain] {
	return func(yield func(string, *listenerv3.FilterChain) bool) {
		for _, l := range res.Listeners {
			if l.GetTrafficDirection() != corev3.TrafficDirection_INBOUND {
				continue
			}
			for _, fc := range listenerChains(l) {
				if !yield(fmt.Sprintf("%s chain %q", resourceAt("listener", l.GetName()), fc.GetName()), fc) {
					return
				}
			}
		}
	}
}

// lastFilterAs unpacks fc's last filter, the one that ends its chain, into m; false when fc has
// no filter or its last is not an m.
func lastFilterAs(fc *listenerv3.FilterChain, m proto.Message) bool {
	filters := fc.GetFilters()
	return len(filters) > 0 && unpackAs(filters[len(filters)-1].GetTypedConfig(), m)
}
