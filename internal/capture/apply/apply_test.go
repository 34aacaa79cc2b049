// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply_test

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The mesh of these tests: xdstest's mixed scenario, where payments (VIP 10.96.0.10) serves HTTP
// 8080, h2 9090 and TCP 9000 (its default TCP port); frontend (10.96.0.20) serves HTTP 8080; the
// client is web/frontend-0. nonMesh is an address no service has.
const (
	paymentsVIP  = "10.96.0.10"
	frontendVIP  = "10.96.0.20"
	nonMesh      = "10.1.0.1"
	excludedPort = 5432
)

// clientPod is the scenarios' client, web/frontend-0, in mode, at ns's path.
func clientPod(t testing.TB, m model.Mesh, mode model.CaptureMode, ns *nstest.NS) model.LocalPod {
	t.Helper()
	i := slices.IndexFunc(m.Pods, func(p model.LocalPod) bool { return p.Namespace == "web" && p.Name == "frontend-0" })
	if i < 0 {
		t.Fatal("the mesh has no local pod web/frontend-0")
	}
	pod := m.Pods[i]
	pod.Capture, pod.NetNS = mode, ns.Path
	return pod
}

// sync programs want into ns with a and fails the test on an error.
func sync(t testing.TB, a *apply.Applier, ns *nstest.NS, want capture.Ruleset) apply.Report {
	t.Helper()
	rep, err := a.Sync(ns.Path, want)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return rep
}

// TestModes: from a pod's namespace, in each mode, a dial to the VIP's :18082 and :9000, to a
// non-mesh address, to loopback and to an excluded port does what the mode says; a captured one
// reaches 127.0.0.1:18001, whose SO_ORIGINAL_DST is the address dialled.
func TestModes(t *testing.T) {
	m := xdstest.MixedHTTPPrimary()
	capturedTo := func(address string) string { return nstest.Captured + " " + address }
	directTo := func(address string) string { return nstest.Direct + " " + address }
	tests := map[model.CaptureMode]map[string]string{
		model.CaptureScoped: {
			paymentsVIP + ":18082": capturedTo(paymentsVIP + ":18082"),
			paymentsVIP + ":9000":  directTo(paymentsVIP + ":9000"),
			nonMesh + ":9000":      directTo(nonMesh + ":9000"),
			nonMesh + ":18082":     directTo(nonMesh + ":18082"), // scoped takes the mesh ports of the mesh's addresses only
		},
		model.CaptureSurface: {
			paymentsVIP + ":18082": capturedTo(paymentsVIP + ":18082"),
			paymentsVIP + ":9000":  capturedTo(paymentsVIP + ":9000"),
			frontendVIP + ":9000":  directTo(frontendVIP + ":9000"), // not a port of frontend
			frontendVIP + ":18082": directTo(frontendVIP + ":18082"),
			nonMesh + ":9000":      directTo(nonMesh + ":9000"),
		},
		model.CaptureAll: {
			paymentsVIP + ":18082": capturedTo(paymentsVIP + ":18082"),
			paymentsVIP + ":9000":  capturedTo(paymentsVIP + ":9000"),
			frontendVIP + ":9000":  capturedTo(frontendVIP + ":9000"), // every port of a mesh address
			nonMesh + ":9000":      directTo(nonMesh + ":9000"),       // not the mesh's: as if there were no mesh
			"127.0.0.1:9000":       directTo("127.0.0.1:9000"),
		},
	}
	for mode, dials := range tests {
		t.Run(string(mode), func(t *testing.T) {
			ns := nstest.New(t, paymentsVIP, frontendVIP, nonMesh)
			ns.Serve(t, 9000, 18082, excludedPort)
			pod := clientPod(t, m, mode, ns)
			pod.ExcludeOutboundPorts = []int32{excludedPort}
			rs := capture.Build(m, pod, capture.Options{})
			rep := sync(t, apply.New(), ns, rs)
			if rep.Result != apply.Applied || rep.Batches != 1 || !rep.Read {
				t.Errorf("first sync: %+v, want one batch, applied, after reading the (absent) table", rep)
			}
			// The excluded port is never captured, whatever the mode.
			dials[paymentsVIP+":5432"] = directTo(paymentsVIP + ":5432")
			for address, want := range dials {
				if got := ns.Dial(address); got != want {
					t.Errorf("dial %s: %q, want %q", address, got, want)
				}
				// What the kernel did is what Ruleset.Evaluate says the table does.
				d := rs.Evaluate(capture.Connection{Proto: capture.ProtoTCP, Dst: netip.MustParseAddrPort(address)})
				if evaluated := map[bool]string{true: capturedTo(address), false: directTo(address)}[d.Redirected()]; evaluated != want {
					t.Errorf("Evaluate(%s) = %q (rule %v), want %q as the kernel does", address, evaluated, d.Rule, want)
				}
			}
		})
	}
}

