// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// writeEnvoyBootstrap writes the node's Envoy bootstrap (xds.Bootstrap) to path, in the format
// its extension names, atomically: Envoy, starting beside the agent, reads either the previous
// file or this one, never a half-written one.
func writeEnvoyBootstrap(path string, c xds.BootstrapConfig) error {
	encode, err := bootstrapEncoder(path)
	if err != nil {
		return err
	}
	bs, err := xds.Bootstrap(c)
	if err != nil {
		return err
	}
	data, err := encode(bs)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, data); err != nil {
		return fmt.Errorf("--envoy-bootstrap %q: %w", path, err)
	}
	return nil
}

// bootstrapEncoder is the encoding Envoy expects of a bootstrap file named path: Envoy picks the
// parser by the extension.
func bootstrapEncoder(path string) (func(*bootstrapv3.Bootstrap) ([]byte, error), error) {
	switch filepath.Ext(path) {
	case ".yaml", ".yml":
		return xds.BootstrapYAML, nil
	case ".json":
		return xds.BootstrapJSON, nil
	}
	return nil, fmt.Errorf("--envoy-bootstrap %q: Envoy reads a bootstrap file by its extension, and this one has none it reads as YAML or JSON: end the path in .yaml or .json", path)
}

// writeFileAtomic writes data to a temporary file beside path and renames it over path. The file
// is world-readable (0644): Envoy runs as another user and the bootstrap holds no secret.
func writeFileAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, os.Remove(tmp.Name()))
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return errors.Join(err, tmp.Close())
	}
	if err := tmp.Chmod(0o644); err != nil {
		return errors.Join(err, tmp.Close())
	}
	if err := tmp.Sync(); err != nil {
		return errors.Join(err, tmp.Close())
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
