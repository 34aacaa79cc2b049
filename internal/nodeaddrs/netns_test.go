// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeaddrs_test

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/nodeaddrs"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The addresses of these tests: a pod's and the node's ends of the pod's link; payments' VIP in
// xdstest's mixed mesh; a ClusterIP of no mesh service; an anycast address on the node's loopback.
const (
	podAddr        = "10.244.1.5"
	nodeAddr       = "10.244.1.1"
	paymentsVIP    = "10.96.0.10"
	otherClusterIP = "10.96.0.99"
	anycast        = "192.0.2.53"
)

// TestIPVSInterfaceVIPStaysCaptured: on a node whose kube-proxy runs in IPVS mode, kube-ipvs0
// holds every ClusterIP, mesh VIPs among them. The node's addresses as the agent reads them are
// its own interfaces' (the pod's link here), not kube-ipvs0's nor its loopback's; programmed into
// a pod's table, node_addrs4 holds the node's address alone, a dial from the pod to payments' VIP
// is captured, and one to the node's address leaves the pod directly.
func TestIPVSInterfaceVIPStaysCaptured(t *testing.T) {
	node, pod := nstest.New(t), nstest.New(t)
	pod.Link(t, node, podAddr, nodeAddr)
	node.IPVSInterface(t, paymentsVIP, otherClusterIP)
	node.IP(t, "addr", "add", anycast+"/32", "dev", "lo")
	pod.Serve(t) // the capture listener
	node.Listen(t, "0.0.0.0:80", func(c *net.TCPConn) string { return "peer " + c.RemoteAddr().(*net.TCPAddr).IP.String() })

	read, err := nodeaddrs.Read(node.Path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []netip.Addr{netip.MustParseAddr(nodeAddr)}; !slices.Equal(read, want) {
		t.Fatalf("Read = %v, want %v (not kube-ipvs0's %s and %s, not loopback's %s)", read, want, paymentsVIP, otherClusterIP, anycast)
	}
	m := xdstest.MixedHTTPPrimary()
	i := slices.IndexFunc(m.Pods, func(p model.LocalPod) bool { return p.Namespace == "web" && p.Name == "frontend-0" })
	local := m.Pods[i]
	local.NetNS = pod.Path
	if _, err := apply.New().Sync(pod.Path, capture.Build(m, local, capture.Options{Node: read})); err != nil {
		t.Fatal(err)
	}
	if got := pod.SetElements(t, capture.SetNodeAddrs4); !slices.Equal(got, []string{nodeAddr}) {
		t.Errorf("nft lists node_addrs4 = %v, want [%s]", got, nodeAddr)
	}
	vip := paymentsVIP + ":18082"
	if got, want := pod.Dial(vip), nstest.Captured+" "+vip; got != want {
		t.Errorf("dial %s (payments' VIP, on the node's kube-ipvs0): %q, want %q", vip, got, want)
	}
	if got, want := pod.Dial(nodeAddr+":80"), "peer "+podAddr; got != want {
		t.Errorf("dial %s:80 (the node's address): %q, want %q (not redirected)", nodeAddr, got, want)
	}
}

// TestWatcherFollowsAddresses: a Watcher started on a node's namespace reads its interfaces'
// addresses, and follows an address added to an interface of the node's (onChange is called,
// and Addrs has it) and removed, never counting one added to kube-ipvs0 meanwhile.
func TestWatcherFollowsAddresses(t *testing.T) {
	node := nstest.New(t)
	node.IPVSInterface(t)
	node.IP(t, "link", "add", "aebr0", "type", "bridge")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	changes := make(chan struct{}, 1)
	w := nodeaddrs.NewWatcher(node.Path, testr.New(t))
	if err := w.Start(ctx, func() {
		select {
		case changes <- struct{}{}:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	if got := w.Addrs(); len(got) != 0 {
		t.Fatalf("Addrs = %v before any address, want none", got)
	}
	// until waits for onChange calls until Addrs is want.
	until := func(step string, want []netip.Addr) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for !slices.Equal(w.Addrs(), want) {
			select {
			case <-changes:
			case <-timeout:
				t.Fatalf("%s: Addrs = %v after 10 s, want %v", step, w.Addrs(), want)
			}
		}
	}
	node.IP(t, "addr", "add", "10.96.0.30/32", "dev", nodeaddrs.IPVSInterface)
	node.IP(t, "addr", "add", "10.0.5.2/24", "dev", "aebr0")
	node.IP(t, "addr", "add", "fd00:5::2/64", "dev", "aebr0", "nodad")
	until("added", []netip.Addr{netip.MustParseAddr("10.0.5.2"), netip.MustParseAddr("fd00:5::2")})
	node.IP(t, "addr", "del", "10.0.5.2/24", "dev", "aebr0")
	until("removed", []netip.Addr{netip.MustParseAddr("fd00:5::2")})
}
