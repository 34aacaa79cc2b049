// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	nft "github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

const podNetns = "/var/run/netns/cni-pod"

// ruleset is a pod's capture table in the shape internal/capture builds: the proxy's mark and
// loopback returned, then each family's (VIP, port) pairs redirected to 18001.
func ruleset(v4, v6 []nft.Element) nft.Ruleset {
	redirect := nft.Verdict{Kind: nft.VerdictRedirect, Port: 18001}
	back := nft.Verdict{Kind: nft.VerdictReturn}
	return nft.Ruleset{
		Sets: []nft.Set{
			{Name: nft.SetSurface4, Type: nft.TypeIPv4Port, Elements: v4},
			{Name: nft.SetSurface6, Type: nft.TypeIPv6Port, Elements: v6},
		},
		Chains: []nft.Chain{{Name: nft.ChainOutput, Type: "nat", Hook: "output", Priority: nft.OutputPriority, Rules: []nft.Rule{
			{Match: nft.Match{Kind: nft.MatchMark, Mark: 0xae7}, Verdict: back},
			{Match: nft.Match{Kind: nft.MatchDaddr, Prefix: netip.MustParsePrefix("127.0.0.0/8")}, Verdict: back},
			{Match: nft.Match{Kind: nft.MatchDaddr, Prefix: netip.MustParsePrefix("::1/128")}, Verdict: back},
			{Match: nft.Match{Kind: nft.MatchDaddrDport, Set: nft.SetSurface4}, Verdict: redirect},
			{Match: nft.Match{Kind: nft.MatchDaddrDport, Set: nft.SetSurface6, IPv6: true}, Verdict: redirect},
		}}},
	}
}

var (
	vip4 = nft.Element{Addr: netip.MustParseAddr("10.96.0.10"), Port: 8080}
	vip6 = nft.Element{Addr: netip.MustParseAddr("fd00:10:96::10"), Port: 8080}
)

// inNetns binds l's address in netns.
func inNetns(netns string) listenerOpt {
	return func(l *listenerv3.Listener) { l.Address.GetSocketAddress().NetworkNamespaceFilepath = netns }
}

// also adds an additional address ip:port in netns.
func also(ip string, port uint32, netns string) listenerOpt {
	return func(l *listenerv3.Listener) {
		a := socket(ip, port)
		a.GetSocketAddress().NetworkNamespaceFilepath = netns
		l.AdditionalAddresses = append(l.AdditionalAddresses, &listenerv3.AdditionalAddress{Address: a})
	}
}

// podCapture is a pod's capture listener, 127.0.0.1:18001 in podNetns, with opts.
func podCapture(opts ...listenerOpt) *listenerv3.Listener {
	return listener("capture", "127.0.0.1", 18001,
		append([]listenerOpt{inNetns(podNetns), originalDst, defaultChain(passthroughChain)}, opts...)...)
}

