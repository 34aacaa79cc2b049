// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
)

// The proxyless server rendering: the Listeners an xDS-enabled gRPC server (grpc-go's
// xds.NewGRPCServer, gRFC A36) of a proxyless pod asks for, so that the server itself terminates
// mesh mTLS and enforces the AccessPolicies of its ports (gRFC A41). grpc-go asks for the
// Listener named by the bootstrap's template (proxyless.ServerListenerTemplate) with the address
// it listens on, and serves only while that Listener's address is exactly that address; so per
// HTTP2 port p of the pod there is one Listener per address a server may listen on: the pod's
// own <IP>:p, 0.0.0.0:p and [::]:p. Each has two filter chains, and the primary port's three:
//
//   - ProxylessServerMeshChain, for any caller: TLS with the pod's certificate, a client
//     certificate required and verified against the mesh's trust bundle (both from the
//     bootstrap's certificate provider; grpc-go refuses SDS, and a SAN matcher on a server), then
//     an HCM whose HTTP filters are the port's RBAC filter (governed ports only: the same rules,
//     from the same accessRules, as the Envoy rendering's inbound chains) and the router, and an
//     inline route configuration whose one route is non_forwarding_action (what a server's route
//     must be: grpc-go fails an RPC matching another action);
//   - ProxylessServerLocalChain, for connections from the pod's own address only (the node
//     proxy's inbound delivering the calls it already authorized, in cleartext, and the pod's own
//     processes): no TLS (grpc-go's fallback credentials), the router alone;
//   - ProxylessServerNodeChain, on the primary port only (the one the agent probes), for
//     connections from the node's own addresses (model.Node.Addrs: where the agent's health
//     probes come from, a gRPC health check in cleartext): no TLS, and an RBAC filter that admits
//     that one RPC, the probe's (ProbeMethod), and nothing else. The node is trusted as the
//     agent's own; but what else comes from its addresses (its processes, hostNetwork pods, a
//     caller the node masquerades as itself) gets the server's health and nothing more. Without
//     it, the server refuses the probe and the agent marks the pod Unhealthy. A node with no
//     address known (its Node not yet seen) gets no such chain.
//
// What grpc-go's RBAC reads of accessRules' output: the principal's authenticated principal_name
// (the leaf's URI SANs first, as Envoy), url_path (the RPC's full method name, /<service>/<method>,
// which is exactly what grpc-go then dispatches on: there is no spelling of another method to
// normalize away, so no path normalization is needed), and :method headers (grpc-go reads every
// RPC as POST). A denied RPC fails PERMISSION_DENIED ("unauthorized RPC request rejected").

// ProxylessServerMeshChain, ProxylessServerLocalChain and ProxylessServerNodeChain are a
// proxyless server listener's filter chains: the mesh's callers over mTLS, the pod's own address
// in cleartext, and the node's addresses in cleartext for the health probe alone.
const (
	ProxylessServerMeshChain  = "proxyless_server_mesh"
	ProxylessServerLocalChain = "proxyless_server_local"
	ProxylessServerNodeChain  = "proxyless_server_node"
)

// ProbeMethod is the one RPC ProxylessServerNodeChain admits: the agent's gRPC health probe's
// (internal/agent probeGRPC), its RBAC policy ProbePolicy.
const (
	ProbeMethod = healthpb.Health_Check_FullMethodName
	ProbePolicy = "node-health-probe"
)

// Cleartext is whom a proxyless server listener takes without TLS, as the model makes it: every
// call from Pod (the pod's own address), and the health probe alone from Node (the node's
// addresses; none on a port the agent does not probe).
type Cleartext struct {
	Pod  netip.Addr
	Node []netip.Addr
}

// BuildProxylessServer renders the server listeners of proxyless pod (one of m.Pods): pure and
// deterministic, every message validated before it is packed. Resources holds only Listeners,
// sorted; and, for the gates, Access, each listener's port as the AccessPolicies make it
// (pod.AccessOf), and Cleartext, whom it takes without TLS. A pod with no HTTP2 port gets none.
func BuildProxylessServer(m model.Mesh, pod model.LocalPod) (Resources, error) {
	if m.Domain == "" {
		return Resources{}, fmt.Errorf("xds: the mesh domain is empty: set the agent's mesh domain")
	}
	addr, err := netip.ParseAddr(pod.Address)
	if err != nil {
		return Resources{}, fmt.Errorf("xds: proxyless server %s/%s: address %q is not an IP address: %w", pod.Namespace, pod.Name, pod.Address, err)
	}
	// The node's addresses, each once; one that is the pod's own is the pod's chain's (grpc-go
	// NACKs a source address two chains match alike).
	node := slices.Compact(slices.SortedFunc(slices.Values(m.Node.Addrs), netip.Addr.Compare))
	node = slices.DeleteFunc(node, func(a netip.Addr) bool { return !a.IsValid() || a == addr })
	b := &builder{mesh: m}
	res := Resources{Access: map[string][]authz.Port{}, Cleartext: map[string]Cleartext{}}
	for _, pp := range pod.Ports {
		if pp.Protocol != meshv1alpha1.ProtocolHTTP2 {
			continue // a gRPC server speaks HTTP/2 only
		}
		access := pod.AccessOf(pp.Port)
		access.Protocol = pp.Protocol
		plain := Cleartext{Pod: addr}
		if pp.Port == pod.Primary {
			plain.Node = node
		}
		for _, host := range []string{addr.String(), "0.0.0.0", "::"} {
			l := b.proxylessServerListener(host, access, plain)
			res.Listeners = append(res.Listeners, l)
			res.Access[l.GetName()] = []authz.Port{access}
			res.Cleartext[l.GetName()] = plain
		}
	}
	slices.SortFunc(res.Listeners, func(x, y *listenerv3.Listener) int { return cmp.Compare(x.GetName(), y.GetName()) })
	requireUnique(b, "listener", res.Listeners, (*listenerv3.Listener).GetName)
	return res, b.err
}

