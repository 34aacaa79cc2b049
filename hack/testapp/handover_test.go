// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
)

// migrateReq is the per-namespace switch that makes the kernel move the connections a closing
// SO_REUSEPORT listener holds but has not accepted (its accept queue, and handshakes in progress)
// to another listener of the group; with the default 0 they are reset. Linux 5.14 and later.
const migrateReq = "/proc/sys/net/ipv4/tcp_migrate_req"

// handoverNS is a network namespace of the test's own (root; the real kernel) with
// net.ipv4.tcp_migrate_req set to migrate: the setting is the namespace's, so the host's is left
// alone and a pod's would be set the same way.
func handoverNS(t *testing.T, migrate bool) *nstest.NS {
	t.Helper()
	ns := nstest.NewNamed(t, "handover")
	want := "0"
	if migrate {
		want = "1"
	}
	var got []byte
	var err error
	// /proc/sys/net is the calling thread's namespace: written and read back from inside it.
	if doErr := ns.Do(func() {
		if err = os.WriteFile(migrateReq, []byte(want), 0o644); err == nil {
			got, err = os.ReadFile(migrateReq)
		}
	}); doErr != nil {
		t.Fatal(doErr)
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("this kernel has no %s (Linux 5.14 and later): a drained SO_REUSEPORT listener resets the connections it has not accepted, and no handover is without a failed dial", migrateReq)
	}
	if err != nil || strings.TrimSpace(string(got)) != want {
		t.Fatalf("setting %s to %s in %s: read back %q, %v", migrateReq, want, ns.Name, got, err)
	}
	return ns
}

// listen binds address with SO_REUSEPORT inside ns.
func listen(t *testing.T, ns *nstest.NS, address string) net.Listener {
	t.Helper()
	var l net.Listener
	var err error
	if doErr := ns.Do(func() { l, err = ListenReusePort(context.Background(), address) }); doErr != nil {
		t.Fatal(doErr)
	}
	if err != nil {
		t.Fatalf("binding %s with SO_REUSEPORT in %s: %v", address, ns.Name, err)
	}
	return l
}

// handover runs two DrainingServers bound with SO_REUSEPORT on one loopback address, in a
// namespace of its own with tcp_migrate_req as migrate says, under a loop of dials; waits until
// both answered, stops the first with stop (once it holds a connection in flight), and returns
// how many dials failed (refused, reset, unanswered) while the second went on answering.
func handover(t *testing.T, migrate bool, stop func(*DrainingServer)) (failed int64) {
	t.Helper()
	ns := handoverNS(t, migrate)
	l1 := listen(t, ns, "127.0.0.1:0")
	l2 := listen(t, ns, l1.Addr().String())
	old, next := NewDrainingServer(l1, 50*time.Millisecond), NewDrainingServer(l2, 50*time.Millisecond)
	go old.Serve()
	go next.Serve()
	t.Cleanup(func() { old.Abort(); next.Abort() })

	var ok, bad atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				var answer string
				// 5 s: an answer is due after 50 ms; the bound is for a loaded machine, never reached.
				if err := ns.Do(func() { answer = DialOnce(l1.Addr().String(), 5*time.Second) }); err != nil {
					answer = "error dial: " + err.Error()
				}
				if strings.HasPrefix(answer, "error dial") || strings.HasPrefix(answer, "error reading") {
					bad.Add(1)
					t.Logf("a dial failed: %s", answer)
				} else {
					ok.Add(1)
				}
			}
		})
	}
	waitFor(t, "both servers answer and the old one holds a connection in flight", func() bool {
		return old.Accepted() >= 5 && next.Accepted() >= 5 && old.InFlight() > 0
	})
	stop(old)
	after := next.Accepted()
	waitFor(t, "20 dials answered by the new server after the old one stopped", func() bool { return next.Accepted() >= after+20 })
	close(done)
	wg.Wait()
	t.Logf("%d dials answered, %d failed", ok.Load(), bad.Load())
	return bad.Load()
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// drain drains s, failing t if a connection is still in flight after 5 s.
func drain(t *testing.T, s *DrainingServer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Drain(ctx); err != nil {
		t.Error(err)
	}
}

