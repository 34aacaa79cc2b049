// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// day is the date every test endpoint is created on; created is "15:04" on that day.
var day = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

// endpoint builds a MeshEndpoint of service payments in shop, created at hh:mm on day. ports are
// "8080/HTTP" spellings ("9090/HTTP2/grpc" adds an appProtocol), given sorted.
func endpoint(t testing.TB, name, created string, primary int32, health meshv1alpha1.Health, ports ...string) meshv1alpha1.MeshEndpoint {
	t.Helper()
	at, err := time.Parse("15:04", created)
	if err != nil {
		t.Fatalf("created %q: want hh:mm", created)
	}
	ep := meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop",
		CreationTimestamp: metav1.NewTime(day.Add(time.Duration(at.Hour())*time.Hour + time.Duration(at.Minute())*time.Minute))}}
	ep.Spec = meshv1alpha1.MeshEndpointSpec{ServiceName: "payments", PodName: name, PodUID: "uid-" + name,
		NodeName: "node-a", Address: "10.244.1.10", PrimaryPort: primary, Weight: 1024}
	for _, p := range ports {
		parts := strings.Split(p, "/")
		n, err := strconv.ParseInt(parts[0], 10, 32)
		if len(parts) < 2 || err != nil {
			t.Fatalf("port %q: want <port>/<protocol>[/<appProtocol>]", p)
		}
		pp := meshv1alpha1.PortProtocol{Port: int32(n), Protocol: meshv1alpha1.Protocol(parts[1])}
		if len(parts) == 3 {
			pp.AppProtocol = meshv1alpha1.AppProtocol(parts[2])
		}
		ep.Spec.Ports = append(ep.Spec.Ports, pp)
	}
	ep.Status.Health = health
	return ep
}

func input(endpoints ...meshv1alpha1.MeshEndpoint) model.Input {
	return model.Input{Namespace: "shop", Name: "payments", Identity: "spiffe://aether.internal/ns/shop/sa/payments",
		VIP: "10.96.0.10", Endpoints: endpoints}
}

// build builds and validates.
func build(t testing.TB, in model.Input) model.Service {
	t.Helper()
	svc := model.BuildService(in)
	if err := svc.Validate(); err != nil {
		t.Fatalf("BuildService gave an invalid service: %v", err)
	}
	return svc
}

func port(t testing.TB, svc model.Service, n int32) model.Port {
	t.Helper()
	i := slices.IndexFunc(svc.Ports, func(p model.Port) bool { return p.Number == n })
	if i < 0 {
		t.Fatalf("port %d is not listed: %v", n, numbers(svc))
	}
	return svc.Ports[i]
}

func numbers(svc model.Service) []int32 {
	out := make([]int32, len(svc.Ports))
	for i, p := range svc.Ports {
		out[i] = p.Number
	}
	return out
}

// votes spells a port's pairs in order: "TCP:2/1 HTTP:1/1" (members/ready).
func votes(p model.Port) string {
	parts := make([]string, len(p.Pairs))
	for i, pr := range p.Pairs {
		parts[i] = fmt.Sprintf("%s:%d/%d", pr.Protocol, len(pr.Members), pr.Ready)
	}
	return strings.Join(parts, " ")
}

// memberNames spells a pair's members by name.
func memberNames(pr model.Pair) []string {
	out := make([]string, len(pr.Members))
	for i, m := range pr.Members {
		out[i] = m.Name
	}
	return out
}

// meshObjects are services MeshServices in namespace fleet, each with perService verified
// MeshEndpoints serving HTTP 8080 (primary), TCP 9000 and h2 9090, every object with its own
// resourceVersion, as the agent's cache holds them.
func meshObjects(services, perService int) ([]meshv1alpha1.MeshService, []meshv1alpha1.MeshEndpoint) {
	verified := []metav1.Condition{{Type: meshv1alpha1.EndpointConditionVerified, Status: metav1.ConditionTrue, ObservedGeneration: 1}}
	var mss []meshv1alpha1.MeshService
	var eps []meshv1alpha1.MeshEndpoint
	rv := 0
	next := func() string { rv++; return strconv.Itoa(rv) }
	for s := range services {
		name := fmt.Sprintf("svc-%04d", s)
		ms := meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, ResourceVersion: next()}}
		ms.Status.Identity, ms.Status.VIP = "spiffe://aether.internal/ns/fleet/sa/"+name, fmt.Sprintf("10.96.%d.%d", s/250, s%250+1)
		mss = append(mss, ms)
		for e := range perService {
			ep := meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: fmt.Sprintf("%s-%02d", name, e),
				Generation: 1, ResourceVersion: next()}}
			n := len(eps)
			ep.Spec = meshv1alpha1.MeshEndpointSpec{ServiceName: name, NodeName: "node-a", Address: fmt.Sprintf("10.%d.%d.%d", 128+n/62500, n/250%250, n%250+1),
				PrimaryPort: 8080, Weight: 1024, Ports: []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP},
					{Port: 9000, Protocol: meshv1alpha1.ProtocolTCP}, {Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2}}}
			ep.Status.Health, ep.Status.Conditions = meshv1alpha1.HealthHealthy, verified
			eps = append(eps, ep)
		}
	}
	return mss, eps
}

// pointers points at each of endpoints, as a cache's store hands them to a ServiceBuilder.
func pointers(endpoints []meshv1alpha1.MeshEndpoint) []*meshv1alpha1.MeshEndpoint {
	out := make([]*meshv1alpha1.MeshEndpoint, len(endpoints))
	for i := range endpoints {
		out[i] = &endpoints[i]
	}
	return out
}
