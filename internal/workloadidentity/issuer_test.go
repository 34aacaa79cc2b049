// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package workloadidentity_test

import (
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// TestParseIssuer: the two spellings are read, and anything else is refused with an error that names
// the flag, the value and both choices.
func TestParseIssuer(t *testing.T) {
	for value, want := range map[string]workloadidentity.Issuer{"spire": workloadidentity.SPIRE, "none": workloadidentity.NoIssuer} {
		got, err := workloadidentity.ParseIssuer(value)
		if err != nil || got != want {
			t.Errorf("ParseIssuer(%q) = %q, %v; want %q", value, got, err, want)
		}
	}
	for _, value := range []string{"", "SPIRE", "None", "spiffe", "spire ", "false"} {
		got, err := workloadidentity.ParseIssuer(value)
		if err == nil {
			t.Errorf("ParseIssuer(%q) = %q; want an error", value, got)
			continue
		}
		for _, word := range []string{"--identity-issuer=", `"` + value + `"`, "spire", "none"} {
			if !strings.Contains(err.Error(), word) {
				t.Errorf("ParseIssuer(%q): error %q does not name %q", value, err, word)
			}
		}
	}
}

// TestIssues: only NoIssuer has no identities; the zero value is the default, SPIRE.
func TestIssues(t *testing.T) {
	for issuer, want := range map[workloadidentity.Issuer]bool{workloadidentity.SPIRE: true, workloadidentity.NoIssuer: false, "": true} {
		if got := issuer.Issues(); got != want {
			t.Errorf("%q.Issues() = %v, want %v", issuer, got, want)
		}
	}
	if workloadidentity.Issuer("").String() != string(workloadidentity.SPIRE) || workloadidentity.NoIssuer.String() != "none" {
		t.Errorf("String: zero value %q, NoIssuer %q", workloadidentity.Issuer("").String(), workloadidentity.NoIssuer.String())
	}
	if workloadidentity.Issuers[0] != workloadidentity.SPIRE {
		t.Errorf("the default (first of Issuers) is %q, want spire", workloadidentity.Issuers[0])
	}
}
