// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package capture

import (
	"net/netip"
	"slices"
)

// Connection is an outbound connection a pod opens, as the table's rules see it.
type Connection struct {
	// Proto is ProtoTCP or ProtoUDP.
	Proto string
	// Dst is the destination address and port.
	Dst netip.AddrPort
	// Mark is the socket's mark (the proxy's own sockets carry model.ProxySocketMark); 0 for an
	// application's.
	Mark uint32
	// UID is the socket owner's user.
	UID uint32
}

// Decision is what the table does with a connection: the verdict of the first rule that matches
// it, and that rule; Rule is nil when none matches and the chain's policy (accept) lets the
// connection leave the pod directly.
type Decision struct {
	Verdict Verdict
	Rule    *Rule
}

// Redirected reports whether the connection is redirected (to the proxy or the mesh DNS).
func (d Decision) Redirected() bool { return d.Verdict.Kind == VerdictRedirect }

// Evaluate runs c through the table's output chain as the kernel does: rule by rule, the first
// match decides. It reads the rules the agent programs, so what it says is what the pod's kernel
// does (apply's tests dial the same destinations through the real table and compare). For
// `kubectl aether dial --from`, which explains what a pod's own table does with a spelling.
func (r Ruleset) Evaluate(c Connection) Decision {
	i := slices.IndexFunc(r.Chains, func(ch Chain) bool { return ch.Name == ChainOutput })
	if i < 0 {
		return Decision{Verdict: Verdict{Kind: VerdictReturn}}
	}
	for j := range r.Chains[i].Rules {
		rule := &r.Chains[i].Rules[j]
		if r.matches(rule.Match, c) {
			return Decision{Verdict: rule.Verdict, Rule: rule}
		}
	}
	return Decision{Verdict: Verdict{Kind: VerdictReturn}}
}

func (r Ruleset) matches(m Match, c Connection) bool {
	addr := c.Dst.Addr().Unmap()
	tcp := c.Proto == ProtoTCP
	switch m.Kind {
	case MatchMark:
		return c.Mark == m.Mark
	case MatchOwner:
		return c.UID == m.UID
	case MatchDaddr:
		return m.Prefix.Contains(addr)
	case MatchProtoDport:
		return c.Proto == m.Proto && c.Dst.Port() == m.Port
	case MatchTCP:
		return tcp
	case MatchDport:
		return tcp && r.has(m.Set, Element{Port: c.Dst.Port()})
	case MatchDaddrDport:
		return tcp && addr.Is6() == m.IPv6 && r.has(m.Set, Element{Addr: addr, Port: c.Dst.Port()})
	case MatchDaddrSet:
		if !tcp || addr.Is6() != m.IPv6 || !r.has(m.Set, Element{Addr: addr}) {
			return false
		}
		return m.Ports == "" || r.has(m.Ports, Element{Port: c.Dst.Port()})
	}
	return false
}

// has reports whether set name holds e.
func (r Ruleset) has(name string, e Element) bool {
	s, ok := r.Set(name)
	return ok && slices.Contains(s.Elements, e)
}