// TestDrainHandsOverWithoutAFailedDial: the old server drained (its listener closed, its
// connections in flight answered) while the new one is bound beside it, in a namespace with
// tcp_migrate_req=1: no dial fails. (Without the setting a connection the kernel had completed,
// or was completing, on the old listener but the old server had not yet accepted is reset when
// the listener closes: one run in 60 beside four CPU hogs failed a dial so, "connect: connection
// reset by peer"; a cold CI run saw it too. TestDrainMovesTheQueuedConnection holds that case
// still.)
func TestDrainHandsOverWithoutAFailedDial(t *testing.T) {
	if failed := handover(t, true, func(s *DrainingServer) { drain(t, s) }); failed != 0 {
		t.Errorf("%d dials failed across a drained handover, want none", failed)
	}
}

// TestAbortFailsTheDialsInFlight is the negative control: the old server killed without draining
// (its connections in flight reset), on the same kernel setting, fails those dials.
func TestAbortFailsTheDialsInFlight(t *testing.T) {
	if failed := handover(t, true, func(s *DrainingServer) { s.Abort() }); failed == 0 {
		t.Error("no dial failed when the old server was killed with connections in flight")
	}
}

// acceptQueue is how many connections the kernel completed on listener l that were not yet
// accepted: TCP_INFO's tcpi_unacked, which on a listening socket is its accept queue's length
// (sk_ack_backlog).
func acceptQueue(t *testing.T, l net.Listener) int {
	t.Helper()
	raw, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var optErr error
	if err := raw.Control(func(fd uintptr) { info, optErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		t.Fatal(err)
	}
	if optErr != nil {
		t.Fatalf("getsockopt(TCP_INFO) on the listener: %v", optErr)
	}
	return int(info.Unacked)
}

// TestDrainMovesTheQueuedConnection holds the handover's race still: a connection the kernel has
// completed into the old listener's accept queue, which the old server has not accepted (its
// accept loop behind, as on a loaded machine; here it never runs), when the old server drains
// with the new one bound beside it. With tcp_migrate_req=1 the kernel moves it to the new
// listener, whose server answers it; with the kernel's default, 0, it is reset: the gap
// docs/install.md describes, and this test's negative control.
func TestDrainMovesTheQueuedConnection(t *testing.T) {
	for name, tc := range map[string]struct {
		migrate bool
		// answered: the dial gets the new server's answer; otherwise it is reset.
		answered bool
	}{
		"tcp_migrate_req=1: the new server answers it": {migrate: true, answered: true},
		"tcp_migrate_req=0: it is reset":               {migrate: false, answered: false},
	} {
		t.Run(name, func(t *testing.T) {
			ns := handoverNS(t, tc.migrate)
			l1 := listen(t, ns, "127.0.0.1:0")
			old := NewDrainingServer(l1, 0) // never served: nothing accepts from its queue
			t.Cleanup(func() { old.Abort() })

			// The only listener yet: the kernel completes the dial into l1's queue.
			var c net.Conn
			var err error
			if doErr := ns.Do(func() { c, err = net.DialTimeout("tcp", l1.Addr().String(), 5*time.Second) }); doErr != nil {
				t.Fatal(doErr)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			waitFor(t, "the dial waits in the old listener's accept queue", func() bool { return acceptQueue(t, l1) == 1 })

			next := NewDrainingServer(listen(t, ns, l1.Addr().String()), 0)
			go next.Serve()
			t.Cleanup(func() { next.Abort() })
			drain(t, old)

			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			switch {
			case tc.answered && err != nil:
				t.Fatalf("the connection queued on the drained listener was not answered: %v (the new server accepted %d)", err, next.Accepted())
			case tc.answered && next.Accepted() != 1:
				t.Fatalf("answered %q, but the new server accepted %d connections; want the queued one", strings.TrimSpace(line), next.Accepted())
			case !tc.answered && !errors.Is(err, syscall.ECONNRESET):
				t.Fatalf("the connection queued on the drained listener: answer %q, error %v; want it reset (ECONNRESET) without tcp_migrate_req", strings.TrimSpace(line), err)
			}
		})
	}
}
