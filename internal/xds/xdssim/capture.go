// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/aether-mesh/aether-operator/internal/capture"
)

// Reachability: where an application's connection goes before Envoy sees it, and which listener
// receives it. A pod's capture ruleset (capture.Ruleset, its table inet aether) is read as the
// kernel evaluates it, and the receiving listener is found as the kernel finds a listening socket:
//
//   - the table is of family inet: a rule without an address match sees IPv4 and IPv6 alike; an
//     address match (ip daddr, ip6 daddr, a set of IPv4 or of IPv6 keys) sees its own family;
//   - the nat output chain's rules are evaluated in order and the first that matches decides:
//     return leaves the connection alone; redirect rewrites its destination to the loopback
//     address of the connection's own family at the rule's port (nf_nat_redirect_ipv4 and
//     nf_nat_redirect_ipv6 on the output hook: 127.0.0.1 or ::1); the family never changes;
//   - a set match holds what the set's elements hold: a rule reading an empty set matches nothing;
//   - the connection an application opens carries no mark and is not the proxy's user's, so a
//     rule on the proxy's mark or user does not match it;
//   - a listening socket is looked up in the network namespace the connection is in: the exact
//     address and port, else the wildcard of the connection's family on that port (0.0.0.0 or
//     ::), else, for IPv4, a :: socket without IPV6_V6ONLY (Envoy's ipv4_compat). A listener has
//     one socket per address, its address and each of additional_addresses, each in the network
//     namespace that address names (ListenerImpl); a listener Envoy rejects (Check) has none.
//
// Another chain type or hook (a prerouting redirect goes to the incoming interface's address) and
// a match kind not listed above are ErrUnsupported.

// ErrNotListening is a redirect to an address no listener is bound to in the connection's
// namespace: the kernel answers the SYN with a reset (ECONNREFUSED).
var ErrNotListening = errors.New("the capture rules redirect the connection where no listener is bound: the kernel refuses it (ECONNREFUSED)")

// Redirect is where one redirect rule sends the connections of one family.
type Redirect struct {
	// Rule is the rule as nft spells it.
	Rule string
	// Target is the redirect's destination: the family's loopback address, the rule's port.
	Target netip.AddrPort
	// Listener receives what arrives at Target in the namespace; "" when none is bound there.
	Listener string
}

// CaptureRedirects reads rs, the capture ruleset of the network namespace netns: for every
// redirect rule and every family it can redirect, where the connections land. A family a rule
// cannot redirect is not listed: its address match is of the other family, a set it reads is
// empty, or an earlier return rule takes every TCP connection of that family. The error names
// each target no listener is bound to (ErrNotListening), and a ruleset the kernel would refuse.
func (s *Sim) CaptureRedirects(netns string, rs capture.Ruleset) ([]Redirect, error) {
	if err := rs.Validate(); err != nil {
		return nil, fmt.Errorf("the kernel refuses the capture ruleset: %w", err)
	}
	sets := setContents(rs)
	var out []Redirect
	var errs []error
	for _, c := range rs.Chains {
		if err := outputNat(c); err != nil {
			return nil, err
		}
		returned := map[bool]bool{} // by IPv6: an earlier return rule took every TCP connection
		for _, r := range c.Rules {
			families, err := matchFamilies(r.Match)
			if err != nil {
				return nil, err
			}
			if r.Verdict.Kind == capture.VerdictReturn {
				for _, ipv6 := range returnsAll(r.Match) {
					returned[ipv6] = true
				}
				continue
			}
			if matchesNothing(r.Match, sets) {
				continue
			}
			for _, ipv6 := range families {
				if returned[ipv6] {
					continue
				}
				rd := Redirect{Rule: r.String(), Target: netip.AddrPortFrom(loopback(ipv6), r.Verdict.Port)}
				rd.Listener, _ = s.ListenerAt(netns, rd.Target)
				if rd.Listener == "" {
					errs = append(errs, s.notListening(netns, rd))
				}
				out = append(out, rd)
			}
		}
	}
	return out, errors.Join(errs...)
}

