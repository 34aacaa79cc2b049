// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package xds_test

import "time"

// processCPU is not measured here: the benchmarks report 0 CPU.
func processCPU() time.Duration { return 0 }
