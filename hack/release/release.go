// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Platform is one os/arch the plugin is built for.
type Platform struct{ OS, Arch string }

// licenseFile is the name of the license in the repository and in every archive.
const licenseFile = "LICENSE"

const amd64, arm64 = "amd64", "arm64"

// Platforms are those a release carries: where kubectl users run it.
var Platforms = []Platform{
	{"linux", amd64}, {"linux", arm64}, {"darwin", amd64}, {"darwin", arm64}, {"windows", amd64},
}

// Bin is the binary's name on p: kubectl finds a plugin by its name on the PATH.
func (p Platform) Bin() string {
	if p.OS == "windows" {
		return "kubectl-aether.exe"
	}
	return "kubectl-aether"
}

// Archive is the archive's file name for p.
func (p Platform) Archive(version string) string {
	return fmt.Sprintf("kubectl-aether_%s_%s_%s.tar.gz", version, p.OS, p.Arch)
}

// Options are a release's inputs.
type Options struct {
	Version, Commit, URL, Out string
	// License is the file every archive carries beside the binary.
	License string
	// Build builds the plugin for p into the file out.
	Build func(p Platform, out string) error
	// Platforms are those built; nil is every one of Platforms.
	Platforms []Platform
}

// semver is what krew accepts as a plugin's version.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func (o Options) validate() error {
	if !semver.MatchString(o.Version) {
		return fmt.Errorf("-version %q is not a semantic version: write v<major>.<minor>.<patch>, for example v0.3.0 (krew refuses anything else)", o.Version)
	}
	u, err := url.Parse(o.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("-url %q is not an https:// URL: write where the archives will be served, for example https://downloads.example/aether/%s", o.URL, o.Version)
	}
	return nil
}

// Release builds every platform's archive into o.Out and writes the krew manifest beside them;
// it returns the manifest's path.
func Release(o Options) (string, error) {
	if err := o.validate(); err != nil {
		return "", err
	}
	license, err := os.ReadFile(o.License)
	if err != nil {
		return "", fmt.Errorf("reading the license every archive carries: %w", err)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp("", "aether-release-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(work) }()
	targets := o.Platforms
	if targets == nil {
		targets = Platforms
	}
	var platforms []krewPlatform
	for _, p := range targets {
		bin := filepath.Join(work, p.OS+"-"+p.Arch, p.Bin())
		if err := o.Build(p, bin); err != nil {
			return "", fmt.Errorf("building %s/%s: %w", p.OS, p.Arch, err)
		}
		binary, err := os.ReadFile(bin)
		if err != nil {
			return "", err
		}
		archive, err := tarGz([]file{{p.Bin(), binary, 0o755}, {licenseFile, license, 0o644}})
		if err != nil {
			return "", err
		}
		name := p.Archive(o.Version)
		if err := os.WriteFile(filepath.Join(o.Out, name), archive, 0o644); err != nil {
			return "", err
		}
		sum := sha256.Sum256(archive)
		platforms = append(platforms, krewPlatform{
			Selector: krewSelector{MatchLabels: map[string]string{"os": p.OS, "arch": p.Arch}},
			URI:      strings.TrimSuffix(o.URL, "/") + "/" + name,
			SHA256:   hex.EncodeToString(sum[:]),
			Bin:      p.Bin(),
			Files:    []krewFile{{From: p.Bin(), To: "."}, {From: licenseFile, To: "."}},
		})
	}
	manifest, err := yaml.Marshal(krewPlugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin",
		Metadata: krewMeta{Name: "aether"},
		Spec: krewSpec{
			Version:          o.Version,
			ShortDescription: "Explain and check an Aether mesh",
			Description: "What a dial of a mesh service reaches and why (the resolution rule the mesh itself uses),\n" +
				"from any pod's point of view; every mesh service's ports, endpoints and routes; manifests\n" +
				"checked offline exactly as the admission webhook judges them.\n",
			Platforms: platforms,
		},
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(o.Out, "aether.yaml")
	return path, os.WriteFile(path, manifest, 0o644)
}

// krew's Plugin manifest (krew.googlecontainertools.github.com/v1alpha2), the fields a release
// sets.
type krewPlugin struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   krewMeta `json:"metadata"`
	Spec       krewSpec `json:"spec"`
}

type krewMeta struct {
	Name string `json:"name"`
}

type krewSpec struct {
	Version          string         `json:"version"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []krewPlatform `json:"platforms"`
}

type krewPlatform struct {
	Selector krewSelector `json:"selector"`
	URI      string       `json:"uri"`
	SHA256   string       `json:"sha256"`
	Bin      string       `json:"bin"`
	Files    []krewFile   `json:"files"`
}

type krewSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type krewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type file struct {
	name string
	data []byte
	mode int64
}

// epoch is every archive entry's time: the same inputs give the same archive, byte for byte.
var epoch = time.Unix(0, 0).UTC()

// tarGz is a reproducible .tar.gz of files, in order: fixed times and owners.
func tarGz(files []file) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// goBuild builds ./cmd/kubectl-aether for a platform, static and stamped with version and commit.
func goBuild(version, commit string) func(Platform, string) error {
	return func(p Platform, out string) error {
		cmd := exec.Command("go", "build", "-trimpath",
			"-ldflags", "-s -w -X github.com/aether-mesh/aether-operator/internal/version.version="+version+
				" -X github.com/aether-mesh/aether-operator/internal/version.commit="+commit,
			"-o", out, "./cmd/kubectl-aether")
		cmd.Env = append(os.Environ(), "GOOS="+p.OS, "GOARCH="+p.Arch, "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		return cmd.Run()
	}
}
