// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// connectUpgrade is the upgrade type that lets an HCM open CONNECT tunnels.
const connectUpgrade = "CONNECT"

// ProxyPort checks that the mesh's HTTP proxy port (18081) serves a client that sets it as
// HTTP_PROXY:
//   - in every network namespace with an outbound listener, a listener binds port 18081 (the
//     pod's 127.0.0.1:18081);
//   - every outbound listener with an HTTP connection manager has a chain for port 18081;
//   - the HCM of each such chain sets http_protocol_options.allow_absolute_url: an HTTP proxy
//     client sends absolute-form requests (GET http://<name>:<port>/x), routed by the URL's
//     authority only when the codec accepts them;
//   - its route configuration answers a host that is no mesh service 404: its "*" virtual host,
//     when it has one, only answers 404 itself (a passthrough there would dial the original
//     destination, the proxy port itself), but for routes before its last that send a Host
//     under the mesh domain to on-demand discovery (meshNameOnDemand), which never passes through;
//   - CONNECT is refused: no CONNECT upgrade_configs entry on the HCM and no route with a
//     connect_matcher in its routes (the proxy port carries plain HTTP; the mesh originates TLS).
func ProxyPort(res xds.Resources) []string {
	routes := map[string]*routev3.RouteConfiguration{}
	for _, rc := range res.Routes {
		routes[rc.GetName()] = rc
	}
	var out []string
	outbound, proxied := map[string]string{}, map[string]bool{} // network namespace → a listener; bound at 18081
	for _, l := range res.Listeners {
		netns := l.GetAddress().GetSocketAddress().GetNetworkNamespaceFilepath()
		if l.GetTrafficDirection() == corev3.TrafficDirection_OUTBOUND && outbound[netns] == "" {
			outbound[netns] = l.GetName()
		}
		if l.GetAddress().GetSocketAddress().GetPortValue() == uint32(meshv1alpha1.MeshHTTPPort) {
			proxied[netns] = true
		}
	}
	for _, netns := range slices.Sorted(maps.Keys(outbound)) {
		if !proxied[netns] {
			out = append(out, fmt.Sprintf("%s: no listener binds port %d in its network namespace %q: HTTP_PROXY=http://127.0.0.1:%d is refused",
				resourceAt("listener", outbound[netns]), meshv1alpha1.MeshHTTPPort, netns, meshv1alpha1.MeshHTTPPort))
		}
	}
	for _, l := range res.Listeners {
		at := resourceAt("listener", l.GetName())
		hasHCM, hasProxy := false, false
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if !unpackAs(f.GetTypedConfig(), hcm) {
					continue
				}
				hasHCM = true
				if fc.GetFilterChainMatch().GetDestinationPort().GetValue() != uint32(meshv1alpha1.MeshHTTPPort) {
					continue
				}
				hasProxy = true
				out = append(out, proxyHCM(fmt.Sprintf("%s chain %q", at, fc.GetName()), hcm, routes)...)
			}
		}
		if hasHCM && !hasProxy && l.GetTrafficDirection() == corev3.TrafficDirection_OUTBOUND {
			out = append(out, fmt.Sprintf("%s: no chain for the proxy port %d: a client using it as HTTP_PROXY is not served",
				at, meshv1alpha1.MeshHTTPPort))
		}
	}
	return out
}

// proxyHCM are the violations of the proxy port's HCM at and its route configuration.
func proxyHCM(at string, hcm *hcmv3.HttpConnectionManager, routes map[string]*routev3.RouteConfiguration) []string {
	var out []string
	if a := hcm.GetHttpProtocolOptions().GetAllowAbsoluteUrl(); a == nil || !a.GetValue() {
		out = append(out, at+": its HTTP connection manager does not set http_protocol_options.allow_absolute_url: "+
			"a client using the proxy port as HTTP_PROXY sends absolute-form requests")
	}
	for _, u := range hcm.GetUpgradeConfigs() {
		if strings.EqualFold(u.GetUpgradeType(), connectUpgrade) && enabled(u.GetEnabled()) {
			out = append(out, at+": its HTTP connection manager allows the CONNECT upgrade: the proxy port must refuse tunnels (the mesh originates TLS)")
		}
	}
	rc, ok := routes[hcm.GetRds().GetRouteConfigName()]
	if !ok {
		return out // References reports a missing route configuration; an inline one is not the mesh's
	}
	rcAt := resourceAt("route configuration", rc.GetName())
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if r.GetMatch().GetConnectMatcher() != nil {
				out = append(out, fmt.Sprintf("%s (the proxy port's): virtual_hosts[%s] has a connect_matcher route: the proxy port must refuse tunnels",
					rcAt, vh.GetName()))
			}
		}
		if !slices.Contains(vh.GetDomains(), "*") {
			continue
		}
		for i, r := range vh.GetRoutes() {
			if r.GetDirectResponse().GetStatus() != 404 {
				out = append(out, fmt.Sprintf("%s (the proxy port's): virtual_hosts[%s].routes[%d] (domain *) does not answer 404: a host that is not the mesh's must be answered 404, never passed through",
					rcAt, vh.GetName(), i))
			}
		}
	}
	return out
}
