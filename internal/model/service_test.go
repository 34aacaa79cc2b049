// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

const (
	healthy   = meshv1alpha1.HealthHealthy
	pending   = meshv1alpha1.HealthPending
	unhealthy = meshv1alpha1.HealthUnhealthy
	draining  = meshv1alpha1.HealthDraining
)

// TestMembership: every (port, protocol) pair lists exactly the endpoints declaring it, each with
// the fields a data plane reads, and the service carries the MeshService's facts.
func TestMembership(t *testing.T) {
	a := endpoint(t, "payments-a", "09:00", 8080, healthy, "8080/HTTP", "9000/TCP", "9090/HTTP2/grpc")
	a.Spec.Address, a.Spec.NodeName, a.Spec.Weight = "10.244.1.11", "node-a", 7
	a.Spec.Locality = meshv1alpha1.Locality{Region: "eu-west", Zone: "eu-west-1a"}
	a.Spec.Metadata = map[string]string{"version": "v1"}
	b := endpoint(t, "payments-b", "10:00", 8080, draining, "8080/HTTP", "9000/HTTP")
	b.Spec.Address, b.Spec.NodeName = "10.244.2.12", "node-b"
	c := endpoint(t, "payments-c", "11:00", 9000, unhealthy, "8080/HTTP", "9000/TCP")

	svc := build(t, input(c, a, b))
	if svc.Namespace != "shop" || svc.Name != "payments" || svc.Identity != "spiffe://aether.internal/ns/shop/sa/payments" ||
		svc.VIP != "10.96.0.10" || svc.Endpoints != 3 || svc.Ready != 1 || svc.Primary != 8080 {
		t.Errorf("service facts %+v", svc)
	}
	if got := numbers(svc); !slices.Equal(got, []int32{8080, 9000, 9090}) {
		t.Errorf("ports %v, want [8080 9000 9090]", got)
	}
	for _, want := range []struct {
		port     int32
		protocol meshv1alpha1.Protocol
		members  []string
	}{
		{8080, meshv1alpha1.ProtocolHTTP, []string{"payments-a", "payments-b", "payments-c"}},
		{9000, meshv1alpha1.ProtocolTCP, []string{"payments-a", "payments-c"}},
		{9000, meshv1alpha1.ProtocolHTTP, []string{"payments-b"}},
		{9090, meshv1alpha1.ProtocolHTTP2, []string{"payments-a"}},
	} {
		p := port(t, svc, want.port)
		i := slices.IndexFunc(p.Pairs, func(pr model.Pair) bool { return pr.Protocol == want.protocol })
		if i < 0 {
			t.Errorf("port %d has no %s pair: %s", want.port, want.protocol, votes(p))
			continue
		}
		if got := memberNames(p.Pairs[i]); !slices.Equal(got, want.members) {
			t.Errorf("%d/%s members %v, want %v", want.port, want.protocol, got, want.members)
		}
	}

	wantA := model.Member{Namespace: "shop", Name: "payments-a", Address: "10.244.1.11", Node: "node-a", Health: healthy,
		Weight: 7, Locality: meshv1alpha1.Locality{Region: "eu-west", Zone: "eu-west-1a"},
		Metadata: map[string]string{"version": "v1"}, AppProtocol: meshv1alpha1.AppProtocolGRPC, Created: a.CreationTimestamp.Time,
		Primary: 8080}
	if got := port(t, svc, 9090).Pairs[0].Members[0]; !reflect.DeepEqual(got, wantA) {
		t.Errorf("9090/HTTP2 member\n got %+v\nwant %+v", got, wantA)
	}
	wantA.AppProtocol = ""
	if got := port(t, svc, 9000).Pairs[0].Members[0]; !reflect.DeepEqual(got, wantA) {
		t.Errorf("9000/TCP member (no appProtocol on that port)\n got %+v\nwant %+v", got, wantA)
	}
	if got := port(t, svc, 8080).Pairs[0].Members[1]; got.Address != "10.244.2.12" || got.Node != "node-b" || got.Health != draining {
		t.Errorf("8080/HTTP member b: %+v", got)
	}
	// Each member carries its own primary, whatever the service's vote (8080): c declares 9000.
	if got := port(t, svc, 9000).Pairs[0].Members[1]; got.Name != "payments-c" || got.Primary != 9000 {
		t.Errorf("9000/TCP member c: %+v, want its own primary 9000", got)
	}

	// The model owns its metadata: a later change to the cache's object does not reach it.
	a.Spec.Metadata["version"] = "v2"
	if got := port(t, svc, 9090).Pairs[0].Members[0].Metadata["version"]; got != "v1" {
		t.Errorf("metadata follows the input after the build: %q", got)
	}
}

