// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
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
	logs := accesslog.New(accesslog.Options{NodeID: "node-a", Log: logr.Discard(), Registerer: prometheus.NewRegistry()})
	s := startOnBothSockets(t, Options{PodOfProcess: thisProcessIs(testPodUID), NodeEnvoy: testNodeEnvoy, Log: logr.Discard(), AccessLog: logs}, testPods, nil)
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
