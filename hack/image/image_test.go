// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
)

// fakeBuild stands in for go build: a small file naming what it was built from, so that each
// platform's and each package's binary differ as the real ones do.
func fakeBuild(p v1.Platform, pkg, out, ldflags string) error {
	return os.WriteFile(out, fmt.Appendf(nil, "%s for %s/%s %s", pkg, p.OS, p.Architecture, ldflags), 0o700)
}

// testOptions are image build's options with fake binaries, a fake CA bundle and fake SPIRE
// binaries, writing into a new directory.
func testOptions(t *testing.T, platforms ...v1.Platform) buildOptions {
	t.Helper()
	in := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(in, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("spire-server", "spire-server binary")
	write("spire-agent", "spire-agent binary")
	return buildOptions{
		Out: t.TempDir(), Platforms: platforms, Stamp: stamp{Version: "v0.3.0", Commit: "0123abc"},
		SpireDir: in, SpireVersion: "v1.13.3", CAFile: write("ca.crt", "-----BEGIN CERTIFICATE-----\n"), Build: fakeBuild,
	}
}

// outputs reads every archive and digest image build wrote, by file name.
func outputs(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, pattern := range []string{"*.tar", "*.digest", "*.imageid"} {
		names, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			data, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(n)] = data
		}
	}
	return out
}

// TestSameInputsSameImages builds every image twice from the same inputs (copied between the two
// builds, so that their files' times and modes on disk differ), for one platform and for two:
// the archives are the same bytes and the digests the same.
func TestSameInputsSameImages(t *testing.T) {
	for _, platforms := range [][]v1.Platform{{amd64}, {amd64, arm64}} {
		t.Run(fmt.Sprint(len(platforms)), func(t *testing.T) {
			first := testOptions(t, platforms...)
			if err := buildImages(first, io.Discard); err != nil {
				t.Fatal(err)
			}
			second := first
			second.Out = t.TempDir()
			second.SpireDir = copyDir(t, first.SpireDir) // SPIRE's binaries and ca.crt
			second.CAFile = filepath.Join(second.SpireDir, "ca.crt")
			if err := buildImages(second, io.Discard); err != nil {
				t.Fatal(err)
			}
			a, b := outputs(t, first.Out), outputs(t, second.Out)
			if len(a) != 15 {
				t.Fatalf("the first build wrote %d archives, digests and image IDs, want 15 (5 images): %v", len(a), slices.Sorted(maps.Keys(a)))
			}
			for name, data := range a {
				if !bytes.Equal(data, b[name]) {
					t.Errorf("%s differs between two builds of the same inputs", name)
				}
			}
			t.Logf("operator: %s", a["operator.digest"])
		})
	}
}

// TestOtherInputsOtherDigest: the digest follows the content (a different version stamp, a
// different image), so that equal digests above mean something.
func TestOtherInputsOtherDigest(t *testing.T) {
	a := testOptions(t, amd64)
	b := testOptions(t, amd64)
	b.Stamp.Version = "v0.3.1"
	for _, o := range []buildOptions{a, b} {
		if err := buildImages(o, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	if x, y := outputs(t, a.Out)["operator.digest"], outputs(t, b.Out)["operator.digest"]; bytes.Equal(x, y) {
		t.Errorf("two versions built the same operator image %s", x)
	}
}

func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, d.Name()), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// layerFiles lists an image's regular files as path → mode and content, from its layers.
func layerFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(epoch) {
				t.Errorf("%s: owner %d:%d, time %v; want root's, at %v", h.Name, h.Uid, h.Gid, h.ModTime, epoch)
			}
			if h.Typeflag == tar.TypeReg {
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				out["/"+h.Name] = fmt.Sprintf("%o %s", h.Mode, data)
			}
		}
		_ = rc.Close()
	}
	return out
}

