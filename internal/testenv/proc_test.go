// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"os"
	"os/exec"
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

// ChildPID finds a child by its command name, and only a child of this process.
func TestChildPID(t *testing.T) {
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	pid, err := ChildPID("sleep")
	if err != nil {
		t.Fatal(err)
	}
	if pid != child.Process.Pid {
		t.Errorf("ChildPID(sleep) = %d, want the child %d", pid, child.Process.Pid)
	}
	if pid, err := ChildPID("no-such-command"); err == nil {
		t.Errorf("ChildPID(no-such-command) = %d, want an error", pid)
	}
	// init (pid 1) is no child of this process.
	raw, err := os.ReadFile("/proc/1/comm")
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := ChildPID(string(raw[:len(raw)-1])); err == nil {
		t.Errorf("ChildPID found pid %d, a process that is not this one's child", pid)
	}
}
