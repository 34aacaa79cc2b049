// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	setfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	netsetfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	filterstateoverridev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/local_address_selectors/filter_state_override/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// A pod's traffic leaves from the pod (DESIGN section 8, "Trust"). The node's Envoy accepts a
// pod's captured connections on a listener bound in the pod's network namespace, and opens the
// upstream connection it makes on the pod's behalf in that same namespace, so that its source is
// the pod's IP: the callee, its NetworkPolicy, and the node's own services (a cloud's metadata
// service among them) see the pod, never the node. Three parts, all in Envoy 1.40:
//
//   - the listener records its namespace in the connection's filter state as it accepts
//     (envoy.network.network_namespace, set by Envoy itself for a listener address with
//     network_namespace_filepath);
//   - the first network filter of every capture chain, set_filter_state, copies it to the key the
//     upstream reads (UpstreamNetnsKey), shared with the upstream connection, through the
//     hashable string factory: the value then keys the upstream connection pool, so a connection
//     opened in one pod's namespace never carries another pod's requests;
//   - every cluster a capture chain reaches binds its upstream sockets through the filter-state
//     local address selector (PodBindSelector), which creates the socket in the namespace that key
//     names, and marks it (model.ProxySocketMark), which the pod's capture rules return first, so
//     the proxy's own connection is not captured again.
//
// An Envoy older than these extensions refuses the clusters (an unknown extension): it fails
// closed, carrying nothing, rather than from the node.
const (
	// ListenerNetnsKey is the filter state object Envoy sets on a connection accepted by a
	// listener bound in a network namespace: that namespace's path.
	ListenerNetnsKey = "envoy.network.network_namespace"
	// UpstreamNetnsKey is the filter state object the filter-state local address selector reads:
	// the path of the network namespace the upstream socket is created in.
	UpstreamNetnsKey = "envoy.network.upstream_bind_override.network_namespace"
	// HashableStringFactory builds a string filter state object that takes part in the upstream
	// connection pool's key (the plain envoy.string factory's does not).
	HashableStringFactory = "envoy.hashable_string"
	// PodBindSelector is the local address selector that binds in UpstreamNetnsKey's namespace.
	PodBindSelector = "envoy.upstream.local_address_selector.filter_state_override"
	// SetFilterStateFilter is the network filter that sets filter state objects on a connection.
	SetFilterStateFilter = "envoy.filters.network.set_filter_state"
	// fromThePodFormat is the value the filter gives UpstreamNetnsKey: the listener's namespace.
	fromThePodFormat = "%FILTER_STATE(" + ListenerNetnsKey + ":PLAIN)%"
)

// Socket option numbers of Linux (asm-generic/socket.h), for SO_MARK.
const (
	solSocket = 1
	soMark    = 36
)

// fromThePodFilter is the set_filter_state filter every capture chain starts with: it names the
// listener's namespace (the pod's) as the one the upstream socket is created in.
func (b *builder) fromThePodFilter() *listenerv3.Filter {
	if b.shared.fromThePod != nil {
		return b.shared.fromThePod
	}
	config := &netsetfilterstatev3.Config{OnNewConnection: []*setfilterstatev3.FilterStateValue{{
		Key:        &setfilterstatev3.FilterStateValue_ObjectKey{ObjectKey: UpstreamNetnsKey},
		FactoryKey: HashableStringFactory,
		Value: &setfilterstatev3.FilterStateValue_FormatString{FormatString: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: fromThePodFormat},
			}},
		}},
		SharedWithUpstream: setfilterstatev3.FilterStateValue_ONCE,
	}}}
	b.shared.fromThePod = b.networkFilter(SetFilterStateFilter, "the capture chains", config)
	return b.shared.fromThePod
}

// leaveFromThePod puts fromThePodFilter first in each chain (capture chains only).
func (b *builder) leaveFromThePod(chains ...*listenerv3.FilterChain) {
	for _, c := range chains {
		c.Filters = append([]*listenerv3.Filter{b.fromThePodFilter()}, c.Filters...)
	}
}

// podBindConfig is the upstream bind config of every cluster a capture chain reaches: any
// address of the upstream's family (0.0.0.0 or ::, port 0: the kernel picks, in the pod's
// namespace the pod's own address), the proxy's mark, and the selector that creates the socket
// in the namespace the connection's filter state names.
func (b *builder) podBindConfig() *corev3.BindConfig {
	if b.shared.podBind != nil {
		return b.shared.podBind
	}
	any := func(address string) *corev3.SocketAddress {
		return &corev3.SocketAddress{Address: address, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0}}
	}
	selector := &filterstateoverridev3.Config{}
	c := &corev3.BindConfig{
		SourceAddress:        any("0.0.0.0"),
		ExtraSourceAddresses: []*corev3.ExtraSourceAddress{{Address: any("::")}},
		SocketOptions: []*corev3.SocketOption{{
			Description: "the mesh proxy's mark: the pod's capture rules leave its sockets alone",
			Level:       solSocket,
			Name:        soMark,
			Value:       &corev3.SocketOption_IntValue{IntValue: int64(model.ProxySocketMark)},
			State:       corev3.SocketOption_STATE_PREBIND,
		}},
		LocalAddressSelector: &corev3.TypedExtensionConfig{Name: PodBindSelector, TypedConfig: b.packSelector(selector)},
	}
	b.check("the pods' upstream bind config", c)
	b.shared.podBind = c
	return c
}

// packSelector packs the local address selector's config.
func (b *builder) packSelector(c *filterstateoverridev3.Config) *anypb.Any {
	return b.pack("the filter-state local address selector", c)
}
