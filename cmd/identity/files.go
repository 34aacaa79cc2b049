// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/spiffe/go-spiffe/v2/workloadapi"

	"github.com/aether-mesh/aether-operator/internal/proxyless"
)

// The certificate files' names, in --dir: those of the proxyless bootstrap's file_watcher.
var (
	certificateName = filepath.Base(proxyless.CertificateFile)
	keyName         = filepath.Base(proxyless.KeyFile)
	bundleName      = filepath.Base(proxyless.BundleFile)
)

// The files' modes. The key is readable by its owner and group: the readers are the pod's app
// containers, which may run as another user than this one, and share its group when the pod
// sets fsGroup (the emptyDir is then group-owned by it) or a pod-level runAsGroup. Nobody
// outside the pod sees the directory, an emptyDir of this pod.
const (
	keyMode    os.FileMode = 0o640
	publicMode os.FileMode = 0o644
)

// errorLogInterval is the least time between two log lines repeating the same Workload API
// error: an outage of SPIRE's agent is said, not shouted.
const errorLogInterval = time.Minute

// filesCommand is `aether-identity files`: it runs until it is stopped (SIGTERM, when the pod's
// containers have exited).
func filesCommand(ctx context.Context, args []string, logger *log.Logger) int {
	flags, socket := workloadFlags("files", logger)
	dir := flags.String("dir", proxyless.IdentityDir, "the directory of the certificate files")
	if err := flags.Parse(args); err != nil {
		return exitUsage
	}
	if info, err := os.Stat(*dir); err != nil || !info.IsDir() {
		logger.Printf("--dir=%q is not a directory (%v): want the mounted volume the files go to, for example %s", *dir, err, proxyless.IdentityDir)
		return exitUsage
	}
	client, err := newClient(ctx, *socket)
	if err != nil {
		logger.Print(err)
		return exitUsage
	}
	defer client.Close()
	logger.Printf("keeping %s, %s and %s in %s current from the SPIRE Workload API at %s", certificateName, keyName, bundleName, *dir, *socket)
	err = client.WatchX509Context(ctx, filesWatcher(*dir, *socket, podFromEnv(), logger))
	if ctx.Err() != nil {
		return exitOK // stopped
	}
	logger.Printf("the Workload API at %s refused the watch: %v", *socket, err)
	return exitFailed
}

// filesWatcher writes each X.509 context the Workload API sends into dir and logs the errors,
// each distinct one at once and a repeated one at most every errorLogInterval. On an error the
// files stay as they are: the last SVID is served until it is replaced.
func filesWatcher(dir, socket string, p pod, logger *log.Logger) watcher {
	var lastError string
	var lastLogged time.Time
	return watcher{
		update: func(c *workloadapi.X509Context) {
			changed, err := writeFiles(dir, c)
			switch {
			case err != nil:
				logger.Printf("could not write the SVID %s into %s (the files keep the previous one): %v", c.DefaultSVID().ID, dir, err)
			case changed:
				svid := c.DefaultSVID()
				logger.Printf("wrote %s (serial %x, valid until %s) into %s", svid.ID, svid.Certificates[0].SerialNumber,
					svid.Certificates[0].NotAfter.UTC().Format(time.RFC3339), dir)
			}
			lastError = ""
		},
		fail: func(err error) {
			text := p.diagnose(socket, err)
			if text == lastError && time.Since(lastLogged) < errorLogInterval {
				return
			}
			lastError, lastLogged = text, time.Now()
			logger.Printf("%s (the files, if any, keep the last SVID)", text)
		},
	}
}

// writeFiles writes c's default SVID, its key and its trust domain's bundle into dir, each file
// replaced whole (written aside, then renamed over the old one), and reports whether any file
// changed. The bundle goes first, then the key, then the certificate. A reader between two
// renames may see a new key beside an old certificate: grpc-go's file_watcher then keeps its
// previous pair (they do not match) and reads again on its next refresh; the probe fails and is
// run again.
func writeFiles(dir string, c *workloadapi.X509Context) (bool, error) {
	svid := c.DefaultSVID()
	bundle, err := c.Bundles.GetX509BundleForTrustDomain(svid.ID.TrustDomain())
	if err != nil {
		return false, err
	}
	certPEM, keyPEM, err := svid.Marshal()
	if err != nil {
		return false, err
	}
	bundlePEM, err := bundle.Marshal()
	if err != nil {
		return false, err
	}
	changed := false
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{bundleName, bundlePEM, publicMode}, {keyName, keyPEM, keyMode}, {certificateName, certPEM, publicMode}} {
		wrote, err := replaceFile(filepath.Join(dir, f.name), f.data, f.mode)
		if err != nil {
			return changed, err
		}
		changed = changed || wrote
	}
	return changed, nil
}

// replaceFile makes path hold data with mode, unless it does already: a temporary file in the
// same directory, synced, then renamed over path, so that a reader sees the old file or the new
// one, never a part. It reports whether it wrote.
func replaceFile(path string, data []byte, mode os.FileMode) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		if info, err := os.Stat(path); err == nil && info.Mode().Perm() == mode {
			return false, nil
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name()) // gone already after the rename
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("replacing %s: %w", path, err)
	}
	return true, nil
}
