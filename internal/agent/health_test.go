// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"net"
	"testing"
	"time"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

func TestNextHealth(t *testing.T) {
	const (
		pending   = meshv1alpha1.HealthPending
		healthy   = meshv1alpha1.HealthHealthy
		unhealthy = meshv1alpha1.HealthUnhealthy
		draining  = meshv1alpha1.HealthDraining
	)
	o := HealthOptions{FailureThreshold: 3, SuccessThreshold: 2}
	cases := map[string]struct {
		start   meshv1alpha1.Health
		results []bool
		want    []meshv1alpha1.Health // health after each result
	}{
		"new endpoint, no health yet, fails once":  {start: "", results: []bool{false}, want: []meshv1alpha1.Health{pending}},
		"pending needs the success threshold":      {start: pending, results: []bool{true, true}, want: []meshv1alpha1.Health{pending, healthy}},
		"pending needs the failure threshold":      {start: pending, results: []bool{false, false, false}, want: []meshv1alpha1.Health{pending, pending, unhealthy}},
		"healthy survives fewer failures":          {start: healthy, results: []bool{false, false, true, false, false}, want: []meshv1alpha1.Health{healthy, healthy, healthy, healthy, healthy}},
		"healthy falls after consecutive failures": {start: healthy, results: []bool{false, false, false}, want: []meshv1alpha1.Health{healthy, healthy, unhealthy}},
		"unhealthy recovers after the threshold":   {start: unhealthy, results: []bool{true, false, true, true}, want: []meshv1alpha1.Health{unhealthy, unhealthy, unhealthy, healthy}},
		"draining is never changed by a probe":     {start: draining, results: []bool{true, true, false, false, false}, want: []meshv1alpha1.Health{draining, draining, draining, draining, draining}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st, h := &probeState{}, tc.start
			for i, ok := range tc.results {
				h = nextHealth(h, st, ok, o)
				if h != tc.want[i] {
					t.Fatalf("after result %d (%v): %q, want %q", i, ok, h, tc.want[i])
				}
			}
		})
	}
}

// TestProbeUDPPrimary: a UDP primary is healthy without a probe (no datagram tells a silent
// server from an absent one), and no TCP connection is attempted to it: the address answers
// nothing. The control: the same endpoint with a TCP primary is unhealthy there.
func TestProbeUDPPrimary(t *testing.T) {
	// A loopback port nobody listens on: bound, then closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	ep := &meshv1alpha1.MeshEndpoint{Spec: meshv1alpha1.MeshEndpointSpec{Address: "127.0.0.1", PrimaryPort: port,
		Ports: []meshv1alpha1.PortProtocol{{Port: port, Protocol: meshv1alpha1.ProtocolUDP}}}}
	if !probeEndpoint(t.Context(), ep, time.Second, "") {
		t.Error("a UDP primary is unhealthy: the agent cannot probe datagrams, so it must not judge them")
	}
	ep.Spec.Ports[0].Protocol = meshv1alpha1.ProtocolTCP
	if probeEndpoint(t.Context(), ep, time.Second, "") {
		t.Errorf("control: a TCP primary on closed port %d is healthy", port)
	}
}
