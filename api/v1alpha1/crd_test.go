// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func namespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns, err := env.Namespace(ctx, strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:min(len(t.Name()), 40)])
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// validEndpoint is a MeshEndpoint as the agent writes it for a mixed pod.
func validEndpoint(ns, name string) *meshv1alpha1.MeshEndpoint {
	ports := []meshv1alpha1.PortProtocol{
		{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP},
		{Port: 9000, Protocol: meshv1alpha1.ProtocolTCP},
		{Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2},
	}
	return &meshv1alpha1.MeshEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: meshv1alpha1.MeshEndpointSpec{
			ServiceName:  "payments",
			PodName:      name,
			PodUID:       "0b7c4e2a-8d1f-4f5e-9a3b-1c2d3e4f5a6b",
			NodeName:     "node-a",
			Address:      "10.244.0.11",
			PrimaryPort:  8080,
			Ports:        ports,
			PortsSummary: meshv1alpha1.FormatPorts(ports),
			Weight:       1024,
			HealthCheck:  meshv1alpha1.HealthCheck{Mode: meshv1alpha1.HealthCheckEDS, Path: "/healthz"},
			Metadata:     map[string]string{"version": "v2"},
			Locality:     meshv1alpha1.Locality{Region: "eu-west-1", Zone: "eu-west-1a"},
		},
	}
}

func TestMeshEndpointRoundTrip(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	want := validEndpoint(ns, "payments-0")
	if err := env.Client.Create(ctx, want.DeepCopy()); err != nil {
		t.Fatalf("creating a valid MeshEndpoint: %v", err)
	}
	got := &meshv1alpha1.MeshEndpoint{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("spec read back differs:\n got %+v\nwant %+v", got.Spec, want.Spec)
	}

	got.Status.Health = meshv1alpha1.HealthHealthy
	if err := env.Client.Status().Update(ctx, got); err != nil {
		t.Fatalf("updating status: %v", err)
	}
	again := &meshv1alpha1.MeshEndpoint{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(want), again); err != nil {
		t.Fatal(err)
	}
	if again.Status.Health != meshv1alpha1.HealthHealthy {
		t.Errorf("status.health = %q after a status update, want Healthy", again.Status.Health)
	}
}

func TestMeshEndpointDefaults(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	ep := validEndpoint(ns, "defaults")
	ep.Spec.Weight = 0
	ep.Spec.HealthCheck = meshv1alpha1.HealthCheck{}
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if ep.Spec.Weight != 1024 || ep.Spec.HealthCheck != (meshv1alpha1.HealthCheck{Mode: "eds", Path: "/"}) {
		t.Errorf("defaults: weight %d, healthCheck %+v; want 1024, {eds /}", ep.Spec.Weight, ep.Spec.HealthCheck)
	}
}

