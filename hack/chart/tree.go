// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeAll reads a multi-document YAML stream into the documents' root nodes.
func decodeAll(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
			docs = append(docs, doc.Content[0])
		}
	}
}

// encode writes n as block YAML, two spaces an indentation level.
func encode(n *yaml.Node) (string, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// tagMap is a mapping node's tag.
const tagMap = "!!map"

// str is a string scalar node.
func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// lookup is the value of key in mapping m, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if i := keyIndex(m, key); i >= 0 {
		return m.Content[i+1]
	}
	return nil
}

// keyIndex is the index in m.Content of key's key node, or -1.
func keyIndex(m *yaml.Node, key string) int {
	if m == nil || m.Kind != yaml.MappingNode {
		return -1
	}
	for i := 0; i < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// set gives key the value v in mapping m, appending the key when m lacks it.
func set(m *yaml.Node, key string, v *yaml.Node) {
	if i := keyIndex(m, key); i >= 0 {
		m.Content[i+1] = v
		return
	}
	m.Content = append(m.Content, str(key), v)
}

// remove deletes key from mapping m.
func remove(m *yaml.Node, key string) {
	if i := keyIndex(m, key); i >= 0 {
		m.Content = append(m.Content[:i], m.Content[i+2:]...)
	}
}

// find walks path from n: dot-separated mapping keys, each optionally followed by [k=v], which
// selects the item of a sequence of mappings whose key k is v, or by [i], its item i. It names the first step it cannot
// take.
func find(n *yaml.Node, path string) (*yaml.Node, error) {
	cur := n
	for _, step := range steps(path) {
		key, sel, _ := strings.Cut(step, "[")
		next := lookup(cur, key)
		if next == nil {
			return nil, fmt.Errorf("no %s (at %q)", path, key)
		}
		cur = next
		if sel == "" {
			continue
		}
		k, v, isKey := strings.Cut(strings.TrimSuffix(sel, "]"), "=")
		if !isKey {
			// [i]: the sequence's item i (a Role's rule, a rule's resource name: no key to select by).
			i, err := strconv.Atoi(k)
			if err != nil || cur.Kind != yaml.SequenceNode || i < 0 || i >= len(cur.Content) {
				return nil, fmt.Errorf("no %s (no item %s)", path, k)
			}
			cur = cur.Content[i]
			continue
		}
		if cur = item(cur, k, v); cur == nil {
			return nil, fmt.Errorf("no %s (no item with %s=%s)", path, k, v)
		}
	}
	return cur, nil
}

// steps splits path at the dots outside brackets ([key=kubernetes.io/metadata.name] is one).
func steps(path string) []string {
	var out []string
	start, depth := 0, 0
	for i, r := range path {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case '.':
			if depth == 0 {
				out = append(out, path[start:i])
				start = i + 1
			}
		}
	}
	return append(out, path[start:])
}

// item is the mapping in sequence s whose key k is v, or nil.
func item(s *yaml.Node, k, v string) *yaml.Node {
	if s.Kind != yaml.SequenceNode {
		return nil
	}
	for _, it := range s.Content {
		if val := lookup(it, k); val != nil && val.Value == v {
			return it
		}
	}
	return nil
}

// scalars calls fn on every scalar node under n, keys included.
func scalars(n *yaml.Node, fn func(*yaml.Node) error) error {
	if n.Kind == yaml.ScalarNode {
		return fn(n)
	}
	for _, c := range n.Content {
		if err := scalars(c, fn); err != nil {
			return err
		}
	}
	return nil
}

// clone is a deep copy of n.
func clone(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		c.Content[i] = clone(child)
	}
	return &c
}

// equal says whether a and b hold the same YAML value (same kinds, tags and values; styles and
// comments aside).
func equal(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || a.Value != b.Value || a.ShortTag() != b.ShortTag() || len(a.Content) != len(b.Content) {
		return false
	}
	for i := range a.Content {
		if !equal(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}
