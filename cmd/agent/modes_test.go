// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// TestParseModes: --capture-mode and --identity-issuer as the agent reads them; a bad value is
// refused naming its flag, the value and the choices.
func TestParseModes(t *testing.T) {
	mode, issuer, err := parseModes("all", "none")
	if err != nil || mode != model.CaptureAll || issuer != workloadidentity.NoIssuer {
		t.Errorf("parseModes(all, none) = %q, %q, %v", mode, issuer, err)
	}
	if _, issuer, err := parseModes("surface", "spire"); err != nil || !issuer.Issues() {
		t.Errorf("parseModes(surface, spire) = %q, %v", issuer, err)
	}
	for _, tc := range []struct {
		mode, issuer string
		want         []string
	}{
		{"everything", "spire", []string{`--capture-mode: capture mode "everything"`, "scoped", "surface", "all"}},
		{"surface", "spiffe", []string{`--identity-issuer="spiffe"`, "spire", "none"}},
		{"surface", "", []string{`--identity-issuer=""`, "spire", "none"}},
	} {
		_, _, err := parseModes(tc.mode, tc.issuer)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("parseModes(%q, %q): %v; want an error naming %q", tc.mode, tc.issuer, err, w)
			}
		}
	}
}

// TestCheckHopHTTP3: --hop-http3 needs --xds-address, and says so, naming both flags.
func TestCheckHopHTTP3(t *testing.T) {
	if err := checkHopHTTP3(true, "unix:///run/aether/xds.sock"); err != nil {
		t.Errorf("with --xds-address: %v", err)
	}
	if err := checkHopHTTP3(false, ""); err != nil {
		t.Errorf("off, without --xds-address: %v", err)
	}
	err := checkHopHTTP3(true, "")
	if err == nil || !strings.Contains(err.Error(), "--hop-http3=true needs --xds-address") {
		t.Errorf("on, without --xds-address: %v, want the error naming both flags", err)
	}
}