// The reachability check: every family the ruleset redirects must land on a listener bound in the
// pod's namespace. A capture listener on 127.0.0.1 alone, while IPv6 is redirected to [::1], fails;
// each way of not redirecting IPv6, or of binding [::1] in that namespace, passes.
func TestCaptureRedirectsReachAListener(t *testing.T) {
	for name, tc := range map[string]struct {
		listener *listenerv3.Listener
		rules    nft.Ruleset
		refused  string // the target the error names; "" for none
		targets  int
	}{
		"IPv4 only bound, IPv6 redirected": {listener: podCapture(), rules: ruleset([]nft.Element{vip4}, []nft.Element{vip6}),
			refused: "[::1]:18001", targets: 2},
		"[::1] beside it": {listener: podCapture(also("::1", 18001, podNetns)), rules: ruleset([]nft.Element{vip4}, []nft.Element{vip6}),
			targets: 2},
		"[::] beside it": {listener: podCapture(also("::", 18001, podNetns)), rules: ruleset([]nft.Element{vip4}, []nft.Element{vip6}),
			targets: 2},
		"[::1] bound in Envoy's own namespace": {listener: podCapture(also("::1", 18001, "")),
			rules: ruleset([]nft.Element{vip4}, []nft.Element{vip6}), refused: "[::1]:18001", targets: 2},
		"[::1] on another port": {listener: podCapture(also("::1", 18002, podNetns)),
			rules: ruleset([]nft.Element{vip4}, []nft.Element{vip6}), refused: "[::1]:18001", targets: 2},
		"an empty IPv6 set redirects nothing": {listener: podCapture(), rules: ruleset([]nft.Element{vip4}, nil), targets: 1},
		"nothing bound at all": {listener: listener("elsewhere", "127.0.0.1", 18001, defaultChain(passthroughChain)),
			rules: ruleset([]nft.Element{vip4}, nil), refused: "127.0.0.1:18001", targets: 1},
		"a listener Envoy rejects binds nothing": {listener: podCapture(also("::1", 18001, podNetns), func(l *listenerv3.Listener) {
			l.DefaultFilterChain = nil
		}), rules: ruleset([]nft.Element{vip4}, nil), refused: "127.0.0.1:18001", targets: 1},
	} {
		t.Run(name, func(t *testing.T) {
			sim := world([]*listenerv3.Listener{tc.listener})
			redirects, err := sim.CaptureRedirects(podNetns, tc.rules)
			if len(redirects) != tc.targets {
				t.Errorf("%d redirects %v; want %d", len(redirects), redirects, tc.targets)
			}
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("unexpected failure: %v", err)
			case tc.refused != "" && (!errors.Is(err, xdssim.ErrNotListening) || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("error %v; want ErrNotListening naming %s", err, tc.refused)
			case tc.refused != "":
				t.Logf("caught: %v", err)
			}
		})
	}
}

// An earlier return of a whole family leaves its later redirects with nothing to redirect.
func TestCaptureRedirectsAfterAReturnOfTheFamily(t *testing.T) {
	rules := ruleset([]nft.Element{vip4}, []nft.Element{vip6})
	out := &rules.Chains[0]
	out.Rules = append([]nft.Rule{{Match: nft.Match{Kind: nft.MatchDaddr, Prefix: netip.MustParsePrefix("::/0")},
		Verdict: nft.Verdict{Kind: nft.VerdictReturn}}}, out.Rules...)
	redirects, err := world([]*listenerv3.Listener{podCapture()}).CaptureRedirects(podNetns, rules)
	if err != nil || len(redirects) != 1 || redirects[0].Target.Addr().Is6() {
		t.Fatalf("redirects %v, error %v; want the IPv4 one alone", redirects, err)
	}
}

// Capture follows one connection: a redirected one to the listener bound at its family's
// loopback, a returned or unmatched one nowhere (""), a redirect to nothing refused.
func TestCaptureFollowsAConnection(t *testing.T) {
	rules := ruleset([]nft.Element{vip4}, []nft.Element{vip6})
	dual := world([]*listenerv3.Listener{podCapture(also("::1", 18001, podNetns))})
	for _, tc := range []struct {
		dst, want string
	}{
		{"10.96.0.10:8080", "capture"},
		{"[fd00:10:96::10]:8080", "capture"},
		{"10.96.0.10:9999", ""},
		{"[::1]:8080", ""},
	} {
		got, err := dual.Capture(podNetns, rules, netip.MustParseAddrPort(tc.dst))
		if err != nil || got != tc.want {
			t.Errorf("connection to %s: listener %q, error %v; want %q", tc.dst, got, err, tc.want)
		}
	}
	ipv4Only := world([]*listenerv3.Listener{podCapture()})
	_, err := ipv4Only.Capture(podNetns, rules, netip.MustParseAddrPort("[fd00:10:96::10]:8080"))
	if !errors.Is(err, xdssim.ErrNotListening) {
		t.Fatalf("an IPv6 connection with only 127.0.0.1 bound: error %v; want ErrNotListening", err)
	}
	t.Logf("caught: %v", err)
}

