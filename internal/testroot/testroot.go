// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testroot marks the tests that need root: network namespaces, nftables and bind mounts
// on the real kernel. `make test` (and CI, which runs as root) runs them all; `make test-unit`
// runs with -short as any user, and there they are skipped with the reason, so a developer
// without root still runs every other test. Without -short a test that needs root and has none
// fails: a full run never passes by skipping the kernel.
package testroot

import (
	"os"
	"testing"
)

// Require stops t unless the process runs as root: skipped under -short (make test-unit),
// failed otherwise. what says what the test does on the kernel.
func Require(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if testing.Short() {
		t.Skipf("needs root (%s): make test runs it", what)
	}
	t.Fatalf("needs root (%s); run as root, or make test-unit (-short) to leave it out", what)
}
