// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package capture

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The table every managed pod's netns holds, and its chain.
const (
	// TableFamily and TableName name the table: inet aether (both IP families in one table).
	TableFamily = "inet"
	TableName   = "aether"
	// ChainOutput is the nat chain on the output hook: where locally generated connections are
	// redirected, on their first packet (conntrack carries the rest).
	ChainOutput = "output"
	// OutputPriority is the chain's priority: dstnat, where destination NAT belongs.
	OutputPriority = -100
)

// The sets of the table.
const (
	// SetExcludedPorts holds the destination ports never redirected: the proxy's own and the
	// pod's aether.io/exclude-outbound-ports.
	SetExcludedPorts = "excluded_ports"
	// SetMeshPorts holds the ports scoped mode redirects: 18081 and 18082.
	SetMeshPorts = "mesh_ports"
	// SetSurface4 and SetSurface6 hold the (VIP, port) pairs surface mode redirects, by family.
	SetSurface4 = "surface4"
	SetSurface6 = "surface6"
	// SetMeshAddrs4 holds the mesh's IPv4 addresses, which all and scoped mode redirect: every
	// VIP and every meshed pod address.
	SetMeshAddrs4 = "mesh_addrs4"
	// SetMeshAddrs6 holds the mesh's IPv6 addresses.
	SetMeshAddrs6 = "mesh_addrs6"
	// SetNodeAddrs4 and SetNodeAddrs6 hold the node's own addresses, by family, which no mode
	// redirects (Options.Node): a set, so that the agent follows the node's addresses as they
	// change by moving elements, never by rewriting a rule.
	SetNodeAddrs4 = "node_addrs4"
	SetNodeAddrs6 = "node_addrs6"
)

// Ruleset is the table inet aether of one pod's network namespace, as data: its sets sorted by
// name, each with its elements sorted and unique, and its chains sorted by name.
type Ruleset struct {
	Sets   []Set
	Chains []Chain
}

// SetType is a set's key type, as nft spells it.
type SetType string

const (
	// TypePort is a destination port.
	TypePort SetType = "inet_service"
	// TypeIPv4Port is an IPv4 destination address and port, concatenated.
	TypeIPv4Port SetType = "ipv4_addr . inet_service"
	// TypeIPv6Port is an IPv6 destination address and port, concatenated.
	TypeIPv6Port SetType = "ipv6_addr . inet_service"
	// TypeIPv4 is an IPv4 destination address alone.
	TypeIPv4 SetType = "ipv4_addr"
	// TypeIPv6 is an IPv6 destination address alone.
	TypeIPv6 SetType = "ipv6_addr"
)

// Set is a named set of the table.
type Set struct {
	Name     string
	Type     SetType
	Elements []Element
}

// Element is one key of a set: a port, an address, or both (Addr is invalid for TypePort, Port
// 0 for TypeIPv4 and TypeIPv6).
type Element struct {
	Addr netip.Addr
	Port uint16
}

// String spells the element as nft does: "80", or "10.96.0.10 . 80".
func (e Element) String() string {
	switch {
	case !e.Addr.IsValid():
		return strconv.Itoa(int(e.Port))
	case e.Port == 0:
		return e.Addr.String()
	}
	return e.Addr.String() + " . " + strconv.Itoa(int(e.Port))
}

// compareElements orders elements by address (IPv4 first), then port.
func compareElements(a, b Element) int {
	return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port))
}

// Chain is a base chain of the table: its type, hook and priority, and its rules in order.
type Chain struct {
	Name     string
	Type     string // nat
	Hook     string // output
	Priority int32
	Rules    []Rule
}

// Header is the chain's first line in nft's syntax.
func (c Chain) Header() string {
	return fmt.Sprintf("type %s hook %s priority %d; policy accept;", c.Type, c.Hook, c.Priority)
}

// Rule is one match and one verdict. Its String is its identity: the applier keeps it as the
// rule's comment, and knows a rule it finds in the kernel by it.
type Rule struct {
	Match   Match
	Verdict Verdict
}

// String spells the rule as nft does, e.g. "tcp dport @mesh_ports redirect to :18001".
func (r Rule) String() string { return r.Match.String() + " " + r.Verdict.String() }

// ProtoTCP and ProtoUDP are the protocols a MatchProtoDport rule names, as nft spells them.
const (
	ProtoTCP = "tcp"
	ProtoUDP = "udp"
)

// MatchKind is what a rule matches on.
type MatchKind string

