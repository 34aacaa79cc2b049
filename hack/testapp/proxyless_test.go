// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/spiffetest"
)

// TestServeInbound: the inbound stand-in answers a client with an SVID of the trust domain over
// mTLS, and refuses one without a client certificate and one of another trust domain (the
// negative controls).
func TestServeInbound(t *testing.T) {
	ca, err := spiffetest.NewCA("aether.internal")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := ca.WriteFiles(dir, "spiffe://aether.internal/ns/shop/sa/payments"); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	closer, err := ServeInbound("127.0.0.1", port, dir, "aether.internal")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closer.Close() })

	check := func(certs []tls.Certificate) error {
		conn, err := grpc.NewClient("passthrough:///127.0.0.1:"+strconv.Itoa(port), grpc.WithTransportCredentials(credentials.NewTLS(
			&tls.Config{Certificates: certs, RootCAs: ca.Pool(), ServerName: "unused", InsecureSkipVerify: true}))) //nolint:gosec // the test checks the server's side
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	client, err := ca.TLSCertificate("spiffe://aether.internal/ns/web/sa/frontend")
	if err != nil {
		t.Fatal(err)
	}
	if err := check([]tls.Certificate{client}); err != nil {
		t.Errorf("a client of the trust domain: %v", err)
	}
	if err := check(nil); err == nil {
		t.Error("control: a client without a certificate was answered")
	}
	other, err := ca.TLSCertificate("spiffe://elsewhere.example/ns/web/sa/frontend")
	if err != nil {
		t.Fatal(err)
	}
	if err := check([]tls.Certificate{other}); err == nil {
		t.Error("control: a client of another trust domain was answered")
	}
}

// TestProxylessClientWithoutBootstrap: without GRPC_XDS_BOOTSTRAP_CONFIG (a pod the injector
// missed) the client fails closed: /spread answers 503 with grpc-go's reason; a bad count is 400;
// the health path answers.
func TestProxylessClientWithoutBootstrap(t *testing.T) {
	if os.Getenv(proxyless.EnvBootstrap) != "" {
		t.Fatalf("%s is set in the test's environment", proxyless.EnvBootstrap)
	}
	port := freePort(t)
	closer, err := ServeProxylessClient("127.0.0.1", port, "xds:///payments.shop.aether.internal:9090", "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closer.Close() })
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	for path, want := range map[string]int{"/spread?n=3": 503, "/spread?n=0": 400, "/healthz": 200} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d %q, want %d", path, resp.StatusCode, body, want)
		}
		if path == "/spread?n=3" && !strings.Contains(string(body), "bootstrap") {
			t.Errorf("GET %s: %q, want grpc-go's word on the missing bootstrap", path, body)
		}
	}
}
