// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// fabric is a scenario's cluster network, built of namespaces the test creates, so that no packet
// leaves them (nothing is sent from the host's namespace, where the addresses are private ones
// another network may hold):
//
//   - a router namespace stands for every node's host namespace and the network between them, as
//     a routed CNI (Calico's, the ptp plugin) wires a node: a veth to each pod, a /32 (/128) route
//     per pod address to its veth, forwarding on. The nodes' Envoys run in it, since an Envoy
//     connects from its own namespace where nothing else says where (an inbound listener's
//     application cluster dials the pod's address);
//   - a namespace per pod of the scenario, on any node: its address on its end of the veth
//     (eth0), its default route to the router (169.254.1.1, the router's address on every link,
//     and fe80::1 when the mesh uses IPv6), and its application (app_test.go) on every port it
//     declares, in that port's protocol;
//   - the router takes every packet for a mesh VIP (a local route) and rejects it, as kube-proxy
//     does for a Service with no endpoints (the generated Service is selectorless; capture takes
//     what the mesh serves before it leaves the pod): a dial that capture leaves alone, or that
//     the proxy passes through to the original destination, is refused, as the design says.
//
// One router for all the nodes is a simplification with no effect on what is walked: what a node
// dials from its own namespace is its own pods, and every hop between pods leaves from the client
// pod's namespace (DESIGN section 8, "Trust").
type fabric struct {
	router *nstest.NS
	// pods are the pods' namespaces by xds.PodKey; keys by address (either family).
	pods map[string]*nstest.NS
	keys map[string]string
	ipv6 bool
	seq  int
	// fortio are the pods whose applications are fortio's servers (fabricOptions).
	fortio []string
}

// Addresses of the router: its address on every link to a pod (the pods' gateway), and its own
// address of each family (the source of what a node's Envoy dials itself).
const (
	gateway4, gateway6     = "169.254.1.1", "fe80::1"
	routerOwn4, routerOwn6 = "169.254.1.1/32", "fd00:ffff::1/128"
	kubeProxyTable         = "aether-kube-proxy"
)

// newFabric wires every pod of s and starts its application; the applications of the pods named
// in failingHealth (by xds.PodKey) answer their health path 503.
func newFabric(t testing.TB, s xdstest.Scenario, opts fabricOptions) *fabric {
	t.Helper()
	f := &fabric{router: nstest.NewNamed(t, "aefab"), pods: map[string]*nstest.NS{}, keys: map[string]string{}, fortio: opts.fortio}
	for _, w := range s.Workloads {
		if netip.MustParseAddr(w.Address).Is6() {
			f.ipv6 = true
		}
	}
	// The kernel limits the ICMP errors it sends (one a second per destination, after a burst):
	// the walk refuses hundreds of dials from one pod at once, each of which must be told.
	f.sysctl(t, f.router, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1", "net.ipv6.conf.default.accept_dad=0",
		"net.ipv4.icmp_ratelimit=0", "net.ipv6.icmp.ratelimit=0", "net.ipv4.icmp_msgs_per_sec=100000")
	command(t, "ip", "-n", f.router.Name, "addr", "add", routerOwn4, "dev", "lo")
	if f.ipv6 {
		command(t, "ip", "-n", f.router.Name, "addr", "add", routerOwn6, "dev", "lo", "nodad")
	}
	f.rejectVIPs(t, s)
	for _, w := range s.Workloads {
		f.addPod(t, w, slices.Contains(opts.failingHealth, xds.PodKey(w.Namespace, w.Name)))
	}
	return f
}

// fabricOptions change the applications newFabric starts.
type fabricOptions struct {
	// failingHealth are the pods (xds.PodKey) whose applications answer their health path 503.
	failingHealth []string
	// fortio are the pods (xds.PodKey) whose applications are fortio's servers (appSpec.Fortio).
	fortio []string
}

