// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package resolve is the resolution rule (DESIGN section 5): from a service's port set, its
// default HTTP port, its default TCP port, and what each address spelling reaches — the dial
// surface. The MeshService controller, the generated Service, route status and the agent's data
// plane all ask this package; none of them decides a default on its own.
//
// This package is pure: no Kubernetes client code, no I/O. It imports only internal/portspec.
package resolve

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// DefaultMeshDomain is the mesh's DNS domain unless configured otherwise.
const DefaultMeshDomain = "aether.internal"

// The mesh's own ports, as clients dial them.
const (
	// MeshHTTPPort reaches the default HTTP port (the Host header decides the service).
	MeshHTTPPort int32 = 18081
	// MeshTCPPort reaches the default TCP port.
	MeshTCPPort int32 = 18082
)

// DefaultHTTPPort is what http://<service>/ and <service>:18081 reach: port 80 when declared
// HTTP-class (http:// means port 80); else the primary when HTTP-class; else the lowest
// HTTP-class port. ok is false when the service has no HTTP-class port.
func DefaultHTTPPort(s portspec.PortSet) (port int32, ok bool) {
	if p, declared := s.Lookup(80); declared && p.IsHTTP() {
		return 80, true
	}
	if p, declared := s.Lookup(s.Primary); declared && p.IsHTTP() {
		return s.Primary, true
	}
	for _, p := range s.Ports {
		if p.Protocol.IsHTTP() {
			return p.Number, true
		}
	}
	return 0, false
}

// DefaultTCPPort is what <service>:18082 reaches: the primary when TCP, else the lowest TCP port.
// ok is false when the service has no TCP port.
func DefaultTCPPort(s portspec.PortSet) (port int32, ok bool) {
	if p, declared := s.Lookup(s.Primary); declared && p == portspec.TCP {
		return s.Primary, true
	}
	for _, p := range s.Ports {
		if p.Protocol == portspec.TCP {
			return p.Number, true
		}
	}
	return 0, false
}

// Scheme is how a spelling is typed: by a URL scheme, or by a bare host:port.
type Scheme string

const (
	// SchemeHTTP is http://<host>/: HTTP, port 80 by definition.
	SchemeHTTP Scheme = "http"
	// SchemeHTTPS is https://<host>/: TLS the application terminates, carried as TCP to port 443.
	SchemeHTTPS Scheme = "https"
	// SchemeNone is <host>:<port>: the port decides.
	SchemeNone Scheme = ""
)

// Spelling is one way a client addresses a service.
type Spelling struct {
	Scheme Scheme
	// Port is the dialled port for SchemeNone; ignored for the URL schemes.
	Port int32
}

// Outcome is what a client dialling a spelling gets. The spellings are the API's.
type Outcome string

const (
	// Reaches means a port of the service.
	Reaches Outcome = "Reaches"
	// Misdirected means an HTTP spelling of a service with no HTTP port; HTTP 421 with the header
	// x-aether-error: no-http-port.
	Misdirected Outcome = "Misdirected"
	// Refused means nothing claims the spelling; ECONNREFUSED.
	Refused Outcome = "Refused"
)

// NoHTTPPortHeader is the header and value of the 421 answered for a service with no HTTP port.
const NoHTTPPortHeader = "x-aether-error: no-http-port"

// Result is what one spelling reaches.
type Result struct {
	// Port is the application port reached; 0 when none.
	Port int32 `json:"port,omitempty"`
	// Protocol is the spelling's protocol. It never depends on the service: HTTP for http:// and
	// :18081, TCP for https:// and :18082, the declared protocol for :<port>; empty for a port
	// nobody declared.
	Protocol portspec.Protocol `json:"protocol,omitempty"`
	// Outcome is Reaches, Misdirected or Refused.
	Outcome Outcome `json:"outcome"`
	// Reason says why, in words a user can act on.
	Reason string `json:"reason"`
}

