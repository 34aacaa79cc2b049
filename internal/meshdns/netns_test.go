// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns_test

import (
	"cmp"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/meshdns"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// Addresses of the test's namespaces: the pod's end of its link and the resolver's, which stands
// in for the cluster's DNS (192.0.2.0/24 is documentation space, routed nowhere but the link).
const (
	podAddr      = "192.0.2.2"
	resolverAddr = "192.0.2.53"
	resolverDNS  = resolverAddr + ":53"
	// The resolver's names: one A record, and a TXT record of about 3 KiB (12 strings of 255
	// bytes), too large for a UDP answer without EDNS0.
	externalName = "www.example.test."
	externalA    = "198.51.100.7"
	bigName      = "big.example.test."
	bigStrings   = 12
)

// testResolver is the stand-in for the cluster's DNS, on resolverDNS (UDP and TCP) in its own
// namespace: it answers externalName and bigName (truncating over UDP what does not fit, as a
// resolver does), and records what it was asked, and from where.
type testResolver struct {
	mu      sync.Mutex
	queries []resolverQuery
	udp     atomic.Int32
	tcp     atomic.Int32
}

type resolverQuery struct {
	msg     *dns.Msg
	from    string
	network string
	reply   *dns.Msg
}

func (r *testResolver) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	network := w.RemoteAddr().Network()
	if network == "udp" {
		r.udp.Add(1)
	} else {
		r.tcp.Add(1)
	}
	m := new(dns.Msg)
	m.SetReply(q)
	m.AuthenticatedData = true // a flag the mesh DNS must pass through untouched
	switch name := strings.ToLower(q.Question[0].Name); {
	case name == externalName && q.Question[0].Qtype == dns.TypeA:
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
			A: net.ParseIP(externalA)})
	case name == bigName && q.Question[0].Qtype == dns.TypeTXT:
		txt := make([]string, bigStrings)
		for i := range txt {
			txt[i] = strings.Repeat(string(rune('a'+i)), 255)
		}
		m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 30}, Txt: txt})
	case name == externalName || name == bigName:
	default:
		m.Rcode = dns.RcodeNameError
	}
	if o := q.IsEdns0(); o != nil {
		m.SetEdns0(o.UDPSize(), o.Do())
	}
	if network == "udp" {
		size := dns.MinMsgSize
		if o := q.IsEdns0(); o != nil {
			size = int(o.UDPSize())
		}
		m.Truncate(size)
	}
	r.mu.Lock()
	r.queries = append(r.queries, resolverQuery{msg: q.Copy(), from: w.RemoteAddr().String(), network: network, reply: m.Copy()})
	r.mu.Unlock()
	_ = w.WriteMsg(m)
}

func (r *testResolver) last() resolverQuery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queries[len(r.queries)-1]
}

func (r *testResolver) count() int { return int(r.udp.Load() + r.tcp.Load()) }

// startResolver serves r on resolverDNS in ns.
func startResolver(t testing.TB, ns *nstest.NS, r *testResolver) {
	t.Helper()
	var pc net.PacketConn
	var ln net.Listener
	var udpErr, tcpErr error
	if err := ns.Do(func() {
		pc, udpErr = net.ListenPacket("udp4", resolverDNS)
		ln, tcpErr = net.Listen("tcp4", resolverDNS)
	}); err != nil {
		t.Fatal(err)
	}
	if udpErr != nil || tcpErr != nil {
		t.Fatalf("the test resolver cannot listen on %s: udp %v, tcp %v", resolverDNS, udpErr, tcpErr)
	}
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: r}, {Listener: ln, Handler: r}} {
		go func() { _ = srv.ActivateAndServe() }()
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
}

// meshPod is a pod's namespace with its capture programmed (the client of the mixed scenario,
// surface mode, with mesh DNS), linked to a resolver's namespace, with its resolv.conf naming
// that resolver (ip netns exec mounts /etc/netns/<name>/resolv.conf over /etc/resolv.conf), the
// mesh DNS serving it from a Table of the scenario's services, and the proxy's capture listener.
type meshPod struct {
	ns       *nstest.NS
	resolver *testResolver
	table    *meshdns.Table
	server   *meshdns.Server
	mesh     model.Mesh
	outcomes *outcomes
}

