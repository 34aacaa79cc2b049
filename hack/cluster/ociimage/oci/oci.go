// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package oci writes OCI image archives (image-spec v1.1 layout in a tar) from files on disk.
package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// Media types of the image-spec.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// File is one file of the image: read from Source, placed at Path.
type File struct {
	Source string
	Path   string
}

// Image describes the image to write.
type Image struct {
	// Name is the full reference containerd imports it as, e.g. docker.io/aether/operator:dev.
	Name       string
	Entrypoint []string
	User       string
	Arch       string
	Files      []File
}

// Descriptor is an image-spec content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// epoch fixes every timestamp, so the same files give the same image, byte for byte.
var epoch = time.Unix(0, 0).UTC()

// Write writes img as an OCI archive to w.
func Write(w io.Writer, img Image) error {
	layer, diffID, err := layerOf(img.Files)
	if err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": img.Arch,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config":       map[string]any{"Entrypoint": img.Entrypoint, "User": img.User},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     MediaTypeManifest,
		"config":        descriptor(MediaTypeConfig, config, nil),
		"layers":        []Descriptor{descriptor(MediaTypeLayer, layer, nil)},
	})
	if err != nil {
		return err
	}
	tag := img.Name[strings.LastIndex(img.Name, ":")+1:]
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     MediaTypeIndex,
		"manifests": []Descriptor{descriptor(MediaTypeManifest, manifest, map[string]string{
			"io.containerd.image.name":          img.Name,
			"org.opencontainers.image.ref.name": tag,
		})},
	})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, blob := range [][]byte{layer, config, manifest} {
		if err := add("blobs/sha256/"+hexDigest(blob), blob); err != nil {
			return err
		}
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := add("index.json", index); err != nil {
		return err
	}
	return tw.Close()
}

// layerOf builds the gzipped layer tar and returns it with its diff ID (digest of the
// uncompressed tar).
func layerOf(files []File) (layer []byte, diffID string, err error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	dirs := map[string]bool{}
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range sorted {
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, "", fmt.Errorf("file %s: %w", f.Source, err)
		}
		name := strings.TrimPrefix(path.Clean(f.Path), "/")
		for dir := path.Dir(name); dir != "." && !dirs[dir]; dir = path.Dir(dir) {
			dirs[dir] = true
			if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir}); err != nil {
				return nil, "", err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if err != nil {
		return nil, "", err
	}
	zw.ModTime = epoch
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), "sha256:" + hexDigest(raw.Bytes()), nil
}

func hexDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func descriptor(mediaType string, blob []byte, annotations map[string]string) Descriptor {
	return Descriptor{MediaType: mediaType, Digest: "sha256:" + hexDigest(blob), Size: int64(len(blob)), Annotations: annotations}
}
