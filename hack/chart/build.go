// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The kustomizations the chart is made of, under the repository's config/.
const (
	// baseDir is the operator without the node's Envoy: envoy.enabled=false.
	baseDir = "config/base"
	// defaultDir is what users deploy, config/base with the component config/envoy:
	// envoy.enabled=true.
	defaultDir = "config/default"
	// certManagerDir holds the webhook's cert-manager Issuer and Certificate, built with
	// config/base's namespace and name prefix: certManager.enabled=true.
	certManagerDir = "config/certmanager"
	// spireDir is the component that deploys SPIRE and wires the node agent to it, added to
	// config/base and to config/default: spire.enabled (its patches of the node agent) and
	// spire.install (its own objects).
	spireDir = "config/spire"
	// prometheusDir holds the ServiceMonitors, the alerts and the Grafana dashboard, built with
	// config/base's namespace and name prefix: prometheus.serviceMonitor.enabled,
	// prometheus.rules.enabled and prometheus.dashboard.enabled, by kind.
	prometheusDir = "config/prometheus"
)

// An object is one Kubernetes object of a build.
type object struct {
	kind, name, namespace string
	node                  *yaml.Node
}

// builds are the kustomize builds the chart is generated from.
type builds struct {
	// namespace and prefix are config/base's namespace and namePrefix, which the chart replaces
	// by the release's namespace and the chart's full name.
	namespace, prefix                  string
	base, def, certManager, prometheus []object
	// baseSpire and defSpire are config/base and config/default with the component config/spire.
	baseSpire, defSpire []object
}

// kustomizeAll builds config/base, config/default, config/certmanager and config/prometheus (under
// config/base's namespace and prefix) from the repository at root.
func kustomizeAll(root string) (*builds, error) {
	b := &builds{}
	var err error
	if b.namespace, b.prefix, err = baseNaming(root); err != nil {
		return nil, err
	}
	if b.base, err = kustomize(filepath.Join(root, baseDir)); err != nil {
		return nil, err
	}
	if b.def, err = kustomize(filepath.Join(root, defaultDir)); err != nil {
		return nil, err
	}
	if b.certManager, err = kustomizeUnder(root, certManagerDir, b.namespace, b.prefix); err != nil {
		return nil, err
	}
	if b.prometheus, err = kustomizeUnder(root, prometheusDir, b.namespace, b.prefix); err != nil {
		return nil, err
	}
	if b.baseSpire, err = kustomizeWith(root, baseDir, spireDir); err != nil {
		return nil, fmt.Errorf("%s with the component %s: %w", baseDir, spireDir, err)
	}
	if b.defSpire, err = kustomizeWith(root, defaultDir, spireDir); err != nil {
		return nil, fmt.Errorf("%s with the component %s: %w", defaultDir, spireDir, err)
	}
	return b, nil
}

// kustomize is `kustomize build dir`, as objects.
func kustomize(dir string) ([]object, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	data, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	docs, err := decodeAll(data)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	objs := make([]object, 0, len(docs))
	for _, d := range docs {
		o := object{node: d}
		if v := lookup(d, "kind"); v != nil {
			o.kind = v.Value
		}
		meta := lookup(d, "metadata")
		if v := lookup(meta, "name"); v != nil {
			o.name = v.Value
		}
		if v := lookup(meta, "namespace"); v != nil {
			o.namespace = v.Value
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// kustomizeUnder builds the kustomization dir (relative to root) with namespace and namePrefix
// set, as config/base would if it listed dir among its resources.
func kustomizeUnder(root, dir, namespace, prefix string) ([]object, error) {
	return kustomizeOverlay(root, func(rel func(string) (string, error)) (string, error) {
		r, err := rel(dir)
		return fmt.Sprintf("namespace: %s\nnamePrefix: %s\nresources:\n- %s\n", namespace, prefix, r), err
	})
}

// kustomizeWith builds the kustomization dir with the component component (both relative to
// root), as the overlay config/spire's kustomization.yaml shows users does.
func kustomizeWith(root, dir, component string) ([]object, error) {
	return kustomizeOverlay(root, func(rel func(string) (string, error)) (string, error) {
		d, err := rel(dir)
		if err != nil {
			return "", err
		}
		c, err := rel(component)
		return fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n- %s\n", d, c), err
	})
}

// kustomizeOverlay builds the kustomization that text writes, in a temporary directory; text
// gets a function giving the path of a directory of the repository relative to that one
// (kustomize takes a resource directory by a relative path only).
func kustomizeOverlay(root string, text func(rel func(string) (string, error)) (string, error)) ([]object, error) {
	tmp, err := os.MkdirTemp("", "aether-chart-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	rel := func(dir string) (string, error) {
		abs, err := filepath.Abs(filepath.Join(root, dir))
		if err != nil {
			return "", err
		}
		return filepath.Rel(tmp, abs)
	}
	k, err := text(rel)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return nil, err
	}
	return kustomize(tmp)
}

// baseNaming reads config/base's namespace and namePrefix.
func baseNaming(root string) (namespace, prefix string, err error) {
	path := filepath.Join(root, baseDir, "kustomization.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	var k struct {
		Namespace  string `yaml:"namespace"`
		NamePrefix string `yaml:"namePrefix"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	if k.Namespace == "" || !strings.HasSuffix(k.NamePrefix, "-") {
		return "", "", fmt.Errorf("%s: namespace %q, namePrefix %q: the chart needs both, the prefix ending in '-' (it becomes the chart's name)",
			path, k.Namespace, k.NamePrefix)
	}
	return k.Namespace, k.NamePrefix, nil
}
