// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package proxyconfig_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/proxyconfig"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// TestParseAddressLoopbackOnly: the endpoint listens on a loopback address or not at all; any
// other address is refused with the flag, the value and the fix.
func TestParseAddressLoopbackOnly(t *testing.T) {
	for value, want := range map[string]struct {
		addr string
		on   bool
		err  string
	}{
		"":                {},
		"0":               {},
		"127.0.0.1:19092": {addr: "127.0.0.1:19092", on: true},
		"[::1]:19092":     {addr: "[::1]:19092", on: true},
		"0.0.0.0:19092":   {err: `--debug-bind-address "0.0.0.0:19092": the debug endpoint serves the node's proxy configuration to whoever connects, so it listens on a loopback address only`},
		"10.0.0.5:19092":  {err: "listens on a loopback address only"},
		":19092":          {err: `--debug-bind-address ":19092": not an IP address and port`},
		"localhost:19092": {err: "use 127.0.0.1:19092, or 0 to serve no debug endpoint"},
	} {
		addr, on, err := proxyconfig.ParseAddress(value)
		switch {
		case want.err != "" && (err == nil || !strings.Contains(err.Error(), want.err)):
			t.Errorf("%q: %v, want an error saying %q", value, err, want.err)
		case want.err == "" && (err != nil || addr != want.addr || on != want.on):
			t.Errorf("%q: %q, %v, %v; want %q, %v", value, addr, on, err, want.addr, want.on)
		}
	}
}

// noSnapshot is a node whose agent has published nothing yet.
type noSnapshot struct{}

func (noSnapshot) Published(string) (xds.Resources, map[string]string, bool) {
	return xds.Resources{}, nil, false
}

// TestHandlerBeforeTheFirstPublish: before its first publish the agent answers 503 saying so,
// and a pod the last build left out is a 404 with the agent's reason.
func TestHandlerBeforeTheFirstPublish(t *testing.T) {
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var p proxyconfig.Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("%s: %v (%s)", path, err, rec.Body)
		}
		return rec.Code, p.Error
	}
	code, msg := get(proxyconfig.Handler("node-a", noSnapshot{}, nil), proxyconfig.PodPath("shop", "web-0"))
	if code != http.StatusServiceUnavailable || !strings.Contains(msg, "the agent on node node-a has published no configuration yet") {
		t.Errorf("before the first publish: %d %q", code, msg)
	}
	published := staticSnapshot{}
	why := func(ns, name string) string {
		if ns == "shop" && name == "web-0" {
			return "it has no MeshEndpoint yet"
		}
		return ""
	}
	code, msg = get(proxyconfig.Handler("node-a", published, why), proxyconfig.PodPath("shop", "web-0"))
	if code != http.StatusNotFound || msg != "pod shop/web-0 has no proxy configuration on node node-a: the agent left it out of its last build: it has no MeshEndpoint yet" {
		t.Errorf("a pod left out: %d %q", code, msg)
	}
}

// staticSnapshot is a published, empty configuration.
type staticSnapshot struct{}

func (staticSnapshot) Published(string) (xds.Resources, map[string]string, bool) {
	return xds.Resources{}, nil, true
}