// ListenerAt finds the socket as the kernel does: exact before wildcard, a wildcard of the
// connection's family, a :: with ipv4_compat for IPv4 too, every additional address, and only in
// its own namespace.
func TestListenerAt(t *testing.T) {
	const other = "/var/run/netns/other"
	compat := func(l *listenerv3.Listener) { l.Address.GetSocketAddress().Ipv4Compat = true }
	sim := world([]*listenerv3.Listener{
		listener("any4", "0.0.0.0", 18008, inNetns(podNetns), defaultChain(passthroughChain), also("::", 18008, podNetns)),
		listener("exact", "10.244.1.10", 18008, inNetns(podNetns), defaultChain(passthroughChain)),
		listener("dual", "::", 18008, inNetns(other), compat, defaultChain(passthroughChain)),
		listener("v6only", "::", 9000, inNetns(other), defaultChain(passthroughChain)),
	})
	for _, tc := range []struct {
		netns, addr, want string
	}{
		{podNetns, "10.244.1.10:18008", "exact"},
		{podNetns, "10.244.1.11:18008", "any4"},
		{podNetns, "[fd00::10]:18008", "any4"}, // its additional [::]
		{other, "10.244.1.10:18008", "dual"},
		{other, "[fd00::10]:18008", "dual"},
		{other, "10.0.0.1:9000", ""}, // IPV6_V6ONLY: no IPv4
		{other, "[fd00::10]:9000", "v6only"},
		{"/var/run/netns/third", "10.244.1.10:18008", ""},
	} {
		got, ok := sim.ListenerAt(tc.netns, netip.MustParseAddrPort(tc.addr))
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s in %s: %q (%t); want %q", tc.addr, tc.netns, got, ok, tc.want)
		}
	}
}

// A connection that reaches a listener by one of its additional addresses is matched on that
// address, and a use_original_dst hand-off finds a listener by an additional address too.
func TestAdditionalAddressesInAWalk(t *testing.T) {
	direct := listener("direct", "127.0.0.1", 18001, also("::1", 18001, ""), defaultChain(passthroughChain))
	out := world([]*listenerv3.Listener{direct}).Dial(xdssim.Conn{Listener: "direct", DstIP: "::1", DstPort: 18001})
	if want := netip.MustParseAddrPort("[::1]:18001"); out.Destination != want {
		t.Errorf("destination %s; want %s (%s)", out.Destination, want, out)
	}
	redirected := world([]*listenerv3.Listener{direct}).Dial(xdssim.Conn{Listener: "direct", DstIP: "fd00::10", DstPort: 80})
	if want := netip.MustParseAddrPort("[::1]:18001"); redirected.Destination != want {
		t.Errorf("an IPv6 connection redirected to the listener: destination %s; want its IPv6 address %s", redirected.Destination, want)
	}
	handing := capture(defaultChain(passthroughChain))
	bound := listener("bound", "0.0.0.0", 8080, also("::", 8080, ""), defaultChain(passthroughChain))
	out = world([]*listenerv3.Listener{handing, bound}).Dial(tcpTo("fd00::10", 8080))
	if !errors.Is(out.Err, xdssim.ErrHandoff) || !strings.Contains(out.Err.Error(), `"bound"`) {
		t.Errorf("hand-off of [fd00::10]:8080: %s; want ErrHandoff to listener bound (its additional [::]:8080)", out)
	}
}