// Capture is where a TCP connection an application in netns opens to dst goes, by rs: the
// listener that receives it when a redirect rule matches, "" when a return rule or no rule does
// (the connection goes to dst itself). A redirect to where no listener is bound is
// ErrNotListening. rs is taken as valid (CaptureRedirects checks it).
func (s *Sim) Capture(netns string, rs capture.Ruleset, dst netip.AddrPort) (string, error) {
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	sets := setContents(rs)
	for _, c := range rs.Chains {
		if err := outputNat(c); err != nil {
			return "", err
		}
		for _, r := range c.Rules {
			matched, err := matches(r.Match, sets, dst)
			if err != nil {
				return "", err
			}
			if !matched {
				continue
			}
			if r.Verdict.Kind == capture.VerdictReturn {
				return "", nil
			}
			rd := Redirect{Rule: r.String(), Target: netip.AddrPortFrom(loopback(dst.Addr().Is6()), r.Verdict.Port)}
			if rd.Listener, _ = s.ListenerAt(netns, rd.Target); rd.Listener == "" {
				return "", fmt.Errorf("connection to %s: %w", dst, s.notListening(netns, rd))
			}
			return rd.Listener, nil
		}
	}
	return "", nil
}

// notListening says that nothing is bound at rd's target in netns, and what is bound on its port.
func (s *Sim) notListening(netns string, rd Redirect) error {
	var there []string
	for _, name := range sortedKeys(s.listeners) {
		rejected := ""
		if Check(s.listeners[name]) != nil {
			rejected = " (which Envoy rejects, so it binds nothing)"
		}
		for _, b := range boundAddresses(s.listeners[name]) {
			if b.netns == netns && b.addr.Port() == rd.Target.Port() {
				there = append(there, fmt.Sprintf("listener %q%s binds %s", name, rejected, b))
			}
		}
	}
	bound := "nothing is bound on that port there"
	if len(there) > 0 {
		bound = strings.Join(there, ", ")
	}
	return fmt.Errorf("%w: rule %q redirects %s to %s in network namespace %q, where no listener is bound (%s); bind %s in that namespace (the listener's address or additional_addresses)",
		ErrNotListening, rd.Rule, familyName(rd.Target.Addr().Is6()), rd.Target, netns, bound, rd.Target)
}

// ListenerAt is the listener whose socket receives a connection to addr in the network namespace
// netns (see the top of this file), and whether there is one.
func (s *Sim) ListenerAt(netns string, addr netip.AddrPort) (string, bool) {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	best, rank := "", 0
	for _, name := range sortedKeys(s.listeners) {
		l := s.listeners[name]
		if Check(l) != nil {
			continue
		}
		for _, b := range boundAddresses(l) {
			if b.netns != netns {
				continue
			}
			if r := b.receives(addr); r > rank {
				best, rank = name, r
			}
		}
	}
	return best, rank > 0
}

// bound is one listening socket of a listener.
type bound struct {
	addr  netip.AddrPort
	netns string
	// dualStack: an IPv6 socket without IPV6_V6ONLY (ipv4_compat), which takes IPv4 too.
	dualStack bool
}

func (b bound) String() string {
	if b.dualStack {
		return b.addr.String() + " (ipv4_compat)"
	}
	return b.addr.String()
}

// receives ranks how b receives a connection to addr as the kernel's socket lookup prefers: 3
// exact, 2 the wildcard of addr's family, 1 a dual-stack :: for IPv4, 0 not at all.
func (b bound) receives(addr netip.AddrPort) int {
	if b.addr.Port() != addr.Port() {
		return 0
	}
	a := b.addr.Addr()
	switch {
	case a == addr.Addr() || b.dualStack && a.Is4In6() && a.Unmap() == addr.Addr():
		return 3
	case a.IsUnspecified() && a.Is6() == addr.Addr().Is6():
		return 2
	case a.IsUnspecified() && b.dualStack && addr.Addr().Is4():
		return 1
	}
	return 0
}

// boundAddresses are l's sockets: its address, then each of additional_addresses (Envoy binds
// one socket per address, each in the namespace its address names). Addresses that are not IP
// socket addresses are left out.
func boundAddresses(l *listenerv3.Listener) []bound {
	var out []bound
	add := func(sa interface {
		GetAddress() string
		GetPortValue() uint32
		GetIpv4Compat() bool
		GetNetworkNamespaceFilepath() string
		GetProtocol() corev3.SocketAddress_Protocol
	}) {
		a, err := netip.ParseAddr(sa.GetAddress())
		// The simulator's connections are TCP: a UDP socket (the HTTP/3 hop's QUIC listener, on
		// the inbound listener's address) never takes one.
		if err != nil || sa.GetPortValue() > 65535 || sa.GetProtocol() == corev3.SocketAddress_UDP {
			return
		}
		out = append(out, bound{addr: netip.AddrPortFrom(a, uint16(sa.GetPortValue())), netns: sa.GetNetworkNamespaceFilepath(),
			dualStack: a.Is6() && sa.GetIpv4Compat()})
	}
	if sa := l.GetAddress().GetSocketAddress(); sa != nil {
		add(sa)
	}
	for _, extra := range l.GetAdditionalAddresses() {
		if sa := extra.GetAddress().GetSocketAddress(); sa != nil {
			add(sa)
		}
	}
	return out
}