// outcomes counts the server's outcomes (Config.Observe).
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
	// hook, if set, is called with each outcome before it is counted, on the server's goroutine.
	hook func(outcome string)
}

func (o *outcomes) observe(outcome string) {
	o.mu.Lock()
	hook := o.hook
	o.mu.Unlock()
	if hook != nil {
		hook(outcome)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[outcome]++
}

// setHook sets (nil: clears) the hook observe calls.
func (o *outcomes) setHook(hook func(outcome string)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hook = hook
}

func (o *outcomes) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}

func newMeshPod(t testing.TB, meshDNS bool) *meshPod {
	t.Helper()
	return newMeshPodWith(t, meshDNS, meshDNS, meshdns.Config{})
}

// newMeshPodWith is newMeshPod with the DNS rules as rules says, a server or none as serve says,
// with the cache size, rate and mark cfg says (the mark model.ProxySocketMark if zero; its table
// and observer are the pod's).
func newMeshPodWith(t testing.TB, rules, serve bool, cfg meshdns.Config) *meshPod {
	t.Helper()
	mesh := xdstest.MixedHTTPPrimary()
	pod := nstest.NewNamed(t, "dns")
	resolverNS := nstest.NewNamed(t, "dns")
	pod.Link(t, resolverNS, podAddr, resolverAddr)
	p := &meshPod{ns: pod, resolver: &testResolver{}, mesh: mesh, outcomes: &outcomes{n: map[string]int{}}}
	startResolver(t, resolverNS, p.resolver)

	dir := filepath.Join("/etc/netns", pod.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver "+resolverAddr+"\noptions attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	local := model.LocalPod{Namespace: "web", Name: "frontend-0", NetNS: pod.Path, Capture: model.CaptureSurface, MeshDNS: rules}
	applier := apply.New()
	if _, err := applier.Sync(pod.Path, capture.Build(mesh, local, capture.Options{})); err != nil {
		t.Fatalf("programming capture: %v", err)
	}
	pod.Serve(t)

	p.table = meshdns.NewTable(resolve.DefaultMeshDomain)
	for _, s := range mesh.Services {
		p.table.Set(s.Namespace, s.Name, []string{s.VIP})
	}
	if serve {
		cfg.Table, cfg.Mark = p.table, cmp.Or(cfg.Mark, model.ProxySocketMark)
		cfg.Observe = func(outcome string, _ time.Duration) { p.outcomes.observe(outcome) }
		server, err := meshdns.Serve(pod.Path, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(server.Close)
		p.server = server
	}
	return p
}

// getent runs getent in the pod's namespace (the system resolver, through the namespace's
// resolv.conf) and returns its output and exit code.
func (p *meshPod) getent(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", p.ns.Name, "getent"}, args...)...).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("getent %v: %v", args, err)
	}
	return string(out), 0
}

// exchange sends m from the pod's namespace to the resolver's address over network (udp, tcp).
func (p *meshPod) exchange(t *testing.T, network string, m *dns.Msg) *dns.Msg {
	t.Helper()
	var reply *dns.Msg
	var err error
	c := &dns.Client{Net: network, UDPSize: 0}
	if doErr := p.ns.Do(func() {
		var conn *dns.Conn
		if conn, err = c.Dial(resolverDNS); err != nil {
			return
		}
		defer conn.Close()
		reply, _, err = c.ExchangeWithConn(m, conn)
	}); doErr != nil {
		t.Fatal(doErr)
	}
	if err != nil {
		t.Fatalf("%s query %s from the pod: %v", network, m.Question[0].Name, err)
	}
	return reply
}

func payments(t testing.TB, m model.Mesh) model.Service {
	t.Helper()
	for _, s := range m.Services {
		if s.Name == "payments" {
			return s
		}
	}
	t.Fatal("the scenario has no payments service")
	return model.Service{}
}
