// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"cmp"
	"slices"
)

// Protocol is a port's protocol. The spellings are the API's (api/v1alpha1.Protocol).
type Protocol string

const (
	// HTTP is HTTP/1.1.
	HTTP Protocol = "HTTP"
	// HTTP2 is HTTP/2 (h2, h2c), gRPC included.
	HTTP2 Protocol = "HTTP2"
	// TCP is a raw byte stream.
	TCP Protocol = "TCP"
)

// AppProtocol names what a port speaks within its protocol, when the mesh must know more than
// the protocol. The spellings are the API's (api/v1alpha1.AppProtocol).
type AppProtocol string

// GRPC is gRPC (suffix =grpc), always on an HTTP2 port.
const GRPC AppProtocol = "grpc"

// IsHTTP reports whether p is of the HTTP class (HTTP or HTTP2): routed by the Host header.
func (p Protocol) IsHTTP() bool { return p == HTTP || p == HTTP2 }

// Port is one declared port and its protocol.
type Port struct {
	Number   int32    `json:"port"`
	Protocol Protocol `json:"protocol"`
	// AppProtocol is GRPC for a port declared =grpc, empty otherwise. Such a port is HTTP2 in
	// everything the mesh derives (resolution, routes, the generated Service, status); only the
	// node agent's health probe differs: grpc.health.v1, since a gRPC server refuses the h2c GET
	// an HTTP2 primary gets.
	AppProtocol AppProtocol `json:"appProtocol,omitempty"`
}

// PortSet is the ports one endpoint (or one service) serves: every port once, sorted by number,
// the primary among them.
type PortSet struct {
	// Primary is the declared port (endpoint.aether.io/port): served and health-checked.
	Primary int32 `json:"primary"`
	// Ports are sorted by Number, each number once, Primary included.
	Ports []Port `json:"ports"`
}

// NewPortSet builds a PortSet from ports in any order. Callers that already hold a valid set
// (parsed, or read from the API) use it to normalise order; it does not validate.
func NewPortSet(primary int32, ports []Port) PortSet {
	sorted := slices.Clone(ports)
	slices.SortFunc(sorted, func(a, b Port) int {
		// Of two HTTP2 duplicates the gRPC one sorts first and is kept, as Parse keeps it.
		return cmp.Or(cmp.Compare(a.Number, b.Number), cmp.Compare(a.Protocol, b.Protocol), -cmp.Compare(a.AppProtocol, b.AppProtocol))
	})
	sorted = slices.CompactFunc(sorted, func(a, b Port) bool { return a.Number == b.Number })
	return PortSet{Primary: primary, Ports: sorted}
}

// Lookup returns the protocol port n is declared with.
func (s PortSet) Lookup(n int32) (Protocol, bool) {
	i, found := slices.BinarySearchFunc(s.Ports, n, func(p Port, n int32) int { return cmp.Compare(p.Number, n) })
	if !found {
		return "", false
	}
	return s.Ports[i].Protocol, true
}

// PrimaryProtocol is the protocol of the primary port.
func (s PortSet) PrimaryProtocol() Protocol {
	p, _ := s.Lookup(s.Primary)
	return p
}
