// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdstest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	gwroutes "github.com/aether-mesh/aether-operator/internal/routes"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// The small vocabulary fuzz bytes choose from: small pools, so that ports, protocols and
// services collide and every rule of the builder is reached.
var (
	// fuzzPorts are every port the scenarios use, ascending (a port mask is one byte).
	fuzzPorts = [8]int32{80, 443, 5432, 6379, 8080, 8081, 9000, 9090}
	// fuzzSuffixes are the annotation's port suffixes.
	fuzzSuffixes = [4]string{"h1", "h2", "tcp", "grpc"}
	fuzzHealth   = [4]meshv1alpha1.Health{meshv1alpha1.HealthHealthy, meshv1alpha1.HealthPending,
		meshv1alpha1.HealthUnhealthy, meshv1alpha1.HealthDraining}
	fuzzNodes    = [3]string{ThisNode, SameRegion, OtherRegion}
	fuzzServices = [4]ServiceDecl{{shop, paymentsService, "10.96.0.10"}, {web, frontendService, "10.96.0.20"},
		{shop, catalogService, catalogVIP}, {shop, "ledger", "10.96.0.12"}}
	fuzzCapture = [4]model.CaptureMode{model.CaptureSurface, model.CaptureScoped, model.CaptureAll, model.CaptureSurface}
	fuzzKinds   = [4]model.RouteKind{model.HTTPRoute, model.GRPCRoute, model.TCPRoute, model.TLSRoute}
)

// fuzzUpstreams is what a local pod declares when the fuzz bytes say so: a service by its
// qualified name and one by its bare name (the pod's own namespace's, or none).
const fuzzUpstreams = "payments.shop,catalog"

// fuzzStart is the creation time of an endpoint of age 0; a byte adds minutes.
var fuzzStart = at(9)

const (
	endpointBytes = 5
	routeBytes    = 4
)

// Decode reads a scenario from fuzz bytes; any bytes give a valid one (the decoder only chooses
// among valid values, and every pod goes through the annotation grammar and BuildService).
//
//	byte 0: bits 0-1 the local pods' capture mode, bits 2-3 the number of routes R, bit 4 a mesh
//	without an identity issuer (none), bit 5 a node that carries declared upstreams only
//	(model.UpstreamsDeclared), bit 6 every local pod declares fuzzUpstreams
//	then R routes of 4 bytes (see route), then up to 4 services (payments, frontend, catalog,
//	ledger), each a header byte (bits 0-1: its number of endpoints, 0-3) and 5 bytes an endpoint:
//	a port mask over 80, 443, 5432, 6379, 8080, 8081, 9000, 9090; two bytes of 2-bit suffixes
//	(h1, h2, tcp, grpc) in that order; health (bits 0-1), node (bits 2-3: this node, same
//	region, other region), primary (bits 4-6: which declared port); and its age in minutes.
//
// Endpoints on this node are the node's local pods.
func Decode(data []byte) Scenario {
	var s Scenario
	if len(data) == 0 {
		return s
	}
	capture, routeCount := fuzzCapture[data[0]&3], int(data[0]>>2&3)
	if data[0]&(1<<4) != 0 {
		s.Issuer = workloadidentity.NoIssuer
	}
	if data[0]&(1<<5) != 0 {
		s.Upstreams = model.UpstreamsDeclared
	}
	upstreams := ""
	if data[0]&(1<<6) != 0 {
		upstreams = fuzzUpstreams
	}
	data = data[1:]
	var routeData [][]byte
	for range routeCount {
		if len(data) < routeBytes {
			break
		}
		routeData, data = append(routeData, data[:routeBytes]), data[routeBytes:]
	}
	for _, decl := range fuzzServices {
		if len(data) == 0 {
			break
		}
		count := int(data[0] & 3)
		data = data[1:]
		s.Services = append(s.Services, decl)
		for i := range count {
			if len(data) < endpointBytes {
				break
			}
			w := decodeWorkload(decl, len(s.Services)-1, i, data[:endpointBytes], capture)
			if w.Node == ThisNode {
				w.Upstreams = upstreams
			}
			s.Workloads = append(s.Workloads, w)
			data = data[endpointBytes:]
		}
	}
	services := s.Mesh().Services
	for _, r := range routeData {
		if route, ok := decodeRoute(r, services); ok {
			route.Name = "route-" + strconv.Itoa(len(s.Routes))
			s.Routes = append(s.Routes, route)
		}
	}
	return s
}

