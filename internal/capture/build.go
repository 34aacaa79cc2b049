// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package capture

import (
	"cmp"
	"net/netip"
	"slices"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// Options are the node's facts capture needs beyond the model.
type Options struct {
	// ProxyUID, when set, is the user whose sockets are never redirected: the proxy's own, so
	// that a proxy opening its upstream connections inside the pod's netns is not captured by
	// itself. Nil by default, and it must stay nil for config/envoy's Envoy: it runs as user 0,
	// whose exclusion would exempt every container running as root, and it opens its upstream
	// connections in the node's network namespace, which this table never sees.
	ProxyUID *uint32
	// Node are the node's own addresses (the agent's internal/nodeaddrs: what its Node reports
	// and its own interfaces hold), never redirected, in any mode: a service on the node (the
	// kubelet, a node-local cache) is reached from the pod itself, never through the proxy. They
	// are the elements of sets node_addrs4 and node_addrs6, not rules, as they change while the
	// agent runs: a change moves elements only. A mesh VIP among them is left out and stays
	// captured: a VIP is the mesh's, never the node's own, even where a proxy of the node's puts
	// it on an interface (kube-proxy's IPVS mode holds every ClusterIP on kube-ipvs0), and leaving
	// it uncaptured would send that dial, in plaintext, around the mesh.
	Node []netip.Addr
	// Never are destinations never redirected, in any mode, beside loopback, link-local and the
	// node's addresses: the agent's --capture-never CIDRs, fixed for its life, so literal rules.
	// A redirected connection leaves the proxy from the pod's netns, so these could be reached
	// either way; leaving them out keeps the proxy out of paths no mesh service is on (a metadata
	// service, a range of the node network's).
	Never []netip.Prefix
}

// loopback are the destinations never redirected: the pod talking to itself (and to its proxy).
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// linkLocal are never redirected either: no mesh address is link-local, and a cloud's metadata
// service (169.254.169.254, fd00:ec2::254 aside) answers there, judging its caller by the hop.
var linkLocal = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}

// proxyPorts are the proxy's own ports, never redirected: capture's target and the inbound port.
var proxyPorts = []uint16{uint16(meshv1alpha1.ProxyCapturePort), uint16(meshv1alpha1.ProxyInboundPort)}

// meshPorts are the ports scoped mode redirects.
var meshPorts = []uint16{uint16(meshv1alpha1.MeshHTTPPort), uint16(meshv1alpha1.MeshTCPPort)}

// redirect is every capture rule's verdict: to the proxy's capture port.
var redirect = Verdict{Kind: VerdictRedirect, Port: uint16(meshv1alpha1.ProxyCapturePort)}

// dnsPort is DNS's port, whose queries (UDP and TCP, to any address) a pod with mesh DNS sends to
// dnsRedirect: the mesh DNS, on 127.0.0.1 or [::1] (the query's family) port 18054.
const dnsPort = 53

var dnsRedirect = Verdict{Kind: VerdictRedirect, Port: uint16(meshv1alpha1.MeshDNSPort)}

