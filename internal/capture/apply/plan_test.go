// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/capture"
)

// rule is a return rule for port p: distinct texts, so distinct identities.
func rule(p int) capture.Rule {
	return capture.Rule{Match: capture.Match{Kind: capture.MatchOwner, UID: uint32(p)}, Verdict: capture.Verdict{Kind: capture.VerdictReturn}}
}

// TestPlanRules: the kept rules are those of have in want's order; the rest are deleted; each
// missing rule goes right after the kept rule before it (0: first). Rules are named by UID, have's
// handles are 100+UID.
func TestPlanRules(t *testing.T) {
	have := func(uids ...int) []ruleState {
		out := make([]ruleState, len(uids))
		for i, u := range uids {
			out[i] = ruleState{key: rule(u).String(), handle: uint64(100 + u)}
			if u < 0 {
				out[i].key = "" // a rule capture did not write
			}
		}
		return out
	}
	tests := map[string]struct {
		have, want []int
		plan       string // "-handle" deletions, then "+uid@after" additions
	}{
		"same":                      {have: []int{1, 2, 3}, want: []int{1, 2, 3}, plan: ""},
		"one missing in the middle": {have: []int{1, 3}, want: []int{1, 2, 3}, plan: "+2@101"},
		"missing first":             {have: []int{2, 3}, want: []int{1, 2, 3}, plan: "+1@0"},
		"one to delete":             {have: []int{1, 2, 3}, want: []int{1, 3}, plan: "-102"},
		"out of order":              {have: []int{3, 1}, want: []int{1, 3}, plan: "-101 +1@0"},
		"a rule of someone else":    {have: []int{-7, 1}, want: []int{1}, plan: "-93"},
		"a rule twice":              {have: []int{1, 1, 2}, want: []int{1, 2}, plan: "-101"},
		"empty chain":               {have: nil, want: []int{1, 2}, plan: "+1@0 +2@0"},
		"replaced middle":           {have: []int{1, 2, 4}, want: []int{1, 3, 4}, plan: "-102 +3@101"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := capture.Chain{Name: "output"}
			for _, u := range tt.want {
				c.Rules = append(c.Rules, rule(u))
			}
			b := &batch{}
			b.planRules(c, have(tt.have...))
			var got []string
			for _, d := range b.delRules {
				got = append(got, fmt.Sprintf("-%d", d.handle))
			}
			for _, a := range b.addRules {
				got = append(got, fmt.Sprintf("+%d@%d", a.rule.Match.UID, a.after))
			}
			if strings.Join(got, " ") != tt.plan {
				t.Errorf("plan %q, want %q", strings.Join(got, " "), tt.plan)
			}
			if changed := len(b.addRules) > 0; changed != (len(b.rulesChanged) == 1) {
				t.Errorf("rulesChanged %v with %d additions", b.rulesChanged, len(b.addRules))
			}
		})
	}
}

// TestDiffElements: one walk of two sorted lists.
func TestDiffElements(t *testing.T) {
	e := func(s string) capture.Element {
		ap := netip.MustParseAddrPort(s)
		return capture.Element{Addr: ap.Addr(), Port: ap.Port()}
	}
	list := func(ss ...string) []capture.Element {
		var out []capture.Element
		for _, s := range ss {
			out = append(out, e(s))
		}
		return out
	}
	have := list("10.0.0.1:80", "10.0.0.1:443", "10.0.0.2:80", "10.0.0.3:80")
	want := list("10.0.0.1:80", "10.0.0.2:80", "10.0.0.2:9000", "10.0.0.4:80")
	added, deleted := diffElements(have, want)
	if !reflect.DeepEqual(added, list("10.0.0.2:9000", "10.0.0.4:80")) || !reflect.DeepEqual(deleted, list("10.0.0.1:443", "10.0.0.3:80")) {
		t.Errorf("added %v, deleted %v", added, deleted)
	}
	if a, d := diffElements(want, want); a != nil || d != nil {
		t.Errorf("the same list: added %v, deleted %v", a, d)
	}
	if a, d := diffElements(nil, want); !reflect.DeepEqual(a, want) || d != nil {
		t.Errorf("from nothing: added %v, deleted %v", a, d)
	}
}