func decodeWorkload(decl ServiceDecl, service, i int, b []byte, capture model.CaptureMode) Workload {
	mask := b[0]
	if mask == 0 {
		mask = 1 << 4 // a pod declares at least one port: 8080
	}
	suffixes := uint16(b[1]) | uint16(b[2])<<8
	var declared []string
	var numbers []int32
	for j, p := range fuzzPorts {
		if mask&(1<<j) != 0 {
			declared = append(declared, fmt.Sprintf("%d=%s", p, fuzzSuffixes[suffixes>>(2*j)&3]))
			numbers = append(numbers, p)
		}
	}
	nodeIndex := int(b[3]>>2&3) % len(fuzzNodes)
	return Workload{Namespace: decl.Namespace, Service: decl.Name, Name: fmt.Sprintf("%s-%d", decl.Name, i),
		Node: fuzzNodes[nodeIndex], Address: fmt.Sprintf("10.244.%d.%d", nodeIndex+1, 10+4*service+i),
		Port: strconv.Itoa(int(numbers[int(b[3]>>4&7)%len(numbers)])), Ports: strings.Join(declared, ","),
		Health: fuzzHealth[b[3]&3], Created: fuzzStart.Add(time.Duration(b[4]) * time.Minute), Capture: capture}
}

// decodeRoute reads a route the controller would accept (ResolvedRefs=True): a parent that is
// a mesh service, with a port only if that port carries the route's kind, and backends on
// declared ports that carry it. Bytes that describe another route give none.
//
//	r[0]: bits 0-1 kind (HTTP, GRPC, TCP, TLS), bits 2-3 parent, bit 4 the parent names a
//	port, bits 5-7 a match (HTTP: path prefix /v<n>; GRPC: service pkg.S<n>; 0 none) or a TLS
//	hostname (h<n>.example.com; 7: *.example.com)
//	r[1]: the parent's port (an index into its ports)
//	r[2]: backend 1: bits 0-1 service, bits 2-7 port index
//	r[3]: backend 2: bits 0-1 service, bits 2-4 port index; bits 5-6 backend 1's weight - 1;
//	bit 7 backend 2 is present (weight 1)
func decodeRoute(r []byte, services []model.Service) (model.Route, bool) {
	if len(services) == 0 {
		return model.Route{}, false
	}
	kind := fuzzKinds[r[0]&3]
	parent := services[int(r[0]>>2&3)%len(services)]
	ref := model.ServiceRef{Namespace: parent.Namespace, Name: parent.Name}
	if r[0]&(1<<4) != 0 {
		port, ok := portAt(parent, int(r[1]))
		if !ok || !carries(kind, port.Protocol) {
			return model.Route{}, false
		}
		ref.Port = port.Number
	}
	route := model.Route{Kind: kind, Namespace: parent.Namespace, Parents: []model.ServiceRef{ref}}
	rule := model.RouteRule{}
	n := int(r[0] >> 5)
	if n != 0 {
		switch kind {
		case model.HTTPRoute:
			rule.Matches = []model.RouteMatch{{PathType: "PathPrefix", Path: "/v" + strconv.Itoa(n)}}
		case model.GRPCRoute:
			rule.Matches = []model.RouteMatch{{GRPCService: "pkg.S" + strconv.Itoa(n)}}
		}
	}
	if kind == model.TLSRoute { // the API requires a hostname: the SNI its chain matches
		route.Hostnames = []string{tlsHostname(n)}
	}
	picks := []struct {
		service, port int
		weight        int32
	}{{int(r[2] & 3), int(r[2] >> 2), 1 + int32(r[3]>>5&3)}}
	if r[3]&(1<<7) != 0 {
		picks = append(picks, struct {
			service, port int
			weight        int32
		}{int(r[3] & 3), int(r[3] >> 2 & 7), 1})
	}
	for _, pick := range picks {
		backend := services[pick.service%len(services)]
		port, ok := portAt(backend, pick.port)
		if !ok || !carries(kind, port.Protocol) || backend.Namespace != route.Namespace {
			return model.Route{}, false // BackendNotFound, UnsupportedProtocol or RefNotPermitted
		}
		rule.Backends = append(rule.Backends, model.Backend{ServiceRef: model.ServiceRef{Namespace: backend.Namespace,
			Name: backend.Name, Port: port.Number}, Weight: pick.weight})
	}
	route.Rules = []model.RouteRule{rule}
	return route, true
}

