// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve

import (
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// DefaultMeshDomain is the mesh's DNS domain unless configured otherwise.
const DefaultMeshDomain = "aether.internal"

// HTTPPort is the port an authority without one means (RFC 9110: http's default port).
const HTTPPort int32 = 80

// HTTPSPort is the port https:// reaches: TLS the application terminates, carried as TCP.
const HTTPSPort int32 = 443

// DefaultHTTPPort is what an HTTP request with no port in its authority reaches (http://<name>/,
// Host: <name>): port 80 when declared HTTP-class. ok is false otherwise, whatever else the
// service serves: the authority's port is the port (proposal 043).
func DefaultHTTPPort(s portspec.PortSet) (port int32, ok bool) {
	if p, declared := s.Lookup(HTTPPort); declared && p.IsHTTP() {
		return HTTPPort, true
	}
	return 0, false
}

// DefaultTCPPort is what <name>:18082 reaches: the primary when TCP, else the lowest TCP port.
// ok is false when the service has no TCP port.
func DefaultTCPPort(s portspec.PortSet) (port int32, ok bool) {
	if p, declared := s.Lookup(s.Primary); declared && p == meshv1alpha1.ProtocolTCP {
		return s.Primary, true
	}
	for _, p := range s.Ports {
		if p.Protocol == meshv1alpha1.ProtocolTCP {
			return p.Port, true
		}
	}
	return 0, false
}

// DefaultUDPPort is what <name>:18082/udp reaches: the primary when UDP (the port in
// endpoint.aether.io/port, as the workload page promises). Unlike :18082 over TCP it never falls
// back to another port: a service whose primary is not UDP is reached over UDP only at its
// declared UDP ports, each by its own number (<name>:<p>/udp). ok is false then.
func DefaultUDPPort(s portspec.PortSet) (port int32, ok bool) {
	if p, declared := s.Lookup(s.Primary); declared && p.IsUDP() {
		return s.Primary, true
	}
	return 0, false
}

// Outcome is what a client gets for one spelling: the API's DialOutcome, so that the rule's
// answers and the status's dial rows are one list and cannot drift. BadRequest and NotMesh answer
// an HTTP request alone and are no row of a dial surface, so the API's enum leaves them out.
type Outcome = meshv1alpha1.DialOutcome

const (
	// Reaches means a port of the service.
	Reaches = meshv1alpha1.DialReaches
	// Misdirected means an HTTP request the mesh answers itself with HTTP 421 (Misdirected
	// Request) and the header x-aether-error: Result.Error; the body names what works.
	Misdirected = meshv1alpha1.DialMisdirected
	// Refused means nothing claims the spelling: the connection is refused (ECONNREFUSED).
	Refused = meshv1alpha1.DialRefused
	// HostDecides means the mesh's HTTP proxy port: by itself it reaches no port of the service;
	// each request reaches what the port in its Host header decides (the surface's Host rows).
	HostDecides = meshv1alpha1.DialHostDecides
	// BadRequest means an HTTP request whose authority is malformed (an empty host, a port that
	// is not a decimal number in 1..65535, an unbracketed IPv6 address): the mesh answers HTTP
	// 400 with x-aether-error: bad-authority. No surface row has it.
	BadRequest Outcome = "BadRequest"
	// NotMesh means a request on the mesh's HTTP proxy port whose authority names no mesh
	// service: the mesh answers HTTP 404 with x-aether-error: not-mesh-name (NotMeshName). No
	// surface row has it.
	NotMesh Outcome = "NotMesh"
)

// HTTPStatus is the status code of the answer the mesh sends itself for o: 421 for Misdirected,
// 400 for BadRequest, 404 for NotMesh, 0 for the outcomes that are not an HTTP answer of the mesh.
func HTTPStatus(o Outcome) int {
	switch o {
	case Misdirected:
		return 421
	case BadRequest:
		return 400
	case NotMesh:
		return 404
	}
	return 0
}

// ErrorHeader is the response header that says why the mesh answered a request itself.
const ErrorHeader = "x-aether-error"

// MeshError is a value of the x-aether-error header: the API's DialError (the values a 421 row of
// a dial surface names), and the two answers no surface row has, bad-authority and not-mesh-name.
type MeshError = meshv1alpha1.DialError

const (
	// NoHTTPPort answers a request with no port in its authority, to a service that serves no HTTP.
	NoHTTPPort = meshv1alpha1.DialErrorNoHTTPPort
	// PortNotDeclared answers a request for a port the service does not declare (18081 and 18082
	// included: no pod can declare them), and one with no port in its authority when port 80 is
	// not HTTP-class but the service serves HTTP on other ports.
	PortNotDeclared = meshv1alpha1.DialErrorPortNotDeclared
	// PortNotHTTP answers a request whose authority names a port the service declares TCP.
	PortNotHTTP = meshv1alpha1.DialErrorPortNotHTTP
	// BadAuthority answers a request whose authority is malformed (with 400).
	BadAuthority MeshError = "bad-authority"
	// NotAMeshName answers a request on the proxy port whose authority names no mesh service
	// (with 404).
	NotAMeshName MeshError = "not-mesh-name"
)

// MeshErrors are every x-aether-error value, for tests and metrics that export each at zero.
func MeshErrors() []MeshError {
	return []MeshError{NoHTTPPort, PortNotDeclared, PortNotHTTP, BadAuthority, NotAMeshName}
}

// MaxBodyLength bounds Result.Body, in bytes: the body names at most a few ports and spellings,
// and an authority longer than a DNS name is not echoed.
const MaxBodyLength = 2048

// Result is what one spelling, or one HTTP request, reaches.
type Result struct {
	// Port is the application port reached; 0 when none.
	Port int32 `json:"port,omitempty"`
	// Protocol is the spelling's protocol. It never depends on the service: HTTP for every HTTP
	// request (http://, :18081, a Host header) whatever the port's HTTP class, TCP for https://
	// and :18082, UDP for :18082/udp, the declared protocol for :<port> and :<port>/udp; empty
	// for a port nobody declared.
	Protocol meshv1alpha1.Protocol `json:"protocol,omitempty"`
	// Outcome is Reaches, Misdirected, Refused, HostDecides, BadRequest or NotMesh.
	Outcome Outcome `json:"outcome"`
	// Error is the x-aether-error value of a Misdirected or BadRequest answer; empty otherwise.
	Error MeshError `json:"error,omitempty"`
	// Reason says why, in words a user can act on; a Misdirected one names its x-aether-error.
	Reason string `json:"reason"`
	// Body is the text the mesh answers a Misdirected or BadRequest request with: what is wrong
	// and the HTTP spellings that work. At most MaxBodyLength bytes; empty otherwise.
	Body string `json:"body,omitempty"`
}
