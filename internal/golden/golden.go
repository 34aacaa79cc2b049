// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package golden helps golden-file tests: a readable line diff of an expected and an actual
// output. Standard library only, so the pure packages' tests may use it too.
package golden

import (
	"fmt"
	"slices"
	"strings"
)

// Diff is a line-by-line diff of want and got (longest common subsequence), "-" for a line
// only in want, "+" for a line only in got, with up to two lines of context around each change.
func Diff(want, got string) string {
	a := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	b := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
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
