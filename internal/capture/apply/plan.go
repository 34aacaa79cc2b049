// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"slices"

	"github.com/google/nftables"

	"github.com/aether-mesh/aether-operator/internal/capture"
)

// tableState is what a namespace's table inet aether holds: as read from the kernel, or as the
// applier last committed it.
type tableState struct {
	sets   []setState   // sorted by name
	chains []chainState // sorted by name
	// foreign is true when the table holds something capture never makes (a set of another type,
	// a chain on another hook or of another priority): it is then replaced whole.
	foreign bool
}

type setState struct {
	name     string
	typ      capture.SetType
	elements []capture.Element // sorted, unique; shared with the Ruleset it was committed from
}

type chainState struct {
	name string
	// kernel is the chain as read from the kernel (nil when it comes from a commit, whose chain
	// is capture's by construction).
	kernel *nftables.Chain
	rules  []ruleState
}

// ruleState is a rule as the kernel holds it: its identity (its comment, the rule's text; empty
// for a rule capture did not write) and its handle (0 until listed after the commit that added it).
type ruleState struct {
	key    string
	handle uint64
}

// stateOf is the state of ruleset r once committed, its rules' handles taken from have where the
// same chain holds the same rule, 0 (unknown) otherwise.
func stateOf(r capture.Ruleset, have *tableState) *tableState {
	st := &tableState{}
	for _, s := range r.Sets {
		st.sets = append(st.sets, setState{name: s.Name, typ: s.Type, elements: s.Elements})
	}
	for _, c := range r.Chains {
		handles := map[string]uint64{}
		if have != nil {
			if hc, ok := have.chain(c.Name); ok {
				for _, hr := range hc.rules {
					handles[hr.key] = hr.handle
				}
			}
		}
		cs := chainState{name: c.Name}
		for _, rule := range c.Rules {
			cs.rules = append(cs.rules, ruleState{key: rule.String(), handle: handles[rule.String()]})
		}
		st.chains = append(st.chains, cs)
	}
	return st
}

func (t *tableState) set(name string) (setState, bool) {
	i := slices.IndexFunc(t.sets, func(s setState) bool { return s.name == name })
	if i < 0 {
		return setState{}, false
	}
	return t.sets[i], true
}

func (t *tableState) chain(name string) (chainState, bool) {
	i := slices.IndexFunc(t.chains, func(c chainState) bool { return c.name == name })
	if i < 0 {
		return chainState{}, false
	}
	return t.chains[i], true
}

// equal reports whether a and b hold the same sets, elements, chains and rules (handles included).
func (t *tableState) equal(o *tableState) bool {
	if t == nil || o == nil {
		return t == o
	}
	return t.foreign == o.foreign &&
		slices.EqualFunc(t.sets, o.sets, func(a, b setState) bool {
			return a.name == b.name && a.typ == b.typ && sameElements(a.elements, b.elements)
		}) &&
		slices.EqualFunc(t.chains, o.chains, func(a, b chainState) bool { return a.name == b.name && slices.Equal(a.rules, b.rules) })
}

// sameElements compares two sorted element lists, at no cost when they are the same slice (a
// ruleset committed unchanged shares its elements with the last one).
func sameElements(a, b []capture.Element) bool {
	if len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) {
		return true
	}
	return slices.Equal(a, b)
}

// batch is what one commit changes: the operations in the order the kernel must see them.
type batch struct {
	// replace deletes the table first (it is foreign), then creates it whole.
	replace bool
	// create adds the table (it is absent, or replaced).
	create bool

	addChains   []capture.Chain
	addSets     []capture.Set
	addElements []setElements
	delElements []setElements
	delRules    []ruleRef
	addRules    []ruleAdd
	delChains   []string
	delSets     []string

	// rulesChanged names the chains whose rules this batch adds to: their handles are listed
	// after the commit.
	rulesChanged []string
}

type setElements struct {
	set      capture.Set // name and type
	elements []capture.Element
}

type ruleRef struct {
	chain  string
	handle uint64
}

// ruleAdd puts rule into chain right after the rule of handle after, or first when after is 0.
type ruleAdd struct {
	chain capture.Chain
	rule  capture.Rule
	after uint64
}

// Stats count what a batch changes.
type Stats struct {
	ElementsAdded, ElementsDeleted int
	RulesAdded, RulesDeleted       int
	// Structure counts tables, chains and sets created or deleted.
	Structure int
}

