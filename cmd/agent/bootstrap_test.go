// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// TestWriteEnvoyBootstrap writes the bootstrap in each format Envoy reads, over an older file,
// and reads it back as Envoy does: the node's bootstrap, readable by another user, no temporary
// file left behind.
func TestWriteEnvoyBootstrap(t *testing.T) {
	config := xds.BootstrapConfig{NodeID: "node-a"}
	want, err := xds.Bootstrap(config)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bootstrap.yaml", "bootstrap.yml", "bootstrap.json"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte("an older bootstrap"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := writeEnvoyBootstrap(path, config); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := yaml.YAMLToJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			got := &bootstrapv3.Bootstrap{}
			if err := protojson.Unmarshal(raw, got); err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if !proto.Equal(got, want) {
				t.Errorf("wrote a bootstrap other than xds.Bootstrap's:\n%s", data)
			}
			if name == "bootstrap.json" && !strings.HasPrefix(string(data), "{") {
				t.Errorf("a .json bootstrap is not JSON:\n%s", data)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != 0o644 {
				t.Errorf("the bootstrap's mode is %v, want 0644 (Envoy runs as another user)", info.Mode().Perm())
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Errorf("the directory holds %d files, want the bootstrap alone: %v", len(entries), entries)
			}
		})
	}
}

// TestWriteEnvoyBootstrapRefuses: a path Envoy could not parse, a bootstrap Bootstrap refuses and
// a directory that does not exist are errors naming the flag or field and the value, and leave
// nothing behind.
func TestWriteEnvoyBootstrapRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		path   string
		config xds.BootstrapConfig
		want   []string
	}{
		"no extension":    {filepath.Join(dir, "bootstrap"), xds.BootstrapConfig{NodeID: "n"}, []string{"--envoy-bootstrap", "bootstrap\"", ".yaml or .json"}},
		"text format":     {filepath.Join(dir, "bootstrap.pb_text"), xds.BootstrapConfig{NodeID: "n"}, []string{"--envoy-bootstrap", "bootstrap.pb_text", ".yaml or .json"}},
		"public admin":    {filepath.Join(dir, "bootstrap.yaml"), xds.BootstrapConfig{NodeID: "n", AdminAddress: "0.0.0.0:19000"}, []string{"AdminAddress", "0.0.0.0:19000", "loopback"}},
		"missing dir":     {filepath.Join(dir, "absent", "bootstrap.yaml"), xds.BootstrapConfig{NodeID: "n"}, []string{"--envoy-bootstrap", "absent/bootstrap.yaml", "no such file or directory"}},
		"missing node ID": {filepath.Join(dir, "bootstrap.yaml"), xds.BootstrapConfig{}, []string{"NodeID is empty"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := writeEnvoyBootstrap(tc.path, tc.config)
			if err == nil {
				t.Fatal("written")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
		})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("refused writes left files behind: %v", entries)
	}
}