// TestNoEndpoints: a service without endpoints has no primary and no ports, and is valid.
func TestNoEndpoints(t *testing.T) {
	svc := build(t, input())
	if svc.Primary != 0 || svc.Ports != nil || svc.LeftOut != nil || svc.Endpoints != 0 {
		t.Errorf("empty service %+v", svc)
	}
}

// TestProtocolVote: a port's pairs in vote order — most ready members, then the newer declaration
// (the pair whose youngest member is younger), then the protocol's name — whatever the counts of
// unready members.
func TestProtocolVote(t *testing.T) {
	for _, tc := range []struct {
		name      string
		endpoints func(t *testing.T) []meshv1alpha1.MeshEndpoint
		want      string
	}{
		{"agreement", func(t *testing.T) []meshv1alpha1.MeshEndpoint {
			return eps(t, ep9000("a", "09:00", healthy, "TCP"), ep9000("b", "10:00", pending, "TCP"))
		}, "TCP:2/1"},
		{"most ready beats most members", func(t *testing.T) []meshv1alpha1.MeshEndpoint {
			return eps(t, ep9000("a", "09:00", healthy, "TCP"),
				ep9000("b", "10:00", pending, "HTTP"), ep9000("c", "11:00", unhealthy, "HTTP"), ep9000("d", "12:00", draining, "HTTP"))
		}, "TCP:1/1 HTTP:3/0"},
		{"more ready beats newer", func(t *testing.T) []meshv1alpha1.MeshEndpoint {
			return eps(t, ep9000("a", "09:00", healthy, "HTTP"), ep9000("b", "09:00", healthy, "HTTP"),
				ep9000("c", "12:00", healthy, "TCP"))
		}, "HTTP:2/2 TCP:1/1"},
		{"ready tie: the newer declaration", func(t *testing.T) []meshv1alpha1.MeshEndpoint {
			return eps(t, ep9000("a", "09:00", healthy, "HTTP"), ep9000("b", "10:00", healthy, "TCP"))
		}, "TCP:1/1 HTTP:1/1"},
		{"ready tie: newer by an unready member", func(t *testing.T) []meshv1alpha1.MeshEndpoint {
			return eps(t, ep9000("a", "12:00", pending, "HTTP"), ep9000("b", "08:00", healthy, "HTTP"),
				ep9000("c", "10:30", pending, "TCP"), ep9000("d", "10:00", healthy, "TCP"))
		}, "HTTP:2/1 TCP:2/1"},
		{"zero ready: the newer declaration", func(t *testing.T) []meshv1alpha1.MeshEndpoint {
			return eps(t, ep9000("a", "11:00", pending, "HTTP2"), ep9000("b", "09:00", unhealthy, "TCP"), ep9000("c", "10:00", pending, "TCP"))
		}, "HTTP2:1/0 TCP:2/0"},
		{"ready and age tie: the protocol's name", func(t *testing.T) []meshv1alpha1.MeshEndpoint {
			return eps(t, ep9000("a", "09:00", healthy, "TCP"), ep9000("b", "09:00", healthy, "HTTP2"), ep9000("c", "09:00", healthy, "HTTP"))
		}, "HTTP:1/1 HTTP2:1/1 TCP:1/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoints := tc.endpoints(t)
			// The verdict is the same in every order: forward and reversed.
			for _, order := range [][]meshv1alpha1.MeshEndpoint{endpoints, reversed(endpoints)} {
				p := port(t, build(t, input(order...)), 9000)
				if got := votes(p); got != tc.want {
					t.Errorf("port 9000 votes %q, want %q", got, tc.want)
				}
				if p.Protocol != p.Pairs[0].Protocol {
					t.Errorf("protocol %s, winner %s", p.Protocol, p.Pairs[0].Protocol)
				}
			}
		})
	}
}

