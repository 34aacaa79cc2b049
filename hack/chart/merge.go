// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// merge returns one tree that renders as off where the template condition cond is false and as
// on where it is true: what on adds (mapping keys, sequence items) is wrapped in
// {{- if cond }}, what it drops in {{- if not cond }}. A flag (--name=value) whose value differs
// becomes one item whose value is chosen by cond (config/spire's --identity-issuer=spire in place
// of none). Two other scalars that differ are an error naming path: a component may add to and
// remove from the objects it patches, and change a flag's value, not rewrite them.
func (t *templater) merge(path string, off, on *yaml.Node, cond string) (*yaml.Node, error) {
	switch {
	case equal(off, on):
		return clone(on), nil
	case flagName(off) != "" && flagName(off) == flagName(on):
		_, offValue, _ := strings.Cut(off.Value, "=")
		_, onValue, _ := strings.Cut(on.Value, "=")
		return str(flagName(on) + "=" + t.raw("{{ if "+cond+" }}"+onValue+"{{ else }}"+offValue+"{{ end }}")), nil
	case off.Kind == yaml.MappingNode && on.Kind == yaml.MappingNode:
		return t.mergeMappings(path, off, on, cond)
	case off.Kind == yaml.SequenceNode && on.Kind == yaml.SequenceNode:
		return t.mergeSequences(path, off, on, cond)
	}
	return nil, fmt.Errorf("%s is %q without and %q with the condition %s: the chart can template only what is added or removed",
		path, off.Value, on.Value, cond)
}

func (t *templater) mergeMappings(path string, off, on *yaml.Node, cond string) (*yaml.Node, error) {
	if templatedKeys(off) || templatedKeys(on) {
		return t.mergeTemplatedMappings(path, off, on, cond)
	}
	var keys []string
	for _, m := range []*yaml.Node{off, on} {
		for i := 0; i < len(m.Content); i += 2 {
			if !slices.Contains(keys, m.Content[i].Value) {
				keys = append(keys, m.Content[i].Value)
			}
		}
	}
	// kustomize writes keys sorted; so does the merge, so that the output does not depend on
	// which of the two trees a key came from.
	slices.Sort(keys)
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: on.Tag}
	var run []*yaml.Node // consecutive pairs present on one side only
	runCond := ""
	flush := func() {
		if len(run) > 0 {
			out.Content = append(out.Content, t.wrapKeys(runCond, run)...)
			run = nil
		}
	}
	for _, k := range keys {
		a, b := lookup(off, k), lookup(on, k)
		if a != nil && b != nil {
			flush()
			v, err := t.merge(path+"."+k, a, b, cond)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, str(k), v)
			continue
		}
		c, v := cond, b
		if b == nil {
			c, v = "not "+cond, a
		}
		if c != runCond {
			flush()
			runCond = c
		}
		run = append(run, str(k), clone(v))
	}
	flush()
	return out, nil
}

// templatedKeys says whether mapping m holds a key that is a template line (an earlier merge's
// {{- if }} or {{- end }}).
func templatedKeys(m *yaml.Node) bool {
	for i := 0; i < len(m.Content); i += 2 {
		if isToken(m.Content[i].Value) {
			return true
		}
	}
	return false
}

// mergeTemplatedMappings merges two mappings that an earlier merge templated (their keys hold its
// {{- if }} lines, which may repeat and must stay where they stand): key by key, in place. The
// keys must be the same: the second condition may change their values, not add or drop keys
// beside the first's.
func (t *templater) mergeTemplatedMappings(path string, off, on *yaml.Node, cond string) (*yaml.Node, error) {
	keys := func(m *yaml.Node) []string {
		var out []string
		for i := 0; i < len(m.Content); i += 2 {
			out = append(out, m.Content[i].Value)
		}
		return out
	}
	if !slices.Equal(keys(off), keys(on)) {
		return nil, fmt.Errorf("%s has keys %v without and %v with the condition %s, in a mapping already templated by another condition: the chart can template a key under one condition only",
			path, keys(off), keys(on), cond)
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: on.Tag}
	for i := 0; i < len(on.Content); i += 2 {
		k := on.Content[i].Value
		v, err := t.merge(path+"."+k, off.Content[i+1], on.Content[i+1], cond)
		if err != nil {
			return nil, err
		}
		out.Content = append(out.Content, str(k), v)
	}
	return out, nil
}

func (t *templater) mergeSequences(path string, off, on *yaml.Node, cond string) (*yaml.Node, error) {
	out := &yaml.Node{Kind: yaml.SequenceNode, Tag: on.Tag}
	var run []*yaml.Node
	runCond := ""
	flush := func() {
		if len(run) > 0 {
			out.Content = append(out.Content, t.wrapItems(runCond, run)...)
			run = nil
		}
	}
	add := func(c string, n *yaml.Node) {
		if c != runCond {
			flush()
			runCond = c
		}
		run = append(run, clone(n))
	}
	for _, step := range align(off.Content, on.Content) {
		switch {
		case step.off != nil && step.on != nil:
			flush()
			v, err := t.merge(fmt.Sprintf("%s[%s]", path, identity(step.on)), step.off, step.on, cond)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, v)
		case step.on != nil:
			add(cond, step.on)
		default:
			add("not "+cond, step.off)
		}
	}
	flush()
	return out, nil
}

// identity is what pairs an item of one sequence with an item of the other: a named mapping
// (a container, a volume, a mount, an environment variable) by its name (and mount path), any
// other item by its value.
func identity(n *yaml.Node) string {
	if f := flagName(n); f != "" {
		return "flag " + f
	}
	if name := lookup(n, "name"); name != nil {
		id := "name=" + name.Value
		if mp := lookup(n, "mountPath"); mp != nil {
			id += ",mountPath=" + mp.Value
		}
		return id
	}
	text, err := encode(n)
	if err != nil {
		return fmt.Sprintf("%p", n)
	}
	return text
}

// flagName is the name of the flag (--name) a scalar --name=value sets, or "".
func flagName(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode || !strings.HasPrefix(n.Value, "--") {
		return ""
	}
	name, _, ok := strings.Cut(n.Value, "=")
	if !ok {
		return ""
	}
	return name
}

// A step pairs an item of off with one of on, or stands for an item of one side alone.
type step struct{ off, on *yaml.Node }

// align pairs the items of off and on by identity along their longest common subsequence, in
// order, with the unpaired items of each side where they stand.
func align(off, on []*yaml.Node) []step {
	a := make([]string, len(off))
	for i, n := range off {
		a[i] = identity(n)
	}
	b := make([]string, len(on))
	for j, n := range on {
		b[j] = identity(n)
	}
	// lcs[i][j] is the length of the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := range slices.Backward(a) {
		for j := range slices.Backward(b) {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var steps []step
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			steps = append(steps, step{off[i], on[j]})
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			steps = append(steps, step{on: on[j]})
			j++
		default:
			steps = append(steps, step{off: off[i]})
			i++
		}
	}
	return steps
}
