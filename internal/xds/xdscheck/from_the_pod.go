// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	setfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netsetfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	filterstateoverridev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/local_address_selectors/filter_state_override/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// FromThePod checks that a pod's traffic leaves from the pod (DESIGN section 8, "Trust"): every
// capture listener is bound in a network namespace; each of its chains, the default one too,
// starts with set_filter_state naming that namespace (the listener's filter state object) as the
// upstream's, shared with the upstream and through the hashable string factory (so it keys the
// connection pool); and every cluster those chains reach, by tcp_proxy or by a route of their
// route configuration, binds its sockets through the filter-state local address selector, from
// a source address, with the proxy's mark.
func FromThePod(res xds.Resources) []string {
	routes := map[string][]string{} // route configuration → the clusters its routes name
	for _, rc := range res.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				routes[rc.GetName()] = append(routes[rc.GetName()], routeClusters(r.GetRoute())...)
			}
		}
	}
	reached := map[string]string{} // cluster → the first chain that reaches it
	var out []string
	for _, l := range res.Listeners {
		if !strings.HasPrefix(l.GetName(), xds.CaptureListener("")) {
			continue
		}
		at := resourceAt("listener", l.GetName())
		if l.GetAddress().GetSocketAddress().GetNetworkNamespaceFilepath() == "" {
			out = append(out, at+": it is not bound in a pod's network namespace")
		}
		for _, fc := range listenerChains(l) {
			chainAt := fmt.Sprintf("%s chain %q", at, fc.GetName())
			if why := namesThePodNetns(fc.GetFilters()); why != "" {
				out = append(out, chainAt+": "+why)
			}
			for _, c := range chainClusters(fc, routes) {
				if _, seen := reached[c]; !seen {
					reached[c] = chainAt
				}
			}
		}
	}
	for _, c := range res.Clusters {
		if by, ok := reached[c.GetName()]; ok {
			if why := bindsInThePod(c); why != "" {
				out = append(out, fmt.Sprintf("%s (reached by %s): %s", resourceAt("cluster", c.GetName()), by, why))
			}
		}
	}
	return out
}

// namesThePodNetns says what is wrong with a capture chain's first filter, "" when it is the
// set_filter_state that names the listener's namespace as the upstream's.
func namesThePodNetns(filters []*listenerv3.Filter) string {
	if len(filters) < 2 {
		return "no set_filter_state before its terminal filter: its upstream would leave from the node"
	}
	config := &netsetfilterstatev3.Config{}
	if !unpackAs(filters[0].GetTypedConfig(), config) {
		return fmt.Sprintf("its first filter is %q, not set_filter_state: its upstream would leave from the node", filters[0].GetName())
	}
	want := "%FILTER_STATE(" + xds.ListenerNetnsKey + ":PLAIN)%"
	for _, v := range config.GetOnNewConnection() {
		if v.GetObjectKey() != xds.UpstreamNetnsKey {
			continue
		}
		switch {
		case v.GetFormatString().GetTextFormatSource().GetInlineString() != want:
			return fmt.Sprintf("it sets %s to %q, not the listener's namespace %q", xds.UpstreamNetnsKey, v.GetFormatString().GetTextFormatSource().GetInlineString(), want)
		case v.GetSharedWithUpstream() == setfilterstatev3.FilterStateValue_NONE:
			return fmt.Sprintf("it does not share %s with the upstream connection", xds.UpstreamNetnsKey)
		case v.GetFactoryKey() != xds.HashableStringFactory:
			return fmt.Sprintf("it builds %s with factory %q, not %q: one pod's upstream connections would be pooled with another's", xds.UpstreamNetnsKey, v.GetFactoryKey(), xds.HashableStringFactory)
		}
		return ""
	}
	return "its set_filter_state does not set " + xds.UpstreamNetnsKey
}

// bindsInThePod says what is wrong with a cluster's upstream bind config, "" when its sockets are
// created in the namespace the connection names, from a source address, with the proxy's mark.
func bindsInThePod(c *clusterv3.Cluster) string {
	bind := c.GetUpstreamBindConfig()
	selector := bind.GetLocalAddressSelector()
	switch {
	case bind == nil:
		return "no upstream_bind_config: it connects from the node's network namespace"
	case bind.GetSourceAddress() == nil:
		return "its upstream_bind_config has no source_address, so the local address selector has nothing to place in the pod"
	case selector.GetName() != xds.PodBindSelector || !unpackAs(selector.GetTypedConfig(), &filterstateoverridev3.Config{}):
		return fmt.Sprintf("its local address selector is %q, not %q", selector.GetName(), xds.PodBindSelector)
	}
	for _, o := range bind.GetSocketOptions() {
		if o.GetLevel() == 1 && o.GetName() == 36 && o.GetIntValue() == int64(model.ProxySocketMark) { // SOL_SOCKET, SO_MARK
			return ""
		}
	}
	return fmt.Sprintf("its sockets do not carry the proxy's mark %#x: the pod's capture would take them again", model.ProxySocketMark)
}

// chainClusters are the clusters a chain's terminal filter reaches.
func chainClusters(fc *listenerv3.FilterChain, routes map[string][]string) []string {
	filters := fc.GetFilters()
	if len(filters) == 0 {
		return nil
	}
	tc := filters[len(filters)-1].GetTypedConfig()
	if tp := (&tcpproxyv3.TcpProxy{}); unpackAs(tc, tp) {
		out := []string{tp.GetCluster()}
		for _, w := range tp.GetWeightedClusters().GetClusters() {
			out = append(out, w.GetName())
		}
		return out
	}
	if hcm := (&hcmv3.HttpConnectionManager{}); unpackAs(tc, hcm) {
		if rds := hcm.GetRds(); rds != nil {
			return routes[rds.GetRouteConfigName()]
		}
		var out []string
		for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				out = append(out, routeClusters(r.GetRoute())...)
			}
		}
		return out
	}
	return nil
}

// unpackAs fills m from a when a holds an m.
func unpackAs(a *anypb.Any, m proto.Message) bool {
	return a != nil && a.MessageName() == m.ProtoReflect().Descriptor().FullName() && a.UnmarshalTo(m) == nil
}

// routeClusters are the clusters a route action names (cluster, weighted_clusters).
func routeClusters(ra interface {
	GetCluster() string
	GetWeightedClusters() *routev3.WeightedCluster
}) []string {
	var out []string
	if c := ra.GetCluster(); c != "" {
		out = append(out, c)
	}
	for _, w := range ra.GetWeightedClusters().GetClusters() {
		out = append(out, w.GetName())
	}
	return out
}