// TestMeshEndpointValidation proves the API server refuses each kind of invalid endpoint, and
// that its message names the field. The first row is the negative control: a valid object passes.
func TestMeshEndpointValidation(t *testing.T) {
	cases := map[string]struct {
		mutate func(*meshv1alpha1.MeshEndpointSpec)
		want   []string // substrings of the API server's error; none means the create must succeed
	}{
		"valid (control)": {mutate: func(*meshv1alpha1.MeshEndpointSpec) {}},
		"port 0": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { setPorts(s, 0, "HTTP") },
			want:   []string{"spec.ports[0].port", "should be greater than or equal to 1"},
		},
		"port 65536": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { setPorts(s, 65536, "HTTP") },
			want:   []string{"spec.ports[0].port", "should be less than or equal to 65535"},
		},
		"unknown protocol": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { setPorts(s, 8080, "SCTP") },
			want:   []string{"spec.ports[0].protocol", `Unsupported value: "SCTP"`, `"HTTP", "HTTP2", "TCP", "UDP"`},
		},
		"a UDP primary beside an HTTP port": {mutate: func(s *meshv1alpha1.MeshEndpointSpec) { setPorts(s, 5353, "UDP", 8080, "HTTP") }},
		"grpc on a UDP port": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) {
				setPorts(s, 5353, "UDP", 8080, "HTTP")
				s.Ports[0].AppProtocol = meshv1alpha1.AppProtocolGRPC
			},
			want: []string{"spec.ports[0].appProtocol", "appProtocol grpc is valid only on an HTTP2 port"},
		},
		"duplicate port": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { setPorts(s, 8080, "HTTP", 8080, "TCP") },
			want:   []string{"spec.ports[1]", "Duplicate value"},
		},
		"unsorted ports": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { setPorts(s, 9000, "TCP", 8080, "HTTP") },
			want:   []string{"spec.ports", "ports must be sorted by port"},
		},
		"reserved port 18081": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { setPorts(s, 8080, "HTTP", 18081, "HTTP") },
			want:   []string{"spec.ports[1].port", "the mesh's own"},
		},
		"reserved port 18082": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { setPorts(s, 8080, "HTTP", 18082, "TCP") },
			want:   []string{"spec.ports[1].port", "the mesh's own"},
		},
		"appProtocol grpc on the HTTP2 port (control)": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.Ports[2].AppProtocol = meshv1alpha1.AppProtocolGRPC },
		},
		"appProtocol grpc on the HTTP2 primary (control)": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) {
				s.Ports[2].AppProtocol, s.PrimaryPort = meshv1alpha1.AppProtocolGRPC, s.Ports[2].Port
			},
		},
		"appProtocol grpc on an HTTP port": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.Ports[0].AppProtocol = meshv1alpha1.AppProtocolGRPC },
			want:   []string{"spec.ports[0].appProtocol", "appProtocol grpc is valid only on an HTTP2 port"},
		},
		"appProtocol grpc on a TCP port": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.Ports[1].AppProtocol = meshv1alpha1.AppProtocolGRPC },
			want:   []string{"spec.ports[1].appProtocol", "appProtocol grpc is valid only on an HTTP2 port"},
		},
		"unknown appProtocol": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.Ports[2].AppProtocol = "h2c" },
			want:   []string{"spec.ports[2].appProtocol", `Unsupported value: "h2c"`, `"grpc"`},
		},
		"no ports": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.Ports, s.PortsSummary = nil, "" },
			want:   []string{"spec.ports"},
		},
		"primary not among ports": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.PrimaryPort = 7000 },
			want:   []string{"spec.primaryPort", "primaryPort must be one of ports"},
		},
		"address not an IP": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.Address = "payments.shop" },
			want:   []string{"spec.address", "must be an IPv4 or IPv6 address"},
		},
		"IPv6 address (control)": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.Address = "fd00::11" },
		},
		"weight 70000": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.Weight = 70000 },
			want:   []string{"spec.weight", "should be less than or equal to 65535"},
		},
		"unknown health-check mode": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.HealthCheck.Mode = "passive" },
			want:   []string{"spec.healthCheck.mode", `Unsupported value: "passive"`},
		},
		"relative health path": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.HealthCheck.Path = "healthz" },
			want:   []string{"spec.healthCheck.path"},
		},
		"reserved metadata key": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.Metadata = map[string]string{"pod": "x"} },
			want:   []string{"spec.metadata", "metadata keys must be DNS labels and not ip, pod, cluster or namespace"},
		},
		"missing serviceName": {
			mutate: func(s *meshv1alpha1.MeshEndpointSpec) { s.ServiceName = "" },
			want:   []string{"spec.serviceName"},
		},
	}
	ctx := testContext(t)
	ns := namespace(t, ctx)
	i := 0
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			i++
			ep := validEndpoint(ns, "ep-"+strings.Repeat("x", i))
			tc.mutate(&ep.Spec)
			expectRefusal(t, env.Client.Create(ctx, ep), tc.want)
		})
	}
}