const (
	// MatchDaddr matches a destination address in Prefix (ip daddr, or ip6 daddr for IPv6).
	MatchDaddr MatchKind = "daddr"
	// MatchOwner matches a socket owned by user UID (meta skuid).
	MatchOwner MatchKind = "skuid"
	// MatchDport matches TCP whose destination port is in set Set (tcp dport @set).
	MatchDport MatchKind = "dport"
	// MatchDaddrDport matches TCP whose (destination address, port) is in set Set, of IPv4 pairs, or of
	// IPv6 pairs when IPv6 (ip daddr . tcp dport @set).
	MatchDaddrDport MatchKind = "daddr-dport"
	// MatchTCP matches any TCP (meta l4proto tcp).
	MatchTCP MatchKind = "tcp"
	// MatchDaddrSet matches TCP whose destination address is in set Set, of IPv4 addresses, or of
	// IPv6 addresses when IPv6 (ip daddr @set), and, when Ports names a set of ports, whose
	// destination port is in that set too (tcp dport @ports).
	MatchDaddrSet MatchKind = "daddr-set"
	// MatchMark matches a socket (so its packets) carrying mark Mark (meta mark).
	MatchMark MatchKind = "mark"
	// MatchProtoDport matches protocol Proto ("udp" or "tcp") to destination port Port, whatever
	// the destination address (udp dport 53).
	MatchProtoDport MatchKind = "proto-dport"
)

// Match is what a rule matches; the fields its Kind names are set, the others zero.
type Match struct {
	Kind   MatchKind
	Prefix netip.Prefix
	UID    uint32
	Mark   uint32
	Set    string
	Ports  string
	IPv6   bool
	Proto  string
	Port   uint16
}

// String spells the match as nft does.
func (m Match) String() string {
	switch m.Kind {
	case MatchDaddr:
		family := "ip"
		if m.Prefix.Addr().Is6() {
			family = "ip6"
		}
		if m.Prefix.IsSingleIP() {
			return family + " daddr " + m.Prefix.Addr().String()
		}
		return family + " daddr " + m.Prefix.String()
	case MatchOwner:
		return "meta skuid " + strconv.FormatUint(uint64(m.UID), 10)
	case MatchDport:
		return "tcp dport @" + m.Set
	case MatchDaddrDport:
		if m.IPv6 {
			return "ip6 daddr . tcp dport @" + m.Set
		}
		return "ip daddr . tcp dport @" + m.Set
	case MatchTCP:
		return "meta l4proto tcp"
	case MatchDaddrSet:
		text := "meta l4proto tcp ip daddr @" + m.Set
		if m.IPv6 {
			text = "meta l4proto tcp ip6 daddr @" + m.Set
		}
		if m.Ports != "" {
			text += " tcp dport @" + m.Ports
		}
		return text
	case MatchMark:
		return fmt.Sprintf("meta mark 0x%08x", m.Mark)
	case MatchProtoDport:
		return m.Proto + " dport " + strconv.Itoa(int(m.Port))
	}
	return "<match " + string(m.Kind) + ">"
}

// VerdictKind is what a rule does with a connection it matches.
type VerdictKind string

const (
	// VerdictReturn leaves the connection alone (no later rule of the chain sees it).
	VerdictReturn VerdictKind = "return"
	// VerdictRedirect sends it to Port on the loopback address of its family.
	VerdictRedirect VerdictKind = "redirect"
)

// Verdict is a rule's verdict; Port is the redirect's.
type Verdict struct {
	Kind VerdictKind
	Port uint16
}

// String spells the verdict as nft does.
func (v Verdict) String() string {
	if v.Kind == VerdictRedirect {
		return "redirect to :" + strconv.Itoa(int(v.Port))
	}
	return string(v.Kind)
}

// Set returns the set named name, if the ruleset has it.
func (r Ruleset) Set(name string) (Set, bool) {
	i := slices.IndexFunc(r.Sets, func(s Set) bool { return s.Name == name })
	if i < 0 {
		return Set{}, false
	}
	return r.Sets[i], true
}

