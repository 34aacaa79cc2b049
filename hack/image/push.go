// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushOptions is what image push does.
type pushOptions struct {
	From     string
	Registry string
	Tag      string
}

// pushImages pushes each shipped archive of opts.From to opts.Registry, as it is (the digest
// pushed is the digest built), and prints each reference with its digest to w.
func pushImages(opts pushOptions, w io.Writer) error {
	prefix := strings.TrimSuffix(opts.Registry, "/")
	for _, archive := range shippedArchives {
		path := filepath.Join(opts.From, archive+".tar")
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("%w: run make images first", err)
		}
		ref, digest, err := pushArchive(path, prefix, opts.Tag)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s@%s\n", ref, digest); err != nil {
			return err
		}
	}
	return nil
}

// pushArchive pushes one archive to <prefix>/<repository>:<tag> (its name's tag, or tag when
// given and the archive is the operator's) and returns the reference and the digest pushed.
func pushArchive(path, prefix, tag string) (name.Reference, string, error) {
	dir, err := os.MkdirTemp("", "image-push-")
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	x, imageName, err := readArchive(path, dir)
	if err != nil {
		return nil, "", err
	}
	repo, ownTag, err := repoAndTag(imageName)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if tag == "" || imageName != operatorName {
		tag = ownTag
	}
	ref, err := name.ParseReference(prefix + "/" + repo + ":" + tag)
	if err != nil {
		return nil, "", fmt.Errorf("-registry %q: %w: give <host>[:<port>]/<prefix>", prefix, err)
	}
	t, ok := x.(remote.Taggable)
	if !ok {
		return nil, "", fmt.Errorf("%s: %T cannot be pushed", path, x)
	}
	if err := remote.Push(ref, t, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return nil, "", fmt.Errorf("push %s: %w", ref, err)
	}
	digest, err := x.Digest()
	if err != nil {
		return nil, "", err
	}
	return ref, digest.String(), nil
}
