// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package workloadidentity

import (
	"fmt"
	"slices"
)

// Issuer is who issues the mesh's workload identities.
type Issuer string

const (
	// SPIRE issues each service's SPIFFE ID: every hop, HTTP and raw TCP, is mTLS. The default.
	SPIRE Issuer = "spire"
	// NoIssuer is a mesh without an issuer: raw TCP is refused (it rides mTLS only).
	NoIssuer Issuer = "none"
)

// Issuers are the values --identity-issuer takes, the default first.
var Issuers = []Issuer{SPIRE, NoIssuer}

// IssuerFlag is the name of the flag the manager and the agent read the issuer from.
const IssuerFlag = "identity-issuer"

// IssuerFlagUsage is the flag's help text, the same on both binaries.
const IssuerFlagUsage = "Who issues the mesh's workload identities: spire (the default: SPIRE issues each service's SPIFFE ID, and every hop is mTLS) " +
	"or none (no issuer: raw TCP, which rides mTLS only, is refused with its reason in each MeshService's dial surface and a Warning Event, " +
	"never sent in plaintext). Set the same value on the manager and every agent."

// Issues reports whether workload identities exist: true for SPIRE and for the zero value (a
// mesh has an issuer unless told otherwise), false for NoIssuer.
func (i Issuer) Issues() bool { return i != NoIssuer }

// String is the issuer as the flag spells it; the zero value is SPIRE's.
func (i Issuer) String() string {
	if i == "" {
		return string(SPIRE)
	}
	return string(i)
}

// ParseIssuer reads the issuer as --identity-issuer spells it. The error names the flag, the value and
// the choices.
func ParseIssuer(value string) (Issuer, error) {
	if i := Issuer(value); slices.Contains(Issuers, i) {
		return i, nil
	}
	return "", fmt.Errorf("--%s=%q: want %s (SPIRE issues the workload identities; the default) or %s (the mesh runs without an issuer, "+
		"and raw TCP is refused)", IssuerFlag, value, SPIRE, NoIssuer)
}

// NoIssuerTCP says why raw TCP is refused without an issuer, and the fix: the words every reader
// of NoIssuer (the dial surface, the controller's Event, the agent's notes) ends with.
const NoIssuerTCP = "the mesh runs without an identity issuer (--identity-issuer=none), and raw TCP rides mTLS between " +
	"workload identities only, never plaintext; install SPIRE and run the manager and the agents with --identity-issuer=spire"
