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
