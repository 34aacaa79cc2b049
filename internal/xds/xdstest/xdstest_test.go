// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdstest_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// checkMesh fails for anything Build could not take: an invalid service or local pod, lists out
// of their documented order, a local pod whose service is missing.
func checkMesh(t testing.TB, name string, m model.Mesh) {
	t.Helper()
	// Every node but the unlabelled-nodes scenario's has its locality.
	if m.Domain != xdstest.Domain || m.Node.Name != xdstest.ThisNode || (m.Node.Locality.Zone == "") != strings.HasPrefix(name, "unlabelled-nodes") {
		t.Errorf("%s: domain %q, node %+v", name, m.Domain, m.Node)
	}
	byKey := func(ns, n string) string { return ns + "/" + n }
	services := map[string]bool{}
	for i, s := range m.Services {
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if i > 0 && byKey(m.Services[i-1].Namespace, m.Services[i-1].Name) >= byKey(s.Namespace, s.Name) {
			t.Errorf("%s: services not sorted at %s/%s", name, s.Namespace, s.Name)
		}
		if s.Identity != xdstest.Identity(s.Namespace, s.Name) || s.VIP == "" {
			t.Errorf("%s: service %s/%s has identity %q, VIP %q", name, s.Namespace, s.Name, s.Identity, s.VIP)
		}
		services[byKey(s.Namespace, s.Name)] = true
	}
	for i, p := range m.Pods {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if i > 0 && byKey(m.Pods[i-1].Namespace, m.Pods[i-1].Name) >= byKey(p.Namespace, p.Name) {
			t.Errorf("%s: local pods not sorted at %s/%s", name, p.Namespace, p.Name)
		}
		if !services[byKey(p.Namespace, p.Service)] || p.Identity != xdstest.Identity(p.Namespace, p.Service) ||
			p.Address == "" || len(p.Ports) == 0 || !filepath.IsAbs(p.NetNS) {
			t.Errorf("%s: local pod %+v is not a member of a listed service with its identity, address and ports", name, p)
		}
	}
}

// TestScenariosAreValid: every scenario is a mesh Build can take, with 1-2 local pods (3 in
// access-policy: two clients of different identities beside the server), and every workload
// joins its service (each is a verified endpoint).
func TestScenariosAreValid(t *testing.T) {
	scenarios := xdstest.Scenarios()
	if len(scenarios) != 24 {
		t.Errorf("%d scenarios, want the 10 of the table, tls-routes, no-issuer, shared-port, dual-stack-mesh, primary-rollout, subsets, uds, "+
			"declared-upstreams, on-demand, unlabelled-nodes, active-health, access-policy, udp-ports and http3-hop", len(scenarios))
	}
	for name, m := range xdstest.All() {
		checkMesh(t, name, m)
		if most := 2 + boolInt(name == "access-policy"); len(m.Pods) < 1 || len(m.Pods) > most {
			t.Errorf("%s: %d local pods, want 1 to %d", name, len(m.Pods), most)
		}
		var endpoints int32
		for _, s := range m.Services {
			endpoints += s.Endpoints
		}
		if int(endpoints) != len(scenarios[name].Workloads) {
			t.Errorf("%s: %d endpoints joined their services, of %d workloads", name, endpoints, len(scenarios[name].Workloads))
		}
	}
}

// describe spells a service's ports as resolve reads them, its defaults and its conflicts:
// "primary 8080; 8080/HTTP 9000/TCP; http default none; tcp default 9000; conflicts 9000:TCP2,HTTP1".
func describe(s model.Service) string {
	set := s.PortSet()
	var ports, conflicts []string
	for _, p := range s.Ports {
		ports = append(ports, fmt.Sprintf("%d/%s", p.Number, p.Protocol))
		if len(p.Pairs) > 1 {
			var votes []string
			for _, pr := range p.Pairs {
				votes = append(votes, fmt.Sprintf("%s%d", pr.Protocol, len(pr.Members)))
			}
			conflicts = append(conflicts, fmt.Sprintf("%d:%s", p.Number, strings.Join(votes, ",")))
		}
	}
	defaultOf := func(port int32, ok bool) string {
		if !ok {
			return "none"
		}
		return fmt.Sprint(port)
	}
	out := fmt.Sprintf("primary %d; %s; http default %s; tcp default %s", set.Primary, strings.Join(ports, " "),
		defaultOf(resolve.DefaultHTTPPort(set)), defaultOf(resolve.DefaultTCPPort(set)))
	if len(conflicts) > 0 {
		out += "; conflicts " + strings.Join(conflicts, " ")
	}
	return out
}

