// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// An API server that does not answer yet: the manager waits, alive but not ready, and goes on
// when it answers, leaving the probe port free for its own probe server.
func TestWaitForAPIServerServesTheProbesUntilItAnswers(t *testing.T) {
	var up atomic.Bool
	var asked atomic.Int32
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if !up.Load() || r.URL.Path != "/version" {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
	}))
	defer apiserver.Close()
	probeAddr := freeLoopbackAddress(t)

	returned := make(chan error, 1)
	go func() {
		returned <- WaitForAPIServer(context.Background(), &rest.Config{Host: apiserver.URL}, probeAddr, logr.Discard())
	}()

	// Waiting: alive, not ready, still asking.
	testenv.Eventually(t, "the probes served while waiting", func() error {
		return want(status(probeAddr, "/healthz"), http.StatusOK)
	})
	if got := status(probeAddr, "/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while waiting: %d, want 503", got)
	}
	testenv.Eventually(t, "a second attempt", func() error {
		return want(int(min(asked.Load(), 2)), 2)
	})
	select {
	case err := <-returned:
		t.Fatalf("returned (%v) before the API server answered", err)
	default:
	}

	up.Store(true)
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("returned %v once the API server answered, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting 30s after the API server answered")
	}
	l, err := net.Listen("tcp", probeAddr)
	if err != nil {
		t.Fatalf("the probe port is still held after the wait: %v", err)
	}
	_ = l.Close()
}

func TestWaitForAPIServerStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		returned <- WaitForAPIServer(ctx, &rest.Config{Host: "http://" + freeLoopbackAddress(t)}, "0", logr.Discard())
	}()
	cancel()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("returned %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting 30s after its context ended")
	}
}

// status is the HTTP status of GET path on addr, 0 if it did not answer.
func status(addr, path string) int {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://%s%s", addr, path))
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// want is nil when got is wanted, else an error saying both.
func want(got, wanted int) error {
	if got != wanted {
		return fmt.Errorf("got %d, want %d", got, wanted)
	}
	return nil
}
