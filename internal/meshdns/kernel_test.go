// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns_test

import (
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/meshdns"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// TestMeshNameResolvesAndIsCaptured: in a pod's namespace with its capture programmed, the system
// resolver (getent, through the pod's resolv.conf, which names the stand-in cluster DNS) gets a
// mesh name's VIP from the mesh DNS, and a dial to that VIP is captured like any VIP dial.
func TestMeshNameResolvesAndIsCaptured(t *testing.T) {
	p := newMeshPod(t, true)
	svc := payments(t, p.mesh)
	name := svc.Name + "." + svc.Namespace + "." + resolve.DefaultMeshDomain
	out, code := p.getent(t, "hosts", name)
	if code != 0 || !strings.HasPrefix(out, svc.VIP+" ") {
		t.Fatalf("getent hosts %s in the pod = %q (exit %d); want its VIP %s", name, out, code, svc.VIP)
	}
	if n := p.resolver.count(); n != 0 {
		t.Errorf("the cluster's resolver was asked %d queries for a mesh name; want none", n)
	}
	if got := p.outcomes.get("mesh"); got == 0 {
		t.Errorf("the server counted no mesh answer")
	}
	// The name's VIP is then dialled like any VIP: the capture takes it to the proxy.
	dst := netip.AddrPortFrom(netip.MustParseAddr(strings.Fields(out)[0]), 8080)
	if got, want := p.ns.Dial(dst.String()), nstest.Captured+" "+dst.String(); got != want {
		t.Errorf("dialling %s (%s:8080) from the pod = %q; want %q", name, dst.Addr(), got, want)
	}
}

// TestOtherNamesForwarded: a name outside the mesh domain reaches the pod's own resolver, from the
// pod's address (the forwarded query leaves the pod's namespace, marked, and is not captured
// again), and its answer comes back.
func TestOtherNamesForwarded(t *testing.T) {
	p := newMeshPod(t, true)
	out, code := p.getent(t, "hosts", strings.TrimSuffix(externalName, "."))
	if code != 0 || !strings.HasPrefix(out, externalA+" ") {
		t.Fatalf("getent hosts %s in the pod = %q (exit %d); want %s", externalName, out, code, externalA)
	}
	if n := p.resolver.count(); n == 0 {
		t.Fatal("the cluster's resolver was never asked")
	}
	if from := p.resolver.last().from; !strings.HasPrefix(from, podAddr+":") {
		t.Errorf("the forwarded query came from %s; want the pod's address %s", from, podAddr)
	}
}

// TestNXDomainAtOnce: a name under the mesh domain that is no service's is NXDOMAIN, answered by
// the mesh DNS itself (authoritative, with the domain's SOA), never forwarded; getent says "not
// found" (exit 2).
func TestNXDomainAtOnce(t *testing.T) {
	p := newMeshPod(t, true)
	name := "nosuch.shop." + resolve.DefaultMeshDomain + "."
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	reply := p.exchange(t, "udp", q)
	if reply.Rcode != dns.RcodeNameError || !reply.Authoritative || len(reply.Ns) != 1 || reply.Ns[0].Header().Ttl != 5 {
		t.Fatalf("%s: %v; want an authoritative NXDOMAIN with the mesh domain's SOA, TTL 5", name, reply)
	}
	if _, code := p.getent(t, "hosts", strings.TrimSuffix(name, ".")); code != 2 {
		t.Errorf("getent hosts %s exit %d; want 2 (not found)", name, code)
	}
	if n := p.resolver.count(); n != 0 {
		t.Errorf("the cluster's resolver was asked %d queries for a mesh-domain name; want none", n)
	}
	if got := p.outcomes.get("nxdomain"); got < 2 {
		t.Errorf("nxdomain outcomes = %d; want one for the query and more for getent's", got)
	}
}

// TestTruncationAndTCPFallback: a 3 KiB answer comes back truncated over UDP (TC set, as the
// resolver sent it), then whole over TCP, both through the mesh DNS.
func TestTruncationAndTCPFallback(t *testing.T) {
	p := newMeshPod(t, true)
	q := new(dns.Msg)
	q.SetQuestion(bigName, dns.TypeTXT)
	udp := p.exchange(t, "udp", q)
	if !udp.Truncated {
		t.Fatalf("the UDP answer for %s is not truncated: %d records", bigName, len(udp.Answer))
	}
	tcp := p.exchange(t, "tcp", q)
	if tcp.Truncated || len(tcp.Answer) != 1 || len(tcp.Answer[0].(*dns.TXT).Txt) != bigStrings {
		t.Fatalf("the TCP answer for %s: truncated %v, %d records; want the whole TXT record", bigName, tcp.Truncated, len(tcp.Answer))
	}
	if packed, _ := tcp.Pack(); len(packed) < 3072 {
		t.Errorf("the TCP answer is %d bytes; want at least 3 KiB", len(packed))
	}
	if u, c := p.resolver.udp.Load(), p.resolver.tcp.Load(); u != 1 || c != 1 {
		t.Errorf("the resolver saw %d UDP and %d TCP queries; want one of each", u, c)
	}
}

// TestForwardedUnchanged: a query with EDNS0 (a buffer size, DO) and CD reaches the resolver as
// the pod sent it (ID, flags, OPT), its answer comes back as the resolver sent it (flags, TTL), and
// a repeat is served from the cache, its TTL no longer than the resolver's.
func TestForwardedUnchanged(t *testing.T) {
	p := newMeshPod(t, true)
	q := new(dns.Msg)
	q.SetQuestion(externalName, dns.TypeA)
	q.CheckingDisabled = true
	q.SetEdns0(1232, true)
	reply := p.exchange(t, "udp", q)
	seen := p.resolver.last()
	if seen.msg.String() != q.String() {
		t.Errorf("the resolver saw\n%s\nthe pod sent\n%s", seen.msg, q)
	}
	if reply.String() != seen.reply.String() {
		t.Errorf("the pod got\n%s\nthe resolver sent\n%s", reply, seen.reply)
	}
	again := p.exchange(t, "udp", q)
	if n := p.resolver.count(); n != 1 {
		t.Errorf("the resolver was asked %d times; want once (the repeat from the cache)", n)
	}
	if len(again.Answer) != 1 || again.Answer[0].(*dns.A).A.String() != externalA || again.Answer[0].Header().Ttl > 30 || again.Id != q.Id {
		t.Errorf("the cached answer: %v", again)
	}
}

// TestOptedOutPodUntouched is the negative control: a pod without mesh DNS (its annotation, or a
// dnsPolicy None) has no DNS rule, and its queries, a mesh name's too, go to its resolver.
func TestOptedOutPodUntouched(t *testing.T) {
	p := newMeshPod(t, false)
	if rules := p.ns.Nft(t, "list", "chain", "inet", "aether", "output"); strings.Contains(rules, "dport 53") {
		t.Fatalf("a pod without mesh DNS has a DNS rule:\n%s", rules)
	}
	svc := payments(t, p.mesh)
	name := svc.Name + "." + svc.Namespace + "." + resolve.DefaultMeshDomain
	if out, code := p.getent(t, "hosts", name); code != 2 {
		t.Errorf("getent hosts %s in a pod without mesh DNS = %q (exit %d); want not found, from its resolver", name, out, code)
	}
	if n := p.resolver.count(); n == 0 {
		t.Error("the pod's resolver was not asked")
	}
}

// TestUnmarkedForwardIsCapturedAgain is the negative control of the mark: a server whose forwarded
// queries carry another mark than the one capture returns has them redirected back to itself, and
// no other name resolves.
func TestUnmarkedForwardIsCapturedAgain(t *testing.T) {
	p := newMeshPodWith(t, true, true, meshdns.Config{Mark: 0x1, UpstreamTimeout: 200 * time.Millisecond})
	if out, code := p.getent(t, "hosts", strings.TrimSuffix(externalName, ".")); code == 0 {
		t.Fatalf("getent hosts %s resolved (%q) though the forwarded query is not marked", externalName, out)
	}
	if n := p.resolver.count(); n != 0 {
		t.Errorf("the resolver was asked %d queries; want none", n)
	}
}

// TestNoServerRefusedAtOnce: while no server listens (the agent restarting), a pod's query is
// refused at once (the kernel's port unreachable, through the redirect), not left to time out.
func TestNoServerRefusedAtOnce(t *testing.T) {
	p := newMeshPodWith(t, true, false, meshdns.Config{})
	q := new(dns.Msg)
	q.SetQuestion(externalName, dns.TypeA)
	var err error
	if doErr := p.ns.Do(func() {
		c := &dns.Client{Timeout: time.Minute}
		_, _, err = c.Exchange(q, resolverDNS)
	}); doErr != nil {
		t.Fatal(doErr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a query with no server behind the redirect: %v; want connection refused", err)
	}
	if n := p.resolver.count(); n != 0 {
		t.Errorf("the resolver was asked %d queries; want none (the redirect holds while no server runs)", n)
	}
}

// TestCountedBeforeTheReply: the server counts a query (Config.Observe) before it writes the
// reply, over UDP and over TCP. While the observer holds the count, nothing has reached the pod's
// socket; once it returns, the reply comes. So whoever has the reply reads the query counted: a
// scraper of the agent's aether_agent_dns_queries_total, or a test that reads it after a lookup.
// (Counted after the write, the reply is in the pod's socket while the observer holds: this test
// fails.)
func TestCountedBeforeTheReply(t *testing.T) {
	p := newMeshPod(t, true)
	svc := payments(t, p.mesh)
	name := dns.Fqdn(svc.Name + "." + svc.Namespace + "." + resolve.DefaultMeshDomain)
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			observed := make(chan string, 1)
			release := make(chan struct{})
			p.outcomes.setHook(func(outcome string) {
				observed <- outcome
				<-release
			})
			t.Cleanup(func() { p.outcomes.setHook(nil) })

			var conn *dns.Conn
			var err error
			c := &dns.Client{Net: network}
			if doErr := p.ns.Do(func() { conn, err = c.Dial(resolverDNS) }); doErr != nil {
				t.Fatal(doErr)
			}
			if err != nil {
				t.Fatalf("dialling %s over %s from the pod: %v", resolverDNS, network, err)
			}
			defer conn.Close()
			q := new(dns.Msg)
			q.SetQuestion(name, dns.TypeA)
			if err := conn.WriteMsg(q); err != nil {
				t.Fatal(err)
			}
			select {
			case outcome := <-observed:
				if outcome != meshdns.OutcomeMesh {
					t.Errorf("outcome %q; want %q", outcome, meshdns.OutcomeMesh)
				}
			case <-time.After(10 * time.Second):
				close(release)
				t.Fatalf("the server did not count the %s query for %s in 10 s", network, name)
			}
			// The observer holds: the reply must not be in the pod's socket yet.
			if n := unread(t, conn); n != 0 {
				t.Errorf("%d bytes of the reply reached the pod before the query was counted; want none until the observer returns", n)
			}
			close(release)
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			reply, err := conn.ReadMsg()
			if err != nil {
				t.Fatalf("no reply once the query was counted: %v", err)
			}
			if a, ok := first(reply.Answer).(*dns.A); !ok || len(reply.Answer) != 1 || a.A.String() != svc.VIP {
				t.Errorf("reply %v; want %s's VIP %s", reply.Answer, name, svc.VIP)
			}
		})
	}
}

// unread is how many bytes wait in conn's socket, unread (SIOCINQ: for UDP the size of the
// next datagram, for TCP every byte).
func unread(t *testing.T, conn *dns.Conn) int {
	t.Helper()
	raw, err := conn.Conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ioErr error
	if err := raw.Control(func(fd uintptr) { n, ioErr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		t.Fatal(err)
	}
	if ioErr != nil {
		t.Fatalf("ioctl(SIOCINQ): %v", ioErr)
	}
	return n
}

// first is rrs' first record, nil if none.
func first(rrs []dns.RR) dns.RR {
	if len(rrs) == 0 {
		return nil
	}
	return rrs[0]
}
