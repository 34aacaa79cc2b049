// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testapp is the stand-in application of `make run`, of the cluster tier's test server
// and of the live Envoy tier's pods: HTTP/1.1 and h2c servers that answer 200 on the health path
// and say who they are elsewhere (a WebSocket upgrade included), gRPC servers whose standard
// health service (grpc.health.v1) answers SERVING, TCP echo servers, and server-first TCP servers
// that greet before they echo.
package testapp

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Ports are the ports to serve, by protocol.
type Ports struct {
	HTTP, H2C, TCP []int
	// GRPC ports serve gRPC in cleartext HTTP/2 with the standard health service, the server
	// SERVING (declare them =grpc: the node agent probes them with grpc.health.v1/Check).
	GRPC []int
	// Hello ports serve TCP that speaks first, as MySQL or SMTP do: on each connection one line,
	// HelloPrefix and the address the connection arrived at, then an echo of what the client sends.
	// A client that waits for the server is answered at once, and one that sends anything sees
	// who it reached before its echo.
	Hello []int
	// HealthPath answers 200 "ok", or 503 "failing" when FailHealth is set: the application says
	// it cannot serve, and still answers every other path (a probe must take it out; a client
	// that does not probe sees nothing wrong).
	HealthPath string
	FailHealth bool
	// ResetRequests makes the HTTP servers take every request but the health path's as
	// ResetPath does: the pod is healthy, and every request sent to it is reset before an answer
	// (the mesh must retry an idempotent one on another pod, and must not retry a POST).
	ResetRequests bool
}

// What the servers tell about themselves, so a client (a test sending through a proxy) learns
// which address and port it reached and in which protocol, not only that something answered:
//   - every HTTP answer but the health path's carries AtHeader (the local address the request
//     arrived at, <IP>:<port>) and ProtoHeader (the request's protocol as the server read it:
//     HTTP/1.1, HTTP/2.0);
//   - a Hello server's greeting is HelloPrefix, a space, the local address and a newline.
const (
	AtHeader    = "X-Testapp-At"
	ProtoHeader = "X-Testapp-Proto"
	HelloPrefix = "testapp-hello"
	// ResetPath is where an HTTP server takes the request and answers nothing: it aborts the
	// connection (HTTP/1.1) or the stream (HTTP/2), as an application that crashed with the request
	// in hand does (the mesh's "app-reset" row: retried for idempotent methods only).
	ResetPath = "/testapp/reset"
	// WhoamiPath answers one line saying who called, as the server read it:
	// "whoami peer <the connection's source IP> xff <X-Forwarded-For> xfcc <X-Forwarded-Client-Cert>"
	// ("-" for a header the request lacks). Behind the mesh the connection comes from the node
	// proxy; the caller's address and identity are in the headers the destination's proxy set.
	WhoamiPath = "/testapp/whoami"
	// HangPath is where an HTTP server takes the request and never answers, until the client goes
	// away: a stuck upstream, which only a timeout ends.
	HangPath = "/testapp/hang"
	// SlowPath answers 200 slowly: "line <i>" for i from 1 to ?lines= (10), one every ?every= (a
	// Go duration, 100ms), each flushed as it is written, then "done": a response that stays in
	// flight for as long as a test needs, whose last line says it arrived whole.
	SlowPath = "/testapp/slow"
	// SlowDone is SlowPath's last line.
	SlowDone = "done"
)

// Serve listens on host for every port and serves until the returned closers are closed. On an
// error the listeners opened so far are returned too, so the caller can close them.
func Serve(host string, p Ports) ([]io.Closer, error) {
	var closers []io.Closer
	mux := http.NewServeMux()
	mux.HandleFunc(p.HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		if p.FailHealth {
			http.Error(w, "failing", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	reset := func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }
	mux.HandleFunc(ResetPath, reset)
	mux.HandleFunc(WhoamiPath, whoami)
	mux.HandleFunc(HangPath, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc(SlowPath, slow)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if p.ResetRequests {
			reset(w, r)
		}
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			w.Header().Set(AtHeader, local.String())
		}
		w.Header().Set(ProtoHeader, r.Proto)
		if isWebSocket(r) {
			serveWebSocket(w, r)
			return
		}
		_, _ = fmt.Fprintf(w, "testapp at %s, %s %s\n", r.Host, r.Proto, r.URL.Path)
	})
	for _, s := range []struct {
		ports []int
		h2c   bool
	}{{p.HTTP, false}, {p.H2C, true}} {
		for _, port := range s.ports {
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return closers, err
			}
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
			if s.h2c {
				srv.Protocols = new(http.Protocols)
				srv.Protocols.SetUnencryptedHTTP2(true)
			}
			closers = append(closers, srv)
			go func() { _ = srv.Serve(l) }()
		}
	}
	for _, port := range p.GRPC {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return closers, err
		}
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, health.NewServer()) // the server as a whole: SERVING
		closers = append(closers, closerFunc(func() error { srv.Stop(); return nil }))
		go func() { _ = srv.Serve(l) }()
	}
	for _, s := range []struct {
		ports []int
		hello bool
	}{{p.TCP, false}, {p.Hello, true}} {
		for _, port := range s.ports {
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return closers, err
			}
			closers = append(closers, l)
			go echo(l, s.hello)
		}
	}
	return closers, nil
}

// whoami answers WhoamiPath.
func whoami(w http.ResponseWriter, r *http.Request) {
	peer, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		peer = r.RemoteAddr
	}
	orDash := func(name string) string {
		if v := r.Header.Get(name); v != "" {
			return v
		}
		return "-"
	}
	_, _ = fmt.Fprintf(w, "whoami peer %s xff %s xfcc %s\n", peer, orDash("X-Forwarded-For"), orDash("X-Forwarded-Client-Cert"))
}

// slow answers SlowPath.
func slow(w http.ResponseWriter, r *http.Request) {
	lines, every := 10, 100*time.Millisecond
	if v := r.URL.Query().Get("lines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			http.Error(w, "lines: not a count: "+v, http.StatusBadRequest)
			return
		}
		lines = n
	}
	if v := r.URL.Query().Get("every"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			http.Error(w, "every: not a duration: "+v, http.StatusBadRequest)
			return
		}
		every = d
	}
	flush := http.NewResponseController(w).Flush
	for i := 1; i <= lines; i++ {
		if i > 1 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(every):
			}
		}
		if _, err := fmt.Fprintf(w, "line %d\n", i); err != nil || flush() != nil {
			return
		}
	}
	_, _ = fmt.Fprintln(w, SlowDone)
}

// closerFunc adapts a function to io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// echo copies every connection's bytes back to it, after the greeting with hello.
func echo(l net.Listener, hello bool) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Minute))
			if hello {
				if _, err := fmt.Fprintf(c, "%s %s\n", HelloPrefix, c.LocalAddr()); err != nil {
					return
				}
			}
			_, _ = io.Copy(c, c)
		}()
	}
}
