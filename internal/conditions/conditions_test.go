// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package conditions

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMerge(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	cond := func(typ string, status metav1.ConditionStatus, reason string, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message", LastTransitionTime: at}
	}
	cases := map[string]struct {
		existing, desired []metav1.Condition
		wantTimes         []metav1.Time
	}{
		"new condition gets now": {
			desired:   []metav1.Condition{cond("Ready", "True", "A", metav1.Time{})},
			wantTimes: []metav1.Time{now},
		},
		"same status keeps its time, even when reason and message change": {
			existing:  []metav1.Condition{cond("Ready", "True", "A", then)},
			desired:   []metav1.Condition{cond("Ready", "True", "B", metav1.Time{})},
			wantTimes: []metav1.Time{then},
		},
		"flipped status moves the time": {
			existing:  []metav1.Condition{cond("Ready", "True", "A", then)},
			desired:   []metav1.Condition{cond("Ready", "False", "A", metav1.Time{})},
			wantTimes: []metav1.Time{now},
		},
		"each type on its own, in desired order": {
			existing:  []metav1.Condition{cond("B", "False", "X", then), cond("A", "True", "X", then)},
			desired:   []metav1.Condition{cond("A", "True", "X", metav1.Time{}), cond("B", "True", "X", metav1.Time{})},
			wantTimes: []metav1.Time{then, now},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Merge(tc.existing, tc.desired, 7, now)
			if len(got) != len(tc.desired) {
				t.Fatalf("got %d conditions, want %d", len(got), len(tc.desired))
			}
			for i, c := range got {
				if c.Type != tc.desired[i].Type || c.Status != tc.desired[i].Status || c.Reason != tc.desired[i].Reason {
					t.Errorf("condition %d = %s/%s/%s, want %s/%s/%s", i, c.Type, c.Status, c.Reason,
						tc.desired[i].Type, tc.desired[i].Status, tc.desired[i].Reason)
				}
				if !c.LastTransitionTime.Equal(&tc.wantTimes[i]) {
					t.Errorf("%s lastTransitionTime = %v, want %v", c.Type, c.LastTransitionTime, tc.wantTimes[i])
				}
				if c.ObservedGeneration != 7 {
					t.Errorf("%s observedGeneration = %d, want 7", c.Type, c.ObservedGeneration)
				}
			}
		})
	}
}

func TestFlipped(t *testing.T) {
	ready := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: "Ready", Status: s}}
	}
	cases := map[string]struct {
		before, after []metav1.Condition
		want          bool
	}{
		"appears":         {before: nil, after: ready("True"), want: true},
		"flips":           {before: ready("True"), after: ready("False"), want: true},
		"stays":           {before: ready("False"), after: ready("False"), want: false},
		"disappears":      {before: ready("False"), after: nil, want: false},
		"other type only": {before: nil, after: []metav1.Condition{{Type: "Other", Status: "True"}}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Flipped(tc.before, tc.after, "Ready"); got != tc.want {
				t.Errorf("Flipped = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes, two per rune
	for _, tc := range []struct {
		name  string
		in    string
		limit int
	}{
		{"short stays", "port 9000 is reserved", 1024},
		{"exactly the limit stays", strings.Repeat("a", 1024), 1024},
		{"one over is cut", strings.Repeat("a", 1025), 1024},
		{"multibyte cut on a rune boundary", long, 1024},
		{"condition limit", strings.Repeat("x", 100000), MaxConditionMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.in, tc.limit)
			if len(got) > tc.limit {
				t.Fatalf("len %d > limit %d", len(got), tc.limit)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("not valid UTF-8: %q", got[len(got)-20:])
			}
			if len(tc.in) <= tc.limit {
				if got != tc.in {
					t.Fatalf("changed a message within the limit: %q", got)
				}
				return
			}
			kept, _, ok := strings.Cut(got, "… (")
			if !ok || !strings.HasPrefix(tc.in, kept) || !strings.HasSuffix(got, fmt.Sprintf("(%d bytes cut)", len(tc.in)-len(kept))) {
				t.Fatalf("want a prefix of the input and the count of bytes cut, got ...%q", got[max(0, len(got)-40):])
			}
		})
	}
}
