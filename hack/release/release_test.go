// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const testURL = "https://downloads.invalid/aether/v1.2.3"

func writeLicense(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "LICENSE")
	if err := os.WriteFile(path, []byte("the license\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// stubBuild writes a stand-in binary naming its platform: the archive and manifest logic under
// test, without five cross-builds.
func stubBuild(p Platform, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, []byte("binary for "+p.OS+"/"+p.Arch), 0o755)
}

// untar reads every file of a .tar.gz.
func untar(t *testing.T, archive []byte) map[string][]byte {
	t.Helper()
	files, err := untarGz(archive)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestManifestNamesEachArchive: the manifest has one platform per target, each with the archive's
// URL under -url and its SHA-256, and each archive holds the binary krew's bin names and LICENSE.
// Built twice, the archives are the same bytes (reproducible).
func TestManifestNamesEachArchive(t *testing.T) {
	license := writeLicense(t)
	out := t.TempDir()
	path, err := Release(Options{Version: "v1.2.3", Commit: "abc", URL: testURL + "/", Out: out, License: license, Build: stubBuild})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m krewPlugin
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "aether" || m.Spec.Version != "v1.2.3" {
		t.Errorf("manifest header: %+v", m)
	}
	if len(m.Spec.Platforms) != len(Platforms) {
		t.Fatalf("%d platforms in the manifest, want %d", len(m.Spec.Platforms), len(Platforms))
	}
	first := map[string][]byte{}
	for i, p := range Platforms {
		kp := m.Spec.Platforms[i]
		name := p.Archive("v1.2.3")
		if kp.URI != testURL+"/"+name || kp.Selector.MatchLabels["os"] != p.OS || kp.Selector.MatchLabels["arch"] != p.Arch || kp.Bin != p.Bin() {
			t.Errorf("platform %d: %+v, want %s/%s at %s/%s", i, kp, p.OS, p.Arch, testURL, name)
		}
		archive, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		first[name] = archive
		if sum := sha256.Sum256(archive); kp.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: manifest sha256 %s, archive's %x", name, kp.SHA256, sum)
		}
		files := untar(t, archive)
		if string(files[kp.Bin]) != "binary for "+p.OS+"/"+p.Arch || string(files["LICENSE"]) != "the license\n" || len(files) != 2 {
			t.Errorf("%s holds %d files: bin %q, LICENSE %q", name, len(files), files[kp.Bin], files["LICENSE"])
		}
	}
	if _, err := Release(Options{Version: "v1.2.3", Commit: "abc", URL: testURL, Out: out, License: license, Build: stubBuild}); err != nil {
		t.Fatal(err)
	}
	for name, archive := range first {
		again, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, archive) {
			t.Errorf("%s differs between two builds of the same inputs", name)
		}
	}
}

// TestRefusesWhatKrewRefuses: a version that is not semantic, or a URL that is not https, is
// refused before anything is built, naming the flag and the fix.
func TestRefusesWhatKrewRefuses(t *testing.T) {
	license := writeLicense(t)
	built := false
	build := func(Platform, string) error { built = true; return nil }
	for _, c := range []struct{ version, url, want string }{
		{"1.2.3", testURL, `-version "1.2.3" is not a semantic version`},
		{"v1.2", testURL, `-version "v1.2" is not a semantic version`},
		{"v1.2.3", "http://downloads.invalid/x", `-url "http://downloads.invalid/x" is not an https:// URL`},
		{"v1.2.3", "", `-url "" is not an https:// URL`},
	} {
		_, err := Release(Options{Version: c.version, URL: c.url, Out: t.TempDir(), License: license, Build: build})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Release(%q, %q) = %v, want an error containing %q", c.version, c.url, err, c.want)
		}
	}
	if built {
		t.Error("a refused release built something")
	}
}

// TestBuildCommand: every platform's build is the go build of ./cmd/kubectl-aether for that
// GOOS and GOARCH, stripped and stamped with the version and commit; shipped, it is static
// (CGO_ENABLED=0: it runs whatever the user's libc) and -trimpath (no path of the build machine in
// the binary); local is the same command without those two, and nothing else differs, so that
// TestReleasedPluginRuns, which runs a local build, runs the release's command.
func TestBuildCommand(t *testing.T) {
	const stamp = "-s -w -X github.com/aether-mesh/aether-operator/internal/version.version=v1.2.3 -X github.com/aether-mesh/aether-operator/internal/version.commit=abc"
	for _, p := range Platforms {
		t.Run(p.OS+"/"+p.Arch, func(t *testing.T) {
			out := "/out/" + p.Bin()
			for mode, want := range map[buildMode]struct{ args, env []string }{
				shipped: {
					[]string{"go", "build", "-trimpath", "-ldflags", stamp, "-o", out, "./cmd/kubectl-aether"},
					[]string{"GOOS=" + p.OS, "GOARCH=" + p.Arch, "CGO_ENABLED=0"},
				},
				local: {
					[]string{"go", "build", "-ldflags", stamp, "-o", out, "./cmd/kubectl-aether"},
					[]string{"GOOS=" + p.OS, "GOARCH=" + p.Arch},
				},
			} {
				cmd := buildCommand(p, "v1.2.3", "abc", out, mode)
				if !slices.Equal(cmd.Args, want.args) {
					t.Errorf("mode %d: args %q, want %q", mode, cmd.Args, want.args)
				}
				// What the build sets is appended to the caller's environment, so that it wins.
				if env := cmd.Env[len(cmd.Env)-len(want.env):]; !slices.Equal(env, want.env) {
					t.Errorf("mode %d: environment ends %q, want %q", mode, env, want.env)
				}
			}
		})
	}
}

// TestReleasedPluginRuns: the real build for this machine's platform (local: the release's
// command without -trimpath and CGO_ENABLED=0, so that it links what go vet and go test compiled
// rather than compiling the plugin's dependencies again; make release-plugin runs the shipped
// one the same way), archived, unpacked and run, prints the version and commit the release
// stamped; checked against another commit, the same archive is refused (checkReleased's negative
// control).
func TestReleasedPluginRuns(t *testing.T) {
	out := t.TempDir()
	// go build runs in the repository's root, where ./cmd/kubectl-aether is.
	t.Chdir("../..")
	if _, err := Release(Options{Version: "v1.2.3", Commit: "0123abc", URL: testURL, Out: out, License: "LICENSE",
		Build: goBuild("v1.2.3", "0123abc", local), Platforms: []Platform{Host()}}); err != nil {
		t.Fatal(err)
	}
	if err := checkReleased(out, "v1.2.3", "0123abc"); err != nil {
		t.Error(err)
	}
	err := checkReleased(out, "v1.2.3", "4567def")
	if want := `says "kubectl-aether v1.2.3 (commit 0123abc, go`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("checked against another commit: %v; want an error containing %q", err, want)
	}
}
