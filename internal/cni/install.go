// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Installer puts the plugin on a node and takes it off again: the binary in the node's CNI bin
// dir, and its Entry last in the node's conflist (the first configuration file of the CNI conf
// dir, the one the runtime uses). Every write is atomic (a temporary file in the same directory,
// synced, then renamed over the old one), so the runtime, which may read the conflist at any
// moment, sees either the old file or the new one.
type Installer struct {
	// BinDir and ConfDir are the node's CNI directories as mounted here (the DaemonSet mounts the
	// host's /opt/cni/bin and /etc/cni/net.d at /host/opt/cni/bin and /host/etc/cni/net.d).
	BinDir  string
	ConfDir string
	// Binary is the plugin binary to copy (in the agent's image: /aether-cni).
	Binary string
	// Entry is the plugin's object in the conflist.
	Entry Entry
}

// confExtensions are the files a runtime reads as CNI configurations (libcni.ConfFiles).
var confExtensions = []string{".conf", ".conflist", ".json"}

// Conflist is the path of the configuration the runtime uses: the first, in lexical order, of the
// conf dir's configuration files. fs.ErrNotExist when there is none yet (the node's primary CNI
// has not written its own).
func (in Installer) Conflist() (string, error) {
	entries, err := os.ReadDir(in.ConfDir)
	if err != nil {
		return "", fmt.Errorf("reading the CNI conf dir: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && slices.Contains(confExtensions, filepath.Ext(e.Name())) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no CNI configuration (%s) in %s yet: %w", strings.Join(confExtensions, ", "), in.ConfDir, fs.ErrNotExist)
	}
	slices.Sort(names)
	return filepath.Join(in.ConfDir, names[0]), nil
}

// WaitForConflist polls for the node's conflist until one exists or ctx ends; report is called
// every reportEvery while it waits (the primary CNI writes its configuration when it starts).
func (in Installer) WaitForConflist(ctx context.Context, reportEvery time.Duration, report func(error)) (string, error) {
	lastReport := time.Now()
	for {
		path, err := in.Conflist()
		if !errors.Is(err, fs.ErrNotExist) {
			return path, err
		}
		if time.Since(lastReport) >= reportEvery {
			report(err)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the node's CNI configuration: %w (last: %w)", ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

// Install copies the binary (first: the runtime must find it once the conflist names it), then
// chains the Entry into the conflist. It reports the conflist and whether it changed; a node
// already as wanted is left untouched.
func (in Installer) Install() (conflist string, changed bool, err error) {
	copied, err := in.installBinary()
	if err != nil {
		return "", false, err
	}
	conflist, edited, err := in.editConflist(func(data []byte) ([]byte, bool, error) { return InsertPlugin(data, in.Entry) })
	return conflist, copied || edited, err
}

// Ensure puts back what went missing: the binary if it is gone (a full comparison is Install's),
// and the Entry if the conflist lost it or holds another version of it (a primary CNI that
// rewrites its conflist when it restarts drops plugins it did not write). Cheap enough to poll.
func (in Installer) Ensure() (conflist string, changed bool, err error) {
	copied := false
	if _, err := os.Stat(in.binaryPath()); errors.Is(err, fs.ErrNotExist) {
		if copied, err = in.installBinary(); err != nil {
			return "", false, err
		}
	}
	conflist, edited, err := in.editConflist(func(data []byte) ([]byte, bool, error) { return InsertPlugin(data, in.Entry) })
	return conflist, copied || edited, err
}

// Uninstall takes the Entry out of the conflist (first: the runtime must not call a binary that
// is gone), then removes the binary. Idempotent: a node without the plugin is left untouched.
func (in Installer) Uninstall() (conflist string, changed bool, err error) {
	conflist, edited, err := in.editConflist(RemovePlugin)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // no conflist: nothing chains the plugin
	}
	if err != nil {
		return conflist, false, err
	}
	removed := true
	if err := os.Remove(in.binaryPath()); errors.Is(err, fs.ErrNotExist) {
		removed = false
	} else if err != nil {
		return conflist, edited, fmt.Errorf("removing the plugin binary: %w", err)
	}
	return conflist, edited || removed, nil
}

// Installed reports whether the node's conflist chains the plugin and the binary is in place.
func (in Installer) Installed() (bool, error) {
	path, err := in.Conflist()
	if err != nil {
		return false, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	has, err := HasPlugin(data)
	if err != nil || !has {
		return false, annotate(path, err)
	}
	_, err = os.Stat(in.binaryPath())
	return err == nil, nil
}

func (in Installer) binaryPath() string { return filepath.Join(in.BinDir, PluginType) }

// installBinary copies Binary into BinDir as PluginType, mode 0755, unless an identical file is
// there already.
func (in Installer) installBinary() (bool, error) {
	src, err := os.ReadFile(in.Binary)
	if err != nil {
		return false, fmt.Errorf("reading the plugin binary to install: %w", err)
	}
	dst := in.binaryPath()
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, src) {
		return false, nil
	}
	if err := WriteFileAtomic(dst, src, 0o755); err != nil {
		return false, fmt.Errorf("installing the plugin binary: %w", err)
	}
	return true, nil
}

// editConflist rewrites the node's conflist through edit, atomically and keeping its mode, when
// edit changes it.
func (in Installer) editConflist(edit func([]byte) ([]byte, bool, error)) (string, bool, error) {
	path, err := in.Conflist()
	if err != nil {
		return "", false, err
	}
	info, err := os.Stat(path)
	if err != nil {
		return path, false, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return path, false, err
	}
	out, changed, err := edit(data)
	if err != nil || !changed {
		return path, false, annotate(path, err)
	}
	if err := WriteFileAtomic(path, out, info.Mode().Perm()); err != nil {
		return path, false, fmt.Errorf("writing %s: %w", path, err)
	}
	return path, true, nil
}

func annotate(path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", path, err)
}

// WriteFileAtomic writes data to path through a temporary file in the same directory, synced
// and renamed over path: a reader sees the old file or the new one, never a part.
func WriteFileAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, bytes.NewReader(data)); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
