// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice_test

import (
	"fmt"
	"testing"
	"time"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

// BenchmarkTranslate: a small service (the mixed golden case: 3 endpoints, 3 ports), a large
// one (500 endpoints of 3 ports each, mid-rollout: a fifth of them retype port 9000, a tenth not
// ready, creation times spread over a day), and a wide one (the ports-over-cap golden case: 5
// endpoints of 64 distinct ports, 320 ports cut to 256).
func BenchmarkTranslate(b *testing.B) {
	small := readInput(b, "mixed")

	start := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var endpoints []meshv1alpha1.MeshEndpoint
	for i := range 500 {
		health := meshv1alpha1.HealthHealthy
		if i%10 == 9 {
			health = meshv1alpha1.HealthPending
		}
		retyped := "9000/TCP"
		if i%5 == 4 {
			retyped = "9000/HTTP"
		}
		created := start.Add(time.Duration(i*173) * time.Second).Format(time.RFC3339)
		endpoints = append(endpoints, endpoint(b, fmt.Sprintf("payments-7f9c6d-%05d", (i*7919)%100000), created, 8080, health,
			"8080/HTTP", retyped, "9090/HTTP2"))
	}
	large := baseInput(endpoints...)

	for _, bc := range []struct {
		name string
		in   meshservice.Input
	}{{"3 endpoints", small}, {"500 endpoints", large}, {"320 ports", readInput(b, "ports-over-cap")}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := meshservice.Translate(bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
