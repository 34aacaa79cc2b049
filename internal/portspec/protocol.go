// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"cmp"
	"slices"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// Port is one declared port and its protocol: the API's own type (api/v1alpha1.PortProtocol),
// so the parser writes what a MeshEndpoint carries, with no translation between. AppProtocol is
// AppProtocolGRPC for a port declared =grpc, empty otherwise. Such a port is HTTP2 in everything
// the mesh derives (resolution, routes, the generated Service, status); only the node agent's
// health probe differs: grpc.health.v1, since a gRPC server refuses the h2c GET an HTTP2 primary
// gets.
type Port = meshv1alpha1.PortProtocol

// PortSet is the ports one endpoint (or one service) serves: every port once, sorted by number,
// the primary among them.
type PortSet struct {
	// Primary is the declared port (endpoint.aether.io/port): served and health-checked.
	Primary int32 `json:"primary"`
	// Ports are sorted by Port (the number), each number once, Primary included.
	Ports []Port `json:"ports"`
}

// NewPortSet builds a PortSet from ports in any order. Callers that already hold a valid set
// (parsed, or read from the API) use it to normalise order; it does not validate.
func NewPortSet(primary int32, ports []Port) PortSet {
	sorted := slices.Clone(ports)
	slices.SortFunc(sorted, func(a, b Port) int {
		// Of two HTTP2 duplicates the gRPC one sorts first and is kept, as Parse keeps it.
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol), -cmp.Compare(a.AppProtocol, b.AppProtocol))
	})
	sorted = slices.CompactFunc(sorted, func(a, b Port) bool { return a.Port == b.Port })
	return PortSet{Primary: primary, Ports: sorted}
}

// Lookup returns the protocol port n is declared with.
func (s PortSet) Lookup(n int32) (meshv1alpha1.Protocol, bool) {
	i, found := slices.BinarySearchFunc(s.Ports, n, func(p Port, n int32) int { return cmp.Compare(p.Port, n) })
	if !found {
		return "", false
	}
	return s.Ports[i].Protocol, true
}

// PrimaryProtocol is the protocol of the primary port.
func (s PortSet) PrimaryProtocol() meshv1alpha1.Protocol {
	p, _ := s.Lookup(s.Primary)
	return p
}
