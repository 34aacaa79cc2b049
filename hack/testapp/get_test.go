// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestGetOnce: the GET carries the Host it is given (what a mesh routes by), the answer line is
// the status and the body's first line, with the mesh's x-aether-error when there is one; a
// refused dial is one "error" line.
func TestGetOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "web.shop.aether.internal:18081" {
			w.Header().Set("x-aether-error", "port-not-declared")
			w.WriteHeader(http.StatusMisdirectedRequest)
		}
		_, _ = w.Write([]byte("host " + r.Host + " path " + r.URL.Path + "\nsecond line\n"))
	}))
	t.Cleanup(srv.Close)
	for host, want := range map[string]string{
		"web.shop.aether.internal:8080":  "200 host web.shop.aether.internal:8080 path /hello",
		"":                               "200 host " + strings.TrimPrefix(srv.URL, "http://") + " path /hello",
		"web.shop.aether.internal:18081": "421 x-aether-error=port-not-declared host web.shop.aether.internal:18081 path /hello",
	} {
		if got := GetOnce(srv.URL+"/hello", host, 2*time.Second); got != want {
			t.Errorf("GetOnce with Host %q = %q, want %q", host, got, want)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	if got := GetOnce("http://"+closed+"/", "", 2*time.Second); !strings.HasPrefix(got, "error ") || !strings.Contains(got, "refused") {
		t.Errorf("GetOnce of a closed port = %q, want an error line saying the connection was refused", got)
	}
}

// TestServePeerAs: the answer names the server after the caller, and is held for the delay (a
// request in flight for that long); two connections are held at once, not one after the other.
func TestServePeerAs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	const delay = 300 * time.Millisecond
	go ServePeerAs(l, "web-0", delay)
	began := time.Now()
	answers := make(chan string, 2)
	for range 2 {
		go func() { answers <- DialOnce(l.Addr().String(), 2*time.Second) }()
	}
	for range 2 {
		if got := <-answers; got != PeerPrefix+" 127.0.0.1 at web-0" {
			t.Errorf("answer %q, want %q", got, PeerPrefix+" 127.0.0.1 at web-0")
		}
	}
	if took := time.Since(began); took < delay || took >= 2*delay {
		t.Errorf("two connections answered after %s, want at least %s and less than %s (held at once)", took, delay, 2*delay)
	}
}

// TestLoad: every request sent is accounted for, answered (200) or failed with its answer line;
// the server's own 503 and a reset are failures; a POST is sent as a POST.
func TestLoad(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			t.Errorf("the load sent %s, want POST", r.Method)
		}
		switch n.Add(1) % 5 {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, "ok\n")
	}))
	t.Cleanup(srv.Close)
	var logged []string
	result := Load{Method: http.MethodPost, URL: srv.URL + "/", Rate: 50, For: 400 * time.Millisecond, Timeout: 2 * time.Second}.
		Run(func(line string) { logged = append(logged, line) })
	if result.Sent < 5 || int64(result.Sent) != n.Load() {
		t.Fatalf("sent %d, the server counted %d; want at least 5, and the same", result.Sent, n.Load())
	}
	if result.Answered+len(result.Failures) != result.Sent {
		t.Errorf("%s: answered and failed do not add up to sent", result)
	}
	var unavailable, reset int
	for _, f := range result.Failures {
		switch {
		case strings.Contains(f, " POST 503 "):
			unavailable++
		case strings.Contains(f, " POST error "):
			reset++
		default:
			t.Errorf("failure %q is neither the server's 503 nor its reset", f)
		}
	}
	if unavailable == 0 || reset == 0 || !slices.Equal(logged, result.Failures) {
		t.Errorf("%s: %d answered 503 and %d reset, want some of each; logged %q, want every failure", result, unavailable, reset, logged)
	}
	if want := fmt.Sprintf("load done sent=%d answered=%d failed=%d", result.Sent, result.Answered, len(result.Failures)); result.String() != want {
		t.Errorf("summary %q, want %q", result, want)
	}
}

// TestProtocolClients: the gRPC and WebSocket clients against the servers Serve runs, and the
// reset and whoami paths, each as one answer line.
func TestProtocolClients(t *testing.T) {
	const httpPort, grpcPort, resetPort = 38461, 38462, 38463
	closers, err := Serve("127.0.0.61", Ports{HTTP: []int{httpPort}, GRPC: []int{grpcPort}, HealthPath: "/healthz"})
	for _, c := range closers {
		t.Cleanup(func() { _ = c.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	resetting, err := Serve("127.0.0.61", Ports{HTTP: []int{resetPort}, HealthPath: "/healthz", ResetRequests: true})
	for _, c := range resetting {
		t.Cleanup(func() { _ = c.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.61:%d", httpPort)
	for name, c := range map[string]struct{ got, want string }{
		"grpc":      {GRPCHealthOnce(fmt.Sprintf("127.0.0.61:%d", grpcPort), "web.shop.aether.internal:9091", 5*time.Second), "grpc SERVING"},
		"websocket": {WebSocketOnce(base+"/ws", "web.shop.aether.internal:8080", 5*time.Second), "websocket 101 echo over the upgraded stream"},
		"whoami":    {GetOnce(base+WhoamiPath, "", 5*time.Second), "200 whoami peer 127.0.0.1 xff - xfcc -"},
		"health":    {GetOnce(fmt.Sprintf("http://127.0.0.61:%d/healthz", resetPort), "", 5*time.Second), "200 ok"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", name, c.got, c.want)
		}
	}
	if got := RequestOnce(http.MethodPost, fmt.Sprintf("http://127.0.0.61:%d/", resetPort), "", 5*time.Second); !strings.HasPrefix(got, "POST error ") {
		t.Errorf("a POST to a server that resets every request: %q, want a POST error line", got)
	}
	if got := WebSocketOnce(fmt.Sprintf("http://127.0.0.61:%d/", grpcPort), "", 2*time.Second); !strings.HasPrefix(got, "error ") {
		t.Errorf("a WebSocket to a gRPC server: %q, want an error line", got)
	}
}
