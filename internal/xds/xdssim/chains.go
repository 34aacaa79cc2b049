// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"net/netip"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// This file is Envoy's filter-chain lookup, FilterChainManagerImpl in
// source/common/listener_manager/filter_chain_manager_impl.cc, level by level. Envoy builds a
// tree (destination port → destination IP trie → server name → transport protocol →
// application protocol → direct source IP trie → source type → source IP trie → source port)
// and descends it once: at each level it takes the exact entry when there is one, else the
// catch-all entry, and when the subtree it took yields nothing it returns nothing (the caller
// then uses the default chain). It never tries a sibling subtree. Here each level keeps the
// chains that its entry holds (a chain listing several values sits under each of them), which is
// the same descent. Check has rejected every listener whose leaves would hold two chains.

// key is what a connection offers the lookup.
type key struct {
	local, remote netip.AddrPort
	detected
}

type chains = []*listenerv3.FilterChain

// findFilterChain is FilterChainManagerImpl::findFilterChain: the destination port's subtree
// when any chain names the port, and then no other (no fallback to the port-less chains); else
// the port-less chains. nil means no chain: the caller takes the default chain.
func findFilterChain(all chains, k key) *listenerv3.FilterChain {
	var exact, portless chains
	for _, fc := range all {
		switch fc.GetFilterChainMatch().GetDestinationPort().GetValue() {
		case uint32(k.local.Port()):
			exact = append(exact, fc)
		case 0:
			portless = append(portless, fc)
		}
	}
	subtree := portless
	if len(exact) > 0 {
		subtree = exact
	}
	return only(forDestinationIP(subtree, k))
}

// only is the one chain a leaf holds. Check rejected listeners with two chains on one leaf.
func only(leaf chains) *listenerv3.FilterChain {
	if len(leaf) == 0 {
		return nil
	}
	return leaf[0]
}

// forDestinationIP is findFilterChainForDestinationIP: the chains under the longest prefix that
// holds the destination (no prefix_ranges = 0.0.0.0/0 and ::/0).
func forDestinationIP(subtree chains, k key) chains {
	return forServerName(longestPrefix(subtree, k.local.Addr(), (*listenerv3.FilterChainMatch).GetPrefixRanges), k)
}

// forServerName is findFilterChainForServerName: the exact server name, else the wildcards
// "*.b.c" then "*.c" (longest first, as Envoy's loop over the name's dots), else the chains with
// no server_names.
func forServerName(subtree chains, k key) chains {
	if len(subtree) == 0 {
		return nil
	}
	name := k.sni
	if set := withServerNameKey(subtree, name); len(set) > 0 {
		return forTransportProtocol(set, k)
	}
	for pos := indexFrom(name, '.', 1); pos >= 0 && pos < len(name)-1; pos = indexFrom(name, '.', pos+1) {
		if set := withServerNameKey(subtree, name[pos:]); len(set) > 0 {
			return forTransportProtocol(set, k)
		}
	}
	return forTransportProtocol(withServerNameKey(subtree, ""), k)
}

// withServerNameKey are the chains Envoy files under server-name key: a name as written (lower
// case), ".x" for a wildcard "*.x", "" for a chain with no server_names.
func withServerNameKey(subtree chains, key string) chains {
	var set chains
	for _, fc := range subtree {
		if slices.Contains(serverNameKeys(fc.GetFilterChainMatch()), key) {
			set = append(set, fc)
		}
	}
	return set
}

func serverNameKeys(m *listenerv3.FilterChainMatch) []string {
	if len(m.GetServerNames()) == 0 {
		return []string{""}
	}
	keys := make([]string, 0, len(m.GetServerNames()))
	for _, n := range m.GetServerNames() {
		n = strings.ToLower(n)
		if strings.HasPrefix(n, "*.") {
			n = n[1:]
		}
		keys = append(keys, n)
	}
	return keys
}

// forTransportProtocol is findFilterChainForTransportProtocol: the detected transport, else the
// chains with no transport_protocol.
func forTransportProtocol(subtree chains, k key) chains {
	if len(subtree) == 0 {
		return nil
	}
	set := filter(subtree, func(m *listenerv3.FilterChainMatch) bool { return m.GetTransportProtocol() == k.transport })
	if len(set) == 0 {
		set = filter(subtree, func(m *listenerv3.FilterChainMatch) bool { return m.GetTransportProtocol() == "" })
	}
	return forApplicationProtocols(set, k)
}

