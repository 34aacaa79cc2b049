// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestOperatorImageMatchesTheDockerfile: the cluster tier's operator image (the Makefile's images
// target, written by this command) holds the same binaries, at the same paths, as the image users
// build from the Dockerfile; a binary added to one and not the other (the CNI plugin the agent's
// init container copies) would pass one tier and fail the other.
func TestOperatorImageMatchesTheDockerfile(t *testing.T) {
	dockerfile, err := os.ReadFile("../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	built := binaries(`-o /out/([a-z-]+) \./cmd/`, dockerfile)
	copied := binaries(`/out/([a-z-]+)`, regexp.MustCompile(`COPY --from=builder [^\n]*`).Find(dockerfile))
	// The operator image's command: from its -name to the next command of the recipe.
	operator := regexp.MustCompile(`(?s)-name docker\.io/aether/operator:dev.*?\n\t[a-z]`).Find(makefile)
	inImage := binaries(`/bin/([a-z-]+)=/[a-z-]+"`, operator)
	if len(built) == 0 || !slices.Equal(built, copied) || !slices.Equal(built, inImage) {
		t.Errorf("the Dockerfile builds %v and copies %v; the Makefile's operator image holds %v: keep them the same", built, copied, inImage)
	}
	if !slices.Contains(inImage, "aether-cni") {
		t.Errorf("the operator image lacks aether-cni, which the agent's init container installs: %v", inImage)
	}
}

// binaries is the first group of every match of pattern in data, sorted.
func binaries(pattern string, data []byte) []string {
	var out []string
	for _, m := range regexp.MustCompile(pattern).FindAllSubmatch(data, -1) {
		out = append(out, string(m[1]))
	}
	slices.Sort(out)
	return out
}