// TestArchiveAsContainerdReadsIt reads the operator's archive back as an OCI layout: its one
// entry named for containerd, the digest recorded beside it, and for two platforms an OCI index
// whose images hold each platform's binaries, the CA bundle, the nonroot user and the labels.
func TestArchiveAsContainerdReadsIt(t *testing.T) {
	opts := testOptions(t, amd64, arm64)
	if err := buildImages(opts, io.Discard); err != nil {
		t.Fatal(err)
	}
	x, name, err := readArchive(filepath.Join(opts.Out, "operator.tar"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if name != operatorName {
		t.Errorf("index.json names the image %q, want %q", name, operatorName)
	}
	digest, _ := x.Digest()
	if recorded := outputs(t, opts.Out)["operator.digest"]; string(recorded) != digest.String()+"\n" {
		t.Errorf("operator.digest = %q, the archive's image is %s", recorded, digest)
	}
	idx, ok := x.(v1.ImageIndex)
	if !ok {
		t.Fatalf("two platforms gave a %T, want an image index", x)
	}
	// The image ID containerd gives the host's image: its config's digest.
	hostImg, err := idx.Image(manifestFor(t, idx, hostPlatform()).Digest)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := hostImg.ConfigName(); string(outputs(t, opts.Out)["operator.imageid"]) != id.String()+"\n" {
		t.Errorf("operator.imageid = %q, the host's image config is %s", outputs(t, opts.Out)["operator.imageid"], id)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", mt, types.OCIImageIndex)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range im.Manifests {
		got = append(got, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != d.Platform.Architecture || cfg.OS != "linux" || cfg.Config.User != "65532:65532" ||
			!slices.Equal(cfg.Config.Entrypoint, []string{"/manager"}) || !cfg.Created.Equal(epoch) {
			t.Errorf("%s: config %s/%s user %q entrypoint %v created %v", d.Platform, cfg.OS, cfg.Architecture, cfg.Config.User, cfg.Config.Entrypoint, cfg.Created)
		}
		wantLabels := map[string]string{
			"org.opencontainers.image.title": "aether-operator", "org.opencontainers.image.version": "v0.3.0",
			"org.opencontainers.image.revision": "0123abc", "org.opencontainers.image.licenses": "Apache-2.0",
		}
		if !maps.Equal(cfg.Config.Labels, wantLabels) {
			t.Errorf("%s: labels %v, want %v", d.Platform, cfg.Config.Labels, wantLabels)
		}
		files := layerFiles(t, img)
		want := map[string]string{caCertificates: "644 -----BEGIN CERTIFICATE-----\n"}
		for _, b := range operatorBinaries {
			want["/"+b.Name] = fmt.Sprintf("755 %s for linux/%s %s", b.Package, d.Platform.Architecture, versionLDFlags(opts.Stamp))
		}
		if !maps.Equal(files, want) {
			t.Errorf("%s: files %v, want %v", d.Platform, files, want)
		}
	}
	if !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("the index's platforms are %v, want linux/amd64, linux/arm64", got)
	}

	// SPIRE's images are the host's alone, as they are: one image, not an index.
	spire, _, err := readArchive(filepath.Join(opts.Out, "spire-agent.tar"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img, ok := spire.(v1.Image)
	if !ok {
		t.Fatalf("spire-agent is a %T, want one image (the host's)", spire)
	}
	cfg, _ := img.ConfigFile()
	if cfg.Architecture != hostPlatform().Architecture || cfg.Config.User != "0:0" ||
		!slices.Equal(cfg.Config.Entrypoint, []string{"/opt/spire/bin/spire-agent", "run"}) {
		t.Errorf("spire-agent: %s, user %q, entrypoint %v", cfg.Architecture, cfg.Config.User, cfg.Config.Entrypoint)
	}
	if files := layerFiles(t, img); !maps.Equal(files, map[string]string{"/opt/spire/bin/spire-agent": "755 spire-agent binary"}) {
		t.Errorf("spire-agent's files: %v", files)
	}
}

func manifestFor(t *testing.T, idx v1.ImageIndex, p v1.Platform) v1.Descriptor {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.Equals(p) {
			return d
		}
	}
	t.Fatalf("the index has no image for %s", p)
	return v1.Descriptor{}
}

// TestIndexJSONForCtr: containerd's importer names the image from index.json's annotation.
func TestIndexJSONForCtr(t *testing.T) {
	opts := testOptions(t, amd64)
	if err := buildImages(opts, io.Discard); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(opts.Out, "pause.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	var names []string
	var index v1.IndexManifest
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "index.json" {
			if err := json.NewDecoder(tr).Decode(&index); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.IsSorted(names) || !slices.Contains(names, "oci-layout") {
		t.Errorf("archive entries %v: want sorted, with oci-layout", names)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != types.OCIManifestSchema1 ||
		index.Manifests[0].Annotations["io.containerd.image.name"] != pauseName ||
		index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "aether" {
		t.Errorf("index.json = %+v", index)
	}
}

func TestParsePlatforms(t *testing.T) {
	got, err := parsePlatforms("linux/amd64, linux/arm64")
	if err != nil || len(got) != 2 || !got[0].Equals(amd64) || !got[1].Equals(arm64) {
		t.Errorf("parsePlatforms = %v, %v", got, err)
	}
	if got, err := parsePlatforms(""); err != nil || len(got) != 1 || !got[0].Equals(hostPlatform()) {
		t.Errorf("parsePlatforms(\"\") = %v, %v; want the host's", got, err)
	}
	for in, want := range map[string]string{
		"amd64":                   `"amd64" is not linux/<arch>`,
		"darwin/arm64":            `"darwin/arm64" is not linux/<arch>`,
		"linux/amd64,linux/amd64": "linux/amd64 is given twice",
	} {
		if _, err := parsePlatforms(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parsePlatforms(%q) = %v, want an error with %q", in, err, want)
		}
	}
}
