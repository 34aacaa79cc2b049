// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice

import (
	"strconv"
	"strings"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// RefusedTCPPorts are the TCP ports st lists whose own dial row (<name>:<p>) is refused, ascending.
// A declared port's row is refused only for want of a workload identity (internal/resolve), so
// these are every TCP port of a service in a mesh without an identity issuer, and none with one.
// It reads the status as written, whatever issuer wrote it: what the controller compares to know
// whether the refusal is news.
func RefusedTCPPorts(st meshv1alpha1.MeshServiceStatus) []int32 {
	refused := map[string]bool{}
	for _, d := range st.DialSurface {
		if d.Outcome == meshv1alpha1.DialRefused {
			refused[d.Address] = true
		}
	}
	var ports []int32
	for _, p := range st.Ports { // sorted by port
		if p.Protocol == meshv1alpha1.ProtocolTCP && refused[resolve.NamePlaceholder+":"+strconv.Itoa(int(p.Port))] {
			ports = append(ports, p.Port)
		}
	}
	return ports
}

// NoIdentityNote is the note of the Warning Event (meshv1alpha1.ServiceReasonTCPRefusedNoIdentity)
// on a service whose TCP ports are refused for want of a workload identity: why and the fix
// first, then the ports, so that a note cut to an Event's limit keeps the fix.
func NoIdentityNote(ports []int32) string {
	spelled := make([]string, len(ports))
	for i, p := range ports {
		spelled[i] = strconv.Itoa(int(p))
	}
	which := "TCP port "
	if len(ports) > 1 {
		which = "TCP ports "
	}
	note := "no workload identity, so raw TCP to this service is refused: " + workloadidentity.NoIssuerTCP +
		". Refused: " + which + strings.Join(spelled, ", ") + ", and :18082 (the default TCP port); " +
		"status.dialSurface gives each spelling's reason"
	return conditions.Truncate(note, conditions.MaxEventNote)
}
