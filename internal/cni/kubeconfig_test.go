// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestWriteKubeconfig renders an in-cluster configuration (the agent's token and CA as files, as
// a pod has them) and the plugin's token into a self-contained kubeconfig that client-go loads
// back, 0600, carrying the plugin's token and none of the agent's credentials, rewritten only
// when the token changes.
func TestWriteKubeconfig(t *testing.T) {
	dir := t.TempDir()
	token, ca := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	write(t, token, "agent-token", 0o600)
	write(t, ca, "-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n", 0o644)
	cfg := &rest.Config{Host: "https://10.96.0.1:443", BearerTokenFile: token, TLSClientConfig: rest.TLSClientConfig{CAFile: ca},
		Impersonate: rest.ImpersonationConfig{UserName: "someone"}}
	path := filepath.Join(dir, "run", "cni.kubeconfig")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}

	wrote, err := WriteKubeconfig(path, cfg, "plugin-token-1")
	if err != nil || !wrote {
		t.Fatalf("WriteKubeconfig = %v, %v", wrote, err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600: it holds a credential", info.Mode().Perm(), err)
	}
	loaded, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Host != cfg.Host || loaded.BearerToken != "plugin-token-1" || string(loaded.CAData) != read(t, ca) {
		t.Errorf("loaded back: host %q, token %q, CA %q", loaded.Host, loaded.BearerToken, loaded.CAData)
	}
	if loaded.Impersonate.UserName != "" || loaded.BearerTokenFile != "" {
		t.Errorf("the agent's credentials leaked into the plugin's kubeconfig: impersonating %q, token file %q", loaded.Impersonate.UserName, loaded.BearerTokenFile)
	}

	if wrote, err := WriteKubeconfig(path, cfg, "plugin-token-1"); wrote || err != nil {
		t.Errorf("an unchanged token: wrote %v, %v; want no write", wrote, err)
	}
	if wrote, err := WriteKubeconfig(path, cfg, "plugin-token-2"); !wrote || err != nil { // renewed
		t.Errorf("a renewed token: wrote %v, %v; want a write", wrote, err)
	}
	if loaded, err := clientcmd.BuildConfigFromFlags("", path); err != nil || loaded.BearerToken != "plugin-token-2" {
		t.Errorf("after renewal the kubeconfig carries %q (%v)", loaded.BearerToken, err)
	}
	onlyFiles(t, filepath.Dir(path), "cni.kubeconfig")

	if _, err := WriteKubeconfig(path, cfg, ""); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Errorf("no token: %v, want a refusal", err)
	}
	cfg.CAFile = filepath.Join(dir, "missing")
	if _, err := WriteKubeconfig(path, cfg, "plugin-token-2"); err == nil {
		t.Error("a CA file that is not there: no error")
	}
}