// forApplicationProtocols is findFilterChainForApplicationProtocols: the first of the
// connection's protocols, in its order, that a chain names; else the chains naming none.
func forApplicationProtocols(subtree chains, k key) chains {
	if len(subtree) == 0 {
		return nil
	}
	for _, p := range k.alpn {
		set := filter(subtree, func(m *listenerv3.FilterChainMatch) bool { return slices.Contains(m.GetApplicationProtocols(), p) })
		if len(set) > 0 {
			return forDirectSourceIP(set, k)
		}
	}
	return forDirectSourceIP(filter(subtree, func(m *listenerv3.FilterChainMatch) bool { return len(m.GetApplicationProtocols()) == 0 }), k)
}

// forDirectSourceIP is findFilterChainForDirectSourceIP. The direct peer is the peer here (no
// PROXY protocol is modelled).
func forDirectSourceIP(subtree chains, k key) chains {
	return forSourceType(longestPrefix(subtree, k.remote.Addr(), (*listenerv3.FilterChainMatch).GetDirectSourcePrefixRanges), k)
}

// forSourceType is findFilterChainForSourceTypes: a local peer (loopback, or the local IP) takes
// the SAME_IP_OR_LOOPBACK chains when there are any, an external one the EXTERNAL chains; only
// when that set is empty does ANY apply.
func forSourceType(subtree chains, k key) chains {
	if len(subtree) == 0 {
		return nil
	}
	ofType := func(t listenerv3.FilterChainMatch_ConnectionSourceType) chains {
		return filter(subtree, func(m *listenerv3.FilterChainMatch) bool { return m.GetSourceType() == t })
	}
	local := k.remote.Addr().IsLoopback() || k.remote.Addr() == k.local.Addr()
	if set := ofType(listenerv3.FilterChainMatch_SAME_IP_OR_LOOPBACK); local && len(set) > 0 {
		return forSourceIPAndPort(set, k)
	}
	if set := ofType(listenerv3.FilterChainMatch_EXTERNAL); !local && len(set) > 0 {
		return forSourceIPAndPort(set, k)
	}
	return forSourceIPAndPort(ofType(listenerv3.FilterChainMatch_ANY), k)
}

// forSourceIPAndPort is findFilterChainForSourceIpAndPort: the longest source prefix, then the
// exact source port, else the chains with no source_ports.
func forSourceIPAndPort(subtree chains, k key) chains {
	set := longestPrefix(subtree, k.remote.Addr(), (*listenerv3.FilterChainMatch).GetSourcePrefixRanges)
	if len(set) == 0 {
		return nil
	}
	port := uint32(k.remote.Port())
	if exact := filter(set, func(m *listenerv3.FilterChainMatch) bool { return slices.Contains(m.GetSourcePorts(), port) }); len(exact) > 0 {
		return exact
	}
	return filter(set, func(m *listenerv3.FilterChainMatch) bool { return len(m.GetSourcePorts()) == 0 })
}

// longestPrefix are the chains filed under the longest of their prefixes (none = every address)
// that holds addr: Envoy's LC trie lookup, which returns the most specific range only. An
// explicit 0.0.0.0/0 and no ranges are one range here (in Envoy two trie entries for one range).
func longestPrefix(subtree chains, addr netip.Addr, ranges func(*listenerv3.FilterChainMatch) []*corev3.CidrRange) chains {
	best := -1
	var set chains
	for _, fc := range subtree {
		for _, p := range prefixes(ranges(fc.GetFilterChainMatch())) {
			switch {
			case !p.Contains(addr) || p.Bits() < best:
			case p.Bits() > best:
				best, set = p.Bits(), chains{fc}
			case !slices.Contains(set, fc):
				set = append(set, fc)
			}
		}
	}
	return set
}

// allAddresses are the ranges a chain with no prefix ranges is filed under
// (makeCidrListEntry with EMPTY_STRING).
var allAddresses = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

// prefixes reads ranges; Check has rejected a listener with an invalid one.
func prefixes(ranges []*corev3.CidrRange) []netip.Prefix {
	if len(ranges) == 0 {
		return allAddresses
	}
	out := make([]netip.Prefix, 0, len(ranges))
	for _, r := range ranges {
		if p, err := cidr(r); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func filter(subtree chains, keep func(*listenerv3.FilterChainMatch) bool) chains {
	var set chains
	for _, fc := range subtree {
		if keep(fc.GetFilterChainMatch()) {
			set = append(set, fc)
		}
	}
	return set
}

// indexFrom is std::string::find(c, from): the index of c at or after from, or -1.
func indexFrom(s string, c byte, from int) int {
	if from >= len(s) {
		return -1
	}
	if i := strings.IndexByte(s[from:], c); i >= 0 {
		return from + i
	}
	return -1
}
