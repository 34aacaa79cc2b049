// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package capture_test

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestRulesDoNotDependOnTheMesh: in every mode, the chain of two different meshes is the same
// rules: a service that comes or goes changes set elements only, never a rule.
func TestRulesDoNotDependOnTheMesh(t *testing.T) {
	a, b := xdstest.PureHTTP(), xdstest.Routes()
	for _, mode := range model.CaptureModes {
		t.Run(string(mode), func(t *testing.T) {
			ra := capture.Build(a, clientPod(t, a, mode), capture.Options{})
			rb := capture.Build(b, clientPod(t, b, mode), capture.Options{})
			if !reflect.DeepEqual(ra.Chains, rb.Chains) {
				t.Errorf("the chains differ between two meshes:\n%s\n%s", ra, rb)
			}
			if mode != model.CaptureScoped && reflect.DeepEqual(ra.Sets, rb.Sets) {
				t.Errorf("two meshes of different services have the same %s sets", mode)
			}
		})
	}
}

// TestExclusionsInEveryMode: every mode returns the proxy's own sockets (its mark), loopback,
// link-local, the never-redirected prefixes, the node's addresses (its sets), the proxy's user
// (when set) and the excluded ports before its first redirect.
func TestExclusionsInEveryMode(t *testing.T) {
	m := xdstest.MixedHTTPPrimary()
	uid := uint32(1337)
	for _, mode := range model.CaptureModes {
		t.Run(string(mode), func(t *testing.T) {
			pod := clientPod(t, m, mode)
			pod.ExcludeOutboundPorts = []int32{6379, 5432}
			never := []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("2001:db8::10/128")}
			r := capture.Build(m, pod, capture.Options{ProxyUID: &uid, Never: never})
			rules := r.Chains[0].Rules
			first := slices.IndexFunc(rules, func(r capture.Rule) bool { return r.Verdict.Kind == capture.VerdictRedirect })
			var returns []string
			for _, rule := range rules[:max(first, 0)] {
				returns = append(returns, rule.String())
			}
			want := []string{"meta mark 0x00000ae7 return", "ip daddr 127.0.0.0/8 return", "ip6 daddr ::1 return",
				"ip daddr 169.254.0.0/16 return", "ip6 daddr fe80::/10 return", "ip daddr 192.0.2.10 return", "ip6 daddr 2001:db8::10 return",
				"meta l4proto tcp ip daddr @node_addrs4 return", "meta l4proto tcp ip6 daddr @node_addrs6 return", "meta skuid 1337 return", "tcp dport @excluded_ports return"}
			if first < 0 || !slices.Equal(returns, want) {
				t.Errorf("before the first redirect (rule %d): %q, want %q", first, returns, want)
			}
			excluded, _ := r.Set(capture.SetExcludedPorts)
			if got := elements(excluded); got != "5432 6379 18001 18008" {
				t.Errorf("excluded ports %s, want 5432 6379 18001 18008", got)
			}
		})
	}
}

func elements(s capture.Set) string {
	out := make([]string, len(s.Elements))
	for i, e := range s.Elements {
		out[i] = e.String()
	}
	return strings.Join(out, " ")
}

// TestSurfaceHoldsTheDialSurface reads each service's dial surface row by row, by the notation of
// its addresses (http:// is port 80, https:// 443, <name>:<p> port p), and checks that the surface
// sets (surface4 or surface6, by the VIP's family) hold (VIP, port) exactly for the rows that are
// not refused.
func TestSurfaceHoldsTheDialSurface(t *testing.T) {
	for name, m := range xdstest.All() {
		t.Run(name, func(t *testing.T) {
			r := capture.Build(m, clientPod(t, m, model.CaptureSurface), capture.Options{})
			held := map[capture.Element]bool{}
			for _, name := range []string{capture.SetSurface4, capture.SetSurface6} {
				set, _ := r.Set(name)
				for _, e := range set.Elements {
					held[e] = true
				}
			}
			want := map[capture.Element]bool{}
			for _, s := range m.Services {
				vip := netip.MustParseAddr(s.VIP)
				for _, row := range resolve.DialSurface(s.PortSet(), m.Issuer) {
					port, dials := dialedPort(t, row.Address)
					if !dials {
						continue
					}
					// A refused row may share its port with one that is not (https:// of a 443
					// declared HTTP is refused, <name>:443 reaches it): the port is then held.
					if row.Outcome != resolve.Refused {
						want[capture.Element{Addr: vip, Port: port}] = true
					}
				}
			}
			if !reflect.DeepEqual(held, want) {
				t.Errorf("surface4 and surface6 hold %v\nthe dial surfaces' rows that are not refused dial %v", held, want)
			}
		})
	}
}

