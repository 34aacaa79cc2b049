// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns_test

import (
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/meshdns"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// BenchmarkQueries measures, in one run, from a captured pod's namespace over UDP: a forwarded
// query through the mesh DNS (its cache off, so every query reaches the resolver, and no rate), the same query
// straight to the resolver (from a socket carrying the mesh's mark, which capture leaves alone),
// and a mesh name answered by the mesh DNS. Each iteration sends one of each; the metrics are
// each kind's queries per second (one client, one at a time) and 99th percentile latency.
func BenchmarkQueries(b *testing.B) {
	p := newMeshPodWith(b, true, true, meshdns.Config{CacheSize: -1, Rate: 1e9, Burst: 1 << 30})
	svc := payments(b, p.mesh)
	kinds := []struct {
		name string
		mark uint32
		msg  *dns.Msg
	}{
		{"forwarded", 0, question(externalName)},
		{"direct", model.ProxySocketMark, question(externalName)},
		{"mesh", 0, question(svc.Name + "." + svc.Namespace + "." + resolve.DefaultMeshDomain + ".")},
	}
	conns := make([]*dns.Conn, len(kinds))
	for i, k := range kinds {
		conns[i] = dial(b, p.ns, k.mark)
	}
	took := make([][]time.Duration, len(kinds))
	b.ResetTimer()
	for b.Loop() {
		for i, k := range kinds {
			start := time.Now()
			if err := conns[i].WriteMsg(k.msg); err != nil {
				b.Fatal(err)
			}
			reply, err := conns[i].ReadMsg()
			if err != nil || len(reply.Answer) != 1 {
				b.Fatalf("%s: %v %v", k.name, reply, err)
			}
			took[i] = append(took[i], time.Since(start))
		}
	}
	b.StopTimer()
	for i, k := range kinds {
		var total time.Duration
		for _, d := range took[i] {
			total += d
		}
		slices.Sort(took[i])
		p99 := took[i][(len(took[i])*99)/100]
		b.ReportMetric(float64(p99.Microseconds()), k.name+"-p99-µs")
		b.ReportMetric(float64(len(took[i]))/total.Seconds(), k.name+"-q/s")
	}
}

func question(name string) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	return q
}

// dial is a UDP client connection from ns to the resolver's address, its socket marked if mark.
func dial(b *testing.B, ns *nstest.NS, mark uint32) *dns.Conn {
	b.Helper()
	dialer := net.Dialer{Control: func(_, _ string, raw syscall.RawConn) error {
		if mark == 0 {
			return nil
		}
		var optErr error
		if err := raw.Control(func(fd uintptr) { optErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark)) }); err != nil {
			return err
		}
		return optErr
	}}
	var c net.Conn
	var err error
	if doErr := ns.Do(func() { c, err = dialer.Dial("udp", resolverDNS) }); doErr != nil || err != nil {
		b.Fatal(doErr, err)
	}
	b.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	return &dns.Conn{Conn: c}
}

// BenchmarkServeStart is the mesh DNS's share of an agent's restart: the time to serve again in
// the namespaces of pods whose capture is already programmed (and still redirects their DNS).
// Per namespace: enter it, open the conntrack socket and the four listeners.
func BenchmarkServeStart(b *testing.B) {
	p := newMeshPod(b, false)
	table := meshdns.NewTable(resolve.DefaultMeshDomain)
	b.ResetTimer()
	for b.Loop() {
		s, err := meshdns.Serve(p.ns.Path, meshdns.Config{Table: table, Mark: model.ProxySocketMark})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}
