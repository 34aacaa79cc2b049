// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/accesslog/accesslogtest"
)

// TestAccessLogOnTheEnvoySocketOnly: the access log is served where the node's Envoy connects,
// and not on the proxyless socket every pod reaches: no pod can log as the node's Envoy.
func TestAccessLogOnTheEnvoySocketOnly(t *testing.T) {
	dir := t.TempDir()
	listen := func(name string) Address {
		addr, err := ParseAddress("unix://" + filepath.Join(dir, name, "xds.sock"))
		if err != nil {
			t.Fatal(err)
		}
		return addr
	}
	envoy, err := Listen(listen("envoy"))
	if err != nil {
		t.Fatal(err)
	}
	pods, err := Listen(listen("proxyless"))
	if err != nil {
		t.Fatal(err)
	}
	logs := accesslog.New(accesslog.Options{NodeID: "node-a", Log: logr.Discard(), Registerer: prometheus.NewRegistry()})
	s := New(Options{Listener: envoy, ProxylessListener: pods, PodOfProcess: thisProcessIs(testPodUID), Log: logr.Discard(), AccessLog: logs})
	s.ResolvePodsWith(podsOf(testPods))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the server stopped with %v", err)
		}
	})
	for address, want := range map[string]codes.Code{s.Address(): codes.OK, s.ProxylessAddress(): codes.Unimplemented} {
		conn, err := accesslogtest.Dial(address)
		if err != nil {
			t.Fatal(err)
		}
		err = accesslogtest.Stream(testContext(t), conn, accesslogtest.TCPLogs(accesslogtest.Identifier("node-a"), accesslogtest.TCP(accesslogtest.Hop{})))
		if status.Code(err) != want {
			t.Errorf("an access-log stream on %s: %v, want %v", address, err, want)
		}
		_ = conn.Close()
	}
}
