// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	originaldstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Families checks that each listener's sockets can receive the connections its chains are for:
//   - every additional address is bound in the network namespace of the listener's address: a
//     socket of a pod's listener bound elsewhere would take connections that are not the pod's,
//     and the pod's own would find nothing;
//   - a listener that restores the original destination (the original_dst listener filter, or
//     use_original_dst) and has a chain matching destination addresses of a family has a socket
//     of that family. Such a listener receives redirected connections, and a redirect keeps the
//     family (nftables sends IPv6 to [::1]): without an IPv6 socket its IPv6 chains are dead and
//     the connections they are for are refused.
func Families(res xds.Resources) []string {
	var out []string
	for _, l := range res.Listeners {
		at := resourceAt("listener", l.GetName())
		primary := l.GetAddress().GetSocketAddress()
		sockets := []string{primary.GetAddress()}
		for i, extra := range l.GetAdditionalAddresses() {
			sa := extra.GetAddress().GetSocketAddress()
			sockets = append(sockets, sa.GetAddress())
			if sa.GetNetworkNamespaceFilepath() != primary.GetNetworkNamespaceFilepath() {
				out = append(out, fmt.Sprintf("%s: additional_addresses[%d] (%s) is bound in network namespace %q, the listener's address (%s) in %q: bind every address in the listener's namespace",
					at, i, sa.GetAddress(), sa.GetNetworkNamespaceFilepath(), primary.GetAddress(), primary.GetNetworkNamespaceFilepath()))
			}
		}
		if restoresDestination(l) {
			out = append(out, deadFamilies(at, l, sockets)...)
		}
	}
	return out
}

// deadFamilies names, once per family, a chain of l matching destinations of a family none of
// l's sockets is of.
func deadFamilies(at string, l *listenerv3.Listener, sockets []string) []string {
	has := map[bool]bool{} // by IPv6
	for _, s := range sockets {
		if a, err := netip.ParseAddr(s); err == nil {
			has[a.Unmap().Is6()] = true
		}
	}
	var out []string
	reported := map[bool]bool{}
	for _, fc := range l.GetFilterChains() {
		for _, r := range fc.GetFilterChainMatch().GetPrefixRanges() {
			a, err := netip.ParseAddr(r.GetAddressPrefix())
			if err != nil {
				continue
			}
			ipv6 := a.Unmap().Is6()
			if has[ipv6] || reported[ipv6] {
				continue
			}
			reported[ipv6] = true
			family, loopback := "IPv4", "127.0.0.1"
			if ipv6 {
				family, loopback = "IPv6", "[::1]"
			}
			out = append(out, fmt.Sprintf("%s: chain %q matches %s destinations (%s/%d), but the listener has no %s socket (it binds %s): a redirect keeps the family, so those connections are refused; bind %s too (additional_addresses)",
				at, fc.GetName(), family, r.GetAddressPrefix(), r.GetPrefixLen().GetValue(), family, strings.Join(sockets, ", "), loopback))
		}
	}
	return out
}

// restoresDestination says l reads a redirected connection's original destination.
func restoresDestination(l *listenerv3.Listener) bool {
	if l.GetUseOriginalDst().GetValue() {
		return true
	}
	return slices.ContainsFunc(l.GetListenerFilters(), func(f *listenerv3.ListenerFilter) bool {
		return f.GetTypedConfig().MessageName() == (&originaldstv3.OriginalDst{}).ProtoReflect().Descriptor().FullName()
	})
}
