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

// TestMetricsPort: the port of the agent's --metrics-bind-address, where the endpoint is
// served; "0" is off, and anything without a port is refused naming the flag.
func TestMetricsPort(t *testing.T) {
	for value, want := range map[string]struct {
		port int
		on   bool
		err  string
	}{
		"0":               {},
		":19090":          {port: 19090, on: true},
		"0.0.0.0:19090":   {port: 19090, on: true},
		"[::1]:9090":      {port: 9090, on: true},
		"19090":           {err: `--metrics-bind-address "19090" is not [host]:port`},
		":http":           {err: `--metrics-bind-address ":http" is not [host]:port`},
		"127.0.0.1:70000": {err: "is not [host]:port"},
	} {
		port, on, err := proxyconfig.MetricsPort(value)
		switch {
		case want.err != "" && (err == nil || !strings.Contains(err.Error(), want.err)):
			t.Errorf("%q: %v, want an error saying %q", value, err, want.err)
		case want.err == "" && (err != nil || port != want.port || on != want.on):
			t.Errorf("%q: %d, %v, %v; want %d, %v", value, port, on, err, want.port, want.on)
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