// dialedPort reads the port a surface row's address dials over TCP: none for a Host row,
// <name>:*, or a UDP row (<name>:<p>/udp: datagrams, which capture of TCP leaves alone).
func dialedPort(t testing.TB, address string) (uint16, bool) {
	name := resolve.NamePlaceholder
	switch {
	case strings.HasPrefix(address, resolve.HostRowPrefix), address == name+":"+resolve.AnyOtherPort,
		strings.HasSuffix(address, resolve.UDPSuffix):
		return 0, false
	case address == "http://"+name+"/":
		return uint16(resolve.HTTPPort), true
	case address == "https://"+name+"/":
		return uint16(resolve.HTTPSPort), true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(address, name+":"))
	if err != nil {
		t.Fatalf("surface row %q is of no shape this test knows", address)
	}
	return uint16(n), true
}

// TestBuildIsDeterministic: any order of the mesh's services builds the same ruleset.
func TestBuildIsDeterministic(t *testing.T) {
	m := xdstest.Fleet(40, 1).Mesh()
	pod := m.Pods[0]
	want := capture.Build(m, pod, capture.Options{}).String()
	rng := rand.New(rand.NewPCG(13, 3))
	for range 20 {
		shuffled := m
		shuffled.Services = slices.Clone(m.Services)
		rng.Shuffle(len(shuffled.Services), func(i, j int) {
			shuffled.Services[i], shuffled.Services[j] = shuffled.Services[j], shuffled.Services[i]
		})
		if got := capture.Build(shuffled, pod, capture.Options{}).String(); got != want {
			t.Fatalf("another order of the services builds another ruleset:\n%s", got)
		}
	}
}

// TestBuildSkipsServicesWithoutAnAddress: a service without a VIP, or with one that is not an
// address, adds nothing; an IPv4-mapped IPv6 VIP is its IPv4 address.
func TestBuildSkipsServicesWithoutAnAddress(t *testing.T) {
	m := xdstest.PureHTTP()
	m.Services = slices.Clone(m.Services)
	m.Services[0].VIP = ""
	m.Services[1].VIP = "not-an-ip"
	r := capture.Build(m, clientPod(t, m, model.CaptureSurface), capture.Options{})
	if s, _ := r.Set(capture.SetSurface4); len(s.Elements) != 0 {
		t.Errorf("surface4 holds %s, want nothing", elements(s))
	}
	m.Services[1].VIP = "::ffff:10.96.0.20"
	r = capture.Build(m, clientPod(t, m, model.CaptureSurface), capture.Options{})
	if s, _ := r.Set(capture.SetSurface4); elements(s) != "10.96.0.20 . 80 10.96.0.20 . 8080 10.96.0.20 . 18081" {
		t.Errorf("surface4 holds %s", elements(s))
	}
}

