// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command image builds the project's container images without a Docker engine, and pushes them:
//
//	go run ./hack/image build -o bin/images -version <v> -commit <sha> -spire <dir> -spire-version v1.13.3 \
//	  [-envoy <dir> -envoy-version 1.40.0 -envoy-debs <a.deb>,<b.deb>,...] [-platforms linux/amd64,linux/arm64]
//	go run ./hack/image push -from bin/images -registry <registry>/<prefix> [-tag <operator tag>]
//
// build cross-compiles the operator's binaries (operatorBinaries) for each platform, then writes
// one OCI archive per image into -o (<archive>.tar, the format `ctr images import` reads, and
// <archive>.digest, the digest containerd will report): the operator, the cluster tier's test
// server and pause, and SPIRE's server and agent from -spire's binaries (the host's platform only:
// they are cgo), and the node Envoy's image for the cluster tier from -envoy's release binary and
// the Debian packages -envoy-debs (the host's platform only too; envoy.go). One platform gives an
// image, several an OCI image index. The archives are deterministic: the same binaries give the
// same digests.
//
// push pushes the operator's and SPIRE's images from -from to <registry>/<prefix>/<repository>:<tag>
// (operator, spire-server, spire-agent; the tags of their names, or -tag for the operator), with
// the credentials of the Docker configuration file when the registry needs any.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|push [flags]; image build -h or image push -h for the flags")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = buildCommand(args)
	case "push":
		err = pushCommand(args)
	default:
		err = fmt.Errorf("unknown command %q: want build or push", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func buildCommand(args []string) error {
	var opts buildOptions
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	fs.StringVar(&opts.Out, "o", "bin/images", "The directory to write the archives, their digests and the binaries (bin/<os>-<arch>) into")
	platforms := fs.String("platforms", "", "Comma-separated <os>/<arch> to build for, for example linux/amd64,linux/arm64; empty: the host's")
	fs.StringVar(&opts.Stamp.Version, "version", "unknown", "What the operator's binaries print for --version, and its image's version label")
	fs.StringVar(&opts.Stamp.Commit, "commit", "unknown", "The commit the operator is built from, stamped like -version and its image's revision label")
	fs.StringVar(&opts.SpireDir, "spire", "", "The directory holding the host's spire-server and spire-agent (hack/build-spire.sh); empty: no SPIRE images")
	fs.StringVar(&opts.SpireVersion, "spire-version", "", "SPIRE's version: the SPIRE images' tag (required with -spire)")
	fs.StringVar(&opts.CAFile, "ca", caCertificates, "The CA bundle the operator image holds at "+caCertificates)
	fs.StringVar(&opts.Envoy.Dir, "envoy", "", "The directory holding the envoy release binary (hack/build-envoy.sh); empty: no Envoy image")
	fs.StringVar(&opts.Envoy.Version, "envoy-version", "", "Envoy's release, for example 1.40.0: the Envoy image's tag is v<it> (required with -envoy)")
	debs := fs.String("envoy-debs", "", "Comma-separated Debian packages (.deb) the Envoy image takes its libraries and shell from (hack/build-debs.sh; required with -envoy)")
	_ = fs.Parse(args)
	var err error
	if opts.Platforms, err = parsePlatforms(*platforms); err != nil {
		return err
	}
	if opts.SpireDir != "" && opts.SpireVersion == "" {
		return fmt.Errorf("-spire %s needs -spire-version, the SPIRE images' tag (v1.13.3)", opts.SpireDir)
	}
	if *debs != "" {
		opts.Envoy.Debs = strings.Split(*debs, ",")
	}
	if opts.Envoy.Dir != "" && (opts.Envoy.Version == "" || len(opts.Envoy.Debs) == 0) {
		return fmt.Errorf("-envoy %s needs -envoy-version (the release, 1.40.0) and -envoy-debs (the packages of hack/build-debs.sh, comma-separated): got -envoy-version %q, -envoy-debs %q",
			opts.Envoy.Dir, opts.Envoy.Version, *debs)
	}
	opts.Build = goBuild
	return buildImages(opts, os.Stdout)
}

func pushCommand(args []string) error {
	var opts pushOptions
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	fs.StringVar(&opts.From, "from", "bin/images", "The directory of image build's archives")
	fs.StringVar(&opts.Registry, "registry", "", "The registry and repository prefix to push to, <host>[:<port>]/<prefix> (required)")
	fs.StringVar(&opts.Tag, "tag", "", "The operator image's tag in the registry; empty: its name's (dev)")
	_ = fs.Parse(args)
	if opts.Registry == "" {
		return fmt.Errorf("-registry is empty: give the registry and prefix to push to, for example REGISTRY=registry.example:5000/aether")
	}
	return pushImages(opts, os.Stdout)
}
