// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

// fuzzEndpoints reads endpoints from bytes, four bytes an endpoint: a port mask over a small
// pool (so endpoints overlap and disagree), the protocols, the health and the age.
func fuzzEndpoints(data []byte) []meshv1alpha1.MeshEndpoint {
	pool := []int32{80, 443, 8080, 9000, 9090, 5432}
	protocols := []meshv1alpha1.Protocol{meshv1alpha1.ProtocolHTTP, meshv1alpha1.ProtocolHTTP2, meshv1alpha1.ProtocolTCP}
	healths := []meshv1alpha1.Health{meshv1alpha1.HealthHealthy, meshv1alpha1.HealthPending, meshv1alpha1.HealthUnhealthy, meshv1alpha1.HealthDraining}
	var eps []meshv1alpha1.MeshEndpoint
	for i := 0; i+4 <= len(data) && len(eps) < 12; i += 4 {
		mask, protos, health, age := data[i], data[i+1], data[i+2], data[i+3]
		var ports []meshv1alpha1.PortProtocol
		for j, p := range pool {
			if mask&(1<<j) != 0 {
				ports = append(ports, meshv1alpha1.PortProtocol{Port: p, Protocol: protocols[int(protos>>(j%4))%3]})
			}
		}
		if len(ports) == 0 {
			continue
		}
		slices.SortFunc(ports, func(a, b meshv1alpha1.PortProtocol) int { return int(a.Port - b.Port) })
		eps = append(eps, meshv1alpha1.MeshEndpoint{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ep-%d", len(eps)),
				CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, int(age), 0, time.UTC))},
			Spec: meshv1alpha1.MeshEndpointSpec{ServiceName: "payments", PrimaryPort: ports[int(mask>>6)%len(ports)].Port,
				Ports: ports, PortsSummary: meshv1alpha1.FormatPorts(ports)},
			Status: meshv1alpha1.MeshEndpointStatus{Health: healths[health%4]},
		})
	}
	return eps
}

// FuzzTranslate: any set of endpoints translates without error, the same in any order, into
// ports each declared by some endpoint in the reported protocol, with counts that add up.
func FuzzTranslate(f *testing.F) {
	f.Add([]byte{0b000100, 0, 0, 1})
	f.Add([]byte{0b001100, 0b0100, 0, 1, 0b001100, 0b1000, 0, 2})
	f.Add([]byte{0b111111, 0xff, 1, 3, 0b010101, 0x55, 2, 9, 0b101010, 0xaa, 3, 4})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		eps := fuzzEndpoints(data)
		in := meshservice.Input{Namespace: "shop", Name: "payments", UID: "u", MeshDomain: "aether.internal",
			Endpoints: eps, Service: meshservice.ServiceFacts{Exists: true, Owned: true, ClusterIP: "10.96.0.10"}}
		out, err := meshservice.Translate(in)
		if err != nil {
			t.Fatalf("Translate: %v", err)
		}
		reversed := in
		reversed.Endpoints = slices.Clone(eps)
		slices.Reverse(reversed.Endpoints)
		again, err := meshservice.Translate(reversed)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := yaml.Marshal(out)
		b, _ := yaml.Marshal(again)
		if !bytes.Equal(a, b) {
			t.Fatalf("the order of the endpoints changed the output")
		}

		st := out.Status
		if int(st.Endpoints.Total) != len(eps) {
			t.Errorf("total %d, %d endpoints", st.Endpoints.Total, len(eps))
		}
		for i, p := range st.Ports {
			if i > 0 && st.Ports[i-1].Port >= p.Port {
				t.Errorf("ports not sorted and unique at %d", p.Port)
			}
			declared := int32(0)
			for _, ep := range eps {
				if slices.Contains(ep.Spec.Ports, meshv1alpha1.PortProtocol{Port: p.Port, Protocol: p.Protocol}) {
					declared++
				}
			}
			if declared == 0 || declared != p.Endpoints {
				t.Errorf("port %d/%s counts %d endpoints, %d declare it so", p.Port, p.Protocol, p.Endpoints, declared)
			}
		}
		if len(eps) > 0 && st.PrimaryPort == 0 {
			t.Errorf("no primary port for %d endpoints", len(eps))
		}
	})
}
