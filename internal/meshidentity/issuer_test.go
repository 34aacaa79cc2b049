// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshidentity_test

import (
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/meshidentity"
)

// TestParse: the two spellings are read, and anything else is refused with an error that names
// the flag, the value and both choices.
func TestParse(t *testing.T) {
	for value, want := range map[string]meshidentity.Issuer{"spire": meshidentity.SPIRE, "none": meshidentity.None} {
		got, err := meshidentity.Parse(value)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", value, got, err, want)
		}
	}
	for _, value := range []string{"", "SPIRE", "None", "spiffe", "spire ", "false"} {
		got, err := meshidentity.Parse(value)
		if err == nil {
			t.Errorf("Parse(%q) = %q; want an error", value, got)
			continue
		}
		for _, word := range []string{"--identity-issuer=", `"` + value + `"`, "spire", "none"} {
			if !strings.Contains(err.Error(), word) {
				t.Errorf("Parse(%q): error %q does not name %q", value, err, word)
			}
		}
	}
}

// TestIssues: only None has no identities; the zero value is the default, SPIRE.
func TestIssues(t *testing.T) {
	for issuer, want := range map[meshidentity.Issuer]bool{meshidentity.SPIRE: true, meshidentity.None: false, "": true} {
		if got := issuer.Issues(); got != want {
			t.Errorf("%q.Issues() = %v, want %v", issuer, got, want)
		}
	}
	if meshidentity.Issuer("").String() != string(meshidentity.SPIRE) || meshidentity.None.String() != "none" {
		t.Errorf("String: zero value %q, None %q", meshidentity.Issuer("").String(), meshidentity.None.String())
	}
	if meshidentity.Issuers[0] != meshidentity.SPIRE {
		t.Errorf("the default (first of Issuers) is %q, want spire", meshidentity.Issuers[0])
	}
}