// TestValidate: every built ruleset is valid, and each broken one is refused with its reason (the
// negative controls of the gate the applier runs before it programs anything).
func TestValidate(t *testing.T) {
	m := xdstest.MixedHTTPPrimary()
	for _, mode := range model.CaptureModes {
		if err := capture.Build(m, clientPod(t, m, mode), capture.Options{}).Validate(); err != nil {
			t.Errorf("mode %s: %v", mode, err)
		}
	}
	good := func() capture.Ruleset {
		return capture.Build(m, clientPod(t, m, model.CaptureSurface), capture.Options{})
	}
	setIndex := func(r *capture.Ruleset, name string) int {
		return slices.IndexFunc(r.Sets, func(s capture.Set) bool { return s.Name == name })
	}
	surface4 := func(r *capture.Ruleset) *capture.Set { return &r.Sets[setIndex(r, capture.SetSurface4)] }
	broken := map[string]struct {
		change func(*capture.Ruleset)
		want   string
	}{
		"a rule naming a set the table lacks": {func(r *capture.Ruleset) {
			r.Sets = slices.Delete(r.Sets, setIndex(r, capture.SetSurface4), setIndex(r, capture.SetSurface4)+1)
		},
			`capture: chain output: rule "ip daddr . tcp dport @surface4 redirect to :18001": it looks up set "surface4", which the table does not have as a set of ipv4_addr . inet_service`},
		"a rule naming a set of another type": {func(r *capture.Ruleset) { r.Sets[setIndex(r, capture.SetNodeAddrs4)].Type = capture.TypeIPv6 },
			`capture: chain output: rule "meta l4proto tcp ip daddr @node_addrs4 return": it looks up set "node_addrs4", which the table does not have as a set of ipv4_addr`},
		"an IPv6 pair in the IPv4 set": {func(r *capture.Ruleset) {
			surface4(r).Elements = append(surface4(r).Elements, capture.Element{Addr: netip.MustParseAddr("fd00::1"), Port: 80})
		}, `capture: set surface4 (ipv4_addr . inet_service): element "fd00::1 . 80" is not of its type`},
		"an IPv6 address among the node's IPv4 ones": {func(r *capture.Ruleset) {
			r.Sets[setIndex(r, capture.SetNodeAddrs4)].Elements = []capture.Element{{Addr: netip.MustParseAddr("fd00::1")}}
		}, `capture: set node_addrs4 (ipv4_addr): element "fd00::1" is not of its type`},
		"elements out of order": {func(r *capture.Ruleset) { slices.Reverse(surface4(r).Elements) },
			`capture: set surface4: elements "10.96.0.20 . 18081" and "10.96.0.20 . 8080" are not sorted and unique`},
		"a rule twice": {func(r *capture.Ruleset) { r.Chains[0].Rules = append(r.Chains[0].Rules, r.Chains[0].Rules[0]) },
			`capture: chain output: rule "meta mark 0x00000ae7 return" is listed twice`},
		"a redirect without a port": {func(r *capture.Ruleset) {
			rules := r.Chains[0].Rules
			rules[slices.IndexFunc(rules, func(r capture.Rule) bool { return r.Verdict.Kind == capture.VerdictRedirect })].Verdict.Port = 0
		},
			`capture: chain output: rule "ip daddr . tcp dport @surface4 redirect to :0": verdict "redirect" (port 0) is neither return nor a redirect to a port`},
		"an unmasked prefix": {func(r *capture.Ruleset) { r.Chains[0].Rules[1].Match.Prefix = netip.MustParsePrefix("127.0.0.1/8") },
			`capture: chain output: rule "ip daddr 127.0.0.1/8 return": prefix "127.0.0.1/8" is not a masked IPv4 or IPv6 prefix`},
	}
	for name, b := range broken {
		t.Run("negative control: "+name, func(t *testing.T) {
			r := good()
			b.change(&r)
			err := r.Validate()
			if err == nil || err.Error() != b.want {
				t.Errorf("Validate() = %v\nwant %s", err, b.want)
			}
		})
	}
}

