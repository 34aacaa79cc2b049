// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeaddrs

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// FromNode are the addresses node reports as its own (status.addresses): its InternalIP and
// ExternalIP entries, those that are IP addresses. Its host names say nothing here; an
// ExternalIP that no interface holds (a cloud's NAT in front of the node) still leads to the
// node, so it counts.
func FromNode(node *corev1.Node) []netip.Addr {
	if node == nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if addr, err := netip.ParseAddr(a.Address); err == nil && addr.Zone() == "" {
			out = append(out, addr.Unmap())
		}
	}
	return Merge(out)
}

// Merge is the addresses of lists, each once, sorted (IPv4 first), IPv4-mapped ones as IPv4.
func Merge(lists ...[]netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, list := range lists {
		for _, addr := range list {
			if addr.IsValid() {
				out = append(out, addr.Unmap())
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// Link is an interface as Counts reads it.
type Link struct {
	// Name is its name (kube-ipvs0), Kind its rtnetlink kind (IFLA_INFO_KIND: dummy, veth,
	// bridge, vxlan; empty for a physical device).
	Name, Kind string
	// Loopback is true for the loopback interface (IFF_LOOPBACK).
	Loopback bool
}

// IPVSInterface is the interface kube-proxy's IPVS mode puts every ClusterIP, external IP and
// load balancer address on: a dummy interface, named so.
const IPVSInterface = "kube-ipvs0"

// Counts reports whether the addresses of interface l are the node's own. They are unless it is:
//
//   - of kind dummy: a dummy interface carries no traffic, it only makes addresses local, and
//     what puts addresses there does so for services, not for the node: kube-proxy's IPVS mode
//     (kube-ipvs0, every ClusterIP), kube-router (kube-dummy-if, the same), NodeLocal DNSCache
//     (nodelocaldns, its listen address and the cluster DNS's ClusterIP);
//   - named kube-ipvs0, whatever kind it reports;
//   - loopback: its 127.0.0.0/8 and ::1 are never redirected anyway, and any other address there
//     is an anycast or service address a routing daemon or load balancer put on the node.
//
// Leaving an interface out only means capture may take a dial to it, and capture takes nothing
// but the mesh's addresses: the safe side. An address the node really owns on such an interface
// (its node IP on a dummy, in some routed designs) is its Node's InternalIP, which counts.
func Counts(l Link) bool {
	return l.Kind != "dummy" && l.Name != IPVSInterface && !l.Loopback
}
