// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// TestSchemaRefusesWhatValuesDoNotHold: helm checks values against the generated
// values.schema.json, so a misspelt value, a value of the wrong type or a pull policy Kubernetes
// lacks fails helm template naming it; the values whose content Kubernetes defines (resources,
// affinity, tolerations, pod annotations) take anything of their type, and global is free.
func TestSchemaRefusesWhatValuesDoNotHold(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" for accepted
	}{
		{[]string{"--set", "manager.replica=3"}, "at '/manager': additional properties 'replica' not allowed"},
		{[]string{"--set", "agent.meshDNS=yes"}, "at '/agent/meshDNS': got string, want boolean"},
		{[]string{"--set", "manager.replicas=two"}, "at '/manager/replicas': got string, want integer"},
		{[]string{"--set", "manager.image.pullPolicy=Sometimes"}, "at '/manager/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"},
		{[]string{"--set", "prometheus.serviceMonitor.enable=true"}, "at '/prometheus/serviceMonitor': additional properties 'enable' not allowed"},
		{[]string{"--set-json", `manager.resources={"limits":{"example.com/device":1}}`}, ""},
		{[]string{"--set", "agent.podAnnotations.example\\.com/team=mesh"}, ""},
		{[]string{"--set-json", `envoy.tolerations=[{"operator":"Exists"}]`}, ""},
		{[]string{"--set", "global.imageRegistry=registry.invalid"}, ""},
	} {
		_, err := helmTemplate(c.args...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: refused (%v), want it accepted", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// TestSchemaTypesFollowDefaults: each value's schema type is its default's, the chart's own
// mappings are closed, every value is described (a key without a comment by the one above it);
// a word list for a value values.yaml lacks is refused.
func TestSchemaTypesFollowDefaults(t *testing.T) {
	values := "# a is a number.\na: 1\nb:\n  # c is on.\n  c: true\n  # d is a name.\n  d: x\n  e: null\n"
	schema, err := valuesSchema(values, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"a": {
      "description": "a is a number.",
      "type": "integer"
    }`,
		`"c": {
          "description": "c is on.",
          "type": "boolean"
        }`,
		`"d": {
          "description": "d is a name.",
          "type": [
            "string",
            "number"
          ]
        }`,
		`"e": {}`,
		`"additionalProperties": false`,
	} {
		if !strings.Contains(schema, want) {
			t.Errorf("schema lacks %s:\n%s", want, schema)
		}
	}
	if _, err := valuesSchema(values, map[string][]string{"b.f": {"x"}}); err == nil || !strings.Contains(err.Error(), "b.f") {
		t.Errorf("a word list for a missing value: %v, want an error naming b.f", err)
	}
	ref, err := valuesReference(values)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `a` | integer | `1` | a is a number. |", "| `b.e` | any | `null` | d is a name. |"} {
		if !strings.Contains(ref, want) {
			t.Errorf("reference lacks %q:\n%s", want, ref)
		}
	}
}
