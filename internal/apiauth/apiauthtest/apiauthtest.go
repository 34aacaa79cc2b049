// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package apiauthtest starts, for a test, a server as the node components serve their
// endpoints (apiauth.Options on controller-runtime's metrics server), against the test's API
// server. Tests only.
package apiauthtest

import (
	"context"
	"net/http"
	"testing"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/aether-mesh/aether-operator/internal/apiauth"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// Serve starts a server with apiauth.Options(a loopback port, no certificate directory,
// clientCerts) and handlers as its extra handlers, speaking to the API server as cfg, and returns
// its base URL (https://127.0.0.1:port). It stops when t ends.
func Serve(t testing.TB, cfg *rest.Config, clientCerts bool, handlers map[string]http.Handler) string {
	t.Helper()
	addr := testenv.FreeLoopbackAddress(t)
	opts := apiauth.Options(addr, "", clientCerts)
	opts.ExtraHandlers = handlers
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(opts, cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the server on %s: %v", addr, err)
		}
	})
	return "https://" + addr
}

// Client is an HTTPS client presenting cfg's credentials (apiauth.Transport).
func Client(t testing.TB, cfg *rest.Config) *http.Client {
	t.Helper()
	rt, err := apiauth.Transport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: rt}
}
