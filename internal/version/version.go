// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package version says which build of the operator a binary is: its version, the commit it was
// built from and the Go that built it. Every binary prints it for --version (the kubectl plugin
// for `kubectl aether version`).
//
// The Makefile's builds set both the version (`git describe`) and the commit with the linker:
//
//	go build -ldflags "-X github.com/aether-mesh/aether-operator/internal/version.version=v0.3.0
//	  -X github.com/aether-mesh/aether-operator/internal/version.commit=<sha>" ./cmd/manager
//
// A plain `go build` from a git checkout falls back to what the Go toolchain stamped: the commit
// (vcs.revision) and whether the tree had uncommitted changes (vcs.modified) — unless stamping is
// off (-buildvcs=false), when the commit says "unknown".
package version

import (
	"fmt"
	"runtime/debug"
)

// version and commit are set by the linker (-X). Empty, the Go toolchain's record stands in:
// the main module's version (a pseudo-version of the commit, or "(devel)") and vcs.revision.
var version, commit string

// Info is one binary's build: what --version prints.
type Info struct {
	// Version is the release (v0.3.0), or the Go toolchain's pseudo-version of the commit.
	Version string `json:"version"`
	// Commit is the git commit the binary was built from, with "-dirty" when the tree had
	// uncommitted changes; "unknown" when it was not built from a git checkout (go run, go test).
	Commit string `json:"commit"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
}

// unknown is what a field says when the build does not tell it.
const unknown = "unknown"

// Get reads the running binary's build.
func Get() Info {
	info := Info{Version: version, Commit: commit}
	build, ok := debug.ReadBuildInfo()
	if !ok {
		if info.Version == "" {
			info.Version = unknown
		}
		if info.Commit == "" {
			info.Commit = unknown
		}
		return info
	}
	return fromBuild(info, build)
}

// fromBuild fills in from the Go toolchain's record what the linker did not set.
func fromBuild(info Info, build *debug.BuildInfo) Info {
	info.GoVersion = build.GoVersion
	if info.Version == "" {
		info.Version = build.Main.Version
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	var revision string
	var modified bool
	for _, s := range build.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	switch {
	case info.Commit != "":
	case revision == "":
		info.Commit = unknown
	case modified:
		info.Commit = revision + "-dirty"
	default:
		info.Commit = revision
	}
	return info
}

// String is the one line --version prints after the program's name.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s)", i.Version, i.Commit, i.GoVersion)
}

// Line is what a binary named program prints for --version.
func Line(program string) string {
	return program + " " + Get().String()
}
