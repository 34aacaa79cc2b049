// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cgrouptest makes, for tests, the cgroups the kubelet makes for a pod's containers: a
// process started in one is, to whoever reads its /proc/<pid>/cgroup (the agent's sockets, which
// learn their caller's pod so: internal/xdsserver's peer.go), a process of that pod. It needs root
// and a writable cgroup v2 hierarchy. Test support, linked by tests only.
package cgrouptest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Pod makes, under a cgroup v2 directory of the test, the cgroup the kubelet makes for a container
// of pod uid (with its systemd cgroup driver, else cgroupfs), and returns it open, for a child
// started in it (exec's SysProcAttr.CgroupFD). It is removed when the test ends: a child started
// in it must be gone by then (stopped by a cleanup registered after this call).
func Pod(t testing.TB, uid string, systemd bool) int {
	t.Helper()
	root, err := mount()
	if err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(root, fmt.Sprintf("aether-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	path := []string{"kubepods", "besteffort", "pod" + uid, "0a1b2c3d"}
	if systemd {
		underscored := strings.ReplaceAll(uid, "-", "_")
		path = []string{"kubepods.slice", "kubepods-besteffort.slice", "kubepods-besteffort-pod" + underscored + ".slice", "cri-containerd-0a1b2c3d.scope"}
	}
	dirs := []string{top}
	for _, p := range path {
		dirs = append(dirs, filepath.Join(dirs[len(dirs)-1], p))
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("making a pod's cgroup (the test runs as root, with cgroup v2 mounted writable at %s): %v", root, err)
		}
	}
	fd, err := syscall.Open(dirs[len(dirs)-1], syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Close(fd)
		for _, d := range slices.Backward(dirs) {
			if err := os.Remove(d); err != nil {
				t.Errorf("removing the test's cgroup: %v", err)
			}
		}
	})
	return fd
}

// mount is where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on
// a hybrid host).
func mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if i := slices.Index(fields, "-"); i > 4 && i+1 < len(fields) && fields[i+1] == "cgroup2" {
			return fields[4], nil
		}
	}
	return "", errors.New("no cgroup v2 hierarchy is mounted: the test needs one to place its processes in pods' cgroups")
}
