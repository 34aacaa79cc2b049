// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/seccomp"
)

// runSeccompSubcommand runs `agent install-seccomp --dir=<dir>`, the node Envoy's init container
// (config/envoy): it writes Envoy's seccomp profile (internal/seccomp) into dir, the host's
// <kubelet root dir>/seccomp/aether, before the kubelet creates Envoy's container, which names it
// as its Localhost profile. It returns the process's exit code.
func runSeccompSubcommand(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("agent install-seccomp", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dir := flags.String("dir", "", "Where the host's <kubelet root dir>/seccomp/"+seccomp.Dir+" is mounted: the profile is written there as "+seccomp.EnvoyFile+".")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || flags.NArg() > 0 {
		fmt.Fprintf(stderr, "agent install-seccomp: --dir=%q (arguments %q): give only --dir, the mount of the host's <kubelet root dir>/seccomp/%s\n", *dir, flags.Args(), seccomp.Dir)
		return 2
	}
	wrote, err := installSeccomp(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "agent install-seccomp: --dir: %v\n", err)
		return 1
	}
	target := filepath.Join(*dir, seccomp.EnvoyFile)
	if wrote {
		fmt.Fprintf(stdout, "wrote Envoy's seccomp profile %s (localhostProfile %s)\n", target, seccomp.EnvoyLocalhostProfile)
	} else {
		fmt.Fprintf(stdout, "%s holds Envoy's seccomp profile already\n", target)
	}
	return 0
}

// installSeccomp writes Envoy's profile into dir as seccomp.EnvoyFile, unless the file holds it
// already, and says whether it wrote. dir must exist: the mount of the host's directory makes it.
// The file is replaced atomically, as the runtime reads it when it creates Envoy's container (an
// Envoy already running keeps the filter it started with); world-readable, written by root only
// (the directory is root's).
func installSeccomp(dir string) (bool, error) {
	if !filepath.IsAbs(dir) {
		return false, fmt.Errorf("the profile's directory %q is not an absolute path: give the mount of the host's <kubelet root dir>/seccomp/%s", dir, seccomp.Dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return false, fmt.Errorf("the profile's directory %s is not there (%v): mount the host's <kubelet root dir>/seccomp/%s at it (config/envoy's volume seccomp)", dir, err, seccomp.Dir)
	}
	target, profile := filepath.Join(dir, seccomp.EnvoyFile), seccomp.Envoy()
	old, err := os.ReadFile(target)
	switch {
	case err == nil && bytes.Equal(old, profile):
		return false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	if err := cni.WriteFileAtomic(target, profile, 0o644); err != nil {
		return false, fmt.Errorf("writing %s: %w", target, err)
	}
	return true, nil
}
