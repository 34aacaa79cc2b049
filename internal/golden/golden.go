// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package golden is the golden-file mechanism of every translation test: cases are
// testdata/<case><in suffix> files, outputs testdata/<case><out suffix>, rewritten with -update
// (orphans deleted), compared otherwise with a readable line diff. Standard library and
// sigs.k8s.io/yaml only (no cluster client), so the pure packages' tests may use it too.
package golden

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Diff is a line-by-line diff of want and got (longest common subsequence), "-" for a line
// only in want, "+" for a line only in got, with up to two lines of context around each change.
func Diff(want, got string) string {
	a := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	b := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	// The common head and tail are context, not part of the quadratic table: a golden file of
	// thousands of lines with one change costs a table of that change's size.
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	common, after := a[:head], a[len(a)-tail:]
	a, b = a[head:len(a)-tail], b[head:len(b)-tail]
	// lcs[i][j] is the length of the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i, ai := range slices.Backward(a) {
		for j, bj := range slices.Backward(b) {
			if ai == bj {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	for _, l := range common {
		lines = append(lines, line{' ', l})
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			lines = append(lines, line{' ', a[i]})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', a[i]})
			i++
		default:
			lines = append(lines, line{'+', b[j]})
			j++
		}
	}
	for _, l := range after {
		lines = append(lines, line{' ', l})
	}
	const context = 2
	var sb strings.Builder
	lastShown := -1
	for k, l := range lines {
		near := false
		for d := max(0, k-context); d <= min(len(lines)-1, k+context); d++ {
			near = near || lines[d].op != ' '
		}
		if !near {
			continue
		}
		if lastShown >= 0 && k > lastShown+1 {
			sb.WriteString("  ...\n")
		}
		fmt.Fprintf(&sb, "%c %s\n", l.op, l.text)
		lastShown = k
	}
	return sb.String()
}

// Cases returns the names of the cases in dir: the files named <case><inSuffix>, sorted.
func Cases(t testing.TB, dir, inSuffix string) []string {
	t.Helper()
	ins, err := filepath.Glob(filepath.Join(dir, "*"+inSuffix))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(ins))
	for _, in := range ins {
		names = append(names, strings.TrimSuffix(filepath.Base(in), inSuffix))
	}
	slices.Sort(names)
	if len(names) == 0 {
		t.Fatalf("no %s/*%s found", dir, inSuffix)
	}
	return names
}

// Compare checks got against the golden file dir/<name><outSuffix>, failing with a Diff; with
// update it writes got there instead.
func Compare(t testing.TB, dir, name, outSuffix string, got []byte, update bool) {
	t.Helper()
	path := filepath.Join(dir, name+outSuffix)
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("case %s: %v (run the test with -update to create it)", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("case %s: output differs from %s (-want +got):\n%s", name, path, Diff(string(want), string(got)))
	}
}

// Orphans fails for every dir/*<outSuffix> that no case produces (a stale output); with update
// it deletes them.
func Orphans(t testing.TB, dir string, cases []string, inSuffix, outSuffix string, update bool) {
	t.Helper()
	outs, err := filepath.Glob(filepath.Join(dir, "*"+outSuffix))
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range outs {
		name := strings.TrimSuffix(filepath.Base(out), outSuffix)
		if slices.Contains(cases, name) {
			continue
		}
		if update {
			if err := os.Remove(out); err != nil {
				t.Fatal(err)
			}
			t.Logf("case %s: deleted orphaned %s", name, out)
			continue
		}
		t.Errorf("case %s: %s has no %s%s (delete it, or run with -update)", name, out, name, inSuffix)
	}
}

// ReadStrict reads the case input dir/<name><inSuffix> into a T strictly: a misspelt field fails
// instead of silently leaving the input zero.
func ReadStrict[T any](t testing.TB, dir, name, inSuffix string) T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name+inSuffix))
	if err != nil {
		t.Fatal(err)
	}
	var in T
	if err := yaml.UnmarshalStrict(data, &in); err != nil {
		t.Fatalf("case %s: reading %s%s: %v", name, name, inSuffix, err)
	}
	return in
}

// YAML is v as sigs.k8s.io/yaml marshals it: the form of the translators' golden outputs.
func YAML(t testing.TB, v any) []byte {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