// TestNeverProxiedFromTheNode: in every mode, from a pod's namespace joined to a "node" namespace
// by a veth pair, a dial to a cloud metadata address (link-local), to the node's own address (as
// the agent passes it in Options.Node), to a --capture-never address (Options.Never) and to an
// address of no service leaves the pod directly: the node's server sees the pod's address as its
// peer, on a mesh port too. A dial of a mesh VIP is still captured, though the node holds it and
// it is among the node's addresses given (as kube-proxy's IPVS mode holds every ClusterIP on the
// node); and the same dial from a socket carrying the proxy's mark (as the proxy's upstream
// connections opened in the pod's namespace do) is not captured again.
func TestNeverProxiedFromTheNode(t *testing.T) {
	const (
		podAddr  = "10.244.1.5"
		nodeAddr = "10.244.1.1" // the node's end of the pod's link, and one of its addresses
		metadata = "169.254.169.254"
		hostAddr = "192.0.2.1" // another address of the node's network, in --capture-never
		outside  = "198.51.100.7"
	)
	m := xdstest.MixedHTTPPrimary()
	seenFrom := func(peer string) string { return "peer " + peer }
	for _, mode := range model.CaptureModes {
		t.Run(string(mode), func(t *testing.T) {
			pod := nstest.New(t)
			node := nstest.New(t, metadata, hostAddr, outside, paymentsVIP)
			pod.Link(t, node, podAddr, nodeAddr)
			pod.Serve(t) // the capture listener only
			for _, port := range []string{"80", "18082"} {
				node.Listen(t, "0.0.0.0:"+port, func(c *net.TCPConn) string {
					return "peer " + c.RemoteAddr().(*net.TCPAddr).IP.String()
				})
			}
			nodeAddrs := []netip.Addr{netip.MustParseAddr(nodeAddr), netip.MustParseAddr(paymentsVIP)}
			never := []netip.Prefix{netip.MustParsePrefix(hostAddr + "/32")}
			rs := capture.Build(m, clientPod(t, m, mode, pod), capture.Options{Node: nodeAddrs, Never: never})
			sync(t, apply.New(), pod, rs)
			// Ruleset.Evaluate says what the kernel did with each dial.
			evaluate := func(address string, mark uint32, redirected bool) {
				t.Helper()
				d := rs.Evaluate(capture.Connection{Proto: capture.ProtoTCP, Dst: netip.MustParseAddrPort(address), Mark: mark})
				if d.Redirected() != redirected {
					t.Errorf("Evaluate(%s, mark %#x): redirected %v (rule %v), but the kernel's answer was redirected %v", address, mark, d.Redirected(), d.Rule, redirected)
				}
			}
			for _, dst := range []string{metadata, nodeAddr, hostAddr, outside} {
				for _, port := range []string{"80", "18082"} {
					address := net.JoinHostPort(dst, port)
					if got := pod.Dial(address); got != seenFrom(podAddr) {
						t.Errorf("dial %s: %q, want %q (not redirected: the pod's own connection)", address, got, seenFrom(podAddr))
					}
					evaluate(address, 0, false)
				}
			}
			vip := net.JoinHostPort(paymentsVIP, "18082")
			if got, want := pod.Dial(vip), nstest.Captured+" "+vip; got != want {
				t.Errorf("dial %s: %q, want %q", vip, got, want)
			}
			evaluate(vip, 0, true)
			if got := pod.DialMarked(vip, model.ProxySocketMark); got != seenFrom(podAddr) {
				t.Errorf("dial %s from a socket with the proxy's mark: %q, want %q (never captured again)", vip, got, seenFrom(podAddr))
			}
			evaluate(vip, model.ProxySocketMark, false)
		})
	}
}
