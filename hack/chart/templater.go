// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A templater puts Helm template text into YAML trees. The YAML encoder cannot write template
// actions (they are not YAML), so the trees carry tokens, plain scalars such as __helm7__, and
// render replaces each token in the encoded text by the template text it stands for.
type templater struct {
	snippets map[string]snippet
	// tokens are the tokens by snippet: the same template text has the same token everywhere,
	// so that two trees templated alike compare equal (merge, of trees already merged once).
	tokens map[snippet]string
}

// A snippet is the template text a token stands for, and how it replaces the token.
type snippet struct {
	kind snippetKind
	// text is the template text; in a line or a block, indentMark stands for the indentation
	// (of the line; of the block's content).
	text string
}

type snippetKind int

const (
	// inline replaces the token where it stands, inside a longer string too.
	inline snippetKind = iota
	// line replaces the whole line holding the token (a mapping key or a sequence item), kept
	// at the token's indentation: {{- if }}, {{- end }}, {{- include ... | nindent }}.
	line
	// block replaces the token, a mapping's value, by a block at the key's indentation plus 2.
	block
)

var tokenPattern = regexp.MustCompile(`__helm[0-9]+__`)

// indentMark, in a line's or a block's template text, stands for its indentation (for nindent).
const indentMark = "<indent>"

func newTemplater() *templater {
	return &templater{snippets: map[string]snippet{}, tokens: map[snippet]string{}}
}

func (t *templater) token(kind snippetKind, text string) string {
	s := snippet{kind: kind, text: text}
	if tok, ok := t.tokens[s]; ok {
		return tok
	}
	tok := fmt.Sprintf("__helm%d__", len(t.snippets))
	t.snippets[tok], t.tokens[s] = s, tok
	return tok
}

// isToken says whether s is a token alone (a templated key, item or value).
func isToken(s string) bool {
	return s != "" && tokenPattern.FindString(s) == s
}

// value is a scalar node standing for the template expression expr ({{ expr }}).
func (t *templater) value(expr string) *yaml.Node {
	return str(t.token(inline, "{{ "+expr+" }}"))
}

// raw is a token standing for the template text text, to splice into a string.
func (t *templater) raw(text string) string {
	return t.token(inline, text)
}

// block is a value node standing for the YAML that the template expression expr yields (for
// example toYaml .Values.manager.resources), indented under its key.
func (t *templater) block(expr string) *yaml.Node {
	return str(t.token(block, "{{- "+expr+" | nindent "+indentMark+" }}"))
}

// lineKey is a key and value pair, for a mapping, standing for a line of template text.
func (t *templater) lineKey(text string) (key, value *yaml.Node) {
	return str(t.token(line, text)), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
}

// lineItem is a sequence item standing for a line of template text.
func (t *templater) lineItem(text string) *yaml.Node {
	return str(t.token(line, text))
}

// wrapKeys wraps the key and value pairs kv of a mapping in {{- if cond }} ... {{- end }}.
func (t *templater) wrapKeys(cond string, kv []*yaml.Node) []*yaml.Node {
	bk, bv := t.lineKey("{{- if " + cond + " }}")
	ek, ev := t.lineKey("{{- end }}")
	out := append([]*yaml.Node{bk, bv}, kv...)
	return append(out, ek, ev)
}

// wrapItems wraps the items of a sequence in {{- if cond }} ... {{- end }}.
func (t *templater) wrapItems(cond string, items []*yaml.Node) []*yaml.Node {
	out := append([]*yaml.Node{t.lineItem("{{- if " + cond + " }}")}, items...)
	return append(out, t.lineItem("{{- end }}"))
}

// render encodes n and replaces its tokens by their template text.
func (t *templater) render(n *yaml.Node) (string, error) {
	text, err := encode(n)
	if err != nil {
		return "", err
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if lines[i], err = t.renderLine(l); err != nil {
			return "", fmt.Errorf("%w, in line %q", err, l)
		}
	}
	return strings.Join(lines, "\n"), nil
}

func (t *templater) renderLine(l string) (string, error) {
	for _, tok := range tokenPattern.FindAllString(l, -1) {
		s, ok := t.snippets[tok]
		if !ok {
			return "", fmt.Errorf("unknown token %s", tok)
		}
		switch s.kind {
		case inline:
			l = strings.Replace(l, tok, s.text, 1)
		case line:
			return lineDirective(l, tok, s.text)
		case block:
			// "<indent>[- ]key: TOKEN": the value sits 2 deeper than the key.
			before, ok := strings.CutSuffix(l, " "+tok)
			if !ok || !strings.HasSuffix(before, ":") {
				return "", fmt.Errorf("block token %s is not a mapping value", tok)
			}
			col := len(before) - len(strings.TrimLeft(before, " -"))
			l = before + " " + strings.ReplaceAll(s.text, indentMark, strconv.Itoa(col+2))
		}
	}
	return l, nil
}

// lineDirective is text at the indentation of tok's line, which holds tok alone: a mapping key
// with a null value, or a sequence item.
func lineDirective(l, tok, text string) (string, error) {
	indent := len(l) - len(strings.TrimLeft(l, " "))
	rest := strings.TrimSpace(l)
	switch rest {
	case "- " + tok, tok + ": null":
		return l[:indent] + strings.ReplaceAll(text, indentMark, strconv.Itoa(indent)), nil
	}
	// A key opening a sequence item's mapping ("- TOKEN: null") would take the "- " with it.
	return "", fmt.Errorf("template line %s shares its line with YAML", tok)
}
