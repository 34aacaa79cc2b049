// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package golden

import "testing"

func TestDiff(t *testing.T) {
	cases := map[string]struct{ want, got, diff string }{
		"one line changed, two lines of context": {
			want: "a\nb\nc\nd\ne\nf\ng\nh\n", got: "a\nb\nc\nD\ne\nf\ng\nh\n",
			diff: "  b\n  c\n- d\n+ D\n  e\n  f\n",
		},
		"equal inputs: no diff":   {want: "a\nb\n", got: "a\nb\n", diff: ""},
		"a line added at the end": {want: "a\n", got: "a\nb\n", diff: "  a\n+ b\n"},
		"far apart changes are separated": {
			want: "1\n2\n3\n4\n5\n6\n7\n8\n9\n", got: "x\n2\n3\n4\n5\n6\n7\n8\ny\n",
			diff: "- 1\n+ x\n  2\n  3\n  ...\n  7\n  8\n- 9\n+ y\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Diff(tc.want, tc.got); got != tc.diff {
				t.Errorf("Diff:\n%q\nwant\n%q", got, tc.diff)
			}
		})
	}
}
