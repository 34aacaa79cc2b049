// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// TestRefusedTCPPorts: in a mesh without an identity issuer every TCP port of every golden
// service is refused, and no HTTP-class port; with one, none is. The status is read as written.
func TestRefusedTCPPorts(t *testing.T) {
	for _, name := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			in := readInput(t, name)
			var tcp []int32
			for _, issuer := range workloadidentity.Issuers {
				in.Issuer = issuer
				out, err := meshservice.Translate(in)
				if err != nil {
					t.Fatal(err)
				}
				tcp = tcp[:0]
				for _, p := range out.Status.Ports {
					if p.Protocol == meshv1alpha1.ProtocolTCP {
						tcp = append(tcp, p.Port)
					}
				}
				got := meshservice.RefusedTCPPorts(out.Status)
				if want := map[workloadidentity.Issuer][]int32{workloadidentity.SPIRE: nil, workloadidentity.NoIssuer: tcp}[issuer]; !slices.Equal(got, want) {
					t.Errorf("issuer %s: RefusedTCPPorts = %v, want %v", issuer, got, want)
				}
			}
		})
	}
}

// TestNoIdentityNote: the note says why and the fix, then names every port; cut to an Event's
// limit it still says the fix.
func TestNoIdentityNote(t *testing.T) {
	note := meshservice.NoIdentityNote([]int32{5432, 9000})
	for _, w := range []string{"no workload identity", "refused", "--identity-issuer=none", "install SPIRE", "--identity-issuer=spire",
		"TCP ports 5432, 9000,", ":18082", "status.dialSurface"} {
		if !strings.Contains(note, w) {
			t.Errorf("note %q lacks %q", note, w)
		}
	}
	var many []int32
	for p := range int32(meshv1alpha1.MaxServicePorts) {
		many = append(many, 20000+p)
	}
	long := meshservice.NoIdentityNote(many)
	if len(long) > conditions.MaxEventNote || !strings.Contains(long, "--identity-issuer=spire") || !strings.Contains(long, strconv.Itoa(20000)) {
		t.Errorf("the note for %d ports: %d bytes (limit %d), the fix and the first port kept? %q", len(many), len(long), conditions.MaxEventNote, long)
	}
}

// TestNoIdentityNoteOnePort: one port is spelled as one.
func TestNoIdentityNoteOnePort(t *testing.T) {
	if note := meshservice.NoIdentityNote([]int32{9000}); !strings.Contains(note, "Refused: TCP port 9000, and :18082") {
		t.Errorf("note %q does not name TCP port 9000", note)
	}
}
