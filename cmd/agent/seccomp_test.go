// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/seccomp"
)

// TestInstallSeccompSubcommand runs `agent install-seccomp` as config/envoy's init container does:
// the profile is written byte for byte and world-readable, then found in place, then put back
// over another file; without --dir, or with a directory that is not the mount, it fails naming
// the flag.
func TestInstallSeccompSubcommand(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, seccomp.EnvoyFile)
	run := func(want string) {
		t.Helper()
		var out, errs bytes.Buffer
		if code := runSeccompSubcommand([]string{"--dir=" + dir}, &out, &errs); code != 0 || !strings.Contains(out.String(), want) {
			t.Fatalf("install-seccomp: exit %d, %q %q; want 0 and %q", code, out.String(), errs.String(), want)
		}
		got, err := os.ReadFile(target)
		if err != nil || !bytes.Equal(got, seccomp.Envoy()) {
			t.Errorf("%s: %d bytes, %v; want the embedded profile's %d", target, len(got), err, len(seccomp.Envoy()))
		}
		if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v, %v; want mode 0644 (the runtime reads it)", target, fi.Mode(), err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("%s holds %d entries, want the profile alone (no temporary file left)", dir, len(entries))
		}
	}
	wrote := "wrote Envoy's seccomp profile " + target + " (localhostProfile aether/envoy.json)"
	run(wrote)
	run("holds Envoy's seccomp profile already")
	if err := os.WriteFile(target, []byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run(wrote)

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, `--dir=""`},
		{[]string{"--dir=" + dir, "extra"}, 2, `arguments ["extra"]`},
		{[]string{"--dir=seccomp/aether"}, 1, `--dir: the profile's directory "seccomp/aether" is not an absolute path`},
		{[]string{"--dir=" + filepath.Join(dir, "none")}, 1, "--dir: the profile's directory " + filepath.Join(dir, "none") + " is not there"},
		{[]string{"--dir=" + target}, 1, "--dir: the profile's directory " + target + " is not there"},
	} {
		var out, errs bytes.Buffer
		if code := runSeccompSubcommand(c.args, &out, &errs); code != c.code || !strings.Contains(errs.String(), c.want) {
			t.Errorf("install-seccomp %q: exit %d, %q; want %d and %q", c.args, code, errs.String(), c.code, c.want)
		}
	}
}
