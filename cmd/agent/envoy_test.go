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
