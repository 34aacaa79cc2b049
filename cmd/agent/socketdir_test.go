// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestPrepareSocketDir: the directory is created 0755 and given to the owner (run as root, as
// the init container is; as another user, chown to oneself); a malformed owner is refused.
func TestPrepareSocketDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "aether-proxyless")
	owner := os.Getuid()
	if err := prepareSocketDir(dir, itoa(owner)+":"+itoa(os.Getgid())); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o755 || !info.IsDir() || int(info.Sys().(*syscall.Stat_t).Uid) != owner {
		t.Errorf("%s: mode %v, owner %d; want a directory 0755 of %d", dir, info.Mode(), info.Sys().(*syscall.Stat_t).Uid, owner)
	}
	for _, bad := range []string{"65532", "a:b", "-1:0", ""} {
		if err := prepareSocketDir(dir, bad); err == nil || !strings.Contains(err.Error(), "is not <uid>:<gid>") {
			t.Errorf("owner %q: %v", bad, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
