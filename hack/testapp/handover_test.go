// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// handover runs two DrainingServers bound with SO_REUSEPORT on one loopback address under a
// loop of dials, waits until both answered, stops the first with stop (once it holds a
// connection in flight), and returns how many dials failed (refused, reset, unanswered) while
// the second went on answering.
func handover(t *testing.T, stop func(*DrainingServer)) (failed int64) {
	t.Helper()
	ctx := context.Background()
	l1, err := ListenReusePort(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := ListenReusePort(ctx, l1.Addr().String())
	if err != nil {
		t.Fatalf("binding %s beside the first server: %v", l1.Addr(), err)
	}
	old, next := NewDrainingServer(l1, 50*time.Millisecond), NewDrainingServer(l2, 50*time.Millisecond)
	go old.Serve()
	go next.Serve()
	t.Cleanup(func() { next.Abort() })

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
				if answer := DialOnce(l1.Addr().String(), 2*time.Second); strings.HasPrefix(answer, "error dial") || strings.HasPrefix(answer, "error reading") {
					bad.Add(1)
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

// TestDrainHandsOverWithoutAFailedDial: the old server drained (its listener closed, its
// connections in flight answered) while the new one is bound beside it: no dial fails.
func TestDrainHandsOverWithoutAFailedDial(t *testing.T) {
	failed := handover(t, func(s *DrainingServer) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Drain(ctx); err != nil {
			t.Error(err)
		}
	})
	if failed != 0 {
		t.Errorf("%d dials failed across a drained handover, want none", failed)
	}
}

// TestAbortFailsTheDialsInFlight is the negative control: the old server killed without draining
// (its connections in flight reset) fails those dials.
func TestAbortFailsTheDialsInFlight(t *testing.T) {
	if failed := handover(t, func(s *DrainingServer) { s.Abort() }); failed == 0 {
		t.Error("no dial failed when the old server was killed with connections in flight")
	}
}
