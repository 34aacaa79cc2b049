// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// InsertPlugin returns conflist with entry as its last plugin, and whether that changed anything.
// Every other plugin and top-level field is kept, in its order; an earlier entry of ours (of
// PluginType) anywhere in the list goes, so the list holds exactly one, last. A conflist that
// already ends with an equal entry is returned unchanged (changed false), byte for byte.
func InsertPlugin(conflist []byte, entry Entry) (out []byte, changed bool, err error) {
	want, err := json.Marshal(entry)
	if err != nil {
		return nil, false, err
	}
	return editPlugins(conflist, func(plugins []json.RawMessage) ([]json.RawMessage, bool, error) {
		kept, ours, err := withoutOurs(plugins)
		if err != nil {
			return nil, false, err
		}
		if ours == 1 && sameJSON(plugins[len(plugins)-1], want) {
			return plugins, false, nil // already last, and as wanted
		}
		return append(kept, want), true, nil
	})
}

// RemovePlugin returns conflist without any plugin of PluginType, and whether it had one. The
// rest is kept, in its order.
func RemovePlugin(conflist []byte) (out []byte, changed bool, err error) {
	return editPlugins(conflist, func(plugins []json.RawMessage) ([]json.RawMessage, bool, error) {
		kept, ours, err := withoutOurs(plugins)
		return kept, ours > 0, err
	})
}

// HasPlugin reports whether conflist chains a plugin of PluginType.
func HasPlugin(conflist []byte) (bool, error) {
	has := false
	_, _, err := editPlugins(conflist, func(plugins []json.RawMessage) ([]json.RawMessage, bool, error) {
		_, ours, err := withoutOurs(plugins)
		has = ours > 0
		return plugins, false, err
	})
	return has, err
}

// errNotConflist is the error of a configuration without a plugins list.
var errNotConflist = errors.New(`it has no "plugins" list: it is a single-plugin .conf, not a conflist; ` +
	`the plugin chains only into a conflist (convert it: {"cniVersion": …, "name": …, "plugins": [<the .conf's object>]})`)

// editPlugins applies edit to conflist's plugins. When edit reports no change, conflist comes
// back untouched; otherwise the whole file is re-encoded (two-space indentation), its top-level
// fields in their order and every other plugin's content as it was.
func editPlugins(conflist []byte, edit func([]json.RawMessage) ([]json.RawMessage, bool, error)) ([]byte, bool, error) {
	fields, err := decodeObject(conflist)
	if err != nil {
		return nil, false, fmt.Errorf("the conflist is not a JSON object: %w", err)
	}
	at := -1
	for i, f := range fields {
		if f.key == "plugins" {
			at = i
		}
	}
	if at < 0 {
		return nil, false, errNotConflist
	}
	var plugins []json.RawMessage
	if err := json.Unmarshal(fields[at].value, &plugins); err != nil {
		return nil, false, fmt.Errorf(`the conflist's "plugins" is not a list: %w`, err)
	}
	edited, changed, err := edit(plugins)
	if err != nil {
		return nil, false, err
	}
	if !changed {
		return conflist, false, nil
	}
	if fields[at].value, err = json.Marshal(edited); err != nil {
		return nil, false, err
	}
	return encodeObject(fields), true, nil
}

// withoutOurs is plugins without those of PluginType, and how many there were.
func withoutOurs(plugins []json.RawMessage) ([]json.RawMessage, int, error) {
	kept := make([]json.RawMessage, 0, len(plugins))
	ours := 0
	for i, p := range plugins {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(p, &head); err != nil {
			return nil, 0, fmt.Errorf("the conflist's plugin %d is not a JSON object: %w", i, err)
		}
		if head.Type == "" {
			return nil, 0, fmt.Errorf(`the conflist's plugin %d has no "type": every plugin names its binary in "type"`, i)
		}
		if head.Type == PluginType {
			ours++
			continue
		}
		kept = append(kept, p)
	}
	return kept, ours, nil
}

// sameJSON reports whether a and b encode the same value (key order and spacing aside).
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	ca, _ := json.Marshal(va) // maps marshal with sorted keys
	cb, _ := json.Marshal(vb)
	return bytes.Equal(ca, cb)
}

// field is one member of a JSON object, its value as written.
type field struct {
	key   string
	value json.RawMessage
}

// decodeObject reads a JSON object's members in their order.
func decodeObject(data []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object, got %v (%v)", tok, err)
	}
	var fields []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("field %q: %w", key, err)
		}
		fields = append(fields, field{key: key, value: value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the object")
	}
	return fields, nil
}

// encodeObject writes fields as one JSON object, indented by two spaces, ending in a newline.
func encodeObject(fields []field) []byte {
	var compact bytes.Buffer
	compact.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			compact.WriteByte(',')
		}
		key, _ := json.Marshal(f.key)
		compact.Write(key)
		compact.WriteByte(':')
		compact.Write(f.value)
	}
	compact.WriteByte('}')
	var out bytes.Buffer
	_ = json.Indent(&out, compact.Bytes(), "", "  ") // valid: built from valid parts
	out.WriteByte('\n')
	return out.Bytes()
}