// ipv6Addresses counts the mesh's IPv6 service VIPs and member addresses.
func ipv6Addresses(m model.Mesh) int {
	n := 0
	is6 := func(s string) bool { a, err := netip.ParseAddr(s); return err == nil && a.Is6() }
	for _, s := range m.Services {
		if is6(s.VIP) {
			n++
		}
		members := map[string]bool{}
		for _, p := range s.Ports {
			for _, pr := range p.Pairs {
				for _, mb := range pr.Members {
					members[mb.Address] = true
				}
			}
		}
		for a := range members {
			if is6(a) {
				n++
			}
		}
	}
	return n
}

func service(t testing.TB, m model.Mesh, ns, name string) model.Service {
	t.Helper()
	i := slices.IndexFunc(m.Services, func(s model.Service) bool { return s.Namespace == ns && s.Name == name })
	if i < 0 {
		t.Fatalf("no service %s/%s", ns, name)
	}
	return m.Services[i]
}

// TestScenariosMeanTheirNames: payments' ports, as internal/resolve reads them, are what each
// scenario's name says, and so are the capture modes and routes.
func TestScenariosMeanTheirNames(t *testing.T) {
	want := map[string]string{
		"pure-http":                  "primary 8080; 8080/HTTP 8081/HTTP; http default none; tcp default none",
		"access-policy":              "primary 8080; 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 9000",
		"pure-tcp":                   "primary 5432; 5432/TCP; http default none; tcp default 5432",
		"mixed-http-primary":         "primary 8080; 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 9000",
		"tcp-primary-http-secondary": "primary 9000; 8080/HTTP 9000/TCP; http default none; tcp default 9000",
		"no-http-port":               "primary 6379; 5432/TCP 6379/TCP; http default none; tcp default 6379",
		"http-80":                    "primary 80; 80/HTTP 8080/HTTP; http default 80; tcp default none",
		"https-443-tcp":              "primary 8080; 443/TCP 8080/HTTP; http default none; tcp default 443",
		"scoped":                     "primary 8080; 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 9000",
		"rollout-conflict":           "primary 8080; 8080/HTTP 9000/TCP; http default none; tcp default 9000; conflicts 9000:TCP2,HTTP1",
		"routes":                     "primary 8080; 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 9000",
		"tls-routes":                 "primary 8080; 443/TCP 8080/HTTP; http default none; tcp default 443",
		"no-issuer":                  "primary 8080; 443/TCP 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 443",
		"shared-port":                "primary 8080; 8080/HTTP 9000/TCP; http default none; tcp default 9000",
		"dual-stack-mesh":            "primary 8080; 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 9000",
		// The vote's primary; this node's pod declares 9000 (TestPrimaryRolloutScenario).
		"subsets":         "primary 8080; 8080/HTTP 9000/TCP; http default none; tcp default 9000",
		"uds":             "primary 8080; 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 9000",
		"primary-rollout": "primary 8080; 8080/HTTP 9000/TCP; http default none; tcp default 9000",
		// The routed mesh, on a node that carries declared upstreams only.
		"declared-upstreams": "primary 8080; 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 9000",
		"on-demand":          "primary 8080; 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 9000",
		"unlabelled-nodes":   "primary 8080; 8080/HTTP; http default none; tcp default none",
		"active-health":      "primary 8080; 8080/HTTP 9000/TCP; http default none; tcp default 9000",
		"udp-ports":          "primary 5353; 5353/UDP 8080/HTTP 9000/TCP; http default none; tcp default 9000",
		"http3-hop":          "primary 8080; 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 9000",
	}
	all := xdstest.All()
	for name, m := range all {
		if got := describe(service(t, m, "shop", "payments")); got != want[name] {
			t.Errorf("%s: payments is\n  %s\nwant\n  %s", name, got, want[name])
		}
		scoped := slices.ContainsFunc(m.Pods, func(p model.LocalPod) bool { return p.Capture == model.CaptureScoped })
		if scoped != (name == "scoped") {
			t.Errorf("%s: a local pod in scoped mode: %v", name, scoped)
		}
		wantRoutes := map[string]int{"routes": 3, "tls-routes": 1, "declared-upstreams": 3, "on-demand": 3}[name]
		if len(m.Routes) != wantRoutes {
			t.Errorf("%s: %d routes, want %d", name, len(m.Routes), wantRoutes)
		}
		if declared := m.Upstreams == model.UpstreamsDeclared; declared != (name == "declared-upstreams" || name == "on-demand") {
			t.Errorf("%s: the node carries declared upstreams only: %v", name, declared)
		}
		if demanded := len(m.Demanded) > 0; demanded != (name == "on-demand") {
			t.Errorf("%s: services asked for on demand: %v", name, m.Demanded)
		}
		if issues := m.Issuer.Issues(); issues != (name != "no-issuer") {
			t.Errorf("%s: the mesh has an identity issuer: %v", name, issues)
		}
		if v6 := ipv6Addresses(m); v6 != map[string]int{"dual-stack-mesh": 4}[name] {
			t.Errorf("%s: %d IPv6 addresses (payments' VIP and its three pods in dual-stack-mesh, none elsewhere)", name, v6)
		}
	}
	// The rollout's local pod serves 9000 as HTTP while the service routes it as TCP.
	for _, p := range all["rollout-conflict"].Pods {
		if p.Service == "payments" && !slices.Contains(p.Ports, meshv1alpha1.PortProtocol{Port: 9000, Protocol: meshv1alpha1.ProtocolHTTP}) {
			t.Errorf("rollout-conflict: the local payments pod declares %v, want 9000 as HTTP", p.Ports)
		}
	}
	// The mixed scenario has a draining member; the scoped one a second, HTTP-only service.
	if !strings.Contains(fmt.Sprint(service(t, all["mixed-http-primary"], "shop", "payments").Ports), string(meshv1alpha1.HealthDraining)) {
		t.Error("mixed-http-primary: no draining member")
	}
	if got := describe(service(t, all["scoped"], "shop", "catalog")); got != "primary 8080; 8080/HTTP; http default none; tcp default none" {
		t.Errorf("scoped: catalog is %s", got)
	}
}