// outputNat checks that c is what this reader models: a nat chain on the output hook.
func outputNat(c capture.Chain) error {
	if c.Type != "nat" || c.Hook != "output" {
		return fmt.Errorf("%w: capture chain %q is type %s hook %s (only nat output chains are modelled: a prerouting redirect goes to the incoming interface's address)",
			ErrUnsupported, c.Name, c.Type, c.Hook)
	}
	return nil
}

// setContents are rs's sets by name.
func setContents(rs capture.Ruleset) map[string][]capture.Element {
	out := map[string][]capture.Element{}
	for _, s := range rs.Sets {
		out[s.Name] = s.Elements
	}
	return out
}

// matchFamilies are the families (by IPv6) a match can apply to in an inet table.
func matchFamilies(m capture.Match) ([]bool, error) {
	switch m.Kind {
	case capture.MatchDaddr:
		return []bool{m.Prefix.Addr().Is6()}, nil
	case capture.MatchDaddrDport, capture.MatchDaddrSet:
		return []bool{m.IPv6}, nil
	case capture.MatchDport, capture.MatchTCP, capture.MatchOwner, capture.MatchMark:
		return []bool{false, true}, nil
	}
	return nil, fmt.Errorf("%w: capture match kind %q", ErrUnsupported, m.Kind)
}

// returnsAll are the families (by IPv6) in which m, on a return rule, takes every TCP connection.
func returnsAll(m capture.Match) []bool {
	switch {
	case m.Kind == capture.MatchTCP:
		return []bool{false, true}
	case m.Kind == capture.MatchDaddr && m.Prefix.Bits() == 0:
		return []bool{m.Prefix.Addr().Is6()}
	}
	return nil
}

// matchesNothing says m reads a set that has no element (or a ports set that has none).
func matchesNothing(m capture.Match, sets map[string][]capture.Element) bool {
	switch m.Kind {
	case capture.MatchDport, capture.MatchDaddrDport:
		return len(sets[m.Set]) == 0
	case capture.MatchDaddrSet:
		return len(sets[m.Set]) == 0 || m.Ports != "" && len(sets[m.Ports]) == 0
	}
	return false
}

// matches says whether m matches an application's TCP connection to dst.
func matches(m capture.Match, sets map[string][]capture.Element, dst netip.AddrPort) (bool, error) {
	has := func(set string, e capture.Element) bool { return slices.Contains(sets[set], e) }
	ipv6 := dst.Addr().Is6()
	switch m.Kind {
	case capture.MatchDaddr:
		return m.Prefix.Contains(dst.Addr()), nil
	case capture.MatchOwner:
		return false, nil // the application is not the proxy's user
	case capture.MatchMark:
		return m.Mark == 0, nil // the application's socket carries no mark
	case capture.MatchDport:
		return has(m.Set, capture.Element{Port: dst.Port()}), nil
	case capture.MatchDaddrDport:
		return m.IPv6 == ipv6 && has(m.Set, capture.Element{Addr: dst.Addr(), Port: dst.Port()}), nil
	case capture.MatchTCP:
		return true, nil
	case capture.MatchDaddrSet:
		return m.IPv6 == ipv6 && has(m.Set, capture.Element{Addr: dst.Addr()}) &&
			(m.Ports == "" || has(m.Ports, capture.Element{Port: dst.Port()})), nil
	}
	return false, fmt.Errorf("%w: capture match kind %q", ErrUnsupported, m.Kind)
}

// loopback is the address an output-hook redirect of the family sends to.
func loopback(ipv6 bool) netip.Addr {
	if ipv6 {
		return netip.IPv6Loopback()
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

func familyName(ipv6 bool) string {
	if ipv6 {
		return "IPv6"
	}
	return "IPv4"
}
