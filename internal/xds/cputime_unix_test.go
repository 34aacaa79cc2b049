// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package xds_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used, user and system, its GC included: what a
// benchmark costs the machine, which its wall time overstates on a machine other work shares.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