// TestEndpointChange: the change keeps every service valid with the same ports, changes exactly
// one service (one member's health flipped, one replica added), and leaves its input alone.
func TestEndpointChange(t *testing.T) {
	for name, m := range xdstest.All() {
		changed, err := xdstest.EndpointChange(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkMesh(t, name+" (changed)", changed)
		if !reflect.DeepEqual(m, xdstest.All()[name]) {
			t.Fatalf("%s: EndpointChange modified its input", name)
		}
		differ := 0
		for i := range m.Services {
			before, after := m.Services[i], changed.Services[i]
			if reflect.DeepEqual(before, after) {
				continue
			}
			differ++
			if !reflect.DeepEqual(before.PortSet(), after.PortSet()) {
				t.Errorf("%s: %s's ports changed: %v, then %v", name, before.Name, before.PortSet(), after.PortSet())
			}
			if after.Endpoints != before.Endpoints+1 {
				t.Errorf("%s: %s has %d endpoints, then %d; want one more", name, before.Name, before.Endpoints, after.Endpoints)
			}
			if healths(before) == healths(after) {
				t.Errorf("%s: no member's health changed in %s", name, before.Name)
			}
		}
		if differ != 1 {
			t.Errorf("%s: %d services changed, want 1", name, differ)
		}
	}
	// Negative control: a mesh without endpoints has nothing to change.
	if _, err := xdstest.EndpointChange(model.Mesh{Services: []model.Service{{Namespace: "shop", Name: "empty"}}}); err == nil {
		t.Error("EndpointChange changed a mesh without endpoints")
	}
}

// healths spells the health of every member of s (by name, the replica left out).
func healths(s model.Service) string {
	var out []string
	for _, p := range s.Ports {
		for _, pr := range p.Pairs {
			for _, mb := range pr.Members {
				if !strings.HasSuffix(mb.Name, "-replica") {
					out = append(out, mb.Name+"="+string(mb.Health))
				}
			}
		}
	}
	return strings.Join(out, " ")
}

// TestDecode: any bytes decode to a valid mesh, and the draw reaches what the builder must
// handle: conflicts, every capture mode, routes of every kind, services without endpoints, a mesh
// without an identity issuer.
func TestDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 4))
	reached := map[string]int{}
	for range 2000 {
		data := make([]byte, rng.IntN(64))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		m := xdstest.Decode(data).Mesh()
		checkMesh(t, fmt.Sprintf("Decode(%x)", data), m)
		for _, s := range m.Services {
			if s.Endpoints == 0 {
				reached["service without endpoints"]++
			}
			for _, p := range s.Ports {
				if len(p.Pairs) > 1 {
					reached["conflict"]++
				}
			}
		}
		for _, p := range m.Pods {
			reached["capture "+string(p.Capture)]++
		}
		if !m.Issuer.Issues() {
			reached["no issuer"]++
		}
		for _, r := range m.Routes {
			reached["route "+string(r.Kind)]++
		}
	}
	for _, what := range []string{"service without endpoints", "conflict", "capture surface", "capture scoped", "capture all",
		"route HTTPRoute", "route GRPCRoute", "route TCPRoute", "route TLSRoute", "no issuer"} {
		if reached[what] < 5 {
			t.Errorf("the decoder reached %q %d times in 2000 draws: it no longer exercises it", what, reached[what])
		}
	}
}