// Build is pod's table inet aether in the mesh m: the exclusions, then its mode's capture rules
// (an empty or unknown mode is the default, surface). In surface mode the sets hold, for every
// service of m whose VIP is an IP address, the VIP with each of resolve.DialPorts; a VIP two
// services share holds the union; without an identity issuer (m.Issuer) those leave the raw-TCP
// ports out, whose dials the surface refuses. The result is sorted and valid (Ruleset.Validate).
func Build(m model.Mesh, pod model.LocalPod, opts Options) Ruleset {
	excluded := Set{Name: SetExcludedPorts, Type: TypePort}
	for _, p := range proxyPorts {
		excluded.Elements = append(excluded.Elements, Element{Port: p})
	}
	for _, p := range pod.ExcludeOutboundPorts {
		if p >= 1 && p <= 65535 {
			excluded.Elements = append(excluded.Elements, Element{Port: uint16(p)})
		}
	}
	sets := []Set{excluded}

	// The proxy's own sockets first: it opens a pod's upstream connections inside the pod's netns.
	rules := []Rule{{Match: Match{Kind: MatchMark, Mark: model.ProxySocketMark}, Verdict: Verdict{Kind: VerdictReturn}}}
	// DNS next, before the returns of loopback, link-local and the node's addresses: a pod's
	// resolver may well be one of those (a node-local cache on 169.254.20.10, none at all:
	// 127.0.0.1). The mesh DNS forwards what is not a mesh name to the query's original
	// destination, from a socket carrying the mark above.
	if pod.MeshDNS {
		for _, proto := range []string{ProtoUDP, ProtoTCP} {
			rules = append(rules, Rule{Match: Match{Kind: MatchProtoDport, Proto: proto, Port: dnsPort}, Verdict: dnsRedirect})
		}
	}
	for _, prefix := range neverRedirected(opts.Never) {
		rules = append(rules, Rule{Match: Match{Kind: MatchDaddr, Prefix: prefix}, Verdict: Verdict{Kind: VerdictReturn}})
	}
	// The node's addresses, for TCP alone: every redirect after this one is of TCP (DNS's, of
	// UDP too, came first), so what this rule would return of another protocol leaves anyway.
	node4, node6 := nodeAddresses(m, opts.Node)
	sets = append(sets, node4, node6)
	rules = append(rules,
		Rule{Match: Match{Kind: MatchDaddrSet, Set: SetNodeAddrs4}, Verdict: Verdict{Kind: VerdictReturn}},
		Rule{Match: Match{Kind: MatchDaddrSet, Set: SetNodeAddrs6, IPv6: true}, Verdict: Verdict{Kind: VerdictReturn}})
	if opts.ProxyUID != nil {
		rules = append(rules, Rule{Match: Match{Kind: MatchOwner, UID: *opts.ProxyUID}, Verdict: Verdict{Kind: VerdictReturn}})
	}
	rules = append(rules, Rule{Match: Match{Kind: MatchDport, Set: SetExcludedPorts}, Verdict: Verdict{Kind: VerdictReturn}})

	switch pod.Capture {
	case model.CaptureScoped:
		mesh := Set{Name: SetMeshPorts, Type: TypePort}
		for _, p := range meshPorts {
			mesh.Elements = append(mesh.Elements, Element{Port: p})
		}
		v4, v6 := meshAddresses(m)
		sets = append(sets, mesh, v4, v6)
		rules = append(rules,
			Rule{Match: Match{Kind: MatchDaddrSet, Set: SetMeshAddrs4, Ports: SetMeshPorts}, Verdict: redirect},
			Rule{Match: Match{Kind: MatchDaddrSet, Set: SetMeshAddrs6, IPv6: true, Ports: SetMeshPorts}, Verdict: redirect})
	case model.CaptureAll:
		v4, v6 := meshAddresses(m)
		sets = append(sets, v4, v6)
		rules = append(rules,
			Rule{Match: Match{Kind: MatchDaddrSet, Set: SetMeshAddrs4}, Verdict: redirect},
			Rule{Match: Match{Kind: MatchDaddrSet, Set: SetMeshAddrs6, IPv6: true}, Verdict: redirect})
	default:
		v4, v6 := surface(m)
		sets = append(sets, v4, v6)
		rules = append(rules,
			Rule{Match: Match{Kind: MatchDaddrDport, Set: SetSurface4}, Verdict: redirect},
			Rule{Match: Match{Kind: MatchDaddrDport, Set: SetSurface6, IPv6: true}, Verdict: redirect})
	}

	for i := range sets {
		slices.SortFunc(sets[i].Elements, compareElements)
		sets[i].Elements = slices.Compact(sets[i].Elements)
	}
	slices.SortFunc(sets, func(a, b Set) int { return cmp.Compare(a.Name, b.Name) })
	return Ruleset{Sets: sets, Chains: []Chain{{Name: ChainOutput, Type: "nat", Hook: "output", Priority: OutputPriority, Rules: rules}}}
}

