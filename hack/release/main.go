// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command release builds the kubectl plugin's release: kubectl-aether cross-built for every
// platform kubectl users run, one reproducible .tar.gz per platform (the binary and LICENSE), and
// the krew manifest (aether.yaml) naming each archive's URL and SHA-256, so that the plugin
// installs with `kubectl krew install --manifest=aether.yaml` or from a krew index.
//
//	go run ./hack/release -version v0.3.0 -commit <sha> -url https://<where the archives are served> -o bin/release
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
)

func main() {
	var opts Options
	flag.StringVar(&opts.Version, "version", "", "The release's version, v<major>.<minor>.<patch> (krew needs semantic versions)")
	flag.StringVar(&opts.Commit, "commit", "", "The commit the release is built from (stamped into the binaries)")
	flag.StringVar(&opts.URL, "url", "", "The https:// base URL the archives will be served from; each platform's URL is <url>/<archive>")
	flag.StringVar(&opts.Out, "o", "bin/release", "The directory to write the archives and aether.yaml into")
	flag.Parse()
	opts.Build = goBuild(opts.Version, opts.Commit, shipped)
	opts.License = licenseFile
	manifest, err := Release(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	// The shipped build of this machine's platform, run: the unit tier runs a local build (the
	// same command without -trimpath and CGO_ENABLED=0, which would compile everything again).
	if slices.Contains(Platforms, Host()) {
		if err := checkReleased(opts.Out, opts.Version, opts.Commit); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			os.Exit(1)
		}
	} else {
		fmt.Fprintf(os.Stderr, "release: no archive for this machine (%s/%s) to run; the archives are built but not run\n", Host().OS, Host().Arch)
	}
	fmt.Println(manifest)
}
