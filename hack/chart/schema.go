// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The chart ships values.schema.json, which Helm checks every install, upgrade, template and lint
// against: a misspelt value (manager.replica) or one of the wrong type (agent.meshDNS=yes) fails
// there, naming it, instead of being ignored. It is derived from values.yaml: each value's type
// is its default's, its description the comment above it. The mappings of the chart's own
// values are closed (no key values.yaml lacks); a value that lands as a Kubernetes block or map
// (a setBlock or addEntries row: resources, affinity, tolerations, pod annotations...) is open,
// whatever its default holds, as Kubernetes defines its content.

// The JSON Schema types the chart's values have most.
const (
	typeObject = "object"
	typeString = "string"
)

// jsonSchema is the part of JSON Schema (draft 07) the chart's schema uses.
type jsonSchema struct {
	Schema               string                 `json:"$schema,omitempty"`
	Title                string                 `json:"title,omitempty"`
	Description          string                 `json:"description,omitempty"`
	Type                 any                    `json:"type,omitempty"`
	Enum                 []string               `json:"enum,omitempty"`
	Properties           map[string]*jsonSchema `json:"properties,omitempty"`
	AdditionalProperties *bool                  `json:"additionalProperties,omitempty"`
}

// enumValues are the string values that take one of a few words: the chart refuses any other at
// install, before a binary would refuse it at start.
// (agent.captureMode is not among them: the template's own check names the fix more plainly.)
func enumValues() map[string][]string {
	pullPolicies := []string{"Always", "IfNotPresent", "Never"}
	return map[string][]string{
		"manager.image.pullPolicy":      pullPolicies,
		"agent.image.pullPolicy":        pullPolicies,
		"envoy.image.pullPolicy":        pullPolicies,
		"envoy.helper.image.pullPolicy": pullPolicies,
		"udsCsi.image.pullPolicy":       pullPolicies,
	}
}

// openValues are the values whose content Kubernetes defines: those a row lands as a block or
// map entries.
func openValues() map[string]bool {
	out := map[string]bool{}
	for _, r := range table {
		if r.how == setBlock || r.how == addEntries {
			out[r.value] = true
		}
	}
	return out
}

// valuesSchema is values.schema.json for the values.yaml text values, with the word lists enums
// (enumValues), each of which values must hold.
func valuesSchema(values string, enums map[string][]string) (string, error) {
	docs, err := decodeAll([]byte(values))
	if err != nil || len(docs) != 1 {
		return "", fmt.Errorf("values.yaml: not one YAML mapping (%v)", err)
	}
	for path := range enums {
		if _, err := find(docs[0], path); err != nil {
			return "", fmt.Errorf("enumValues names %s, which values.yaml does not hold", path)
		}
	}
	root, err := schemaOf(docs[0], "", openValues(), enums)
	if err != nil {
		return "", err
	}
	root.Schema = "http://json-schema.org/draft-07/schema#"
	root.Title = "Values of the aether-operator chart"
	// Helm passes global to every chart and its subcharts: other keys than the chart's own are
	// other charts' business.
	if global, ok := root.Properties["global"]; ok {
		global.AdditionalProperties = nil
	} else {
		root.Properties["global"] = &jsonSchema{Type: typeObject}
	}
	b, err := json.MarshalIndent(root, "", "  ")
	return string(b) + "\n", err
}

// schemaOf is the schema of the value at path, whose default is n.
func schemaOf(n *yaml.Node, path string, open map[string]bool, enums map[string][]string) (*jsonSchema, error) {
	switch {
	case open[path]:
		return &jsonSchema{Type: kindType(n)}, nil
	case n.Kind == yaml.MappingNode:
		s := &jsonSchema{Type: typeObject, Properties: map[string]*jsonSchema{}, AdditionalProperties: new(false)}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			child, err := schemaOf(value, strings.TrimPrefix(path+"."+key.Value, "."), open, enums)
			if err != nil {
				return nil, err
			}
			child.Description = commentText(key.HeadComment)
			s.Properties[key.Value] = child
		}
		return s, nil
	case n.Kind == yaml.SequenceNode:
		return &jsonSchema{Type: "array"}, nil
	case n.Kind == yaml.ScalarNode:
		t := kindType(n)
		if t == typeString && enums[path] == nil {
			// --set reads 1.40 or 2 as a number: a tag or a log level so given is still one.
			t = []string{typeString, "number"}
		}
		return &jsonSchema{Type: t, Enum: enums[path]}, nil
	}
	return nil, fmt.Errorf("values.yaml: %s: a YAML node of kind %d has no schema", path, n.Kind)
}

// kindType is the JSON Schema type of a default: nil (any) for null.
func kindType(n *yaml.Node) any {
	switch n.Kind {
	case yaml.MappingNode:
		return typeObject
	case yaml.SequenceNode:
		return "array"
	}
	switch n.Tag {
	case "!!bool":
		return "boolean"
	case "!!int":
		return "integer"
	case "!!float":
		return "number"
	case "!!null":
		return nil
	}
	return typeString
}

// commentText is a YAML head comment as prose: the # and indentation gone, one line.
func commentText(c string) string {
	var words []string
	for line := range strings.SplitSeq(c, "\n") {
		words = append(words, strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "#"))...)
	}
	return strings.Join(words, " ")
}

// valuesReference is the chart's README.md: every value with its type, default and what it does,
// from the same schema and values.yaml (helm show readme prints it).
func valuesReference(values string) (string, error) {
	docs, err := decodeAll([]byte(values))
	if err != nil || len(docs) != 1 {
		return "", fmt.Errorf("values.yaml: not one YAML mapping (%v)", err)
	}
	var b strings.Builder
	b.WriteString("# The aether-operator chart\n\n")
	b.WriteString("Generated by hack/chart (make chart) from values.yaml; the chart checks every value against\n")
	b.WriteString("values.schema.json, so a misspelt value or one of the wrong type fails the install, naming it.\n")
	b.WriteString("Strings given with `--set` that look like numbers or booleans need `--set-string`.\n\n")
	b.WriteString("| Value | Type | Default | What it does |\n|---|---|---|---|\n")
	open := openValues()
	var walk func(n *yaml.Node, path, comment string) error
	walk = func(n *yaml.Node, path, comment string) error {
		if n.Kind == yaml.MappingNode && !open[path] && len(n.Content) > 0 {
			// A key without a comment of its own is described by the nearest one above it in
			// its mapping (nodeSelector's covers tolerations and affinity), else by its parent's.
			shared := comment
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i]
				if c := commentText(key.HeadComment); c != "" {
					shared = c
				}
				if err := walk(n.Content[i+1], strings.TrimPrefix(path+"."+key.Value, "."), shared); err != nil {
					return err
				}
			}
			return nil
		}
		dflt, err := inlineYAML(n)
		if err != nil {
			return err
		}
		t, _ := kindType(n).(string)
		if t == "" {
			t = "any"
		}
		if e := enumValues()[path]; e != nil {
			t += ": " + strings.Join(e, ", ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", path, t, strings.ReplaceAll(dflt, "|", `\|`), markdownCell(comment))
		return nil
	}
	if err := walk(docs[0], "", ""); err != nil {
		return "", err
	}
	return b.String(), nil
}

// markdownCell escapes what would end a table cell or read as HTML.
func markdownCell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// inlineYAML is a default on one line: flow style.
func inlineYAML(n *yaml.Node) (string, error) {
	c := *n
	c.Style = yaml.FlowStyle
	for _, child := range c.Content {
		child.Style |= yaml.FlowStyle
	}
	text, err := encode(&c)
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(text), " "), nil
}
