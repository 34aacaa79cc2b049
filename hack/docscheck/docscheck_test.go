// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot: the tests run in hack/docscheck.
const repoRoot = "../.."

// TestRepositoryDocs: every link, make target, repository path and metric that README.md and
// docs/ name exists.
func TestRepositoryDocs(t *testing.T) {
	problems, err := Check(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckerCatchesLies is the negative control: a copy of the repository's docs (the rest of the
// repository linked in) with one lie of each kind planted (link, anchor, make target, path,
// metric, flag); each is reported with its file, its
// line and the bad reference, and nothing else is.
func TestCheckerCatchesLies(t *testing.T) {
	root := copyOfRepository(t)
	const file = "docs/concepts.md"
	planted := []struct{ text, want string }{
		{"A dead link: [gone](no-such-page.md).", "no-such-page.md"},
		{"A dead anchor: [gone](architecture.md#no-such-heading).", "#no-such-heading"},
		{"A dead anchor in the same file: [gone](#nor-this-one).", "#nor-this-one"},
		{"An unknown target: `make no-such-target`.", `"no-such-target"`},
		{"A missing path: `internal/xds/no-such-file.go`.", "internal/xds/no-such-file.go"},
		{"A missing package: `internal/nosuchpkg.Build`.", "internal/nosuchpkg.Build"},
		{"A metric no code exports: `aether_no_such_metric_total{reason}`.", "aether_" + "no_such_metric_total"}, // not one string: this file is Go source too
		{"A flag no binary defines: `--no-such-flag=1` on the manager.", "--no-such-flag"},
		{"A command of the agent: `/agent uninstall --nor-this-flag`.", "--nor-this-flag"},
		{"A link out of the repository: [out](https://example.invalid/).", "https://example.invalid/"},
		{"```sh\nmake run && make also-no-such-target\n```", `"also-no-such-target"`},
		{"```sh\nhelm install aether-operator dist/chart --set untested=1   # a path the tier never runs\n```", `"helm install aether-operator dist/chart --set untested=1" is not one of the install paths`},
		{"An install the tier does not run: `kubectl apply -k config/base`.", `"kubectl apply -k config/base" is not one of the install paths`},
	}
	path := filepath.Join(root, file)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimRight(string(b), "\n") + "\n"
	wantLines := make([]int, len(planted))
	for i, p := range planted {
		text += "\n"
		// A code block's lie is on its second line.
		wantLines[i] = strings.Count(text, "\n") + 1 + strings.Count(p.text, "\n")/2
		text += p.text + "\n"
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range problems {
		got[p.String()] = true
		t.Logf("caught: %s", p)
	}
	for i, p := range planted {
		prefix := fmt.Sprintf("%s:%d: ", file, wantLines[i])
		found := false
		for s := range got {
			if strings.HasPrefix(s, prefix) && strings.Contains(s, p.want) {
				found = true
				delete(got, s)
				break
			}
		}
		if !found {
			t.Errorf("the lie %q was not reported as %s…%s…", p.text, prefix, p.want)
		}
	}
	for s := range got {
		t.Errorf("reported beyond the planted lies: %s", s)
	}
}

// TestInstallPathsMustBeQuoted is the other half's negative control: docs/install.md without one
// of the install paths' commands is reported, naming the path.
func TestInstallPathsMustBeQuoted(t *testing.T) {
	root := copyOfRepository(t)
	path := filepath.Join(root, installPage)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "kubectl apply -k config/overlays/cert-manager"
	if !strings.Contains(string(b), cmd) {
		t.Fatalf("%s does not quote %q", installPage, cmd)
	}
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), cmd, "kubectl get pods")), 0o644); err != nil {
		t.Fatal(err)
	}
	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := installPage + `:1: the install path kustomize-cert-manager of hack/install/install.sh ("` + cmd + `") is not quoted here`
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Fatalf("problems %q, want exactly one starting %q", got, want)
	}
	t.Logf("caught: %s", got[0])
}

// copyOfRepository: a temporary root with README.md and docs/ copied and every other top-level
// entry linked to the repository's own.
func copyOfRepository(t *testing.T) string {
	t.Helper()
	repo, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case ".git", "README.md", "docs":
		default:
			if err := os.Symlink(filepath.Join(repo, e.Name()), filepath.Join(root, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.CopyFS(filepath.Join(root, "docs"), os.DirFS(filepath.Join(repo, "docs"))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "README.md"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestAnchor: GitHub's rule, on headings the docs have.
func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Endpoint programming latency (`make bench-latency`)":  "endpoint-programming-latency-make-bench-latency",
		"The manager's defaults, and how to read a regression": "the-managers-defaults-and-how-to-read-a-regression",
		"Using the mesh as HTTP_PROXY":                         "using-the-mesh-as-http_proxy",
		"Identity (SPIRE)":                                     "identity-spire",
		"AetherXDSNack":                                        "aetherxdsnack",
	} {
		if got := Anchor(heading); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", heading, got, want)
		}
	}
	_, anchors := split("# A\n\n## A\n\n```\n# not a heading\n```\n")
	for _, want := range []string{"a", "a-1"} {
		if !anchors[want] {
			t.Errorf("anchor #%s missing from %v", want, anchors)
		}
	}
	if anchors["not-a-heading"] {
		t.Errorf("a comment in a code block was taken for a heading: %v", anchors)
	}
}
