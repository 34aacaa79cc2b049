// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package identity_test

import (
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/identity"
)

// TestParse: the two spellings are read, and anything else is refused with an error that names
// the flag, the value and both choices.
func TestParse(t *testing.T) {
	for value, want := range map[string]identity.Issuer{"spire": identity.SPIRE, "none": identity.None} {
		got, err := identity.Parse(value)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", value, got, err, want)
		}
	}
	for _, value := range []string{"", "SPIRE", "None", "spiffe", "spire ", "false"} {
		got, err := identity.Parse(value)
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
	for issuer, want := range map[identity.Issuer]bool{identity.SPIRE: true, identity.None: false, "": true} {
		if got := issuer.Issues(); got != want {
			t.Errorf("%q.Issues() = %v, want %v", issuer, got, want)
		}
	}
	if identity.Issuer("").String() != string(identity.SPIRE) || identity.None.String() != "none" {
		t.Errorf("String: zero value %q, None %q", identity.Issuer("").String(), identity.None.String())
	}
	if identity.Issuers[0] != identity.SPIRE {
		t.Errorf("the default (first of Issuers) is %q, want spire", identity.Issuers[0])
	}
}
