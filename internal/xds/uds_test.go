// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"testing"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestUDSDeliveredToThePipe: in the uds scenario, a caller's request or connection to each port of
// payments reaches payments-0 over the network (its pod IP, as any pod: callers cannot tell), and
// its inbound delivers it to the pod's Unix socket, /run/aether/uds/<pod UID>/app.sock — every
// port to the one socket (the workload page) — and never to the pod's address.
func TestUDSDeliveredToThePipe(t *testing.T) {
	res, err := xds.Build(xdstest.UDS())
	if err != nil {
		t.Fatal(err)
	}
	sim := xdssim.New(res)
	if err := sim.Check(); err != nil {
		t.Fatal(err)
	}
	const (
		vip    = "10.96.0.10"
		podIP  = "10.244.1.10"
		socket = "unix:/run/aether/uds/uid-payments-0/app.sock"
		host   = "payments.shop.aether.internal"
	)
	podKey := xds.PodKey("shop", "payments-0")
	client := xds.CaptureListener(xds.PodKey("web", "frontend-0"))
	for _, tc := range []struct {
		name string
		conn xdssim.Conn
		port int32
	}{
		{"HTTP 8080", xdssim.Conn{DstIP: vip, DstPort: 8080, HTTP: &xdssim.Request{Host: host + ":8080"}}, 8080},
		{"HTTP2 9090", xdssim.Conn{DstIP: vip, DstPort: 9090, HTTP: &xdssim.Request{Host: host + ":9090", HTTP2: true}}, 9090},
		{"TCP 9000", xdssim.Conn{DstIP: vip, DstPort: 9000}, 9000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.conn.Listener = client
			hopsInto(t, sim, tc.conn, podIP, podKey, tc.port, func(_ xdssim.Target, in xdssim.Outcome) {
				if in.Verdict != xdssim.Forwarded || len(in.Targets) != 1 || in.Targets[0].Cluster != xds.AppCluster(podKey, tc.port) {
					t.Fatalf("port %d arrives at %s as %s; want %s", tc.port, podKey, in, xds.AppCluster(podKey, tc.port))
				}
				got := in.Targets[0].Receiving()
				if len(got) != 1 || got[0].Address != socket || got[0].Port != 0 {
					t.Errorf("port %d is delivered to %+v; want the pod's socket %s only", tc.port, got, socket)
				}
			})
		})
	}
}
