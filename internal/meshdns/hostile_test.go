// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns_test

import (
	"fmt"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/aether-mesh/aether-operator/internal/meshdns"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestHostileTCPConnectionsAreBounded: a pod opens 10 000 TCP connections to its mesh DNS, each
// announcing a 64 KiB query and sending nothing more. Its server holds at most its cap of them,
// each with a buffer that grows with the bytes that come (not to the length announced), so the
// process's heap stays bounded; and another pod's server still answers, over UDP and TCP. (Held
// all, each with the 64 KiB the prefix announced, it was about 650 MiB of heap, and the agent,
// which runs every pod's server, was killed at its memory limit.)
func TestHostileTCPConnectionsAreBounded(t *testing.T) {
	attacker, victim := newMeshPod(t, true), newMeshPod(t, true)
	const hostile = 10000
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	conns := make([]net.Conn, 0, hostile)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	server := "127.0.0.1:" + strconv.Itoa(meshdns.Port)
	if err := attacker.ns.Do(func() {
		for range hostile {
			c, err := net.DialTimeout("tcp", server, 5*time.Second)
			if err != nil {
				continue // the listen queue full for a moment: refused, as it should be
			}
			_, _ = c.Write([]byte{0xff, 0xff}) // "64 KiB follow", and nothing does
			conns = append(conns, c)
		}
	}); err != nil {
		t.Fatal(err)
	}
	// The server holds as many as it takes (its cap; without one, all of them).
	testenv.Eventually(t, "the attacker's server holding its cap of connections", func() error {
		if held := attacker.server.HeldTCPConns(); held < 64 {
			return fmt.Errorf("%d held", held)
		}
		return nil
	})

	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d connections opened, %d held by the server; heap in use grew %d KiB", len(conns), attacker.server.HeldTCPConns(), grown/1024)
	// The client's own 10 000 connections are most of it (about half a KiB each).
	if grown > 64<<20 {
		t.Errorf("heap in use grew %d MiB for %d idle connections, want at most 64 MiB", grown>>20, len(conns))
	}
	if held := attacker.server.HeldTCPConns(); held > 64 {
		t.Errorf("the server holds %d TCP connections, want at most 64", held)
	}

	svc := payments(t, victim.mesh)
	name := dns.Fqdn(svc.Name + "." + svc.Namespace + "." + resolve.DefaultMeshDomain)
	for _, network := range []string{"udp", "tcp"} {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		if reply := victim.exchange(t, network, q); reply.Rcode != dns.RcodeSuccess || len(reply.Answer) != 1 {
			t.Errorf("another pod's %s query for %s during the attack: %v", network, name, reply)
		}
	}
}

// TestAQuerySentToTheServerItselfIsRefused: a pod that sends a query for a name outside the mesh
// straight to its mesh DNS (127.0.0.1:18054, no redirect) is refused: the query's original
// destination is the server itself, and forwarded it would come back, again and again.
func TestAQuerySentToTheServerItselfIsRefused(t *testing.T) {
	p := newMeshPod(t, true)
	q := new(dns.Msg)
	q.SetQuestion(externalName, dns.TypeA)
	for _, network := range []string{"udp", "tcp"} {
		var reply *dns.Msg
		var err error
		if doErr := p.ns.Do(func() {
			c := &dns.Client{Net: network, Timeout: 5 * time.Second}
			reply, _, err = c.Exchange(q, "127.0.0.1:"+strconv.Itoa(meshdns.Port))
		}); doErr != nil {
			t.Fatal(doErr)
		}
		if err != nil || reply.Rcode != dns.RcodeRefused {
			t.Errorf("%s query for %s sent to the server itself: %v (%v), want REFUSED", network, externalName, reply, err)
		}
	}
	if n := p.resolver.count(); n != 0 {
		t.Errorf("the resolver was asked %d queries; want none", n)
	}
	if got := p.outcomes.get(meshdns.OutcomeRefused); got != 2 {
		t.Errorf("%d queries counted refused, want 2", got)
	}
}
