// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command chart generates the Helm chart dist/chart from config/ (make chart), and checks that
// dist/chart is what config/ generates (make verify-chart), so that the chart and the kustomize
// install cannot drift apart.
//
// The chart is kustomize's output, templated: `kustomize build` (sigs.k8s.io/kustomize/api, as a
// library) of config/base and config/default, merged into one set of objects whose differences
// (the node's Envoy, config/envoy) turn on envoy.enabled; the same with the component
// config/spire, whose patches of the node agent turn on spire.enabled and whose own objects
// (SPIRE, in its namespace) on spire.install; config/certmanager's objects under
// certManager.enabled; the release's namespace and names derived from the release for
// config/base's; and the values in place of what they set: the rows of table.go, and the code of
// values.go and spire.go for what no row's shape fits. Its layout is
// that of kubebuilder's helm plugin (helm/v2-alpha): Chart.yaml, values.yaml, templates/<part>/
// (SPIRE's objects in templates/spire/).
//
//	go run ./hack/chart -o dist/chart        # write the chart
//	go run ./hack/chart -verify dist/chart   # exit 1, with a diff, unless dist/chart is current
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

func main() {
	root := flag.String("root", ".", "The repository's root directory.")
	out := flag.String("o", "", "Write the chart into this directory, replacing the chart it holds.")
	verify := flag.String("verify", "", "Generate the chart into a temporary directory and fail, with a diff, when this directory differs from it.")
	flag.Parse()
	if (*out == "") == (*verify == "") {
		fmt.Fprintln(os.Stderr, "chart: give one of -o DIR (write the chart) and -verify DIR (check it)")
		os.Exit(2)
	}
	if err := run(*root, *out, *verify); err != nil {
		fmt.Fprintf(os.Stderr, "chart: %v\n", err)
		os.Exit(1)
	}
}

func run(root, out, verify string) error {
	files, err := generate(root)
	if err != nil {
		return err
	}
	if out != "" {
		return writeChart(out, files)
	}
	tmp, err := os.MkdirTemp("", "aether-chart-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := writeChart(filepath.Join(tmp, "chart"), files); err != nil {
		return err
	}
	diff, err := compareDirs(verify, filepath.Join(tmp, "chart"))
	if err != nil {
		return err
	}
	if diff != "" {
		return fmt.Errorf("%s is not what config/ generates; run make chart and commit the result (a hand edit belongs in config/ or hack/chart):\n%s", verify, diff)
	}
	return nil
}

// writeChart replaces the chart in dir by files. It refuses a directory that holds files but
// no Chart.yaml: not a chart to replace.
func writeChart(dir string, files map[string]string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
			return fmt.Errorf("%s holds files but no Chart.yaml: not replacing it", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// compareDirs describes how the files under have differ from those under want: a unified diff
// of each file both hold that differs, and the files only one holds. Empty: none.
func compareDirs(have, want string) (string, error) {
	a, err := readTree(have)
	if err != nil {
		return "", err
	}
	b, err := readTree(want)
	if err != nil {
		return "", err
	}
	var names []string
	for n := range a {
		names = append(names, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out strings.Builder
	for _, n := range names {
		x, inHave := a[n]
		y, inWant := b[n]
		switch {
		case !inWant:
			fmt.Fprintf(&out, "%s: not generated from config/ (delete it)\n", filepath.Join(have, n))
		case !inHave:
			fmt.Fprintf(&out, "%s: missing (generated from config/)\n", filepath.Join(have, n))
		case x != y:
			d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: difflib.SplitLines(x), B: difflib.SplitLines(y),
				FromFile: filepath.Join(have, n), ToFile: "generated/" + n, Context: 2,
			})
			if err != nil {
				return "", err
			}
			out.WriteString(d)
		}
	}
	return out.String(), nil
}

// readTree reads every file under dir, by slash-separated path relative to dir.
func readTree(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	return files, err
}
