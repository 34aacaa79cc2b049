// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testapp is the stand-in application of `make run` and of the cluster tier's test
// server: HTTP/1.1 and h2c servers that answer 200 on the health path and say who they are
// elsewhere, gRPC servers whose standard health service (grpc.health.v1) answers SERVING, and
// TCP echo servers.
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
	// HealthPath answers 200 "ok".
	HealthPath string
}

// Serve listens on host for every port and serves until the returned closers are closed. On an
// error the listeners opened so far are returned too, so the caller can close them.
func Serve(host string, p Ports) ([]io.Closer, error) {
	var closers []io.Closer
	mux := http.NewServeMux()
	mux.HandleFunc(p.HealthPath, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
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
	for _, port := range p.TCP {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return closers, err
		}
		closers = append(closers, l)
		go echo(l)
	}
	return closers, nil
}

// closerFunc adapts a function to io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// echo copies every connection's bytes back to it.
func echo(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Minute))
			_, _ = io.Copy(c, c)
		}()
	}
}
