// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
)

// defaultMaxDirectResponseBody is Envoy's max_direct_response_body_size_bytes when unset.
const defaultMaxDirectResponseBody = 4096

// Check is what Envoy checks when it adds a listener's filter chains
// (ListenerImpl::validateFilterChains: a TCP listener has a chain or a default chain;
// FilterChainManagerImpl::addFilterChains): no chain uses the unimplemented suffix fields, no
// two chains have identical matches (verifyNoDuplicateMatchers), no server name is a partial
// wildcard, every prefix range is valid, and no two chains reach one leaf of the match tree
// (addFilterChainForSourcePorts: "multiple filter chains with overlapping matching rules"). A
// listener that fails is never active: Envoy NACKs it. The error names the chains and the fix.
func Check(l *listenerv3.Listener) error {
	if err := checkAddresses(l); err != nil {
		return err
	}
	if len(l.GetFilterChains()) == 0 && l.GetDefaultFilterChain() == nil {
		return fmt.Errorf("listener %q: no filter chains specified: Envoy rejects the listener; give it a chain or a default chain", l.GetName())
	}
	if l.GetFilterChainMatcher() != nil {
		return checkNamedChains(l)
	}
	var errs []error
	seen := map[string]string{} // a chain's match, serialized, → its name
	leaves := map[string]string{}
	for _, fc := range l.GetFilterChains() {
		m := fc.GetFilterChainMatch()
		if m.GetAddressSuffix() != "" || m.GetSuffixLen() != nil {
			errs = append(errs, fmt.Errorf("listener %q: filter chain %q uses address_suffix or suffix_len, which Envoy does not implement: remove them",
				l.GetName(), fc.GetName()))
			continue
		}
		id := matchIdentity(m)
		if other, dup := seen[id]; dup {
			errs = append(errs, fmt.Errorf("listener %q: filter chain %q has the same matching rules defined as %q: give one of them a distinguishing match, or merge them",
				l.GetName(), fc.GetName(), other))
			continue
		}
		seen[id] = fc.GetName()
		if err := checkMatchValues(m); err != nil {
			errs = append(errs, fmt.Errorf("listener %q: filter chain %q: %w", l.GetName(), fc.GetName(), err))
			continue
		}
		for _, leaf := range leafKeys(m) {
			if other, taken := leaves[leaf]; taken {
				if leaf == "" {
					leaf = "any connection"
				}
				errs = append(errs, fmt.Errorf("listener %q: filter chains %q and %q have overlapping matching rules (both match %s): Envoy rejects the listener; make their matches disjoint",
					l.GetName(), other, fc.GetName(), leaf))
				break
			}
			leaves[leaf] = fc.GetName()
		}
	}
	return errors.Join(errs...)
}

// checkAddresses is what ListenerImpl checks of a listener's addresses: every additional address
// has the address's socket type (TCP or UDP), and ipv4_compat is set only where the address (the
// listener's own address, also when the flag is an additional address's:
// checkIpv4CompatAddress is given the first address for each) is :: or an IPv4-mapped IPv6
// address.
func checkAddresses(l *listenerv3.Listener) error {
	primary := l.GetAddress().GetSocketAddress()
	if primary == nil {
		return nil
	}
	compat := func(flag bool) error {
		a, err := netip.ParseAddr(primary.GetAddress())
		if !flag || err != nil || a.Is6() && (a.IsUnspecified() || a.Is4In6()) {
			return nil
		}
		return fmt.Errorf("listener %q: ipv4_compat is set while the listener's address is %s: Envoy accepts it only with the address :: or an IPv4-mapped IPv6 address (\"Only IPv6 address '::' or valid IPv4-mapped IPv6 address can set ipv4_compat\"); clear it, or bind :: as the listener's address",
			l.GetName(), primary.GetAddress())
	}
	if err := compat(primary.GetIpv4Compat()); err != nil {
		return err
	}
	for i, extra := range l.GetAdditionalAddresses() {
		sa := extra.GetAddress().GetSocketAddress()
		if sa.GetProtocol() != primary.GetProtocol() {
			return fmt.Errorf("listener %q: additional_addresses[%d] is %s while the address is %s: Envoy supports one socket type for all the addresses",
				l.GetName(), i, sa.GetProtocol(), primary.GetProtocol())
		}
		if err := compat(sa.GetIpv4Compat()); err != nil {
			return fmt.Errorf("additional_addresses[%d]: %w", i, err)
		}
	}
	return nil
}

// checkNamedChains is setupFilterChainMatcher's rule when filter_chain_matcher is used: every
// chain has a unique name.
func checkNamedChains(l *listenerv3.Listener) error {
	names := map[string]bool{}
	for _, fc := range l.GetFilterChains() {
		if fc.GetName() == "" || names[fc.GetName()] {
			return fmt.Errorf("listener %q: with filter_chain_matcher every filter chain needs a unique name; %q is empty or repeated",
				l.GetName(), fc.GetName())
		}
		names[fc.GetName()] = true
	}
	return nil
}