func portAt(s model.Service, i int) (model.Port, bool) {
	if len(s.Ports) == 0 {
		return model.Port{}, false
	}
	return s.Ports[i%len(s.Ports)], true
}

// carries is whether a route of kind k can reach a port of protocol p: the controller's rule.
func carries(k model.RouteKind, p meshv1alpha1.Protocol) bool {
	return gwroutes.Carries(gwroutes.Kind(k), p)
}

// tlsHostname is the TLS route hostname of match bits n: h<n>.example.com, or a wildcard for 7.
func tlsHostname(n int) string {
	if n == 7 {
		return "*.example.com"
	}
	return "h" + strconv.Itoa(n) + ".example.com"
}

// Encode writes s as Decode reads it, for a fuzz corpus seeded from the scenarios: its first
// four services become payments, frontend, catalog and ledger (in its order), each with its
// first three pods; ports outside the pool are dropped. Its first three routes are kept, each
// with one rule (the one with the most backends), its first two backends (the first's weight
// capped at 4, the second's 1) and a path prefix "/v<digit>" or a gRPC service "pkg.S<digit>"
// match. The capture mode is the first local pod's; the issuer is the scenario's.
func Encode(s Scenario) []byte {
	head := byte(0)
	for _, w := range s.Workloads {
		if w.Node == ThisNode {
			head = byte(slices.Index(fuzzCapture[:], w.Capture)) & 3
			break
		}
	}
	if !s.Issuer.Issues() {
		head |= 1 << 4
	}
	if s.Upstreams.OnDemand() {
		head |= 1 << 5
	}
	if slices.ContainsFunc(s.Workloads, func(w Workload) bool { return w.Node == ThisNode && w.Upstreams != "" }) {
		head |= 1 << 6
	}
	decls := s.Services[:min(len(s.Services), len(fuzzServices))]
	var services []byte
	for _, decl := range decls {
		var mine []Workload
		for _, w := range s.Workloads {
			if w.Namespace == decl.Namespace && w.Service == decl.Name && len(mine) < 3 {
				mine = append(mine, w)
			}
		}
		services = append(services, byte(len(mine)))
		for _, w := range mine {
			services = append(services, encodeWorkload(w)...)
		}
	}
	// Routes name services by their index in the decoded mesh, whose services are named after
	// fuzzServices and sorted.
	decoded := Decode(append([]byte{head}, services...)).Mesh().Services
	var routes []byte
	count := 0
	for _, r := range s.Routes {
		if b, ok := encodeRoute(r, decls, decoded); ok && count < 3 {
			routes = append(routes, b...)
			count++
		}
	}
	return append(append([]byte{head | byte(count)<<2}, routes...), services...)
}

