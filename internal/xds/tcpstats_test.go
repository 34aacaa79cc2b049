// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"testing"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// TestTCPPortStatPrefix: a raw-TCP port's stat prefix names the namespace, the service and the
// port, with no dot (a dot of the service's name is spelled '_').
func TestTCPPortStatPrefix(t *testing.T) {
	for _, tc := range []struct {
		ns, svc string
		port    int32
		want    string
	}{
		{"shop", "payments", 9000, "tcp_shop/payments_9000"},
		{"shop", "payments.v2", 5432, "tcp_shop/payments_v2_5432"},
	} {
		if got := xds.TCPPortStatPrefix(tc.ns, tc.svc, tc.port); got != tc.want {
			t.Errorf("TCPPortStatPrefix(%q, %q, %d) = %q, want %q", tc.ns, tc.svc, tc.port, got, tc.want)
		}
	}
}