// TestPrimaryVote: the primary is the port most endpoints declare primary (health aside), ties to
// the newer declaration, then to the lower port.
func TestPrimaryVote(t *testing.T) {
	ep := func(name, created string, primary int32, health meshv1alpha1.Health) spec {
		return spec{name, created, primary, health, []string{"8080/HTTP", "9000/TCP", "9090/HTTP2"}}
	}
	for _, tc := range []struct {
		name  string
		specs []spec
		want  int32
	}{
		{"one endpoint", []spec{ep("a", "09:00", 9090, healthy)}, 9090},
		{"most endpoints, whatever their health", []spec{ep("a", "09:00", 9000, unhealthy), ep("b", "09:00", 9000, pending),
			ep("c", "12:00", 8080, healthy)}, 9000},
		{"tie: the newer declaration", []spec{ep("a", "09:00", 8080, healthy), ep("b", "10:00", 9090, healthy)}, 9090},
		{"tie: newer by its youngest endpoint", []spec{ep("a", "08:00", 8080, healthy), ep("b", "11:00", 8080, healthy),
			ep("c", "10:00", 9000, healthy), ep("d", "10:30", 9000, healthy)}, 8080},
		{"tie in count and age: the lower port", []spec{ep("a", "09:00", 9090, healthy), ep("b", "09:00", 9000, healthy),
			ep("c", "09:00", 8080, pending)}, 8080},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoints := eps(t, tc.specs...)
			for _, order := range [][]meshv1alpha1.MeshEndpoint{endpoints, reversed(endpoints)} {
				if got := build(t, input(order...)).Primary; got != tc.want {
					t.Errorf("primary %d, want %d", got, tc.want)
				}
			}
		})
	}
}

// TestPortCap: over MaxServicePorts ports, the primary is kept first, then the ports declared by
// the most endpoints whatever the protocol, ties to the lower port; the rest are LeftOut, sorted.
func TestPortCap(t *testing.T) {
	// Endpoint "wide" declares ports 1001..1000+n as TCP, and its primary 60000 (declared by it
	// alone, the highest number). "popular" declares 1300 (HTTP) and "retyped" declares 1300 as
	// TCP too; both declare 1200: those two are declared twice and outrank every other.
	wide := func(n int) []meshv1alpha1.MeshEndpoint {
		var ports []string
		for i := 1; i <= n; i++ {
			ports = append(ports, fmt.Sprintf("%d/TCP", 1000+i))
		}
		ports = append(ports, "60000/HTTP")
		return []meshv1alpha1.MeshEndpoint{
			endpoint(t, "wide", "09:00", 60000, healthy, ports...),
			endpoint(t, "popular", "09:00", 1200, healthy, "1200/TCP", "1300/HTTP"),
			endpoint(t, "retyped", "09:00", 1200, healthy, "1200/TCP", "1300/TCP"),
		}
	}
	t.Run("at the cap", func(t *testing.T) {
		svc := build(t, input(wide(model.MaxServicePorts-2)...)) // 1001..1254, 1300 and 60000
		if len(svc.Ports) != model.MaxServicePorts || svc.LeftOut != nil {
			t.Errorf("%d ports, left out %v; want %d and none", len(svc.Ports), svc.LeftOut, model.MaxServicePorts)
		}
	})
	t.Run("over the cap", func(t *testing.T) {
		const declared = 400 // 1001..1400 and 60000
		endpoints := wide(declared)
		for _, order := range [][]meshv1alpha1.MeshEndpoint{endpoints, reversed(endpoints)} {
			svc := build(t, input(order...))
			if svc.Primary != 1200 {
				t.Fatalf("primary %d, want 1200 (two votes to one)", svc.Primary)
			}
			// Kept: the primary 1200, then 1300 (declared twice), then the lowest of the ports
			// declared once: 1001..1255 but 1200, 256 in all; 1256.. and 60000 (once, highest)
			// are left out.
			var want []int32
			for n := int32(1001); len(want) < model.MaxServicePorts-2; n++ {
				if n != 1200 && n != 1300 {
					want = append(want, n)
				}
			}
			want = append(want, 1200, 1300)
			slices.Sort(want)
			if got := numbers(svc); !slices.Equal(got, want) {
				t.Errorf("kept %d ports %v..., want %v...", len(got), got[len(got)-5:], want[len(want)-5:])
			}
			if n := len(svc.LeftOut); n != declared+1-model.MaxServicePorts || svc.LeftOut[n-1] != 60000 ||
				!slices.IsSorted(svc.LeftOut) || svc.LeftOut[0] != 1256 {
				t.Errorf("left out %d: %v", n, svc.LeftOut)
			}
		}
	})
	t.Run("the primary is kept however rare", func(t *testing.T) {
		// One vote each for 60000, 1200 and 1300: the newest, wide's 60000, is the primary,
		// though only wide declares it and it is the highest port: kept all the same.
		endpoints := wide(400)
		setAt(t, &endpoints[0], "12:00")
		endpoints[2].Spec.PrimaryPort = 1300
		for _, order := range [][]meshv1alpha1.MeshEndpoint{endpoints, reversed(endpoints)} {
			svc := build(t, input(order...))
			if svc.Primary != 60000 || port(t, svc, 60000).Declared() != 1 || slices.Contains(svc.LeftOut, 60000) {
				t.Errorf("primary %d, left out %v", svc.Primary, svc.LeftOut)
			}
			// Kept: 60000, 1200 and 1300, then 1001..1254 but 1200 (253); 1255 is left out.
			if got := numbers(svc); got[len(got)-3] != 1254 || svc.LeftOut[0] != 1255 {
				t.Errorf("kept ...%v, left out %v...", got[len(got)-3:], svc.LeftOut[:3])
			}
		}
	})
}

