// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ListenReusePort listens on TCP address with SO_REUSEPORT, as the node's proxy binds its
// listeners (enable_reuse_port): a second process may bind the same address beside it, and the
// kernel spreads new connections over both until one closes its socket. That is the handover of
// a node proxy: the new one binds beside the old one, the old one drains.
func ListenReusePort(ctx context.Context, address string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, raw syscall.RawConn) error {
		var optErr error
		if err := raw.Control(func(fd uintptr) {
			optErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return optErr
	}}
	return lc.Listen(ctx, "tcp", address)
}

// DrainingServer answers each connection like ServeOriginalDst, but after Delay, each on its own
// goroutine: a proxy with requests in flight. Drain is how such a proxy hands over: it stops
// accepting (closes its listener, so the kernel sends new connections to the other socket bound
// beside it) and finishes what it holds; Abort is a proxy killed: its connections in flight are
// reset.
type DrainingServer struct {
	// Delay is how long each connection waits for its answer.
	Delay time.Duration
	// Log, when set, gets a line per connection accepted ("accepted connection <n>") and answered
	// ("answered connection <n>"): a reader of the log sees what is in flight.
	Log io.Writer

	l        net.Listener
	accepted atomic.Int64
	inflight sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

// NewDrainingServer serves l (Serve) with delay.
func NewDrainingServer(l net.Listener, delay time.Duration) *DrainingServer {
	return &DrainingServer{Delay: delay, l: l, conns: map[net.Conn]bool{}}
}

// Serve accepts until the listener is closed.
func (s *DrainingServer) Serve() {
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		n := s.accepted.Add(1)
		s.mu.Lock()
		s.conns[c] = true
		s.inflight.Add(1)
		s.mu.Unlock()
		s.logf("accepted connection %d", n)
		go s.answer(c, n)
	}
}

// Accepted is how many connections the server accepted.
func (s *DrainingServer) Accepted() int64 { return s.accepted.Load() }

// InFlight is how many connections wait for their answer.
func (s *DrainingServer) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// logf writes a line to Log, if set.
func (s *DrainingServer) logf(format string, args ...any) {
	if s.Log != nil {
		_, _ = fmt.Fprintf(s.Log, format+"\n", args...)
	}
}

// answer writes c's original destination after Delay, then closes it.
func (s *DrainingServer) answer(c net.Conn, n int64) {
	defer s.inflight.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	time.Sleep(s.Delay) // the request in flight
	answer := originalDstAnswer(c)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, answer); err == nil {
		s.logf("answered connection %d", n)
	}
}

// Drain stops accepting and waits until every connection in flight is answered, or ctx ends.
func (s *DrainingServer) Drain(ctx context.Context) error {
	_ = s.l.Close()
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("draining: connections still in flight: %w", ctx.Err())
	}
}

// Abort closes the listener and resets every connection in flight (SO_LINGER 0), as the kernel
// does when the process is killed.
func (s *DrainingServer) Abort() int {
	_ = s.l.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		if err := c.Close(); err == nil || !errors.Is(err, net.ErrClosed) {
			n++
		}
	}
	return n
}
