// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// node is a node's CNI directories in a temporary directory, with a primary CNI's conflist and a
// plugin binary to install.
type node struct {
	in       Installer
	conflist string
}

func newNode(t *testing.T) node {
	t.Helper()
	root := t.TempDir()
	in := Installer{BinDir: filepath.Join(root, "opt/cni/bin"), ConfDir: filepath.Join(root, "etc/cni/net.d"),
		Binary: filepath.Join(root, "image", PluginType), Entry: testEntry}
	for _, dir := range []string{in.BinDir, in.ConfDir, filepath.Dir(in.Binary)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, in.Binary, "#!/bin/true plugin v1", 0o755)
	write(t, filepath.Join(in.BinDir, "bridge"), "bridge", 0o755)
	// The runtime reads the first file in lexical order: 10-aether.conflist, not 20-other.conf
	// (nor a file of another extension).
	conflist := filepath.Join(in.ConfDir, "10-aether.conflist")
	write(t, conflist, bridgeConflist, 0o644)
	write(t, filepath.Join(in.ConfDir, "20-other.conf"), `{"cniVersion":"0.4.0","name":"other","type":"bridge"}`, 0o644)
	write(t, filepath.Join(in.ConfDir, "00-notes.txt"), "not a configuration", 0o644)
	return node{in: in, conflist: conflist}
}

func write(t *testing.T, path, data string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// onlyFiles fails unless dir holds exactly names (no temporary file left behind).
func onlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

func TestInstallAndUninstallAreIdempotentOnRealFiles(t *testing.T) {
	n := newNode(t)
	if err := os.Chmod(n.conflist, 0o640); err != nil { // an unusual mode, to see it kept
		t.Fatal(err)
	}

	conflist, changed, err := n.in.Install()
	if err != nil || !changed || conflist != n.conflist {
		t.Fatalf("Install: %s, changed %v, err %v; want %s changed", conflist, changed, err, n.conflist)
	}
	if got := strings.Join(pluginTypes(t, []byte(read(t, n.conflist))), ","); got != "bridge,portmap,loopback,aether-cni" {
		t.Errorf("plugins %s", got)
	}
	binary := filepath.Join(n.in.BinDir, PluginType)
	if read(t, binary) != "#!/bin/true plugin v1" {
		t.Error("the binary was not copied")
	}
	for path, mode := range map[string]fs.FileMode{binary: 0o755, n.conflist: 0o640} {
		if info, err := os.Stat(path); err != nil || info.Mode().Perm() != mode {
			t.Errorf("%s: mode %v (%v), want %v", path, info.Mode().Perm(), err, mode)
		}
	}
	if ok, err := n.in.Installed(); !ok || err != nil {
		t.Errorf("Installed = %v, %v", ok, err)
	}
	onlyFiles(t, n.in.ConfDir, "00-notes.txt", "10-aether.conflist", "20-other.conf")
	onlyFiles(t, n.in.BinDir, PluginType, "bridge")

	// Again: nothing to do, nothing written.
	before := read(t, n.conflist)
	info, _ := os.Stat(n.conflist)
	if _, changed, err := n.in.Install(); changed || err != nil {
		t.Errorf("second Install: changed %v, err %v", changed, err)
	}
	if after, _ := os.Stat(n.conflist); read(t, n.conflist) != before || !after.ModTime().Equal(info.ModTime()) {
		t.Error("a second Install rewrote the conflist")
	}

	// A new plugin version in the image replaces the binary.
	write(t, n.in.Binary, "#!/bin/true plugin v2", 0o755)
	if _, changed, err := n.in.Install(); !changed || err != nil || read(t, binary) != "#!/bin/true plugin v2" {
		t.Errorf("Install of a new binary: changed %v, err %v", changed, err)
	}

	if _, changed, err := n.in.Uninstall(); !changed || err != nil {
		t.Fatalf("Uninstall: changed %v, err %v", changed, err)
	}
	if got := strings.Join(pluginTypes(t, []byte(read(t, n.conflist))), ","); got != "bridge,portmap,loopback" {
		t.Errorf("plugins after uninstall %s", got)
	}
	onlyFiles(t, n.in.BinDir, "bridge")
	if ok, _ := n.in.Installed(); ok {
		t.Error("Installed after Uninstall")
	}
	if _, changed, err := n.in.Uninstall(); changed || err != nil {
		t.Errorf("second Uninstall: changed %v, err %v", changed, err)
	}
	onlyFiles(t, n.in.ConfDir, "00-notes.txt", "10-aether.conflist", "20-other.conf")
}

// TestEnsurePutsBackWhatAnotherWriterRemoved: a primary CNI that rewrites its conflist drops our
// entry; the agent's periodic Ensure puts it back, and the binary if it went.
func TestEnsurePutsBackWhatAnotherWriterRemoved(t *testing.T) {
	n := newNode(t)
	if _, _, err := n.in.Install(); err != nil {
		t.Fatal(err)
	}
	if _, changed, err := n.in.Ensure(); changed || err != nil {
		t.Errorf("Ensure on an installed node: changed %v, err %v", changed, err)
	}
	write(t, n.conflist, bridgeConflist, 0o644) // the primary CNI rewrote it
	if err := os.Remove(filepath.Join(n.in.BinDir, PluginType)); err != nil {
		t.Fatal(err)
	}
	if _, changed, err := n.in.Ensure(); !changed || err != nil {
		t.Fatalf("Ensure: changed %v, err %v", changed, err)
	}
	if ok, err := n.in.Installed(); !ok || err != nil {
		t.Errorf("Installed after Ensure = %v, %v", ok, err)
	}
}

func TestInstallRefusesASinglePluginConf(t *testing.T) {
	n := newNode(t)
	if err := os.Remove(n.conflist); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(n.in.ConfDir, "20-other.conf")
	before := read(t, other)
	_, _, err := n.in.Install()
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "not a conflist") {
		t.Errorf("err %v, want one naming %s and saying it is not a conflist", err, other)
	}
	if read(t, other) != before {
		t.Error("the refused file was changed")
	}
}

func TestWaitForConflist(t *testing.T) {
	in := Installer{ConfDir: t.TempDir()}
	if _, err := in.Conflist(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Conflist of an empty dir: %v, want fs.ErrNotExist", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reported := make(chan struct{}, 100)
	written := make(chan error, 1)
	go func() {
		<-reported // it waits, and says so, until the primary CNI writes its file
		written <- os.WriteFile(filepath.Join(in.ConfDir, "10-flannel.conflist"), []byte(bridgeConflist), 0o644)
	}()
	path, err := in.WaitForConflist(ctx, 0, func(error) { reported <- struct{}{} })
	if err != nil || filepath.Base(path) != "10-flannel.conflist" {
		t.Errorf("WaitForConflist = %s, %v", path, err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer stop()
	if _, err := (Installer{ConfDir: t.TempDir()}).WaitForConflist(short, time.Hour, func(error) {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForConflist past its context: %v", err)
	}
}