// TestEncodeDecode: a scenario encoded as fuzz bytes decodes to a mesh of the same shape: the
// same port sets, endpoint counts and capture modes (names differ: the decoder has its own).
func TestEncodeDecode(t *testing.T) {
	for name, s := range xdstest.Scenarios() {
		if name == "udp-ports" {
			continue // the fuzz encoding spells the protocols the node proxy carries; UDP is not yet one
		}
		want, got := shape(s.Mesh()), shape(xdstest.Decode(xdstest.Encode(s)).Mesh())
		if got != want {
			t.Errorf("%s: decodes to\n  %s\nwant\n  %s", name, got, want)
		}
	}
}

// shape is a mesh without its names: each service's endpoints and port set, sorted, the local
// pods' capture modes, each route's kind, parent port and backends (of its rule with the most
// backends, as Encode keeps it), and the identity issuer.
func shape(m model.Mesh) string {
	var routes []string
	for _, r := range m.Routes {
		rule := r.Rules[0]
		for _, c := range r.Rules {
			if len(c.Backends) > len(rule.Backends) {
				rule = c
			}
		}
		var backends []string
		for _, b := range rule.Backends {
			backends = append(backends, fmt.Sprint(b.Port))
		}
		routes = append(routes, fmt.Sprintf("%s on port %d to %s", r.Kind, r.Parents[0].Port, strings.Join(backends, ",")))
	}
	slices.Sort(routes)
	var services []string
	for _, s := range m.Services {
		services = append(services, fmt.Sprintf("%d endpoints, %s", s.Endpoints, describe(s)))
	}
	slices.Sort(services)
	var capture []string
	for _, p := range m.Pods {
		capture = append(capture, string(p.Capture))
	}
	slices.SortFunc(capture, cmp.Compare)
	return strings.Join(services, " | ") + " | capture " + strings.Join(capture, ",") + " | routes " + strings.Join(routes, "; ") +
		" | issuer " + m.Issuer.String()
}

// TestFleet: the benchmarks' mesh has the size asked, two local pods, and valid services.
func TestFleet(t *testing.T) {
	m := xdstest.Fleet(20, 10).Mesh()
	checkMesh(t, "fleet", m)
	if len(m.Services) != 20 || len(m.Pods) != 2 {
		t.Fatalf("%d services, %d local pods", len(m.Services), len(m.Pods))
	}
	for _, s := range m.Services {
		if s.Endpoints != 10 || describe(s) != "primary 8080; 8080/HTTP 9000/TCP 9090/HTTP2; http default none; tcp default 9000" {
			t.Errorf("%s: %d endpoints, %s", s.Name, s.Endpoints, describe(s))
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