// ProxylessServerListener is the Listener a proxyless server listening on host:port asks for.
func ProxylessServerListener(host string, port int32) string {
	return proxyless.ServerListener(net.JoinHostPort(host, strconv.Itoa(int(port))))
}

// proxylessServerListener is the listener of port p (access) for a server listening on host,
// taking plain without TLS.
func (b *builder) proxylessServerListener(host string, p authz.Port, plain Cleartext) *listenerv3.Listener {
	name := ProxylessServerListener(host, p.Port)
	mesh := b.proxylessServerHCM(name, p.Port)
	if p.Governed {
		rbac := &hcmv3.HttpFilter{Name: HTTPRBACFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{
			TypedConfig: b.pack("the RBAC filter of "+name, &rbachttpv3.RBAC{Rules: accessRules(b.mesh.Domain, p, true)})}}
		mesh.HttpFilters = append([]*hcmv3.HttpFilter{rbac}, mesh.HttpFilters...)
	}
	l := &listenerv3.Listener{
		Name:    name,
		Address: socketAddress(host, p.Port),
		FilterChains: []*listenerv3.FilterChain{
			{Name: ProxylessServerMeshChain, TransportSocket: b.proxylessServerTLS(name), Filters: []*listenerv3.Filter{b.hcmFilter(name, mesh)}},
			{Name: ProxylessServerLocalChain, FilterChainMatch: fromHosts(plain.Pod), Filters: []*listenerv3.Filter{b.hcmFilter(name, b.proxylessServerHCM(name, p.Port))}},
		},
	}
	if len(plain.Node) > 0 {
		probe := b.proxylessServerHCM(name, p.Port)
		rbac := &hcmv3.HttpFilter{Name: HTTPRBACFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{
			TypedConfig: b.pack("the probe's RBAC filter of "+name, &rbachttpv3.RBAC{Rules: probeRules()})}}
		probe.HttpFilters = append([]*hcmv3.HttpFilter{rbac}, probe.HttpFilters...)
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{Name: ProxylessServerNodeChain, FilterChainMatch: fromHosts(plain.Node...),
			Filters: []*listenerv3.Filter{b.hcmFilter(name, probe)}})
	}
	b.check("listener "+name, l)
	return l
}

// fromHosts matches connections from addrs, each one address.
func fromHosts(addrs ...netip.Addr) *listenerv3.FilterChainMatch {
	m := &listenerv3.FilterChainMatch{}
	for _, a := range addrs {
		m.SourcePrefixRanges = append(m.SourcePrefixRanges, &corev3.CidrRange{AddressPrefix: a.String(), PrefixLen: wrapperspb.UInt32(uint32(a.BitLen()))})
	}
	return m
}

// probeRules admit the agent's health probe and nothing else: ProbeMethod, from any caller (the
// node chain's connections carry no identity; its source addresses say who they are).
func probeRules() *rbacv3.RBAC {
	return &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{ProbePolicy: {
		Permissions: []*rbacv3.Permission{urlPath(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: ProbeMethod}})},
		Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
	}}}
}

// proxylessServerHCM is a server listener's connection manager: the router alone, and one route
// taking every RPC to the server itself.
func (b *builder) proxylessServerHCM(name string, port int32) *hcmv3.HttpConnectionManager {
	routes := &routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    "proxyless_server:" + itoa(port),
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
			}},
		}},
	}
	return &hcmv3.HttpConnectionManager{
		StatPrefix:     name,
		CodecType:      hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: routes},
		HttpFilters:    b.routerFilters(),
	}
}

// hcmFilter packs hcm as a network filter of listener name.
func (b *builder) hcmFilter(name string, hcm *hcmv3.HttpConnectionManager) *listenerv3.Filter {
	return &listenerv3.Filter{Name: wellknown.HTTPConnectionManager, ConfigType: &listenerv3.Filter_TypedConfig{
		TypedConfig: b.pack("the HCM of listener "+name, hcm)}}
}

// proxylessServerTLS is the mesh chain's transport socket: the pod's certificate, a client
// certificate required and verified against the trust bundle, both from the bootstrap's
// certificate provider. No SAN matcher: grpc-go NACKs one on a server; who may call is the RBAC
// filter's to say.
func (b *builder) proxylessServerTLS(name string) *corev3.TransportSocket {
	provider := &tlsv3.CertificateProviderPluginInstance{InstanceName: proxyless.CertificateProvider}
	ctx := &tlsv3.DownstreamTlsContext{
		RequireClientCertificate: wrapperspb.Bool(true),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateProviderInstance: provider,
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				CaCertificateProviderInstance: provider,
			}},
		},
	}
	return &corev3.TransportSocket{
		Name:       wellknown.TransportSocketTLS,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: b.pack(name+" downstream TLS context", ctx)},
	}
}
