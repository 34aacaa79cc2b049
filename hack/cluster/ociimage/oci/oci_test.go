// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readArchive returns the archive's files by name.
func readArchive(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = data
	}
}

func blob(t *testing.T, files map[string][]byte, d Descriptor) []byte {
	t.Helper()
	data, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok {
		t.Fatalf("blob %s is missing", d.Digest)
	}
	if int64(len(data)) != d.Size || "sha256:"+hexDigest(data) != d.Digest {
		t.Fatalf("blob %s: size %d digest sha256:%s, descriptor says %d %s", d.Digest, len(data), hexDigest(data), d.Size, d.Digest)
	}
	return data
}

// TestWrite reads an archive back the way an importer does: index → manifest → config and
// layer, every blob checked against its descriptor's digest and size, the layer's diff ID
// against the config, the files and modes in the layer against what went in.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	manager := filepath.Join(dir, "manager")
	if err := os.WriteFile(manager, []byte("#!/bin/true\nmanager"), 0o600); err != nil {
		t.Fatal(err)
	}
	img := Image{Name: "docker.io/aether/operator:dev", Entrypoint: []string{"/manager"}, User: "65532:65532", Arch: "amd64",
		Files: []File{{Source: manager, Path: "/manager"}, {Source: manager, Path: "/usr/local/bin/agent"}}}
	var archive bytes.Buffer
	if err := Write(&archive, img); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, archive.Bytes())
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %s", files["oci-layout"])
	}

	var index struct {
		SchemaVersion int          `json:"schemaVersion"`
		Manifests     []Descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if index.SchemaVersion != 2 || len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] != img.Name ||
		index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "dev" {
		t.Fatalf("index = %+v", index)
	}
	var manifest struct {
		Config Descriptor   `json:"config"`
		Layers []Descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blob(t, files, index.Manifests[0]), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Config       struct {
			Entrypoint []string
			User       string
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blob(t, files, manifest.Config), &config); err != nil {
		t.Fatal(err)
	}
	if config.OS != "linux" || config.Architecture != "amd64" || strings.Join(config.Config.Entrypoint, " ") != "/manager" || config.Config.User != "65532:65532" {
		t.Errorf("config = %+v", config)
	}

	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, manifest.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != "sha256:"+hexDigest(raw) {
		t.Errorf("diff_ids %v, the layer's uncompressed digest is sha256:%s", config.RootFS.DiffIDs, hexDigest(raw))
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	got := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h.Mode
	}
	want := map[string]int64{"manager": 0o755, "usr/": 0o755, "usr/local/": 0o755, "usr/local/bin/": 0o755, "usr/local/bin/agent": 0o755}
	if len(got) != len(want) {
		t.Errorf("layer entries %v, want %v", got, want)
	}
	for name, mode := range want {
		if got[name] != mode {
			t.Errorf("layer entry %s mode %o, want %o (entries %v)", name, got[name], mode, got)
		}
	}

	// Same files, same bytes: the archive is reproducible.
	var again bytes.Buffer
	if err := Write(&again, img); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), archive.Bytes()) {
		t.Error("writing the same image twice gave different archives")
	}
}

func TestWriteMissingFile(t *testing.T) {
	err := Write(io.Discard, Image{Name: "x:y", Files: []File{{Source: "/nonexistent/manager", Path: "/manager"}}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/manager") {
		t.Errorf("got %v, want an error naming the file", err)
	}
}