// matchIdentity is a FilterChainMatch as a map key: Envoy compares matches as messages.
func matchIdentity(m *listenerv3.FilterChainMatch) string {
	if m == nil {
		m = &listenerv3.FilterChainMatch{}
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	return string(b)
}

// checkMatchValues rejects what setupFilterChainMatcher rejects: an invalid CIDR range, and a
// server name with a '*' anywhere but a leading "*.".
func checkMatchValues(m *listenerv3.FilterChainMatch) error {
	for _, ranges := range [][]*corev3.CidrRange{m.GetPrefixRanges(), m.GetSourcePrefixRanges(), m.GetDirectSourcePrefixRanges()} {
		for _, r := range ranges {
			if _, err := cidr(r); err != nil {
				return err
			}
		}
	}
	for _, n := range m.GetServerNames() {
		if strings.Contains(n, "*") && !strings.HasPrefix(n, "*.") {
			return fmt.Errorf("server name %q is a partial wildcard, which Envoy does not support: write *.<domain> or the full name", n)
		}
	}
	return nil
}

// cidr reads a CidrRange as Envoy's CidrRange::create does (the address masked to its length).
func cidr(r *corev3.CidrRange) (netip.Prefix, error) {
	a, err := netip.ParseAddr(r.GetAddressPrefix())
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("prefix range %q is not an IP address", r.GetAddressPrefix())
	}
	a = a.Unmap()
	p, err := a.Prefix(int(r.GetPrefixLen().GetValue()))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("prefix range %s/%d: the length is out of range for the address", a, r.GetPrefixLen().GetValue())
	}
	return p, nil
}

// leafKeys are the leaves of Envoy's match tree a chain occupies: every combination of its
// destination port, destination range, server name, transport protocol, application protocol,
// direct source range, source type, source range and source port, each as Envoy keys it (an
// empty list is the "" or 0 key).
func leafKeys(m *listenerv3.FilterChainMatch) []string {
	levels := []struct {
		field, catchAll string // catchAll is the key of a chain that does not constrain the field
		values          []string
	}{
		{"destination_port", "0", []string{strconv.FormatUint(uint64(m.GetDestinationPort().GetValue()), 10)}},
		{"prefix_ranges", "", rangeKeys(m.GetPrefixRanges())},
		{"server_names", "", serverNameKeys(m)},
		{"transport_protocol", "", []string{m.GetTransportProtocol()}},
		{"application_protocols", "", orEmpty(m.GetApplicationProtocols())},
		{"direct_source_prefix_ranges", "", rangeKeys(m.GetDirectSourcePrefixRanges())},
		{"source_type", "ANY", []string{m.GetSourceType().String()}},
		{"source_prefix_ranges", "", rangeKeys(m.GetSourcePrefixRanges())},
		{"source_ports", "0", portKeys(m.GetSourcePorts())},
	}
	leaves := []string{""}
	for _, level := range levels {
		next := make([]string, 0, len(leaves)*len(level.values))
		for _, prefix := range leaves {
			for _, v := range level.values {
				next = append(next, leafStep(prefix, level.field, v, level.catchAll))
			}
		}
		leaves = next
	}
	return leaves
}

// leafStep adds one level to a leaf's spelling, the levels that constrain something only, so the
// error says what two chains share ("server_names=b.test").
func leafStep(prefix, field, value, catchAll string) string {
	switch {
	case value == catchAll:
		return prefix
	case prefix == "":
		return field + "=" + value
	}
	return prefix + " " + field + "=" + value
}

func rangeKeys(ranges []*corev3.CidrRange) []string {
	if len(ranges) == 0 {
		return []string{""}
	}
	keys := make([]string, 0, len(ranges))
	for _, r := range ranges {
		p, _ := cidr(r)
		keys = append(keys, p.Masked().String())
	}
	return keys
}

func portKeys(ports []uint32) []string {
	if len(ports) == 0 {
		return []string{"0"}
	}
	keys := make([]string, 0, len(ports))
	for _, p := range ports {
		keys = append(keys, strconv.FormatUint(uint64(p), 10))
	}
	return keys
}

func orEmpty(values []string) []string {
	if len(values) == 0 {
		return []string{""}
	}
	return values
}

// CheckRoutes is what Envoy checks when it accepts a route configuration (RouteMatcher and
// CommonConfigImpl): each domain once across the virtual hosts (compared in lower case), at
// most one "*", and no direct_response body longer than max_direct_response_body_size_bytes.
func CheckRoutes(rc *routev3.RouteConfiguration) error {
	var errs []error
	domains := map[string]string{} // lower-cased domain → virtual host
	for _, vh := range rc.GetVirtualHosts() {
		for _, d := range vh.GetDomains() {
			ld := strings.ToLower(d)
			if other, dup := domains[ld]; dup {
				what := fmt.Sprintf("domain %q is in virtual hosts %q and %q", d, other, vh.GetName())
				if ld == "*" {
					what = fmt.Sprintf("virtual hosts %q and %q are both the wildcard \"*\" (only one is permitted)", other, vh.GetName())
				}
				errs = append(errs, fmt.Errorf("route configuration %q: %s: Envoy permits each domain once; keep it in one virtual host", rc.GetName(), what))
				continue
			}
			domains[ld] = vh.GetName()
		}
		errs = append(errs, checkBodies(rc, vh))
	}
	return errors.Join(errs...)
}

func checkBodies(rc *routev3.RouteConfiguration, vh *routev3.VirtualHost) error {
	limit := uint32(defaultMaxDirectResponseBody)
	if m := rc.GetMaxDirectResponseBodySizeBytes(); m != nil {
		limit = m.GetValue()
	}
	for i, r := range vh.GetRoutes() {
		if body := r.GetDirectResponse().GetBody(); body != nil && uint32(len(dataSource(body))) > limit {
			return fmt.Errorf("route configuration %q, virtual host %q, route %s: the direct response body is %d bytes, over the limit of %d (max_direct_response_body_size_bytes)",
				rc.GetName(), vh.GetName(), routeName(r, i), len(dataSource(body)), limit)
		}
	}
	return nil
}

// sortedKeys lists a map's keys in order, so every walk over resources is deterministic.
func sortedKeys[V any](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), cmp.Compare[string])
}