// TestNeverRedirected: the prefixes of Options.Never are returned in every mode, after loopback and
// link-local, masked, each once, sorted, IPv4-mapped ones as IPv4; what is no prefix is left out.
func TestNeverRedirected(t *testing.T) {
	m := xdstest.MixedHTTPPrimary()
	never := []netip.Prefix{
		netip.MustParsePrefix("203.0.113.77/24"),       // a --capture-never CIDR, unmasked
		netip.MustParsePrefix("192.0.2.10/32"),         // a --capture-never address
		netip.MustParsePrefix("::ffff:192.0.2.10/128"), // the same, IPv4-mapped
		netip.MustParsePrefix("169.254.0.0/16"),        // link-local again
		netip.MustParsePrefix("2001:db8::10/128"),
		{}, // invalid
	}
	want := []string{"ip daddr 127.0.0.0/8 return", "ip6 daddr ::1 return", "ip daddr 169.254.0.0/16 return", "ip6 daddr fe80::/10 return",
		"ip daddr 192.0.2.10 return", "ip daddr 203.0.113.0/24 return", "ip6 daddr 2001:db8::10 return"}
	for _, mode := range model.CaptureModes {
		r := capture.Build(m, clientPod(t, m, mode), capture.Options{Never: never})
		var got []string
		for _, rule := range r.Chains[0].Rules {
			if rule.Match.Kind == capture.MatchDaddr {
				got = append(got, rule.String())
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("mode %s returns %q, want %q", mode, got, want)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("mode %s: %v", mode, err)
		}
	}
}

// TestNodeAddresses: in every mode, Options.Node are the elements of node_addrs4 and
// node_addrs6, returned before any redirect: IPv4-mapped ones as IPv4, each once, sorted, without
// loopback and link-local (returned by their prefixes) and without any service's VIP, which stays
// captured (a VIP on the node's kube-ipvs0 is the service's, not the node's). Other node
// addresses change set elements only, never a rule.
func TestNodeAddresses(t *testing.T) {
	m := dualStack(xdstest.MixedHTTPPrimary()) // payments fd00:10:96::10, frontend 10.96.0.20
	node := []netip.Addr{
		netip.MustParseAddr("192.0.2.7"),
		netip.MustParseAddr("::ffff:192.0.2.7"), // the same, IPv4-mapped
		netip.MustParseAddr("10.244.1.1"),
		netip.MustParseAddr("2001:db8::7"),
		netip.MustParseAddr("127.0.0.1"),
		netip.MustParseAddr("fe80::1"),
		netip.MustParseAddr("10.96.0.20"),     // frontend's VIP, as kube-ipvs0 holds it
		netip.MustParseAddr("fd00:10:96::10"), // payments'
		{},
	}
	for _, mode := range model.CaptureModes {
		t.Run(string(mode), func(t *testing.T) {
			r := capture.Build(m, clientPod(t, m, mode), capture.Options{Node: node})
			if err := r.Validate(); err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string]string{capture.SetNodeAddrs4: "10.244.1.1 192.0.2.7", capture.SetNodeAddrs6: "2001:db8::7"} {
				if set, _ := r.Set(name); elements(set) != want {
					t.Errorf("set %s holds %q, want %q", name, elements(set), want)
				}
			}
			for dst, redirected := range map[string]bool{
				"192.0.2.7:18082": false, "[2001:db8::7]:18082": false, "10.244.1.1:80": false,
				"10.96.0.20:18081": true, "[fd00:10:96::10]:18082": true,
			} {
				d := r.Evaluate(capture.Connection{Proto: capture.ProtoTCP, Dst: netip.MustParseAddrPort(dst)})
				if d.Redirected() != redirected {
					t.Errorf("Evaluate(%s): redirected %v (rule %v), want %v", dst, d.Redirected(), d.Rule, redirected)
				}
			}
			other := capture.Build(m, clientPod(t, m, mode), capture.Options{Node: []netip.Addr{netip.MustParseAddr("198.51.100.1")}})
			if !reflect.DeepEqual(r.Chains, other.Chains) {
				t.Errorf("other node addresses changed the rules:\n%s\n%s", r, other)
			}
		})
	}
}

