// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuild(t *testing.T) {
	cases := []struct {
		name   string
		linked string
		commit string
		build  debug.BuildInfo
		want   Info
	}{{
		name:   "a release: the linker's version wins over the toolchain's",
		linked: "v0.3.0",
		build: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261201-abc"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}},
		want: Info{Version: "v0.3.0", Commit: "abc123", GoVersion: "go1.26.0"},
	}, {
		name:   "the Makefile's build: version and commit linked, the toolchain's record not consulted",
		linked: "v0.2.0-14-g6df8e8f-dirty",
		commit: "6df8e8f0123",
		build:  debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
		want:   Info{Version: "v0.2.0-14-g6df8e8f-dirty", Commit: "6df8e8f0123", GoVersion: "go1.26.0"},
	}, {
		name: "a build from a tree with changes says so",
		build: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261201-abc+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
		want: Info{Version: "v0.0.0-20261201-abc+dirty", Commit: "abc123-dirty", GoVersion: "go1.26.0"},
	}, {
		name:  "no git, no version: said, not left blank",
		build: debug.BuildInfo{GoVersion: "go1.26.0"},
		want:  Info{Version: "(devel)", Commit: "unknown", GoVersion: "go1.26.0"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := fromBuild(Info{Version: c.linked, Commit: c.commit}, &c.build)
			if got != c.want {
				t.Errorf("fromBuild = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestLineNamesTheProgramAndTheToolchain: the running binary's line names the program and the Go
// that built it, read from the runtime rather than from the build record the code reads.
func TestLineNamesTheProgramAndTheToolchain(t *testing.T) {
	line := Line("aether-agent")
	if !strings.HasPrefix(line, "aether-agent ") || !strings.HasSuffix(line, ", "+runtime.Version()+")") {
		t.Errorf("Line = %q, want \"aether-agent <version> (commit <commit>, %s)\"", line, runtime.Version())
	}
}
