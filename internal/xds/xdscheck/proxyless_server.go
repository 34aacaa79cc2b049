// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"

	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// grpcServerListener checks a proxyless server listener (xds.BuildProxylessServer) against what
// grpc-go v1.85 accepts and enforces (xdsresource unmarshal_lds.go, filter_chain.go; internal/xds
// server), and against the AccessPolicies its port is governed by (access, Resources.Access):
//   - its name is the bootstrap template's for its own address (grpc-go serves only while the
//     two agree), and the model says which port it serves;
//   - no chain matches on what grpc-go drops a chain for (destination port, server names,
//     application protocols, a transport protocol other than raw_buffer);
//   - a chain with TLS requires a client certificate, verified against a certificate provider
//     instance's trust bundle, presents one from a provider instance, and names no SAN matcher
//     (grpc-go NACKs one on a server);
//   - a chain without TLS is the pod's own (its source ranges the pod's address alone, no RBAC
//     filter) or the node's probe chain (exactly the node's addresses, each one address, and an
//     RBAC filter admitting the health probe's RPC alone), as the model says (Resources.Cleartext):
//     any wider, callers would pass unauthenticated, past the policy; and a port the agent
//     probes, on a node with addresses, has the probe chain (else the probe is refused);
//   - every chain's HCM ends with the router, leaves xff_num_trusted_hops unset, and routes
//     inline by non_forwarding_action only;
//   - the TLS chain of a governed port carries one RBAC filter, right before the router, whose
//     rules are the port's (as the Envoy rendering's inbound chains: sameRules); an open port's
//     carries none.
func grpcServerListener(l *listenerv3.Listener, access map[string][]authz.Port, cleartext map[string]xds.Cleartext) []string {
	at := resourceAt("listener", l.GetName())
	var out []string
	sa := l.GetAddress().GetSocketAddress()
	if want := proxyless.ServerListener(net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))); l.GetName() != want {
		out = append(out, fmt.Sprintf("%s: its address is %s:%d, whose listener grpc-go asks for is %q: it would not serve", at,
			sa.GetAddress(), sa.GetPortValue(), want))
	}
	if len(l.GetListenerFilters()) > 0 || l.GetUseOriginalDst().GetValue() {
		out = append(out, at+": has listener filters or use_original_dst (grpc-go NACKs)")
	}
	ports := access[l.GetName()]
	if len(ports) != 1 || ports[0].Port != int32(sa.GetPortValue()) {
		return append(out, fmt.Sprintf("%s: the model names %d ports for it (%v), want its own, %d", at, len(ports), ports, sa.GetPortValue()))
	}
	p := ports[0]
	plain := cleartext[l.GetName()]
	secured, probed := 0, false
	for _, fc := range l.GetFilterChains() {
		chainAt := fmt.Sprintf("%s chain %q", at, fc.GetName())
		m := fc.GetFilterChainMatch()
		if m.GetDestinationPort() != nil || len(m.GetServerNames()) > 0 || len(m.GetApplicationProtocols()) > 0 ||
			(m.GetTransportProtocol() != "" && m.GetTransportProtocol() != "raw_buffer") {
			out = append(out, chainAt+": matches on a field grpc-go drops the chain for")
		}
		hcm := &hcmv3.HttpConnectionManager{}
		if len(fc.GetFilters()) != 1 || !lastFilterAs(fc, hcm) {
			out = append(out, chainAt+": its one network filter is not an HttpConnectionManager")
			continue
		}
		out = append(out, serverHCM(chainAt, hcm)...)
		if fc.GetTransportSocket() == nil {
			probed = probed || fc.GetName() == xds.ProxylessServerNodeChain
			out = append(out, cleartextChain(chainAt, fc, hcm, plain)...)
			continue
		}
		secured++
		out = append(out, serverTLS(chainAt, fc)...)
		var rules []*rbacv3.RBAC
		filters := hcm.GetHttpFilters()
		for i, f := range filters {
			r := &rbachttpv3.RBAC{}
			if f.GetName() != xds.HTTPRBACFilter {
				continue
			}
			if !unpackAs(f.GetTypedConfig(), r) {
				out = append(out, fmt.Sprintf("%s: http filter %s is no RBAC", chainAt, f.GetName()))
				continue
			}
			if i != len(filters)-2 {
				out = append(out, fmt.Sprintf("%s: the RBAC filter is http filter %d of %d, want the one right before the router", chainAt, i, len(filters)))
			}
			rules = append(rules, r.GetRules())
		}
		if v, enforced := governs(chainAt, p, rules, true); !enforced {
			out = append(out, v...)
			continue
		}
		out = append(out, sameRules(chainAt, rules[0], p, true)...)
	}
	if secured == 0 {
		out = append(out, at+": no chain terminates mTLS: the mesh's callers cannot reach the server")
	}
	if len(plain.Node) > 0 && !probed {
		out = append(out, fmt.Sprintf("%s: no chain takes the node's health probe from %v: the server refuses it, and the pod is marked Unhealthy", at, plain.Node))
	}
	return out
}

