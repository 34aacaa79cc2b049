// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestWriteRows: every field of the fixture CRD has its row, with its type, whether it is
// required, its description on one line and each constraint the API server enforces.
func TestWriteRows(t *testing.T) {
	crd, err := Read("testdata/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Write(&b, []*apiextensionsv1.CustomResourceDefinition{crd}); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"- [Widget](#widget)\n",
		"## Widget\n",
		"- Group: `example.aether.io`; scope: Namespaced\n",
		"- Names for kubectl: `widgets`, `wdg`\n",
		"### example.aether.io/v1 (served, stored)\n",
		"| Size | `.spec.size` | integer |\n",
		"| `.spec` | object, required |  |\n",
		"| `.spec.labels` | map[string]string | Rule: at most three labels. |\n",
		"| `.spec.mode` | string | One of: `a`, `b`, `\"\"`. Default: `\"a\"`. |\n",
		"| `.spec.parts` | []object | At most 3 items. |\n",
		"| `.spec.parts[].name` | string, required | Pattern: `^x\\|y$`. |\n",
		"| `.spec.size` | integer (int32), required | size is how big, in units. Minimum: 1. Maximum: 9. |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("reference lacks %q; got:\n%s", want, got)
		}
	}
	// apiVersion, kind and metadata are every kind's; the reference leaves them out.
	if strings.Contains(got, "`.apiVersion`") || strings.Contains(got, "`.metadata`") {
		t.Errorf("reference lists the common fields:\n%s", got)
	}
}

// TestReadRefusesOtherKinds: a file that is no CRD is an error naming the file, not an empty
// section.
func TestReadRefusesOtherKinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cm.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Read(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Read(ConfigMap) = %v, want an error naming %s", err, path)
	}
}
