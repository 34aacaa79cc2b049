// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestPushToARegistry pushes the built images to a real registry (go-containerregistry's, in
// memory, on 127.0.0.1), then reads each manifest back by its tag: the digest the registry serves
// is the digest the build recorded, for one platform's image and for a two-platform index.
func TestPushToARegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	for _, tc := range []struct {
		platforms []v1.Platform
		prefix    string
		tag       string // the operator's tag in the registry
	}{
		{[]v1.Platform{amd64}, "one/aether", ""},
		{[]v1.Platform{amd64, arm64}, "two/aether", "v0.3.0"},
	} {
		opts := testOptions(t, tc.platforms...)
		if err := buildImages(opts, io.Discard); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := pushImages(pushOptions{From: opts.Out, Registry: host + "/" + tc.prefix, Tag: tc.tag}, &out); err != nil {
			t.Fatal(err)
		}
		operatorTag := "dev"
		if tc.tag != "" {
			operatorTag = tc.tag
		}
		want := map[string]string{
			"operator":     host + "/" + tc.prefix + "/operator:" + operatorTag,
			"spire-server": host + "/" + tc.prefix + "/spire-server:v1.13.3",
			"spire-agent":  host + "/" + tc.prefix + "/spire-agent:v1.13.3",
		}
		for archive, ref := range want {
			recorded, err := os.ReadFile(filepath.Join(opts.Out, archive+".digest"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := crane.Digest(ref)
			if err != nil {
				t.Fatalf("%s: %v", ref, err)
			}
			if got+"\n" != string(recorded) {
				t.Errorf("%s: the registry serves %s, the build recorded %s", ref, got, recorded)
			}
			if !strings.Contains(out.String(), ref+"@"+got+"\n") {
				t.Errorf("push printed %q, want a line %s@%s", out.String(), ref, got)
			}
		}
		// The test images are not pushed.
		if _, err := crane.Digest(host + "/" + tc.prefix + "/testserver:dev"); err == nil {
			t.Errorf("the test server's image was pushed")
		}
		if len(tc.platforms) > 1 {
			idx, err := crane.Manifest(want["operator"])
			if err != nil {
				t.Fatal(err)
			}
			m, err := v1.ParseIndexManifest(bytes.NewReader(idx))
			if err != nil || len(m.Manifests) != 2 {
				t.Errorf("the pushed operator index: %v, %v; want two platforms' images", m, err)
			}
		}
	}
}

// TestPushNeedsTheArchives: pushing before building names what is missing and what to run.
func TestPushNeedsTheArchives(t *testing.T) {
	err := pushImages(pushOptions{From: t.TempDir(), Registry: "127.0.0.1:1/aether"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "operator.tar") || !strings.Contains(err.Error(), "make images") {
		t.Errorf("push from an empty directory: %v; want operator.tar named and make images", err)
	}
}