// String writes the table in nft's syntax (`nft -f` reads it): sets, then chains, one element and
// one rule per line, so that a golden file's diff names each pair that came or went.
func (r Ruleset) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", TableFamily, TableName)
	for _, s := range r.Sets {
		fmt.Fprintf(&b, "\tset %s {\n\t\ttype %s\n", s.Name, s.Type)
		if len(s.Elements) > 0 {
			b.WriteString("\t\telements = {\n")
			for i, e := range s.Elements {
				sep := ","
				if i == len(s.Elements)-1 {
					sep = ""
				}
				fmt.Fprintf(&b, "\t\t\t%s%s\n", e, sep)
			}
			b.WriteString("\t\t}\n")
		}
		b.WriteString("\t}\n")
	}
	for _, c := range r.Chains {
		fmt.Fprintf(&b, "\tchain %s {\n\t\t%s\n", c.Name, c.Header())
		for _, rule := range c.Rules {
			fmt.Fprintf(&b, "\t\t%s\n", rule)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// Validate names the first thing about r the kernel would refuse or the applier could not keep
// apart: sets and chains listed twice or out of order, an element not of its set's type or listed
// twice, a rule naming a set the table lacks or one of the wrong type, a rule listed twice in a
// chain (its text is its identity), a match or verdict of no known kind.
func (r Ruleset) Validate() error {
	if !slices.IsSortedFunc(r.Sets, func(a, b Set) int { return cmp.Compare(a.Name, b.Name) }) {
		return fmt.Errorf("capture: the sets are not sorted by name")
	}
	types := map[string]SetType{}
	for _, s := range r.Sets {
		if _, dup := types[s.Name]; dup {
			return fmt.Errorf("capture: set %s is listed twice", s.Name)
		}
		types[s.Name] = s.Type
		if err := s.validate(); err != nil {
			return err
		}
	}
	if !slices.IsSortedFunc(r.Chains, func(a, b Chain) int { return cmp.Compare(a.Name, b.Name) }) {
		return fmt.Errorf("capture: the chains are not sorted by name")
	}
	for i, c := range r.Chains {
		if i > 0 && r.Chains[i-1].Name == c.Name {
			return fmt.Errorf("capture: chain %s is listed twice", c.Name)
		}
		if err := c.validate(types); err != nil {
			return err
		}
	}
	return nil
}

func (s Set) validate() error {
	for i, e := range s.Elements {
		var fits bool
		switch s.Type {
		case TypePort:
			fits = !e.Addr.IsValid()
		case TypeIPv4Port:
			fits = e.Addr.Is4()
		case TypeIPv6Port:
			fits = e.Addr.Is6() && !e.Addr.Is4In6() && e.Addr.Zone() == ""
		case TypeIPv4:
			fits = e.Addr.Is4() && e.Port == 0
		case TypeIPv6:
			fits = e.Addr.Is6() && !e.Addr.Is4In6() && e.Addr.Zone() == "" && e.Port == 0
		default:
			return fmt.Errorf("capture: set %s has type %q, none of %q, %q, %q, %q, %q", s.Name, s.Type, TypePort, TypeIPv4Port, TypeIPv6Port, TypeIPv4, TypeIPv6)
		}
		switch {
		case !fits:
			return fmt.Errorf("capture: set %s (%s): element %q is not of its type", s.Name, s.Type, e)
		case e.Port == 0 && s.Type != TypeIPv4 && s.Type != TypeIPv6:
			return fmt.Errorf("capture: set %s: element %q has port 0", s.Name, e)
		case i > 0 && compareElements(s.Elements[i-1], e) >= 0:
			return fmt.Errorf("capture: set %s: elements %q and %q are not sorted and unique", s.Name, s.Elements[i-1], e)
		}
	}
	return nil
}

func (c Chain) validate(types map[string]SetType) error {
	seen := map[string]bool{}
	for _, r := range c.Rules {
		text := r.String()
		if seen[text] {
			return fmt.Errorf("capture: chain %s: rule %q is listed twice", c.Name, text)
		}
		seen[text] = true
		if err := r.validate(types); err != nil {
			return fmt.Errorf("capture: chain %s: rule %q: %w", c.Name, text, err)
		}
	}
	return nil
}

func (r Rule) validate(types map[string]SetType) error {
	m := r.Match
	want := map[MatchKind]SetType{MatchDport: TypePort, MatchDaddrDport: TypeIPv4Port, MatchDaddrSet: TypeIPv4}
	if m.IPv6 {
		want[MatchDaddrDport], want[MatchDaddrSet] = TypeIPv6Port, TypeIPv6
	}
	switch m.Kind {
	case MatchDaddr:
		if !m.Prefix.IsValid() || m.Prefix.Addr().Is4In6() || m.Prefix.Addr().Zone() != "" || m.Prefix != m.Prefix.Masked() {
			return fmt.Errorf("prefix %q is not a masked IPv4 or IPv6 prefix", m.Prefix)
		}
	case MatchOwner, MatchTCP, MatchMark:
	case MatchProtoDport:
		if (m.Proto != ProtoUDP && m.Proto != ProtoTCP) || m.Port == 0 {
			return fmt.Errorf("protocol %q and port %d are not udp or tcp and a port", m.Proto, m.Port)
		}
	case MatchDport, MatchDaddrDport, MatchDaddrSet:
		if typ, ok := types[m.Set]; !ok || typ != want[m.Kind] {
			return fmt.Errorf("it looks up set %q, which the table does not have as a set of %s", m.Set, want[m.Kind])
		}
		if typ, ok := types[m.Ports]; m.Ports != "" && (!ok || typ != TypePort) {
			return fmt.Errorf("it looks up set %q, which the table does not have as a set of %s", m.Ports, TypePort)
		}
	default:
		return fmt.Errorf("match kind %q is none the applier knows", m.Kind)
	}
	switch v := r.Verdict; {
	case v.Kind == VerdictReturn && v.Port == 0:
	case v.Kind == VerdictRedirect && v.Port != 0:
	default:
		return fmt.Errorf("verdict %q (port %d) is neither return nor a redirect to a port", v.Kind, v.Port)
	}
	return nil
}
