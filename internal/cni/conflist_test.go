// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"encoding/json"
	"strings"
	"testing"
)

// bridgeConflist is a node's conflist as a primary CNI writes it: fields in its own order, its
// own spacing, and plugins with fields the installer knows nothing of.
const bridgeConflist = `{"cniVersion": "1.0.0", "name": "aether", "disableCheck": false, "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}},
  {"type": "loopback"}
], "x-vendor": {"kept": [1, 2, 3]}}`

var testEntry = Entry{Type: PluginType, AgentSocket: "/var/run/aether/cni.sock", Timeout: "5s", IgnoredNamespaces: []string{"kube-system"}}

// pluginTypes lists the conflist's plugins' types, in order.
func pluginTypes(t *testing.T, conflist []byte) []string {
	t.Helper()
	var list struct {
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(conflist, &list); err != nil {
		t.Fatalf("the edited conflist does not parse: %v\n%s", err, conflist)
	}
	var types []string
	for _, p := range list.Plugins {
		types = append(types, p.Type)
	}
	return types
}

// keys lists a JSON object's top-level keys, in order.
func keys(t *testing.T, data []byte) []string {
	t.Helper()
	fields, err := decodeObject(data)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fields {
		out = append(out, f.key)
	}
	return out
}

func TestInsertPluginChainsLastAndKeepsTheRest(t *testing.T) {
	out, changed, err := InsertPlugin([]byte(bridgeConflist), testEntry)
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v; want a change", changed, err)
	}
	if got, want := strings.Join(pluginTypes(t, out), ","), "bridge,portmap,loopback,aether-cni"; got != want {
		t.Errorf("plugins %s, want %s", got, want)
	}
	if got, want := strings.Join(keys(t, out), ","), "cniVersion,name,disableCheck,plugins,x-vendor"; got != want {
		t.Errorf("top-level fields %s, want them kept in their order %s", got, want)
	}
	// Every other plugin and field holds what it held.
	var before, after map[string]any
	_ = json.Unmarshal([]byte(bridgeConflist), &before)
	_ = json.Unmarshal(out, &after)
	afterPlugins := after["plugins"].([]any)
	if !sameJSON(mustJSON(t, before["plugins"]), mustJSON(t, afterPlugins[:3])) || !sameJSON(mustJSON(t, before["x-vendor"]), mustJSON(t, after["x-vendor"])) {
		t.Errorf("the other plugins or fields changed:\n%s", out)
	}
	if !sameJSON(mustJSON(t, afterPlugins[3]), mustJSON(t, testEntry)) {
		t.Errorf("our entry is %v, want %+v", afterPlugins[3], testEntry)
	}

	// Idempotent: a second insert changes nothing, byte for byte.
	again, changed, err := InsertPlugin(out, testEntry)
	if err != nil || changed || string(again) != string(out) {
		t.Errorf("second insert: changed %v, err %v, same bytes %v; want no change", changed, err, string(again) == string(out))
	}
}

func TestInsertPluginMovesOrReplacesAnEarlierEntry(t *testing.T) {
	cases := map[string]string{
		// A primary CNI that re-wrote its list put its plugins after ours.
		"not last": `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"},{"type":"aether-cni","agentSocket":"/var/run/aether/cni.sock","timeout":"5s","ignoredNamespaces":["kube-system"]},{"type":"loopback"}]}`,
		// An older installation, with another socket.
		"stale": `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"},{"type":"loopback"},{"type":"aether-cni","agentSocket":"/old.sock"}]}`,
		// Two of ours (a hand edit): one stays, last.
		"twice": `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"aether-cni"},{"type":"bridge"},{"type":"loopback"},{"type":"aether-cni"}]}`,
	}
	for name, conflist := range cases {
		t.Run(name, func(t *testing.T) {
			out, changed, err := InsertPlugin([]byte(conflist), testEntry)
			if err != nil || !changed {
				t.Fatalf("changed %v, err %v; want a change", changed, err)
			}
			if got := strings.Join(pluginTypes(t, out), ","); got != "bridge,loopback,aether-cni" {
				t.Errorf("plugins %s, want bridge,loopback,aether-cni", got)
			}
		})
	}
}

func TestRemovePlugin(t *testing.T) {
	installed, _, err := InsertPlugin([]byte(bridgeConflist), testEntry)
	if err != nil {
		t.Fatal(err)
	}
	out, changed, err := RemovePlugin(installed)
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v; want a change", changed, err)
	}
	if got := strings.Join(pluginTypes(t, out), ","); got != "bridge,portmap,loopback" {
		t.Errorf("plugins %s, want bridge,portmap,loopback", got)
	}
	if has, err := HasPlugin(out); has || err != nil {
		t.Errorf("HasPlugin after removal = %v, %v", has, err)
	}
	// Idempotent: nothing to remove leaves the bytes alone.
	again, changed, err := RemovePlugin(out)
	if err != nil || changed || string(again) != string(out) {
		t.Errorf("second removal: changed %v, err %v; want no change", changed, err)
	}
	untouched, changed, err := RemovePlugin([]byte(bridgeConflist))
	if err != nil || changed || string(untouched) != bridgeConflist {
		t.Errorf("removal from a conflist without us: changed %v, err %v; want it untouched", changed, err)
	}
}

// TestConflistEditsRefuseWhatTheyCannotKeep is the negative side: a file the edit cannot keep
// whole is refused with why, never rewritten.
func TestConflistEditsRefuseWhatTheyCannotKeep(t *testing.T) {
	for name, tc := range map[string]struct{ conflist, want string }{
		"single-plugin .conf": {`{"cniVersion":"0.4.0","name":"n","type":"bridge"}`, `it has no "plugins" list: it is a single-plugin .conf, not a conflist`},
		"plugins not a list":  {`{"cniVersion":"1.0.0","name":"n","plugins":{"type":"bridge"}}`, `"plugins" is not a list`},
		"plugin without type": {`{"cniVersion":"1.0.0","name":"n","plugins":[{"bridge":"cni0"}]}`, `plugin 0 has no "type"`},
		"not JSON":            {`{"cniVersion":`, "not a JSON object"},
		"trailing data":       {`{"name":"n","plugins":[]} {}`, "trailing data"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := InsertPlugin([]byte(tc.conflist), testEntry)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("insert: err %v, want one saying %q", err, tc.want)
			}
			_, _, err = RemovePlugin([]byte(tc.conflist))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("remove: err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