// encodeRoute writes r as decodeRoute reads it, or reports that it cannot (a service beyond
// the first four).
func encodeRoute(r model.Route, decls []ServiceDecl, decoded []model.Service) ([]byte, bool) {
	// service finds a ServiceRef's index in decoded, and its port's index in that service.
	service := func(ref model.ServiceRef) (svc, port int, ok bool) {
		i := slices.Index(decls, ServiceDecl{Namespace: ref.Namespace, Name: ref.Name, VIP: vipOf(decls, ref)})
		if i < 0 {
			return 0, 0, false
		}
		svc = slices.IndexFunc(decoded, func(s model.Service) bool {
			return s.Namespace == fuzzServices[i].Namespace && s.Name == fuzzServices[i].Name
		})
		if svc < 0 {
			return 0, 0, false
		}
		port = slices.IndexFunc(decoded[svc].Ports, func(p model.Port) bool { return p.Number == ref.Port })
		return svc, max(port, 0), true
	}
	if len(r.Parents) == 0 || len(r.Rules) == 0 {
		return nil, false
	}
	parent, parentPort, ok := service(r.Parents[0])
	if !ok {
		return nil, false
	}
	rule := r.Rules[0]
	for _, candidate := range r.Rules {
		if len(candidate.Backends) > len(rule.Backends) {
			rule = candidate
		}
	}
	b := make([]byte, routeBytes)
	b[0] = byte(slices.Index(fuzzKinds[:], r.Kind)) | byte(parent)<<2
	if r.Parents[0].Port != 0 {
		b[0] |= 1 << 4
	}
	switch {
	case r.Kind == model.TLSRoute && len(r.Hostnames) > 0:
		label, _, _ := strings.Cut(r.Hostnames[0], ".")
		n := lastDigit(label)
		if label == "*" {
			n = 7
		}
		b[0] |= byte(n) << 5
	case len(rule.Matches) > 0:
		m := rule.Matches[0]
		b[0] |= byte(lastDigit(m.Path+m.GRPCService)) << 5
	}
	b[1] = byte(parentPort)
	if len(rule.Backends) == 0 {
		return nil, false
	}
	svc, port, ok := service(rule.Backends[0].ServiceRef)
	if !ok {
		return nil, false
	}
	b[2] = byte(svc) | byte(port)<<2
	b[3] = byte(min(max(rule.Backends[0].Weight, 1), 4)-1) << 5
	if len(rule.Backends) > 1 {
		if svc, port, ok := service(rule.Backends[1].ServiceRef); ok {
			b[3] |= byte(svc) | byte(port&7)<<2 | 1<<7
		}
	}
	return b, true
}

func vipOf(decls []ServiceDecl, ref model.ServiceRef) string {
	for _, d := range decls {
		if d.Namespace == ref.Namespace && d.Name == ref.Name {
			return d.VIP
		}
	}
	return ""
}

// lastDigit is the value of s's last character if it is a digit 1-7, else 0 (no match).
func lastDigit(s string) int {
	if s == "" || s[len(s)-1] < '1' || s[len(s)-1] > '7' {
		return 0
	}
	return int(s[len(s)-1] - '0')
}

func encodeWorkload(w Workload) []byte {
	spec, err := portspec.Parse(w.Pod().Annotations)
	if err != nil {
		panic(fmt.Sprintf("xdstest: workload %s/%s does not parse: %v", w.Namespace, w.Name, err))
	}
	var mask byte
	var suffixes uint16
	primary := 0
	for j, n := range fuzzPorts {
		i := slices.IndexFunc(spec.Ports, func(p portspec.Port) bool { return p.Port == n })
		if i < 0 {
			continue
		}
		if n == spec.Primary {
			primary = countBits(mask)
		}
		mask |= 1 << j
		suffixes |= uint16(suffixCode(spec.Ports[i])) << (2 * j)
	}
	health := slices.Index(fuzzHealth[:], w.Health)
	nodeIndex := slices.Index(fuzzNodes[:], w.Node)
	age := min(max(w.Created.Sub(fuzzStart)/time.Minute, 0), 255)
	return []byte{mask, byte(suffixes), byte(suffixes >> 8), byte(max(health, 0)) | byte(max(nodeIndex, 0))<<2 | byte(primary)<<4, byte(age)}
}

func suffixCode(p portspec.Port) int {
	switch {
	case p.AppProtocol == meshv1alpha1.AppProtocolGRPC:
		return 3
	case p.Protocol == meshv1alpha1.ProtocolHTTP2:
		return 1
	case p.Protocol == meshv1alpha1.ProtocolTCP:
		return 2
	}
	return 0
}

func countBits(b byte) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}
