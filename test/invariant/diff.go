// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package invariant

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fieldDiff is one field whose value differs.
type fieldDiff struct {
	field, want, got string
}

// absent is how a violation shows a value that is not there.
const absent = "absent"

// render is v as a reader of a violation sees it: JSON, "absent" for the zero value.
func render(v any) string {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.IsZero() {
		return absent
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(data)
}

// diffFields compares two values of one struct type field by field, naming each field
// prefix.<its JSON name>; skip names fields (by JSON name) the caller compares itself.
func diffFields(prefix string, want, got any, skip ...string) []fieldDiff {
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	var out []fieldDiff
	for i := range wv.NumField() {
		field := wv.Type().Field(i)
		name := jsonName(field)
		if name == "" || name == "-" || slices.Contains(skip, name) {
			continue
		}
		out = append(out, diffValue(prefix+"."+name, wv.Field(i).Interface(), gv.Field(i).Interface())...)
	}
	return out
}

// diffValue compares one field's values (a nil and an empty list or map are equal, as for the API).
func diffValue(field string, want, got any) []fieldDiff {
	if equality.Semantic.DeepEqual(want, got) {
		return nil
	}
	return []fieldDiff{{field, render(want), render(got)}}
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// diffConditions compares two condition lists by type, without lastTransitionTime (the writer
// stamps it when it writes; a fresh evaluation stamps now).
func diffConditions(prefix string, want, got []metav1.Condition) []fieldDiff {
	var out []fieldDiff
	find := func(list []metav1.Condition, t string) *metav1.Condition {
		for i := range list {
			if list[i].Type == t {
				return &list[i]
			}
		}
		return nil
	}
	var types []string
	for _, list := range [][]metav1.Condition{want, got} {
		for _, c := range list {
			if !slices.Contains(types, c.Type) {
				types = append(types, c.Type)
			}
		}
	}
	for _, t := range types {
		w, g := find(want, t), find(got, t)
		if w != nil && g != nil && w.Status == g.Status && w.Reason == g.Reason && w.Message == g.Message && w.ObservedGeneration == g.ObservedGeneration {
			continue
		}
		out = append(out, fieldDiff{fmt.Sprintf("%s[%s]", prefix, t), describeCondition(w), describeCondition(g)})
	}
	return out
}

// describeCondition is a condition as kubectl describe shows it, or "absent".
func describeCondition(c *metav1.Condition) string {
	if c == nil {
		return absent
	}
	return fmt.Sprintf("%s %s (generation %d): %s", c.Status, c.Reason, c.ObservedGeneration, c.Message)
}

// violations turns diffs of one object into violations.
func violations(check, kind, namespace, name string, diffs []fieldDiff) []Violation {
	out := make([]Violation, 0, len(diffs))
	for _, d := range diffs {
		out = append(out, Violation{Check: check, Kind: kind, Namespace: namespace, Name: name, Field: d.field, Want: d.want, Got: d.got})
	}
	return out
}
