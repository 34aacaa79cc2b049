// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerImage is what a Dockerfile's final stage puts into its image.
type dockerImage struct {
	Files      map[string]string // path in the image → where it comes from: a package for a go build output, else the builder's path
	User       string
	Entrypoint []string
	Labels     map[string]string
}

// instructions splits a Dockerfile into instructions (continuation lines joined, comments
// dropped), each as its keyword (upper case) and its arguments.
func instructions(dockerfile string) [][2]string {
	var out [][2]string
	var cur strings.Builder
	for line := range strings.SplitSeq(dockerfile, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if rest, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(trimmed)
		keyword, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, [2]string{strings.ToUpper(keyword), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

var goBuildOutput = regexp.MustCompile(`go build [^&]*-o (/\S+) (\./\S+)`)

// parseDockerfile reads the final stage's COPY and ADD lines (sources in an earlier stage that
// are `go build -o` outputs are named by their package), USER, ENTRYPOINT and LABEL.
func parseDockerfile(dockerfile string) (dockerImage, error) {
	img := dockerImage{Files: map[string]string{}, Labels: map[string]string{}}
	built := map[string]string{} // go build output → package, in any stage
	final := false
	for _, ins := range instructions(dockerfile) {
		keyword, args := ins[0], ins[1]
		if keyword == "FROM" {
			img = dockerImage{Files: map[string]string{}, Labels: map[string]string{}}
			final = true // until the next FROM: the last stage is the image
			continue
		}
		switch keyword {
		case "RUN":
			for _, m := range goBuildOutput.FindAllStringSubmatch(args, -1) {
				built[m[1]] = m[2]
			}
		case "COPY", "ADD":
			fields := strings.Fields(args)
			for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
				fields = fields[1:]
			}
			if len(fields) < 2 {
				return img, fmt.Errorf("%s %s: want sources and a destination", keyword, args)
			}
			srcs, dst := fields[:len(fields)-1], fields[len(fields)-1]
			if len(srcs) > 1 && !strings.HasSuffix(dst, "/") {
				return img, fmt.Errorf("%s %s: several sources need a directory destination ending in /", keyword, args)
			}
			for _, src := range srcs {
				to := dst
				if strings.HasSuffix(dst, "/") {
					to = path.Join(dst, path.Base(src))
				}
				from := src
				if pkg, ok := built[src]; ok {
					from = pkg
				}
				img.Files[to] = from
			}
		case "USER":
			img.User = args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(args), &img.Entrypoint); err != nil {
				return img, fmt.Errorf("ENTRYPOINT %s: want the exec form, a JSON array: %w", args, err)
			}
		case "LABEL":
			for kv := range strings.FieldsSeq(args) {
				k, v, _ := strings.Cut(kv, "=")
				img.Labels[k] = v
			}
		}
	}
	if !final {
		return img, fmt.Errorf("no FROM: not a Dockerfile")
	}
	return img, nil
}

// goImage is the same description of the operator image image build makes, read from the image
// itself (its layer's files, its config), each binary named by its package as the Dockerfile's are.
func goImage(t *testing.T, s stamp) dockerImage {
	t.Helper()
	opts := testOptions(t, hostPlatform())
	for _, b := range operatorBinaries {
		if err := fakeBuild(hostPlatform(), b.Package, opts.Out+"/"+b.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	img, err := image(operatorSpec(opts.Out, opts.CAFile, s), hostPlatform())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	out := dockerImage{Files: map[string]string{}, User: cfg.Config.User, Entrypoint: cfg.Config.Entrypoint, Labels: cfg.Config.Labels}
	for p := range layerFiles(t, img) {
		out.Files[p] = p // the CA bundle: the same path in the builder (Debian's) as on this machine
		for _, b := range operatorBinaries {
			if p == "/"+b.Name {
				out.Files[p] = b.Package
			}
		}
	}
	return out
}

// compareWithDockerfile names every difference between the Dockerfile's image and image build's
// operator image: a file only in one, built from another package, the user, the entrypoint, a label.
func compareWithDockerfile(dockerfile string, goImg dockerImage, s stamp) error {
	d, err := parseDockerfile(dockerfile)
	if err != nil {
		return err
	}
	var diffs []string
	for _, p := range slices.Sorted(maps.Keys(goImg.Files)) {
		if from, ok := d.Files[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s is in make images' operator image (from %s) but not in the Dockerfile's final stage", p, goImg.Files[p]))
		} else if from != goImg.Files[p] {
			diffs = append(diffs, fmt.Sprintf("%s comes from %s in the Dockerfile, from %s in make images", p, from, goImg.Files[p]))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(d.Files)) {
		if _, ok := goImg.Files[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s is in the Dockerfile's image (from %s) but not in make images' operator image (hack/image operatorBinaries)", p, d.Files[p]))
		}
	}
	if d.User != goImg.User {
		diffs = append(diffs, fmt.Sprintf("the Dockerfile's USER is %q, make images' user %q", d.User, goImg.User))
	}
	if !slices.Equal(d.Entrypoint, goImg.Entrypoint) {
		diffs = append(diffs, fmt.Sprintf("the Dockerfile's ENTRYPOINT is %q, make images' %q", d.Entrypoint, goImg.Entrypoint))
	}
	stamped := map[string]string{}
	for k, v := range d.Labels {
		stamped[k] = strings.NewReplacer("${VERSION}", s.Version, "${COMMIT}", s.Commit).Replace(v)
	}
	if !maps.Equal(stamped, goImg.Labels) {
		diffs = append(diffs, fmt.Sprintf("the Dockerfile's labels are %v (stamped), make images' %v", stamped, goImg.Labels))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the Dockerfile and make images build different operator images:\n%s", strings.Join(diffs, "\n"))
	}
	return nil
}

// TestDockerfileBuildsTheSameImage: the image users build with Docker holds what the tested image
// (make images) holds: the same files at the same paths, each binary from the same package, the
// same user, entrypoint and labels. A binary added to operatorBinaries and not to the Dockerfile,
// or the reverse, fails here.
func TestDockerfileBuildsTheSameImage(t *testing.T) {
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := stamp{Version: "v0.3.0", Commit: "0123abc"}
	goImg := goImage(t, s)
	if len(goImg.Files) != len(operatorBinaries)+1 {
		t.Fatalf("make images' operator image holds %v: want every binary and the CA bundle", goImg.Files)
	}
	if err := compareWithDockerfile(string(dockerfile), goImg, s); err != nil {
		t.Error(err)
	}
}

// TestDockerfileDriftIsNamed is the comparison's negative control: a Dockerfile missing a binary,
// or building it from another package, or running as root, fails naming what differs.
func TestDockerfileDriftIsNamed(t *testing.T) {
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := stamp{Version: "v0.3.0", Commit: "0123abc"}
	goImg := goImage(t, s)
	for _, tc := range []struct{ old, new, want string }{
		{" /out/aether-identity /out/aether-csi-node /\n", " /out/aether-csi-node /\n", "/aether-identity is in make images' operator image (from ./cmd/identity) but not in the Dockerfile's final stage"},
		{"/out/aether-cni ./cmd/cni", "/out/aether-cni ./cmd/agent", "/aether-cni comes from ./cmd/agent in the Dockerfile, from ./cmd/cni in make images"},
		{" /out/aether-csi-node /\n", " /out/aether-csi-node /out/extra /\n", "/extra is in the Dockerfile's image"},
		{"USER 65532:65532", "USER 0:0", `the Dockerfile's USER is "0:0"`},
		{"COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/\n", "", "/etc/ssl/certs/ca-certificates.crt is in make images' operator image"},
	} {
		changed := strings.Replace(string(dockerfile), tc.old, tc.new, 1)
		if changed == string(dockerfile) {
			t.Fatalf("the Dockerfile has no %q to change: update this control", tc.old)
		}
		err := compareWithDockerfile(changed, goImg, s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("a Dockerfile with %q for %q: %v; want an error with %q", tc.new, tc.old, err, tc.want)
		} else {
			t.Logf("with %q for %q: %v", tc.new, tc.old, err)
		}
	}
}
