// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package netnsprobe_test

import (
	"testing"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/netnsprobe"
)

// TestIPv6Loopback reads two real namespaces: one as a pod's usually is (IPv6 on), and one whose
// IPv6 was turned off by sysctl, as a pod's can be.
func TestIPv6Loopback(t *testing.T) {
	on := nstest.NewNamed(t, "aeprobe")
	if ok, err := netnsprobe.IPv6Loopback(on.Path); err != nil || !ok {
		t.Errorf("a namespace with IPv6 on: IPv6Loopback = %t, %v; want true", ok, err)
	}
	off := nstest.NewNamed(t, "aeprobe")
	off.DisableIPv6(t)
	if ok, err := netnsprobe.IPv6Loopback(off.Path); err != nil || ok {
		t.Errorf("a namespace with IPv6 off: IPv6Loopback = %t, %v; want false", ok, err)
	}
	if _, err := netnsprobe.IPv6Loopback("/nonexistent/netns"); err == nil {
		t.Error("a path that is no namespace: no error")
	}
}