// addPod gives workload w a namespace linked to the router, and its application (failing its
// health path when failHealth is set).
func (f *fabric) addPod(t testing.TB, w xdstest.Workload, failHealth bool) {
	t.Helper()
	key := xds.PodKey(w.Namespace, w.Name)
	ns := nstest.NewNamed(t, "aelive")
	f.pods[key] = ns
	if f.ipv6 {
		f.sysctl(t, ns, "net.ipv6.conf.default.accept_dad=0")
	}
	f.seq++
	link := fmt.Sprintf("aef%d", f.seq)
	command(t, "ip", "link", "add", link, "netns", f.router.Name, "type", "veth", "peer", "name", "eth0", "netns", ns.Name)
	command(t, "ip", "-n", ns.Name, "link", "set", "eth0", "up")
	command(t, "ip", "-n", f.router.Name, "link", "set", link, "up")
	command(t, "ip", "-n", ns.Name, "route", "add", gateway4, "dev", "eth0", "scope", "link")
	command(t, "ip", "-n", ns.Name, "route", "add", "default", "via", gateway4, "dev", "eth0")
	if f.ipv6 {
		command(t, "ip", "-n", f.router.Name, "addr", "add", gateway6+"/64", "dev", link, "nodad")
		command(t, "ip", "-n", ns.Name, "-6", "route", "add", "default", "via", gateway6, "dev", "eth0")
	}
	for _, a := range f.addresses(w.Address) {
		prefix, extra := "/32", []string{}
		if netip.MustParseAddr(a).Is6() {
			prefix, extra = "/128", []string{"nodad"}
		}
		command(t, append([]string{"ip", "-n", ns.Name, "addr", "add", a + prefix, "dev", "eth0"}, extra...)...)
		command(t, "ip", "-n", f.router.Name, "route", "add", a+prefix, "dev", link)
		f.keys[a] = key
	}
	spec := appSpec{Host: w.Address, FailHealth: failHealth, Fortio: slices.Contains(f.fortio, key)}
	for _, p := range w.Endpoint().Spec.Ports {
		switch {
		case p.Protocol == meshv1alpha1.ProtocolHTTP2:
			spec.H2C = append(spec.H2C, int(p.Port))
		case p.Protocol.IsHTTP():
			spec.HTTP = append(spec.HTTP, int(p.Port))
		default:
			spec.Hello = append(spec.Hello, int(p.Port))
		}
	}
	startApp(t, ns, spec)
}

// addresses are a pod's addresses: its own, and, in a mesh that uses IPv6, one of the other family
// beside it (a dual-stack cluster gives every pod both; the scenario names the one its
// MeshEndpoint carries). The scenarios' own pattern pairs them: fd00:10:244:1::10 and 10.244.1.10.
func (f *fabric) addresses(address string) []string {
	out := []string{address}
	ip := netip.MustParseAddr(address)
	switch {
	case !f.ipv6:
	case ip.Is4():
		b := ip.As4()
		out = append(out, fmt.Sprintf("fd00:%d:%d:%d::%d", b[0], b[1], b[2], b[3]))
	default:
		var b [4]int
		if n, err := fmt.Sscanf(ip.StringExpanded(), "fd00:%04d:%04d:%04d:0000:0000:0000:%04d", &b[0], &b[1], &b[2], &b[3]); err != nil || n != 4 {
			panic(fmt.Sprintf("IPv6 pod address %s is not of the scenarios' pattern fd00:a:b:c::d", address))
		}
		out = append(out, fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3]))
	}
	return out
}

// rejectVIPs makes the router refuse every packet for a VIP of s, with what kube-proxy answers
// for a Service with no endpoints (an ICMP port unreachable: the client's connect fails
// ECONNREFUSED). The VIPs are routed to the router itself (no interface holds them, as none on a
// node does), where its input hook rejects them.
func (f *fabric) rejectVIPs(t testing.TB, s xdstest.Scenario) {
	t.Helper()
	var v4, v6 []string
	for _, svc := range s.Services {
		prefix := "/32"
		if netip.MustParseAddr(svc.VIP).Is6() {
			v6, prefix = append(v6, svc.VIP), "/128"
		} else {
			v4 = append(v4, svc.VIP)
		}
		command(t, "ip", "-n", f.router.Name, "route", "add", "local", svc.VIP+prefix, "dev", "lo")
	}
	rules := []string{fmt.Sprintf("table inet %s {", kubeProxyTable),
		"  chain input {", "    type filter hook input priority filter; policy accept;"}
	if len(v4) > 0 {
		rules = append(rules, fmt.Sprintf("    ip daddr { %s } reject with icmpx type port-unreachable", strings.Join(slices.Sorted(slices.Values(v4)), ", ")))
	}
	if len(v6) > 0 {
		rules = append(rules, fmt.Sprintf("    ip6 daddr { %s } reject with icmpx type port-unreachable", strings.Join(slices.Sorted(slices.Values(v6)), ", ")))
	}
	rules = append(rules, "  }", "}")
	cmd := exec.Command("ip", "netns", "exec", f.router.Name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(strings.Join(rules, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s\n%s", f.router.Name, err, out, strings.Join(rules, "\n"))
	}
}

// sysctl sets settings in ns.
func (f *fabric) sysctl(t testing.TB, ns *nstest.NS, settings ...string) {
	t.Helper()
	command(t, append([]string{"ip", "netns", "exec", ns.Name, "sysctl", "-q", "-w"}, settings...)...)
}

// pod is the key of the pod an address belongs to ("" for none).
func (f *fabric) pod(address string) string { return f.keys[address] }

func command(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}