// cleartextChain checks a server chain without TLS against whom the model says it takes (plain):
// the pod's own chain, every call from the pod's address alone; the node's probe chain, the
// health probe's RPC alone from exactly the node's addresses.
func cleartextChain(at string, fc *listenerv3.FilterChain, hcm *hcmv3.HttpConnectionManager, plain xds.Cleartext) []string {
	var sources []string
	for _, r := range fc.GetFilterChainMatch().GetSourcePrefixRanges() {
		sources = append(sources, fmt.Sprintf("%s/%d", r.GetAddressPrefix(), r.GetPrefixLen().GetValue()))
	}
	hosts := func(addrs ...netip.Addr) []string {
		var out []string
		for _, a := range addrs {
			out = append(out, netip.PrefixFrom(a, a.BitLen()).String())
		}
		return out
	}
	filters := hcm.GetHttpFilters()
	switch fc.GetName() {
	case xds.ProxylessServerLocalChain:
		if want := hosts(plain.Pod); !slices.Equal(sources, want) {
			return []string{fmt.Sprintf("%s: a chain without TLS admits %q, want the pod's own address %q alone: callers would pass unauthenticated, past the AccessPolicies",
				at, sources, want)}
		}
		if len(filters) != 1 {
			return []string{fmt.Sprintf("%s: the pod's own chain carries %d HTTP filters, want the router alone", at, len(filters))}
		}
		return nil
	case xds.ProxylessServerNodeChain:
		var out []string
		if want := hosts(plain.Node...); len(want) == 0 || !slices.Equal(sources, want) {
			out = append(out, fmt.Sprintf("%s: the node's probe chain admits %q, want the node's addresses %q alone: callers would pass unauthenticated", at, sources, want))
		}
		r := &rbachttpv3.RBAC{}
		if len(filters) != 2 || filters[0].GetName() != xds.HTTPRBACFilter || !unpackAs(filters[0].GetTypedConfig(), r) || !probeOnly(r.GetRules()) {
			out = append(out, fmt.Sprintf("%s: the node's probe chain does not admit %s alone (one RBAC filter, policy %s, any caller, that exact path): "+
				"what comes from the node's addresses would reach every method unauthenticated", at, xds.ProbeMethod, xds.ProbePolicy))
		}
		return out
	}
	return []string{at + ": a chain without TLS that is neither the pod's own nor the node's probe chain: callers would pass unauthenticated, past the AccessPolicies"}
}

// probeOnly reports whether r admits the health probe's RPC alone: ALLOW, one policy, any
// principal, a url_path of exactly xds.ProbeMethod.
func probeOnly(r *rbacv3.RBAC) bool {
	policy := r.GetPolicies()[xds.ProbePolicy]
	perms, principals := policy.GetPermissions(), policy.GetPrincipals()
	return r.GetAction() == rbacv3.RBAC_ALLOW && len(r.GetPolicies()) == 1 &&
		len(principals) == 1 && principals[0].GetAny() &&
		len(perms) == 1 && perms[0].GetUrlPath().GetPath().GetExact() == xds.ProbeMethod && !perms[0].GetUrlPath().GetPath().GetIgnoreCase()
}

// serverHCM checks a server chain's connection manager.
func serverHCM(at string, hcm *hcmv3.HttpConnectionManager) []string {
	var out []string
	filters := hcm.GetHttpFilters()
	if len(filters) == 0 || filters[len(filters)-1].GetName() != wellknown.Router || !filters[len(filters)-1].GetTypedConfig().MessageIs(&routerv3.Router{}) {
		out = append(out, at+": the HCM's last HTTP filter is not the router")
	}
	if hcm.GetXffNumTrustedHops() != 0 {
		out = append(out, at+": xff_num_trusted_hops is set (grpc-go NACKs)")
	}
	routes := hcm.GetRouteConfig()
	if routes == nil {
		return append(out, at+": the HCM has no inline route configuration")
	}
	for _, vh := range routes.GetVirtualHosts() {
		for i, r := range vh.GetRoutes() {
			if r.GetNonForwardingAction() == nil {
				out = append(out, fmt.Sprintf("%s: virtual host %q: route %d is not non_forwarding_action: grpc-go fails its RPCs", at, vh.GetName(), i))
			}
		}
	}
	return out
}

// serverTLS checks a server chain's DownstreamTlsContext.
func serverTLS(at string, fc *listenerv3.FilterChain) []string {
	ts := fc.GetTransportSocket()
	ctx := &tlsv3.DownstreamTlsContext{}
	if ts.GetName() != wellknown.TransportSocketTLS || !unpackAs(ts.GetTypedConfig(), ctx) {
		return []string{fmt.Sprintf("%s: transport socket %q is not a DownstreamTlsContext named %s", at, ts.GetName(), wellknown.TransportSocketTLS)}
	}
	var out []string
	if !ctx.GetRequireClientCertificate().GetValue() {
		out = append(out, at+": require_client_certificate is off: a caller without a mesh certificate is not refused, and has no identity for the RBAC filter")
	}
	if ctx.GetRequireSni().GetValue() {
		out = append(out, at+": require_sni is set (grpc-go NACKs)")
	}
	cc := ctx.GetCommonTlsContext()
	if len(cc.GetTlsCertificateSdsSecretConfigs()) > 0 || len(cc.GetTlsCertificates()) > 0 {
		out = append(out, at+": names its certificate by SDS or inline; grpc-go NACKs both (certificate provider instances only)")
	}
	if cc.GetTlsCertificateProviderInstance().GetInstanceName() == "" {
		out = append(out, at+": presents no certificate: tls_certificate_provider_instance is unset")
	}
	validation := cc.GetValidationContext()
	if validation.GetCaCertificateProviderInstance().GetInstanceName() == "" {
		out = append(out, at+": verifies no client certificate: ca_certificate_provider_instance is unset")
	}
	if len(validation.GetMatchSubjectAltNames()) > 0 { //nolint:staticcheck // the field grpc-go refuses on a server
		out = append(out, at+": names match_subject_alt_names, which grpc-go NACKs on a server")
	}
	return out
}
