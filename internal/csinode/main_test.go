// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package csinode

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// privateNamespaceEnv marks the test process that runs in a mount namespace of its own.
const privateNamespaceEnv = "AETHER_CSINODE_TEST_MOUNTNS"

// TestMain runs the tests, as root, in a private mount namespace of their own: the test binary
// runs itself again with CLONE_NEWNS (Go's exec makes the child's / recursively private), so the
// tmpfs and bind mounts the tests make never reach the host's table, and go with the process
// whatever a failing test leaves.
func TestMain(m *testing.M) {
	if os.Geteuid() != 0 || os.Getenv(privateNamespaceEnv) != "" {
		os.Exit(m.Run())
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), privateNamespaceEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if err := cmd.Run(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			os.Exit(exit.ExitCode())
		}
		_, _ = os.Stderr.WriteString("csinode tests: run in a private mount namespace: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}
