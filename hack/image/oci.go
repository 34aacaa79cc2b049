// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is every timestamp of an image and its archive, so that the same files give the same
// image, digest for digest.
var epoch = time.Unix(0, 0).UTC()

// image builds sp for platform p: one layer holding sp's files (sorted, owned by root, at epoch),
// OCI media types, sp's entrypoint, user, environment and labels.
func image(sp spec, p v1.Platform) (v1.Image, error) {
	raw, err := layerTar(sp.Files)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", sp.Name, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/image"}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = sp.Entrypoint
	cfg.Config.User = sp.User
	cfg.Config.Env = sp.Env
	cfg.Config.Labels = sp.Labels
	return mutate.ConfigFile(img, cfg)
}

// layerTar is the uncompressed layer: sp's files (regular files and symbolic links) and their
// parent directories (0755), sorted by path.
func layerTar(files []file) ([]byte, error) {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b file) int { return strings.Compare(a.Path, b.Path) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range sorted {
		data := f.Data
		if f.Source != "" {
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, fmt.Errorf("file %s for %s: %w", f.Source, f.Path, err)
			}
		}
		name := strings.TrimPrefix(path.Clean(f.Path), "/")
		var parents []string
		for dir := path.Dir(name); dir != "." && !dirs[dir]; dir = path.Dir(dir) {
			dirs[dir] = true
			parents = append(parents, dir)
		}
		slices.Reverse(parents) // a directory before what it holds
		for _, dir := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		if f.Link != "" {
			if err := tw.WriteHeader(&tar.Header{Name: name, Linkname: f.Link, Mode: 0o777, ModTime: epoch, Typeflag: tar.TypeSymlink, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: f.Mode, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// built is what one spec became: one image per platform, or an index of them.
type built interface {
	Digest() (v1.Hash, error)
}

// build builds the image specFor gives for each platform: the image itself for one platform, an
// OCI image index of the images (each descriptor naming its platform) for more.
func build(platforms []v1.Platform, specFor func(v1.Platform) spec) (built, error) {
	if len(platforms) == 1 {
		return image(specFor(platforms[0]), platforms[0])
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := image(specFor(p), p)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx, nil
}

// writeArchive writes x as an OCI image layout in a tar (what `ctr images import` reads), its
// entry in index.json annotated with name (containerd's image name) and its tag. The archive is
// deterministic: entries sorted, every timestamp epoch.
func writeArchive(w io.Writer, name string, x built) error {
	dir, err := os.MkdirTemp("", "image-layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	_, tag, err := repoAndTag(name)
	if err != nil {
		return err
	}
	annotations := layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": tag,
	})
	switch x := x.(type) {
	case v1.Image:
		err = lp.AppendImage(x, annotations)
	case v1.ImageIndex:
		err = lp.AppendIndex(x, annotations)
	default:
		err = fmt.Errorf("image %s: %T is neither an image nor an index", name, x)
	}
	if err != nil {
		return err
	}
	return tarDir(w, dir)
}

// tarDir writes the regular files under dir into a tar, sorted, at epoch, owned by root.
func tarDir(w io.Writer, dir string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// readArchive unpacks an archive of writeArchive into dir and returns its one entry: the image or
// the index, and the name it was written with.
func readArchive(archive, dir string) (x built, name string, err error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", archive, err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag != tar.TypeReg || !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) {
			return nil, "", fmt.Errorf("%s: unexpected entry %q: not an archive of hack/image", archive, h.Name)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return nil, "", err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, "", err
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return nil, "", err
		}
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", archive, err)
	}
	root, err := lp.ImageIndex()
	if err != nil {
		return nil, "", err
	}
	im, err := root.IndexManifest()
	if err != nil {
		return nil, "", err
	}
	if len(im.Manifests) != 1 {
		return nil, "", fmt.Errorf("%s: %d entries in index.json, want 1", archive, len(im.Manifests))
	}
	d := im.Manifests[0]
	name = d.Annotations["io.containerd.image.name"]
	if d.MediaType.IsIndex() {
		x, err = root.ImageIndex(d.Digest)
	} else {
		x, err = root.Image(d.Digest)
	}
	return x, name, err
}