// Envoy's address checks: ipv4_compat only on :: (for an additional address too, Envoy checks
// the listener's own address), one socket type for every address.
func TestCheckAddresses(t *testing.T) {
	compat := func(i int) listenerOpt {
		return func(l *listenerv3.Listener) {
			if i < 0 {
				l.Address.GetSocketAddress().Ipv4Compat = true
				return
			}
			l.AdditionalAddresses[i].Address.GetSocketAddress().Ipv4Compat = true
		}
	}
	udp := func(l *listenerv3.Listener) {
		l.AdditionalAddresses[0].Address.GetSocketAddress().Protocol = corev3.SocketAddress_UDP
	}
	for name, tc := range map[string]struct {
		l      *listenerv3.Listener
		reject bool
	}{
		":: with ipv4_compat":               {l: listener("l", "::", 1, compat(-1), defaultChain(passthroughChain))},
		"0.0.0.0 with ipv4_compat":          {l: listener("l", "0.0.0.0", 1, compat(-1), defaultChain(passthroughChain)), reject: true},
		"0.0.0.0 and [::] v6only":           {l: listener("l", "0.0.0.0", 1, also("::", 1, ""), defaultChain(passthroughChain))},
		"0.0.0.0 and [::] with ipv4_compat": {l: listener("l", "0.0.0.0", 1, also("::", 1, ""), compat(0), defaultChain(passthroughChain)), reject: true},
		"an additional address of UDP":      {l: listener("l", "0.0.0.0", 1, also("::", 1, ""), udp, defaultChain(passthroughChain)), reject: true},
		"127.0.0.1 and [::1], both TCP":     {l: listener("l", "127.0.0.1", 1, also("::1", 1, ""), defaultChain(passthroughChain))},
	} {
		t.Run(name, func(t *testing.T) {
			err := xdssim.Check(tc.l)
			if (err != nil) != tc.reject {
				t.Fatalf("Check: %v; want rejected %t", err, tc.reject)
			}
		})
	}
}

// The upstream socket's source family: the default selector binds the source address of the
// endpoint's family, from source_address and extra_source_addresses; with none of that family
// the connection fails (ErrSourceFamily). Without a bind config the kernel picks.
func TestUpstreamSourceFamily(t *testing.T) {
	source := func(ips ...string) *corev3.BindConfig {
		if len(ips) == 0 {
			return nil
		}
		b := &corev3.BindConfig{SourceAddress: &corev3.SocketAddress{Address: ips[0], PortSpecifier: &corev3.SocketAddress_PortValue{}}}
		for _, ip := range ips[1:] {
			b.ExtraSourceAddresses = append(b.ExtraSourceAddresses, &corev3.ExtraSourceAddress{
				Address: &corev3.SocketAddress{Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{}}})
		}
		return b
	}
	for name, tc := range map[string]struct {
		endpoint string
		bind     *corev3.BindConfig
		fails    bool
	}{
		"IPv6 endpoint, 0.0.0.0 alone":    {endpoint: "fd00::10", bind: source("0.0.0.0"), fails: true},
		"IPv6 endpoint, 0.0.0.0 and [::]": {endpoint: "fd00::10", bind: source("0.0.0.0", "::")},
		"IPv4 endpoint, [::] alone":       {endpoint: "10.0.0.10", bind: source("::"), fails: true},
		"IPv4 endpoint, 0.0.0.0 alone":    {endpoint: "10.0.0.10", bind: source("0.0.0.0")},
		"IPv6 endpoint, no bind config":   {endpoint: "fd00::10"},
	} {
		t.Run(name, func(t *testing.T) {
			cluster := staticCluster("c", tc.endpoint, 18008)
			cluster.UpstreamBindConfig = tc.bind
			res := base()
			res.Clusters = append(res.Clusters, cluster)
			res.Listeners = []*listenerv3.Listener{listener("l", "127.0.0.1", 18001, defaultChain(chain("to_c", tcpProxy("c"))))}
			out := xdssim.New(res).Dial(xdssim.Conn{Listener: "l", DstIP: "127.0.0.1", DstPort: 18001})
			if got := errors.Is(out.Err, xdssim.ErrSourceFamily); got != tc.fails {
				t.Fatalf("%s; want the source family to fail: %t", out, tc.fails)
			}
			if tc.fails {
				t.Logf("caught: %v", out.Err)
			}
		})
	}
}
