// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUSeconds is the CPU time (user and system) process pid has used, from /proc/<pid>/stat: what
// the benchmarks report of a real manager or agent process.
func CPUSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("reading /proc/%d/stat: %q", pid, raw)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("reading /proc/%d/stat: %q", pid, raw)
	}
	const clockTicks = 100 // USER_HZ, 100 on every Linux the benchmarks run on
	return (utime + stime) / clockTicks, nil
}

// MemoryMiB reads one memory line of /proc/<pid>/status (VmRSS: resident now; VmHWM: the most it
// was resident), in MiB.
func MemoryMiB(pid int, key string) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kib / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

// ChildPID is the process id of this process's child whose command name (/proc/<pid>/comm) is
// comm: the kube-apiserver or etcd envtest started, for a benchmark to read their CPU time.
func ChildPID(comm string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid ...": the name may hold spaces, so cut at the last parenthesis.
		open, closing := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
		fields := strings.Fields(string(raw[closing+1:]))
		if open < 0 || len(fields) < 2 || string(raw[open+1:closing]) != comm {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == self {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no child process of %d is named %q", self, comm)
}
