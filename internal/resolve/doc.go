// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package resolve is the resolution rule (DESIGN section 5, proposal 043: the authority's port is
// the port): from a service's port set, its default ports, what an HTTP request reaches, and the
// dial surface. The MeshService status, the generated Service, route status, the agent's data
// plane (xDS virtual hosts and their 421 answers) and kubectl tooling all ask this package, so
// they can never disagree; none of them decides a default on its own.
//
//   - DefaultHTTPPort: 80 when declared HTTP-class, else none. Nothing means "the port the pods
//     declare".
//   - DefaultTCPPort: the primary when TCP, else the lowest TCP port, else none (proposal 037).
//   - DefaultUDPPort: the primary when UDP, else none: <name>:18082/udp reaches the port in
//     endpoint.aether.io/port only. One port number carries one transport: a TCP dial never
//     reaches a UDP port, nor a datagram a TCP or HTTP one.
//   - HTTPRequest: what an HTTP request with a given authority (Host header, host[:port]) reaches:
//     the port when declared HTTP-class; else HTTP 421 with an x-aether-error value (MeshError)
//     and a body naming the HTTP spellings that work; a malformed authority is 400.
//   - NotMeshName: what the mesh's HTTP proxy port answers a request whose host names no mesh
//     service (404 not-mesh-name; proxy.go says how the port takes absolute-form requests).
//   - Names and DialSurface: the names a service is dialled by, listed once, and the surface's
//     rows, each spelling once, written relative to any of the names (NamePlaceholder). The
//     surface has SurfaceLen(len(ports)) = 2×ports + 10 rows. LocalName, the bare name, holds the
//     same surface from the service's own namespace only (NamesFrom).
//   - DialPorts: the ports of the surface's TCP rows that dial one and are not refused, which the
//     node's capture takes on the service's VIP (internal/capture), so that the surface holds;
//     UDPDialPorts the same of its UDP rows. ConnectionAddress finds the row of one dial.
//   - The issuer (internal/workloadidentity) is the surface's other input: without one, every
//     raw-TCP row that would reach a port is refused, its reason saying why (no workload identity)
//     and the fix; the rows themselves, and so SurfaceLen, do not change. UDP rows are plaintext
//     with or without an issuer, so it changes none of them.
//
// The notation of a row's Address (what `kubectl describe meshservice` shows):
//
//	http://<name>/          an HTTP request with no port in its authority (port 80)
//	<name>:18081            a connection to the mesh's HTTP proxy port: the Host header decides
//	Host: <name>            an HTTP request whose Host header has no port
//	Host: <name>:8080       an HTTP request whose Host header names port 8080
//	Host: <name>:*          an HTTP request whose Host header names any other port
//	https://<name>/         TLS the application terminates, on port 443
//	<name>:18082            a connection to the mesh's TCP port (the default TCP port)
//	<name>:18082/udp        UDP datagrams to the mesh's port (the primary, when it is UDP)
//	<name>:9000             a connection to port 9000, in its declared protocol
//	<name>:5353/udp         UDP datagrams to port 5353, declared udp
//	<name>:*                a connection (or datagrams) to any other port
//
// where <name> is any of Names(service, namespace, meshDomain), and, from a client in the
// service's own namespace, its bare name, LocalName(service) (NamesFrom says which hold for a
// client); Dial.For writes a row for one.
//
// This package is pure: no Kubernetes client code, no I/O. It imports only internal/portspec (the
// port set), internal/workloadidentity (the issuer) and api/v1alpha1 (the protocols and the mesh's
// ports, MeshHTTPPort and MeshTCPPort); the depguard rules pure and pure-core in .golangci.yml hold it to that.
package resolve
