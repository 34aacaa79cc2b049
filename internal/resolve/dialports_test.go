// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve

import (
	"fmt"
	"slices"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// TestDialPortsMemo: DialPorts remembers its answer per port set and issuer, and the memory never
// answers for a set it was not asked about: asked about sets that differ in one thing only (the
// primary, a protocol, an app protocol, a port, the issuer), in turns, each answer is the one
// worked out afresh, and changing the answer returned changes nothing remembered.
func TestDialPortsMemo(t *testing.T) {
	port := func(n int32, p meshv1alpha1.Protocol, app meshv1alpha1.AppProtocol) portspec.Port {
		return portspec.Port{Port: n, Protocol: p, AppProtocol: app}
	}
	var sets []portspec.PortSet
	for _, primary := range []int32{80, 8080, 9000} {
		for _, p9000 := range []meshv1alpha1.Protocol{meshv1alpha1.ProtocolTCP, meshv1alpha1.ProtocolHTTP, meshv1alpha1.ProtocolHTTP2} {
			for _, app := range []meshv1alpha1.AppProtocol{"", "grpc"} {
				ports := []portspec.Port{port(8080, meshv1alpha1.ProtocolHTTP, ""), port(9000, p9000, "")}
				if p9000 == meshv1alpha1.ProtocolHTTP2 {
					ports[1].AppProtocol = app
				}
				if primary == 80 {
					ports = append(ports, port(80, meshv1alpha1.ProtocolHTTP, ""))
				}
				sets = append(sets, portspec.NewPortSet(primary, ports))
			}
		}
	}
	issuers := []workloadidentity.Issuer{workloadidentity.SPIRE, workloadidentity.NoIssuer}
	distinct, asked := map[string]bool{}, map[string]bool{}
	for round := range 2 { // the second round is answered from the memory
		for _, s := range sets {
			for _, issuer := range issuers {
				got, want := DialPorts(s, issuer), dialPorts(s, issuer)
				if !slices.Equal(got, want) {
					t.Fatalf("round %d: DialPorts(%v, %q) = %v, worked out afresh %v", round, s, issuer, got, want)
				}
				distinct[string(dialPortsKey(s, issuer))] = true
				asked[fmt.Sprintf("%v %s", s, issuer)] = true
				got[0] = -1 // the caller's copy
			}
		}
	}
	if len(distinct) != len(asked) {
		t.Errorf("%d distinct port sets and issuers gave %d distinct keys: two share one", len(asked), len(distinct))
	}
}