// neverRedirected are the prefixes every mode returns: loopback, link-local, then never's valid
// prefixes (masked, each once, in order), IPv4-mapped ones as IPv4.
func neverRedirected(never []netip.Prefix) []netip.Prefix {
	out := slices.Concat(loopback, linkLocal)
	var extra []netip.Prefix
	for _, p := range never {
		if !p.IsValid() || p.Addr().Zone() != "" {
			continue
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				continue // wider than the IPv4-mapped range: not a prefix of one family
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p = p.Masked(); !slices.Contains(out, p) && !slices.Contains(extra, p) {
			extra = append(extra, p)
		}
	}
	slices.SortFunc(extra, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	return append(out, extra...)
}

// nodeAddresses are the sets of the node's addresses, IPv4 and IPv6, unsorted: node's valid
// addresses (IPv4-mapped ones as IPv4) but loopback and link-local ones, which every mode returns
// already, and any service's VIP (Options.Node).
func nodeAddresses(m model.Mesh, node []netip.Addr) (v4, v6 Set) {
	v4, v6 = Set{Name: SetNodeAddrs4, Type: TypeIPv4}, Set{Name: SetNodeAddrs6, Type: TypeIPv6}
	if len(node) == 0 {
		return v4, v6
	}
	vips := make(map[netip.Addr]bool, len(m.Services))
	for _, s := range m.Services {
		if vip, err := netip.ParseAddr(s.VIP); err == nil {
			vips[vip.Unmap()] = true
		}
	}
	for _, addr := range node {
		addr = addr.Unmap()
		switch {
		case !addr.IsValid() || addr.Zone() != "" || addr.IsLoopback() || addr.IsLinkLocalUnicast() || vips[addr]:
		case addr.Is4():
			v4.Elements = append(v4.Elements, Element{Addr: addr})
		default:
			v6.Elements = append(v6.Elements, Element{Addr: addr})
		}
	}
	return v4, v6
}

// meshAddresses are the sets of the mesh's addresses, IPv4 and IPv6, unsorted: every service's VIP
// and every endpoint's address (a meshed pod's IP), whatever their ports.
func meshAddresses(m model.Mesh) (v4, v6 Set) {
	v4, v6 = Set{Name: SetMeshAddrs4, Type: TypeIPv4}, Set{Name: SetMeshAddrs6, Type: TypeIPv6}
	add := func(s string) {
		addr, err := netip.ParseAddr(s)
		if err != nil || addr.Zone() != "" {
			return
		}
		if addr = addr.Unmap(); addr.Is4() {
			v4.Elements = append(v4.Elements, Element{Addr: addr})
		} else {
			v6.Elements = append(v6.Elements, Element{Addr: addr})
		}
	}
	for _, s := range m.Services {
		add(s.VIP)
		for _, p := range s.Ports {
			for _, pair := range p.Pairs {
				for _, member := range pair.Members {
					add(member.Address)
				}
			}
		}
	}
	return v4, v6
}

// surface are the sets of every service's (VIP, dial port) pairs, IPv4 and IPv6, unsorted.
func surface(m model.Mesh) (v4, v6 Set) {
	v4, v6 = Set{Name: SetSurface4, Type: TypeIPv4Port}, Set{Name: SetSurface6, Type: TypeIPv6Port}
	for _, s := range m.Services {
		vip, err := netip.ParseAddr(s.VIP)
		if err != nil || vip.Zone() != "" {
			continue // no VIP (yet), or not an address: nothing to dial
		}
		vip = vip.Unmap()
		set := &v4
		if vip.Is6() {
			set = &v6
		}
		for _, port := range resolve.DialPorts(s.PortSet(), m.Issuer) {
			set.Elements = append(set.Elements, Element{Addr: vip, Port: uint16(port)})
		}
	}
	return v4, v6
}

// SameInputs reports whether Build reads the same of meshes a and b for a pod in mode
// (meshAddresses' VIPs and member addresses in scoped and all modes; surface's VIPs, port sets and
// issuer otherwise): for the same pod and options, it builds equal rulesets from both
// (TestSameInputsCoversBuild). An endpoint's health, weight or metadata is no part of it: the node
// agent keeps its pods' rulesets across the rebuilds such changes make, rather than building
// every service's sets again. It compares the fields themselves, not what Build makes of them,
// so that it is far cheaper than a Build.
func SameInputs(a, b model.Mesh, mode model.CaptureMode) bool {
	if len(a.Services) != len(b.Services) {
		return false
	}
	scoped := mode == model.CaptureScoped || mode == model.CaptureAll
	if !scoped && a.Issuer != b.Issuer {
		return false
	}
	for i := range a.Services {
		sa, sb := &a.Services[i], &b.Services[i]
		if sa.VIP != sb.VIP || len(sa.Ports) != len(sb.Ports) || !scoped && sa.Primary != sb.Primary {
			return false
		}
		for j := range sa.Ports {
			pa, pb := &sa.Ports[j], &sb.Ports[j]
			if scoped {
				if !sameAddresses(pa.Pairs, pb.Pairs) {
					return false
				}
			} else if pa.Number != pb.Number || pa.Protocol != pb.Protocol || appProtocol(pa) != appProtocol(pb) {
				return false
			}
		}
	}
	return true
}

// sameAddresses reports whether the pairs' members have the same addresses, in the same order.
func sameAddresses(a, b []model.Pair) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		ma, mb := a[i].Members, b[i].Members
		if len(ma) != len(mb) {
			return false
		}
		for j := range ma {
			if ma[j].Address != mb[j].Address { // indexed: a Member is too large to copy
				return false
			}
		}
	}
	return true
}

// appProtocol is the port's app protocol as Service.PortSet reads it: its first member's.
func appProtocol(p *model.Port) meshv1alpha1.AppProtocol {
	if len(p.Pairs) > 0 && len(p.Pairs[0].Members) > 0 {
		return p.Pairs[0].Members[0].AppProtocol
	}
	return ""
}
