// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Usage: go run ./hack/crdref -o docs/reference/crds.md config/crd/bases/*.yaml
func main() {
	out := flag.String("o", "", "the Markdown file to write (required)")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: crdref -o <file.md> <crd.yaml>...")
		os.Exit(2)
	}
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "crdref:", err)
		os.Exit(1)
	}
}

func run(out string, paths []string) error {
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(paths))
	for _, p := range paths {
		crd, err := Read(p)
		if err != nil {
			return err
		}
		crds = append(crds, crd)
	}
	var b bytes.Buffer
	if err := Write(&b, crds); err != nil {
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}
