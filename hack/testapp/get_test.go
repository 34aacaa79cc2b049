// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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
