// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// buildOptions is what image build does.
type buildOptions struct {
	Out          string
	Platforms    []v1.Platform
	Stamp        stamp
	SpireDir     string
	SpireVersion string
	CAFile       string
	// Envoy is what the node Envoy's image is built from; no image when its Dir is empty.
	Envoy envoyOptions
	// Build compiles pkg for platform p into out with extra ldflags (tests compile small stand-ins).
	Build func(p v1.Platform, pkg, out, ldflags string) error
}

// versionLDFlags stamps internal/version (what --version prints).
func versionLDFlags(s stamp) string {
	return "-X github.com/aether-mesh/aether-operator/internal/version.version=" + s.Version +
		" -X github.com/aether-mesh/aether-operator/internal/version.commit=" + s.Commit
}

// goBuild is a static, reproducible build: no cgo, no paths of the build machine, no symbols.
func goBuild(p v1.Platform, pkg, out, ldflags string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", strings.TrimSpace("-s -w "+ldflags), "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w", pkg, p.OS, p.Architecture, err)
	}
	return nil
}

// hostPlatform is the platform image build runs on: the cluster tier's node.
func hostPlatform() v1.Platform { return v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH} }

// parsePlatforms parses -platforms: comma-separated linux/<arch>, each once; empty is the host's.
func parsePlatforms(s string) ([]v1.Platform, error) {
	if strings.TrimSpace(s) == "" {
		return []v1.Platform{hostPlatform()}, nil
	}
	var out []v1.Platform
	for f := range strings.SplitSeq(s, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		p := v1.Platform{OS: osName, Architecture: arch}
		if !ok || osName != "linux" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("-platforms %q: %q is not linux/<arch>: give for example linux/amd64,linux/arm64", s, f)
		}
		if slices.ContainsFunc(out, p.Equals) {
			return nil, fmt.Errorf("-platforms %q: %s is given twice", s, f)
		}
		out = append(out, p)
	}
	return out, nil
}

// binDir is where the binaries of platform p are built.
func binDir(out string, p v1.Platform) string {
	return filepath.Join(out, "bin", p.OS+"-"+p.Architecture)
}

// buildImages compiles the binaries of every platform, then writes every image's archive and
// digest, and prints each image's name and digest to w.
func buildImages(opts buildOptions, w io.Writer) error {
	for _, p := range opts.Platforms {
		dir := binDir(opts.Out, p)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, b := range operatorBinaries {
			if err := opts.Build(p, b.Package, filepath.Join(dir, b.Name), versionLDFlags(opts.Stamp)); err != nil {
				return err
			}
		}
		for _, b := range []binary{testServerBinary, pauseBinary} {
			if err := opts.Build(p, b.Package, filepath.Join(dir, b.Name), ""); err != nil {
				return err
			}
		}
	}
	type job struct {
		name, archive string
		platforms     []v1.Platform
		specFor       func(v1.Platform) spec
	}
	jobs := []job{{operatorName, operatorArchive, opts.Platforms, func(p v1.Platform) spec {
		return operatorSpec(binDir(opts.Out, p), opts.CAFile, opts.Stamp)
	}}}
	for i, sp := range testSpecs("") {
		jobs = append(jobs, job{sp.Name, sp.Archive, opts.Platforms, func(p v1.Platform) spec { return testSpecs(binDir(opts.Out, p))[i] }})
	}
	if opts.SpireDir != "" {
		// SPIRE's binaries are cgo (sqlite), built for the host by hack/build-spire.sh: their
		// images are the host's platform alone, whatever -platforms says.
		for _, sp := range spireSpecs(opts.SpireDir, opts.SpireVersion) {
			jobs = append(jobs, job{sp.Name, sp.Archive, []v1.Platform{hostPlatform()}, func(v1.Platform) spec { return sp }})
		}
	}
	if opts.Envoy.Dir != "" {
		// The wheel's Envoy and the Debian packages are the host's: the host's platform alone,
		// as SPIRE's. Its files are read once, here, so that a missing one fails before any
		// archive is written.
		sp, err := envoySpec(opts.Envoy, hostPlatform())
		if err != nil {
			return err
		}
		jobs = append(jobs, job{sp.Name, sp.Archive, []v1.Platform{hostPlatform()}, func(v1.Platform) spec { return sp }})
	}
	for _, j := range jobs {
		x, err := build(j.platforms, j.specFor)
		if err != nil {
			return err
		}
		digest, err := writeFiles(opts.Out, j.archive, j.name, x)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s %s\n", j.name, digest); err != nil {
			return err
		}
	}
	return nil
}

// writeFiles writes x's archive <archive>.tar and its digest <archive>.digest into dir, each
// through a temporary file, so that a failed build leaves no half-written archive.
func writeFiles(dir, archive, name string, x built) (v1.Hash, error) {
	digest, err := x.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	tmp, err := os.CreateTemp(dir, archive+".tar.")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := writeArchive(tmp, name, x); err != nil {
		_ = tmp.Close()
		return v1.Hash{}, fmt.Errorf("image %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return v1.Hash{}, err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, archive+".tar")); err != nil {
		return v1.Hash{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, archive+".digest"), []byte(digest.String()+"\n"), 0o644); err != nil {
		return v1.Hash{}, err
	}
	id, ok, err := hostImageID(x)
	if err != nil || !ok {
		return digest, err
	}
	return digest, os.WriteFile(filepath.Join(dir, archive+".imageid"), []byte(id.String()+"\n"), 0o644)
}

// hostImageID is the digest of the host platform's image config: the image ID containerd gives the
// image, which the kubelet reports as a container's imageID when the image was imported (a pull
// from a registry adds the reference <repository>@<digest>, which it reports instead). ok is false
// when x has no image for the host.
func hostImageID(x built) (id v1.Hash, ok bool, err error) {
	img, isImage := x.(v1.Image)
	if idx, isIndex := x.(v1.ImageIndex); isIndex {
		im, err := idx.IndexManifest()
		if err != nil {
			return v1.Hash{}, false, err
		}
		host := hostPlatform()
		i := slices.IndexFunc(im.Manifests, func(d v1.Descriptor) bool { return d.Platform != nil && d.Platform.Equals(host) })
		if i < 0 {
			return v1.Hash{}, false, nil
		}
		if img, err = idx.Image(im.Manifests[i].Digest); err != nil {
			return v1.Hash{}, false, err
		}
	} else if !isImage {
		return v1.Hash{}, false, fmt.Errorf("%T is neither an image nor an index", x)
	}
	cfg, err := img.ConfigFile()
	if err != nil || cfg.OS != hostPlatform().OS || cfg.Architecture != hostPlatform().Architecture {
		return v1.Hash{}, false, err
	}
	id, err = img.ConfigName()
	return id, err == nil, err
}