// Reach resolves one spelling of the service whose ports are s, addressed as host (used only in
// the words of the reason).
func Reach(s portspec.PortSet, host string, sp Spelling) Result {
	switch {
	case sp.Scheme == SchemeHTTP || (sp.Scheme == SchemeNone && sp.Port == MeshHTTPPort):
		return reachDefaultHTTP(s, host)
	case sp.Scheme == SchemeHTTPS:
		return reachHTTPS(s)
	case sp.Port == MeshTCPPort:
		return reachDefaultTCP(s)
	}
	if p, declared := s.Lookup(sp.Port); declared {
		return Result{Port: sp.Port, Protocol: p, Outcome: Reaches,
			Reason: fmt.Sprintf("port %d is declared %s", sp.Port, p)}
	}
	return Result{Outcome: Refused,
		Reason: fmt.Sprintf("port %d is not declared: nothing claims it (the service serves %s)", sp.Port, describePorts(s))}
}

func reachDefaultHTTP(s portspec.PortSet, host string) Result {
	port, ok := DefaultHTTPPort(s)
	if !ok {
		// With no HTTP port every declared port is TCP; with none declared, :18082 is refused too.
		advice := "it declares no ports, so no spelling reaches it"
		if len(s.Ports) > 0 {
			spellings := []string{host + ":" + strconv.Itoa(int(MeshTCPPort))}
			for _, p := range s.Ports {
				spellings = append(spellings, host+":"+strconv.Itoa(int(p.Number)))
			}
			advice = "dial its TCP ports as " + strings.Join(spellings, " or ")
		}
		return Result{Protocol: portspec.HTTP, Outcome: Misdirected, Reason: fmt.Sprintf(
			"the service has no HTTP port: answered HTTP 421 with %s; %s", NoHTTPPortHeader, advice)}
	}
	var why string
	switch port {
	case 80:
		why = "port 80 is declared " + string(mustLookup(s, 80))
	case s.Primary:
		why = fmt.Sprintf("the primary port %d is %s", port, mustLookup(s, port))
	default:
		why = fmt.Sprintf("port %d is the lowest HTTP port (no HTTP port 80, and the primary is not HTTP)", port)
	}
	return Result{Port: port, Protocol: portspec.HTTP, Outcome: Reaches, Reason: "the default HTTP port: " + why}
}

func reachHTTPS(s portspec.PortSet) Result {
	switch p, declared := s.Lookup(443); {
	case !declared:
		return Result{Protocol: portspec.TCP, Outcome: Refused,
			Reason: "port 443 is not declared: https:// reaches port 443 only when it is declared tcp (TLS the application terminates)"}
	case p != portspec.TCP:
		return Result{Protocol: portspec.TCP, Outcome: Refused,
			Reason: fmt.Sprintf("port 443 is declared %s, not TCP: https:// is the application's own TLS, carried as TCP; declare 443=tcp", p)}
	}
	return Result{Port: 443, Protocol: portspec.TCP, Outcome: Reaches,
		Reason: "port 443 is declared TCP: TLS the application terminates"}
}

func reachDefaultTCP(s portspec.PortSet) Result {
	port, ok := DefaultTCPPort(s)
	if !ok {
		return Result{Protocol: portspec.TCP, Outcome: Refused,
			Reason: "the service has no TCP port: :18082 reaches the default TCP port, and none is declared"}
	}
	why := fmt.Sprintf("port %d is the lowest TCP port (the primary is not TCP)", port)
	if port == s.Primary {
		why = fmt.Sprintf("the primary port %d is TCP", port)
	}
	return Result{Port: port, Protocol: portspec.TCP, Outcome: Reaches, Reason: "the default TCP port: " + why}
}

func mustLookup(s portspec.PortSet, port int32) portspec.Protocol {
	p, _ := s.Lookup(port)
	return p
}

// describePorts spells a port set for a reason: "8080/HTTP, 9000/TCP", or "no ports".
func describePorts(s portspec.PortSet) string {
	if len(s.Ports) == 0 {
		return "no ports"
	}
	parts := make([]string, len(s.Ports))
	for i, p := range s.Ports {
		parts[i] = fmt.Sprintf("%d/%s", p.Number, p.Protocol)
	}
	return strings.Join(parts, ", ")
}