func (b *batch) stats() Stats {
	s := Stats{RulesAdded: len(b.addRules), RulesDeleted: len(b.delRules),
		Structure: len(b.addChains) + len(b.addSets) + len(b.delChains) + len(b.delSets)}
	for _, set := range b.addSets {
		s.ElementsAdded += len(set.Elements)
	}
	for _, e := range b.addElements {
		s.ElementsAdded += len(e.elements)
	}
	for _, e := range b.delElements {
		s.ElementsDeleted += len(e.elements)
	}
	if b.replace {
		s.Structure++
	}
	if b.create {
		s.Structure++
	}
	return s
}

func (b *batch) empty() bool { return b.stats() == Stats{} }

// plan is the batch that turns have (nil: no table) into want.
func plan(have *tableState, want capture.Ruleset) *batch {
	b := &batch{}
	if have == nil || have.foreign || !chainsFit(have, want) {
		b.replace, b.create = have != nil, true
		have = &tableState{}
	}
	for _, s := range want.Sets {
		hs, ok := have.set(s.Name)
		if !ok {
			b.addSets = append(b.addSets, s)
			continue
		}
		added, deleted := diffElements(hs.elements, s.Elements)
		if len(added) > 0 {
			b.addElements = append(b.addElements, setElements{set: s, elements: added})
		}
		if len(deleted) > 0 {
			b.delElements = append(b.delElements, setElements{set: s, elements: deleted})
		}
	}
	for _, c := range want.Chains {
		hc, ok := have.chain(c.Name)
		if !ok {
			b.addChains = append(b.addChains, c)
		}
		b.planRules(c, hc.rules)
	}
	for _, hc := range have.chains {
		if !slices.ContainsFunc(want.Chains, func(c capture.Chain) bool { return c.Name == hc.name }) {
			b.delChains = append(b.delChains, hc.name)
		}
	}
	for _, hs := range have.sets {
		if _, ok := want.Set(hs.name); !ok {
			b.delSets = append(b.delSets, hs.name)
		}
	}
	return b
}

// chainsFit reports whether every chain have shares with want is want's base chain, and every set
// it shares is of want's type: else the table is replaced (a chain's hook or a set's type cannot
// be changed in place).
func chainsFit(have *tableState, want capture.Ruleset) bool {
	for _, c := range want.Chains {
		if hc, ok := have.chain(c.Name); ok && hc.kernel != nil && !sameChain(hc.kernel, c) {
			return false
		}
	}
	for _, s := range want.Sets {
		if hs, ok := have.set(s.Name); ok && hs.typ != s.Type {
			return false
		}
	}
	return true
}

// planRules turns chain c's rules from have into want's: it keeps the rules of have that want
// holds in the same relative order (each known by its text), deletes the others (a rule without
// capture's comment, a rule listed twice, one out of order), and puts each missing rule right
// after the kept rule before it.
func (b *batch) planRules(c capture.Chain, have []ruleState) {
	index := make(map[string]int, len(c.Rules))
	for i, r := range c.Rules {
		index[r.String()] = i
	}
	keptAt := make([]uint64, len(c.Rules)) // the handle of the rule kept at each index; 0: missing
	last := -1
	for _, h := range have {
		i, wanted := index[h.key]
		if wanted && i > last {
			keptAt[i], last = h.handle, i
			continue
		}
		b.delRules = append(b.delRules, ruleRef{chain: c.Name, handle: h.handle})
	}
	var after uint64
	changed := false
	for i, r := range c.Rules {
		if keptAt[i] != 0 {
			after = keptAt[i]
			continue
		}
		b.addRules = append(b.addRules, ruleAdd{chain: c, rule: r, after: after})
		changed = true
	}
	if changed {
		b.rulesChanged = append(b.rulesChanged, c.Name)
	}
}

// diffElements are the elements of want not in have, and of have not in want: one walk of the
// two sorted lists.
func diffElements(have, want []capture.Element) (added, deleted []capture.Element) {
	if sameElements(have, want) {
		return nil, nil
	}
	i, j := 0, 0
	for i < len(have) || j < len(want) {
		switch {
		case j == len(want) || (i < len(have) && compareElements(have[i], want[j]) < 0):
			deleted = append(deleted, have[i])
			i++
		case i == len(have) || compareElements(have[i], want[j]) > 0:
			added = append(added, want[j])
			j++
		default:
			i, j = i+1, j+1
		}
	}
	return added, deleted
}