// TestAllModeCapturesOnlyTheMesh: mode all redirects the mesh's addresses (every VIP, every meshed
// pod address) on every port, and nothing else: no rule matches all TCP, so a dial to an address
// of no service leaves the pod directly.
func TestAllModeCapturesOnlyTheMesh(t *testing.T) {
	m := dualStack(xdstest.MixedHTTPPrimary())
	r := capture.Build(m, clientPod(t, m, model.CaptureAll), capture.Options{})
	var want4, want6 []string
	for _, s := range m.Services {
		addrs := []string{s.VIP}
		for _, p := range s.Ports {
			for _, pair := range p.Pairs {
				for _, member := range pair.Members {
					addrs = append(addrs, member.Address)
				}
			}
		}
		for _, a := range addrs {
			if netip.MustParseAddr(a).Is4() {
				want4 = append(want4, a)
			} else {
				want6 = append(want6, a)
			}
		}
	}
	for name, want := range map[string][]string{capture.SetMeshAddrs4: want4, capture.SetMeshAddrs6: want6} {
		set, _ := r.Set(name)
		slices.SortFunc(want, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
		if got := elements(set); got != strings.Join(slices.Compact(want), " ") {
			t.Errorf("set %s holds %q, want %q", name, got, strings.Join(slices.Compact(want), " "))
		}
	}
	if len(want6) == 0 {
		t.Fatal("the dual-stack mesh has no IPv6 address: the IPv6 set is not tested")
	}
	for _, rule := range r.Chains[0].Rules {
		if rule.Match.Kind == capture.MatchTCP {
			t.Errorf("rule %q redirects every TCP destination", rule)
		}
	}
}

// TestScopedGaps: a service with a TCP port :18082 does not reach is a gap for a scoped pod that
// may call it (no upstreams, or upstreams naming it), and for no one else.
func TestScopedGaps(t *testing.T) {
	m := xdstest.NoHTTPPort() // payments: TCP 5432 and 6379 (primary, the default TCP port)
	tests := map[string]struct {
		mode      model.CaptureMode
		upstreams []string
		want      []capture.ScopedGap
	}{
		"scoped, calls anything": {mode: model.CaptureScoped,
			want: []capture.ScopedGap{{Namespace: "shop", Name: "payments", Ports: []int32{5432}, Callers: []string{"web/frontend-0"}}}},
		"scoped, calls payments.shop": {mode: model.CaptureScoped, upstreams: []string{"payments.shop"},
			want: []capture.ScopedGap{{Namespace: "shop", Name: "payments", Ports: []int32{5432}, Callers: []string{"web/frontend-0"}}}},
		"scoped, calls payments of its own namespace (web), not shop's": {mode: model.CaptureScoped, upstreams: []string{"payments"}},
		"scoped, calls another service":                                 {mode: model.CaptureScoped, upstreams: []string{"catalog.shop"}},
		"surface":                                                       {mode: model.CaptureSurface},
		"all":                                                           {mode: model.CaptureAll},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pod := clientPod(t, m, tt.mode)
			pod.Upstreams = tt.upstreams
			if got := capture.ScopedGaps(m, []model.LocalPod{pod}); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ScopedGaps = %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("without an identity issuer no TCP port is reached, so there is no gap to tell", func(t *testing.T) {
		none := m
		none.Issuer = workloadidentity.NoIssuer
		if got := capture.ScopedGaps(none, []model.LocalPod{clientPod(t, none, model.CaptureScoped)}); len(got) != 0 {
			t.Errorf("ScopedGaps = %+v, want none", got)
		}
	})
	t.Run("the mixed service: 9000 is its only TCP port, reached by :18082", func(t *testing.T) {
		mixed := xdstest.MixedHTTPPrimary()
		if got := capture.ScopedGaps(mixed, []model.LocalPod{clientPod(t, mixed, model.CaptureScoped)}); len(got) != 0 {
			t.Errorf("ScopedGaps = %+v, want none", got)
		}
	})
}
