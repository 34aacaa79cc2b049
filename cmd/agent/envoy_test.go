// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

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

// TestEnvoyDrainPostsGracefulDrain: envoy-drain POSTs /drain_listeners?graceful to the admin
// endpoint (a GET is refused there, as Envoy refuses mutating GETs), then returns after the drain
// time; an admin endpoint that refuses makes it fail with the status.
func TestEnvoyDrainPostsGracefulDrain(t *testing.T) {
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
	if err := drainEnvoy(context.Background(), address, time.Millisecond, &out); err != nil || drains.Load() != 1 {
		t.Fatalf("drain: err %v, %d drains asked; want one", err, drains.Load())
	}
	if !strings.Contains(out.String(), "Envoy drains its listeners; waiting 1ms") {
		t.Errorf("drain said %q", out.String())
	}
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer refusing.Close()
	if err := drainEnvoy(context.Background(), strings.TrimPrefix(refusing.URL, "http://"), time.Millisecond, &out); err == nil ||
		!strings.Contains(err.Error(), "500") {
		t.Errorf("a refusing admin endpoint: err %v, want its status", err)
	}
}

// TestEnvoyHelperRelaysReadyAndStatsOnly: the helper answers GET /ready and GET
// /stats/prometheus with the admin endpoint's answers (status, content type, body; usedonly
// passed on, any other parameter not), refuses every other path and method without reaching the
// admin endpoint, and answers 503 when the admin endpoint is down.
func TestEnvoyHelperRelaysReadyAndStatsOnly(t *testing.T) {
	var reached []string
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Method+" "+r.URL.RequestURI())
		switch r.URL.Path {
		case "/ready":
			http.Error(w, "PRE_INITIALIZING", http.StatusServiceUnavailable)
		case "/stats/prometheus":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write([]byte("envoy_cluster_upstream_cx_total{envoy_cluster_name=\"x\"} 3\n"))
		default:
			_, _ = w.Write([]byte("admin page " + r.URL.Path))
		}
	}))
	defer admin.Close()
	helper := httptest.NewServer(helperHandler(strings.TrimPrefix(admin.URL, "http://")))
	defer helper.Close()

	get := func(method, path string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(method, helper.URL+path, nil)
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
	if code, _, body := get(http.MethodGet, "/ready"); code != http.StatusServiceUnavailable || !strings.Contains(body, "PRE_INITIALIZING") {
		t.Errorf("GET /ready: %d %q, want the admin endpoint's 503 PRE_INITIALIZING", code, body)
	}
	code, ct, body := get(http.MethodGet, "/stats/prometheus?usedonly&filter=.*")
	if code != http.StatusOK || ct != "text/plain; version=0.0.4" || !strings.Contains(body, "envoy_cluster_upstream_cx_total") {
		t.Errorf("GET /stats/prometheus: %d %q %q", code, ct, body)
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/config_dump"}, {http.MethodPost, "/drain_listeners"}, {http.MethodGet, "/stats"},
		{http.MethodPost, "/stats/prometheus"}, {http.MethodGet, "/quitquitquit"},
	} {
		if code, _, _ := get(c.method, c.path); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want it refused", c.method, c.path, code)
		}
	}
	if want := []string{"GET /ready", "GET /stats/prometheus?usedonly"}; strings.Join(reached, ",") != strings.Join(want, ",") {
		t.Errorf("the admin endpoint was asked %q, want only %q", reached, want)
	}
	admin.Close()
	if code, _, body := get(http.MethodGet, "/stats/prometheus"); code != http.StatusServiceUnavailable || !strings.Contains(body, "does not answer") {
		t.Errorf("admin down: %d %q, want 503", code, body)
	}
}
