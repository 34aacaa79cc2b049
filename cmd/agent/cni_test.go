// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/model"
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

// TestUninstallSubcommand runs `agent uninstall` on a node whose agent is gone: the plugin
// leaves the CNI directories, the capture table of the pod in the registry beside --cni-socket
// leaves its (real) network namespace, another owner's table stays, and the registry goes.
func TestUninstallSubcommand(t *testing.T) {
	root := t.TempDir()
	binDir, confDir, runDir := filepath.Join(root, "bin"), filepath.Join(root, "net.d"), filepath.Join(root, "run")
	for _, d := range []string{binDir, confDir, runDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conflist := filepath.Join(confDir, "10-aether.conflist")
	chained := `{"cniVersion":"1.0.0","name":"aether","plugins":[{"type":"bridge"},{"type":"aether-cni","agentSocket":"/run/aether/cni.sock"}]}`
	if err := os.WriteFile(conflist, []byte(chained), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := nstest.NewNamed(t, "aeproxycmd")
	if _, err := apply.New().Sync(ns.Path, capture.Build(model.Mesh{}, model.LocalPod{Namespace: "web", Name: "a", NetNS: ns.Path}, capture.Options{})); err != nil {
		t.Fatal(err)
	}
	ns.Nft(t, "add", "table", "inet", "cni-owned")
	file := filepath.Join(runDir, "netns.json")
	registry, _, err := agent.OpenNetNS(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.Record("pod-a", ns.Path); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAMESPACE", "mesh-system")
	args := []string{"--cni-bin-dir=" + binDir, "--cni-conf-dir=" + confDir, "--cni-socket=" + filepath.Join(runDir, "cni.sock"), "--cni-kubeconfig="}

	var out bytes.Buffer
	if code := runCNISubcommand("uninstall", args, &out); code != 0 {
		t.Fatalf("uninstall exited %d: %s", code, out.String())
	}
	if want := "1 removed, 0 already absent, 0 failed"; !strings.Contains(out.String(), want) {
		t.Errorf("uninstall said %q, want %q", out.String(), want)
	}
	if has, err := cni.HasPlugin(mustRead(t, conflist)); has || err != nil {
		t.Errorf("after uninstall the conflist chains us: %v %v", has, err)
	}
	if got := ns.Nft(t, "list", "tables"); strings.Contains(got, "aether") || !strings.Contains(got, "table inet cni-owned") {
		t.Errorf("after uninstall the pod's namespace holds tables %q, want inet cni-owned alone", got)
	}
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the registry %s is still there (%v)", file, err)
	}
}

// TestNetNSDrainTail: --netns-drain-tail's duration is the option's; 0 (none) is a negative
// option, the option's zero being its default; a negative flag is refused, naming the flag.
func TestNetNSDrainTail(t *testing.T) {
	for flag, want := range map[time.Duration]time.Duration{time.Minute: time.Minute, 5 * time.Second: 5 * time.Second, 0: -1} {
		if got, err := netnsDrainTail(flag); err != nil || got != want {
			t.Errorf("netnsDrainTail(%s) = %s, %v; want %s", flag, got, err, want)
		}
	}
	if _, err := netnsDrainTail(-time.Second); err == nil || !strings.Contains(err.Error(), "--netns-drain-tail -1s is negative") {
		t.Errorf("a negative tail: %v, want a refusal naming the flag", err)
	}
}