// expectRefusal checks a write's outcome: no want means it must succeed; otherwise it must fail
// with an error that contains every string in want (the field path and the message).
func expectRefusal(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("valid object refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("invalid object accepted; want an error containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

func TestMeshEndpointServiceNameImmutable(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	ep := validEndpoint(ns, "immutable")
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	ep.Spec.Address = "10.244.0.12"
	if err := env.Client.Update(ctx, ep); err != nil {
		t.Fatalf("control: changing the address was refused: %v", err)
	}
	ep.Spec.ServiceName = "ledger"
	err := env.Client.Update(ctx, ep)
	if err == nil || !strings.Contains(err.Error(), "spec.serviceName") || !strings.Contains(err.Error(), "serviceName is immutable") {
		t.Fatalf("changing serviceName: got %v, want a refusal naming spec.serviceName", err)
	}
}

func setPorts(s *meshv1alpha1.MeshEndpointSpec, portsAndProtocols ...any) {
	s.Ports = nil
	for i := 0; i < len(portsAndProtocols); i += 2 {
		s.Ports = append(s.Ports, meshv1alpha1.PortProtocol{
			Port:     int32(portsAndProtocols[i].(int)),
			Protocol: meshv1alpha1.Protocol(portsAndProtocols[i+1].(string)),
		})
	}
	s.PrimaryPort = s.Ports[0].Port
	s.PortsSummary = meshv1alpha1.FormatPorts(s.Ports)
}

// mixedServiceStatus is the status the controller derives for the sample payments service.
func mixedServiceStatus() meshv1alpha1.MeshServiceStatus {
	ports := []meshv1alpha1.PortProtocol{
		{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP},
		{Port: 9000, Protocol: meshv1alpha1.ProtocolTCP},
		{Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2},
	}
	status := meshv1alpha1.MeshServiceStatus{
		PortsSummary:     meshv1alpha1.FormatPorts(ports),
		DefaultTCPPort:   ptr.To[int32](9000), // no defaultHTTPPort: 80 is not declared
		VIP:              "10.96.0.10",
		Identity:         "spiffe://aether.internal/ns/shop/sa/payments",
		Endpoints:        meshv1alpha1.EndpointCounts{Ready: 3, Total: 3},
		EndpointsSummary: "3/3",
		Names:            []string{"payments.shop.aether.internal", "payments.shop.svc.cluster.local", "payments.shop"},
		DialSurface: []meshv1alpha1.Dial{{
			Address: "http://<name>/", Protocol: meshv1alpha1.ProtocolHTTP, Outcome: meshv1alpha1.DialMisdirected,
			Error: meshv1alpha1.DialErrorPortNotDeclared,
			Reason: "no port in the authority means port 80, and port 80 is not declared: answered 421 with x-aether-error: " +
				"port-not-declared; <name> serves HTTP on 8080 and 9090: dial http://<name>:8080/ or http://<name>:9090/",
		}, {
			Address: "<name>:18081", Protocol: meshv1alpha1.ProtocolHTTP, Outcome: meshv1alpha1.DialHostDecides,
			Reason: "the mesh's HTTP proxy port, not a port of the service: the port in each request's Host header decides, as the Host rows say",
		}, {
			Address: "Host: <name>:65535", Protocol: meshv1alpha1.ProtocolHTTP, Outcome: meshv1alpha1.DialMisdirected,
			Error:  meshv1alpha1.DialErrorPortNotDeclared,
			Reason: "port 65535 is not declared: answered 421 with x-aether-error: port-not-declared",
		}, {
			Address: "<name>:18082", Port: ptr.To[int32](9000),
			Protocol: meshv1alpha1.ProtocolTCP, Outcome: meshv1alpha1.DialReaches,
			Reason: "the default TCP port: port 9000 is the lowest TCP port (the primary is not TCP)",
		}},
		Conditions: []metav1.Condition{{
			Type: meshv1alpha1.ServiceConditionReady, Status: metav1.ConditionTrue,
			Reason: meshv1alpha1.ServiceReasonEndpointsReady, Message: "3 of 3 endpoints are ready",
			LastTransitionTime: metav1.NewTime(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)),
		}},
	}
	for _, p := range ports {
		status.Ports = append(status.Ports, meshv1alpha1.ServicePort{Port: p.Port, Protocol: p.Protocol, Endpoints: 3})
	}
	return status
}

func TestMeshServiceStatusRoundTrip(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	ms := &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"}}
	if err := env.Client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	want := mixedServiceStatus()
	ms.Status = want
	if err := env.Client.Status().Update(ctx, ms); err != nil {
		t.Fatalf("writing a valid status: %v", err)
	}
	got := &meshv1alpha1.MeshService{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Status, want) {
		t.Errorf("status read back differs:\n got %+v\nwant %+v", got.Status, want)
	}
}

func TestMeshServiceStatusValidation(t *testing.T) {
	cases := map[string]struct {
		mutate func(*meshv1alpha1.MeshServiceStatus)
		want   []string
	}{
		"valid (control)": {mutate: func(*meshv1alpha1.MeshServiceStatus) {}},
		"unsorted ports": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) { s.Ports[0], s.Ports[1] = s.Ports[1], s.Ports[0] },
			want:   []string{"status.ports", "ports must be sorted by port"},
		},
		"duplicate port": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) { s.Ports[1].Port = 8080 },
			want:   []string{"status.ports[1]", "Duplicate value"},
		},
		"default HTTP port 0": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) { s.DefaultHTTPPort = ptr.To[int32](0) },
			want:   []string{"status.defaultHTTPPort", "should be greater than or equal to 1"},
		},
		"unknown dial outcome": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) { s.DialSurface[0].Outcome = "Maybe" },
			want:   []string{"status.dialSurface[0].outcome", `Unsupported value: "Maybe"`},
		},
		"BadRequest is no row of a surface": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) { s.DialSurface[0].Outcome = "BadRequest" },
			want:   []string{"status.dialSurface[0].outcome", `Unsupported value: "BadRequest"`},
		},
		"unknown x-aether-error": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) { s.DialSurface[0].Error = "bad-authority" },
			want:   []string{"status.dialSurface[0].error", `Unsupported value: "bad-authority"`},
		},
		"Misdirected row without its x-aether-error": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) { s.DialSurface[0].Error = "" },
			want:   []string{"status.dialSurface[0]", "error is the x-aether-error value of a Misdirected row"},
		},
		"x-aether-error on a row that reaches": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) { s.DialSurface[3].Error = meshv1alpha1.DialErrorPortNotHTTP },
			want:   []string{"status.dialSurface[3]", "error is the x-aether-error value of a Misdirected row"},
		},
		"address over its limit": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) {
				s.DialSurface[1].Address = strings.Repeat("x", meshv1alpha1.MaxDialAddress+1)
			},
			want: []string{"status.dialSurface[1].address", "may not be more than 64"},
		},
		"a fourth name": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) { s.Names = append(s.Names, "payments") },
			want:   []string{"status.names", "must have at most 3 items"},
		},
		"a name over its limit": {
			mutate: func(s *meshv1alpha1.MeshServiceStatus) {
				s.Names[0] = strings.Repeat("a", meshv1alpha1.MaxNameLength+1)
			},
			want: []string{"status.names[0]", "may not be more than 571"},
		},
	}
	ctx := testContext(t)
	ns := namespace(t, ctx)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ms := &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "svc-"}}
			if err := env.Client.Create(ctx, ms); err != nil {
				t.Fatal(err)
			}
			ms.Status = mixedServiceStatus()
			tc.mutate(&ms.Status)
			expectRefusal(t, env.Client.Status().Update(ctx, ms), tc.want)
		})
	}
}
