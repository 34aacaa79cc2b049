// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/cni"
)

// TestInstallCNISubcommand runs `agent install-cni` and `agent uninstall-cni` as the init
// container does, on a node's CNI directories in a temporary directory: the entry it chains last
// carries the flags (and the pod's own namespace among the ignored ones); both are idempotent.
func TestInstallCNISubcommand(t *testing.T) {
	root := t.TempDir()
	binDir, confDir := filepath.Join(root, "bin"), filepath.Join(root, "net.d")
	for _, d := range []string{binDir, confDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	binary := filepath.Join(root, "aether-cni")
	conflist := filepath.Join(confDir, "10-aether.conflist")
	original := `{"cniVersion":"1.0.0","name":"aether","plugins":[{"type":"bridge"},{"type":"loopback"}]}`
	for path, data := range map[string]string{binary: "plugin", conflist: original} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("POD_NAMESPACE", "mesh-system")
	args := []string{"--cni-bin-dir=" + binDir, "--cni-conf-dir=" + confDir, "--cni-plugin-binary=" + binary,
		"--cni-socket=/run/aether/cni.sock", "--cni-kubeconfig=", "--cni-timeout=3s", "--ignored-namespaces=kube-system"}

	for i := range 2 {
		var out bytes.Buffer
		if code := runCNISubcommand("install-cni", args, &out); code != 0 {
			t.Fatalf("install-cni #%d exited %d: %s", i+1, code, out.String())
		}
		if want := []string{"installed aether-cni", "aether-cni was already installed"}[i]; !strings.Contains(out.String(), want) {
			t.Errorf("install-cni #%d said %q, want %q", i+1, out.String(), want)
		}
	}
	var list struct {
		Plugins []cni.Entry `json:"plugins"`
	}
	data, _ := os.ReadFile(conflist)
	if err := json.Unmarshal(data, &list); err != nil || len(list.Plugins) != 3 {
		t.Fatalf("conflist after install: %s (%v)", data, err)
	}
	got, _ := json.Marshal(list.Plugins[2])
	want := `{"type":"aether-cni","agentSocket":"/run/aether/cni.sock","timeout":"3s","ignoredNamespaces":["kube-system","mesh-system"]}`
	if string(got) != want {
		t.Errorf("our entry %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(binDir, cni.PluginType)); err != nil {
		t.Errorf("binary: %v", err)
	}

	for i := range 2 {
		var out bytes.Buffer
		if code := runCNISubcommand("uninstall-cni", args, &out); code != 0 {
			t.Fatalf("uninstall-cni #%d exited %d: %s", i+1, code, out.String())
		}
		if want := []string{"removed aether-cni", "aether-cni was not installed"}[i]; !strings.Contains(out.String(), want) {
			t.Errorf("uninstall-cni #%d said %q, want %q", i+1, out.String(), want)
		}
	}
	if has, err := cni.HasPlugin(mustRead(t, conflist)); has || err != nil {
		t.Errorf("after uninstall the conflist chains us: %v %v", has, err)
	}

	var out bytes.Buffer
	if code := runCNISubcommand("install-cni", append(args, "--cni-socket=run/cni.sock"), &out); code != 2 || !strings.Contains(out.String(), `--cni-socket "run/cni.sock" is not an absolute path`) {
		t.Errorf("a relative socket: exit %d, %q", code, out.String())
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
