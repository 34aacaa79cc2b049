// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"os"
	"testing"
)

// The readers read this very process: resident memory within its peak, and CPU time that grows
// with work done.
func TestProcReaders(t *testing.T) {
	pid := os.Getpid()
	rss, err := MemoryMiB(pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	peak, err := MemoryMiB(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || peak < rss {
		t.Errorf("VmRSS %.2f MiB, VmHWM %.2f MiB: want 0 < RSS <= peak", rss, peak)
	}
	if _, err := MemoryMiB(pid, "NoSuchLine"); err == nil {
		t.Error("a line /proc/<pid>/status lacks was read without an error")
	}
	before, err := CPUSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	for after := before; after <= before; {
		spin := 0
		for i := range 50_000_000 {
			spin += i
		}
		_ = spin
		if after, err = CPUSeconds(pid); err != nil {
			t.Fatal(err)
		}
	}
}
