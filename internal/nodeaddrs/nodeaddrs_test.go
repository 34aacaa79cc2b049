// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeaddrs

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// TestFromNode: a Node's InternalIP and ExternalIP addresses, each once, sorted, IPv4-mapped ones
// as IPv4; host names and what is no address are left out; no Node, no address.
func TestFromNode(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "node-a"},
		{Type: corev1.NodeInternalIP, Address: "10.0.0.7"},
		{Type: corev1.NodeInternalIP, Address: "fd00::7"},
		{Type: corev1.NodeExternalIP, Address: "203.0.113.7"},
		{Type: corev1.NodeExternalIP, Address: "::ffff:10.0.0.7"},
		{Type: corev1.NodeInternalDNS, Address: "node-a.internal"},
		{Type: corev1.NodeInternalIP, Address: "not-an-address"},
		{Type: corev1.NodeInternalIP, Address: "fe80::1%eth0"},
	}}}
	if got, want := FromNode(node), addrs("10.0.0.7", "203.0.113.7", "fd00::7"); !slices.Equal(got, want) {
		t.Errorf("FromNode = %v, want %v", got, want)
	}
	if got := FromNode(nil); got != nil {
		t.Errorf("FromNode(nil) = %v, want none", got)
	}
}

// TestMerge: lists merged, each address once, sorted, IPv4-mapped as IPv4, invalid left out.
func TestMerge(t *testing.T) {
	got := Merge(addrs("192.0.2.7", "fd00::1"), nil, append(addrs("::ffff:192.0.2.7", "10.0.0.1"), netip.Addr{}))
	if want := addrs("10.0.0.1", "192.0.2.7", "fd00::1"); !slices.Equal(got, want) {
		t.Errorf("Merge = %v, want %v", got, want)
	}
}

// TestCounts: which interfaces' addresses are the node's own. Not a dummy's (kube-proxy's IPVS
// kube-ipvs0, kube-router's kube-dummy-if, NodeLocal DNSCache's nodelocaldns), not kube-ipvs0's
// whatever its kind, not loopback's; every other kind's (the node's NICs, the pod network's
// bridges, tunnels and gateways) are.
func TestCounts(t *testing.T) {
	for _, tt := range []struct {
		link Link
		want bool
	}{
		{Link{Name: "kube-ipvs0", Kind: "dummy"}, false},
		{Link{Name: "kube-dummy-if", Kind: "dummy"}, false},
		{Link{Name: "nodelocaldns", Kind: "dummy"}, false},
		{Link{Name: "kube-ipvs0", Kind: "ifb"}, false},
		{Link{Name: "lo", Loopback: true}, false},
		{Link{Name: "eth0"}, true},
		{Link{Name: "cni0", Kind: "bridge"}, true},
		{Link{Name: "flannel.1", Kind: "vxlan"}, true},
		{Link{Name: "cilium_host", Kind: "veth"}, true},
		{Link{Name: "tunl0", Kind: "ipip"}, true},
	} {
		if got := Counts(tt.link); got != tt.want {
			t.Errorf("Counts(%+v) = %v, want %v", tt.link, got, tt.want)
		}
	}
}
