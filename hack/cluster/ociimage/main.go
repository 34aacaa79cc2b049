// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command ociimage writes an OCI image archive (an image layout in a tar, the format
// `ctr images import` reads) from static binaries, with no Docker engine and no registry:
//
//	ociimage -name docker.io/aether/operator:dev -o operator.tar \
//	  -entrypoint /manager -file bin/manager=/manager -file bin/agent=/agent
//
// The image has one layer holding the files (mode 0755, owned by root), runs as 65532:65532
// unless -user says otherwise, and is for linux on the architecture of -arch (default amd64).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/aether-mesh/aether-operator/hack/cluster/ociimage/oci"
)

type files []oci.File

func (f *files) String() string { return fmt.Sprint(*f) }

func (f *files) Set(v string) error {
	src, dst, ok := strings.Cut(v, "=")
	if !ok || src == "" || !strings.HasPrefix(dst, "/") {
		return fmt.Errorf("-file %q: want <path on disk>=<absolute path in the image>, for example bin/manager=/manager", v)
	}
	*f = append(*f, oci.File{Source: src, Path: dst})
	return nil
}

func main() {
	var (
		img        oci.Image
		out        string
		entrypoint string
	)
	flag.StringVar(&img.Name, "name", "", "image name, for example docker.io/aether/operator:dev (required)")
	flag.StringVar(&out, "o", "", "output archive (required)")
	flag.StringVar(&entrypoint, "entrypoint", "", "entrypoint, space-separated (required)")
	flag.StringVar(&img.User, "user", "65532:65532", "user the image runs as")
	flag.StringVar(&img.Arch, "arch", "amd64", "architecture")
	flag.Var((*files)(&img.Files), "file", "<path on disk>=<absolute path in the image>; repeat for each file")
	flag.Parse()
	if img.Name == "" || out == "" || entrypoint == "" || len(img.Files) == 0 {
		fmt.Fprintln(os.Stderr, "ociimage: -name, -o, -entrypoint and at least one -file are required")
		flag.Usage()
		os.Exit(2)
	}
	img.Entrypoint = strings.Fields(entrypoint)
	f, err := os.Create(out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ociimage: %v\n", err)
		os.Exit(1)
	}
	if err := oci.Write(f, img); err != nil {
		_ = f.Close()
		_ = os.Remove(out)
		fmt.Fprintf(os.Stderr, "ociimage: %v\n", err)
		os.Exit(1)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "ociimage: %v\n", err)
		os.Exit(1)
	}
}
