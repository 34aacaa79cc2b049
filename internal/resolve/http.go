// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve

import (
	"fmt"
	"strconv"
	"strings"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// HTTPRequest is what an HTTP request reaches on the service whose ports are s, given the
// request's authority: its Host header (HTTP/1.1) or :authority (HTTP/2), host[:port]. Which
// service the host names is the caller's concern (it passes that service's ports); the host is
// used here only in the words of the answer. The authority's port is the port:
//
//   - no port: port 80 when declared HTTP-class; else 421 no-http-port when the service serves no
//     HTTP, or 421 port-not-declared when it serves HTTP on other ports;
//   - port p: p when declared HTTP-class; 421 port-not-http when p is declared TCP or UDP; 421
//     port-not-declared when p is not declared (18081 and 18082 included: no pod declares them);
//   - a malformed authority: 400 bad-authority.
//
// The xDS virtual hosts, the MeshService status and kubectl tooling all answer from here.
func HTTPRequest(s portspec.PortSet, authority string) Result {
	a, err := parseAuthority(authority)
	if err != nil {
		return Result{Protocol: meshv1alpha1.ProtocolHTTP, Outcome: BadRequest, Error: BadAuthority,
			Reason: fmt.Sprintf("%v: answered %d with %s: %s", err, HTTPStatus(BadRequest), ErrorHeader, BadAuthority),
			Body:   err.Error() + ".\n"}
	}
	return answerHTTP(s, a)
}

// answerHTTP answers a request with a well-formed authority. The surface calls it with the host
// NamePlaceholder, so its rows and HTTPRequest are the same words.
func answerHTTP(s portspec.PortSet, a authority) Result {
	port := a.port
	if a.portless {
		port = HTTPPort
	}
	p, declared := s.Lookup(port)
	switch {
	case declared && p.IsHTTP() && a.portless:
		return Result{Port: port, Protocol: meshv1alpha1.ProtocolHTTP, Outcome: Reaches,
			Reason: fmt.Sprintf("no port in the authority means port 80, declared %s", p)}
	case declared && p.IsHTTP():
		return Result{Port: port, Protocol: meshv1alpha1.ProtocolHTTP, Outcome: Reaches,
			Reason: fmt.Sprintf("port %d is declared %s", port, p)}
	case a.portless:
		problem := "no port in the authority means port 80, and port 80 is not declared"
		if declared {
			problem = fmt.Sprintf("no port in the authority means port 80, and port 80 is declared %s, not HTTP", p)
		}
		code := PortNotDeclared
		if !servesHTTP(s) {
			code = NoHTTPPort
		}
		return misdirected(s, a.host, code, problem)
	case declared && p.IsUDP():
		return misdirected(s, a.host, PortNotHTTP, fmt.Sprintf(
			"port %d is declared UDP, not HTTP (send datagrams to %s%s, not a TCP connection)", port, a, UDPSuffix))
	case declared:
		return misdirected(s, a.host, PortNotHTTP, fmt.Sprintf(
			"port %d is declared TCP, not HTTP (dial %s as TCP, without HTTP)", port, a))
	case port == meshv1alpha1.MeshHTTPPort:
		return misdirected(s, a.host, PortNotDeclared,
			"port 18081 is the mesh's HTTP proxy port, not a port of the service (send requests to it with the service's port in Host)")
	case port == meshv1alpha1.MeshTCPPort:
		problem := "port 18082 is the mesh's TCP port, not a port of the service"
		if _, ok := DefaultTCPPort(s); ok { // else :18082 is refused too: no advice to dial it
			problem += fmt.Sprintf(" (dial %s as TCP, without HTTP)", a)
		}
		return misdirected(s, a.host, PortNotDeclared, problem)
	}
	return misdirected(s, a.host, PortNotDeclared, fmt.Sprintf("port %d is not declared", port))
}

// misdirected is the mesh's 421 answer: the problem, the x-aether-error value, and what works.
func misdirected(s portspec.PortSet, host string, code MeshError, problem string) Result {
	works := workingSpellings(s, host)
	return Result{Protocol: meshv1alpha1.ProtocolHTTP, Outcome: Misdirected, Error: code,
		Reason: fmt.Sprintf("%s: answered %d with %s: %s; %s", problem, HTTPStatus(Misdirected), ErrorHeader, code, works),
		Body:   problem + ".\n" + works + ".\n"}
}

func servesHTTP(s portspec.PortSet) bool {
	for _, p := range s.Ports {
		if p.Protocol.IsHTTP() {
			return true
		}
	}
	return false
}

// maxNamedPorts and maxSpelled bound what an answer lists, so its length does not grow with the
// service's ports.
const (
	maxNamedPorts = 6
	maxSpelled    = 2
)

// workingSpellings says what does reach the service named host, HTTP first: "payments serves
// HTTP on 8080 and 9090: dial http://payments:8080/ or http://payments:9090/".
func workingSpellings(s portspec.PortSet, host string) string {
	var httpPorts, tcpPorts, udpPorts []int32
	for _, p := range s.Ports {
		switch {
		case p.Protocol.IsHTTP():
			httpPorts = append(httpPorts, p.Port)
		case p.Protocol.IsUDP():
			udpPorts = append(udpPorts, p.Port)
		default:
			tcpPorts = append(tcpPorts, p.Port)
		}
	}
	if len(httpPorts) > 0 {
		urls := make([]string, 0, maxSpelled)
		for _, p := range httpPorts[:min(len(httpPorts), maxSpelled)] {
			urls = append(urls, httpURL(host, p))
		}
		return fmt.Sprintf("%s serves HTTP on %s: dial %s", host, listPorts(httpPorts), strings.Join(urls, " or "))
	}
	if port, ok := DefaultTCPPort(s); ok {
		return fmt.Sprintf("%s serves no HTTP, only TCP on %s: dial %s (or %s) as TCP, without HTTP",
			host, listPorts(tcpPorts), hostPort(host, port), hostPort(host, meshv1alpha1.MeshTCPPort))
	}
	if len(udpPorts) > 0 {
		return fmt.Sprintf("%s serves no HTTP, only UDP on %s: send datagrams to %s%s, not a TCP connection",
			host, listPorts(udpPorts), hostPort(host, udpPorts[0]), UDPSuffix)
	}
	return host + " declares no ports: nothing reaches it until its pods declare some (endpoint.aether.io/ports)"
}

// httpURL spells an HTTP port as a URL: http://host/ for 80, http://host:p/ otherwise.
func httpURL(host string, port int32) string {
	if port == HTTPPort {
		return httpScheme + host + "/"
	}
	return httpScheme + hostPort(host, port) + "/"
}

// listPorts spells ports for a sentence: "8080", "8080 and 9090", "80, 8080 and 9090", and past
// maxNamedPorts "... and 3 more".
func listPorts(ports []int32) string {
	named := ports[:min(len(ports), maxNamedPorts)]
	words := make([]string, len(named))
	for i, p := range named {
		words[i] = strconv.Itoa(int(p))
	}
	if more := len(ports) - len(named); more > 0 {
		words = append(words, strconv.Itoa(more)+" more")
	}
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

func hostPort(host string, port int32) string { return host + ":" + strconv.Itoa(int(port)) }