// setAt sets an endpoint's creation time to hh:mm on day.
func setAt(t *testing.T, ep *meshv1alpha1.MeshEndpoint, created string) {
	t.Helper()
	ep.CreationTimestamp = endpoint(t, ep.Name, created, 0, "").CreationTimestamp
}

type spec struct {
	name, created string
	primary       int32
	health        meshv1alpha1.Health
	ports         []string
}

// ep9000 is an endpoint declaring only port 9000, with the given protocol, as its primary.
func ep9000(name, created string, health meshv1alpha1.Health, protocol string) spec {
	return spec{name, created, 9000, health, []string{"9000/" + protocol}}
}

func eps(t *testing.T, specs ...spec) []meshv1alpha1.MeshEndpoint {
	out := make([]meshv1alpha1.MeshEndpoint, len(specs))
	for i, s := range specs {
		out[i] = endpoint(t, "payments-"+s.name, s.created, s.primary, s.health, s.ports...)
	}
	return out
}

func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// TestSubsetKeys: a service publishes the sorted union of its endpoints' metadata keys, each
// once, whatever their health; a reserved key a MeshEndpoint carries anyway is not published.
func TestSubsetKeys(t *testing.T) {
	a := endpoint(t, "a", "09:00", 8080, healthy, "8080/HTTP")
	a.Spec.Metadata = map[string]string{"version": "v1", "shard": "s1"}
	b := endpoint(t, "b", "09:01", 8080, draining, "8080/HTTP")
	b.Spec.Metadata = map[string]string{"version": "v2", "canary": "yes", "namespace": "x", "pod": "y"}
	c := endpoint(t, "c", "09:02", 8080, healthy, "8080/HTTP")
	svc := build(t, input(a, b, c))
	if want := []string{"canary", "shard", "version"}; !slices.Equal(svc.SubsetKeys, want) {
		t.Errorf("subset keys %q, want %q", svc.SubsetKeys, want)
	}
	if none := build(t, input(c)); none.SubsetKeys != nil {
		t.Errorf("a service without metadata publishes %q", none.SubsetKeys)
	}
}

// TestActiveCheck: clients probe a service when any endpoint asks (health-check-mode active),
// whatever its health, on the path most of the asking endpoints declare (ties to the lower path;
// "/" for one that declares none); a service whose endpoints all leave it to their agents
// (eds, or nothing) is not probed.
func TestActiveCheck(t *testing.T) {
	ep := func(name string, mode meshv1alpha1.HealthCheckMode, path string, health meshv1alpha1.Health) meshv1alpha1.MeshEndpoint {
		e := endpoint(t, name, "09:00", 8080, health, "8080/HTTP")
		e.Spec.HealthCheck = meshv1alpha1.HealthCheck{Mode: mode, Path: path}
		return e
	}
	const active, eds = meshv1alpha1.HealthCheckActive, meshv1alpha1.HealthCheckEDS
	for _, tc := range []struct {
		name      string
		endpoints []meshv1alpha1.MeshEndpoint
		want      model.ActiveCheck
	}{
		{"no endpoint asks", []meshv1alpha1.MeshEndpoint{ep("a", eds, "/healthz", healthy), ep("b", "", "", healthy)}, model.ActiveCheck{}},
		{"one asks, unhealthy", []meshv1alpha1.MeshEndpoint{ep("a", eds, "/", healthy), ep("b", active, "/ready", unhealthy)},
			model.ActiveCheck{Path: "/ready"}},
		{"the path most askers declare", []meshv1alpha1.MeshEndpoint{ep("a", active, "/z", healthy), ep("b", active, "/z", healthy),
			ep("c", active, "/a", healthy), ep("d", eds, "/a", healthy), ep("e", eds, "/a", healthy)}, model.ActiveCheck{Path: "/z"}},
		{"tie: the lower path", []meshv1alpha1.MeshEndpoint{ep("a", active, "/z", healthy), ep("b", active, "/a", healthy)},
			model.ActiveCheck{Path: "/a"}},
		{"no path declared: /", []meshv1alpha1.MeshEndpoint{ep("a", active, "", pending)}, model.ActiveCheck{Path: "/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][]meshv1alpha1.MeshEndpoint{tc.endpoints, reversed(tc.endpoints)} {
				if got := build(t, input(order...)).ActiveCheck; got != tc.want {
					t.Errorf("active check %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}
