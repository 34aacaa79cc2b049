// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoyhelper

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDrainPostsGracefulDrain: envoy-drain POSTs /drain_listeners?graceful to the admin endpoint
// (a GET is refused there, as Envoy refuses mutating GETs), then returns after the drain time; an
// admin endpoint that refuses makes it fail with the status.
func TestDrainPostsGracefulDrain(t *testing.T) {
	var drains atomic.Int32
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/drain_listeners" || !r.URL.Query().Has("graceful") {
			http.Error(w, "want POST /drain_listeners?graceful", http.StatusMethodNotAllowed)
			return
		}
		drains.Add(1)
		_, _ = w.Write([]byte("OK\n"))
	}))
	defer admin.Close()
	address := strings.TrimPrefix(admin.URL, "http://")
	var out bytes.Buffer
	if err := Drain(context.Background(), address, time.Millisecond, &out); err != nil || drains.Load() != 1 {
		t.Fatalf("drain: err %v, %d drains asked; want one", err, drains.Load())
	}
	if !strings.Contains(out.String(), "Envoy drains its listeners; waiting 1ms") {
		t.Errorf("drain said %q", out.String())
	}
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer refusing.Close()
	if err := Drain(context.Background(), strings.TrimPrefix(refusing.URL, "http://"), time.Millisecond, &out); err == nil ||
		!strings.Contains(err.Error(), "500") {
		t.Errorf("a refusing admin endpoint: err %v, want its status", err)
	}
}

// TestHandlersRelayOneReadEach: ReadyHandler answers GET /ready with the admin endpoint's answer
// and nothing else (not the statistics: the ready address has no authentication); StatsHandler
// answers GET /stats/prometheus (status, content type, body; usedonly passed on, any other
// parameter not) and nothing else. Neither reaches the admin endpoint for anything else, and both
// answer 503 when it is down. (The stats address's authentication is TestStatsOnlyForAReader's.)
func TestHandlersRelayOneReadEach(t *testing.T) {
	var reached []string
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Method+" "+r.URL.RequestURI())
		switch r.URL.Path {
		case "/ready":
			http.Error(w, "PRE_INITIALIZING", http.StatusServiceUnavailable)
		case StatsPath:
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write([]byte("envoy_cluster_upstream_cx_total{envoy_cluster_name=\"x\"} 3\n"))
		default:
			_, _ = w.Write([]byte("admin page " + r.URL.Path))
		}
	}))
	defer admin.Close()
	address := strings.TrimPrefix(admin.URL, "http://")
	ready, stats := httptest.NewServer(ReadyHandler(address)), httptest.NewServer(StatsHandler(address))
	defer ready.Close()
	defer stats.Close()

	get := func(server *httptest.Server, method, path string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(method, server.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), body.String()
	}
	if code, _, body := get(ready, http.MethodGet, "/ready"); code != http.StatusServiceUnavailable || !strings.Contains(body, "PRE_INITIALIZING") {
		t.Errorf("GET /ready: %d %q, want the admin endpoint's 503 PRE_INITIALIZING", code, body)
	}
	code, ct, body := get(stats, http.MethodGet, StatsPath+"?usedonly&filter=.*")
	if code != http.StatusOK || ct != "text/plain; version=0.0.4" || !strings.Contains(body, "envoy_cluster_upstream_cx_total") {
		t.Errorf("GET /stats/prometheus: %d %q %q", code, ct, body)
	}
	for _, c := range []struct {
		server       *httptest.Server
		method, path string
	}{
		{ready, http.MethodGet, StatsPath}, {ready, http.MethodGet, "/config_dump"}, {ready, http.MethodPost, "/ready"},
		{stats, http.MethodGet, "/ready"}, {stats, http.MethodGet, "/config_dump"}, {stats, http.MethodPost, "/drain_listeners"},
		{stats, http.MethodGet, "/stats"}, {stats, http.MethodPost, StatsPath}, {stats, http.MethodGet, "/quitquitquit"},
	} {
		if code, _, _ := get(c.server, c.method, c.path); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want it refused", c.method, c.path, code)
		}
	}
	if want := []string{"GET /ready", "GET /stats/prometheus?usedonly"}; strings.Join(reached, ",") != strings.Join(want, ",") {
		t.Errorf("the admin endpoint was asked %q, want only %q", reached, want)
	}
	admin.Close()
	for _, c := range []struct {
		server *httptest.Server
		path   string
	}{{ready, "/ready"}, {stats, StatsPath}} {
		if code, _, body := get(c.server, http.MethodGet, c.path); code != http.StatusServiceUnavailable || !strings.Contains(body, "does not answer") {
			t.Errorf("admin down, %s: %d %q, want 503", c.path, code, body)
		}
	}
}
