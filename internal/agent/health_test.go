// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

func TestNextHealth(t *testing.T) {
	const (
		pending   = meshv1alpha1.HealthPending
		healthy   = meshv1alpha1.HealthHealthy
		unhealthy = meshv1alpha1.HealthUnhealthy
		draining  = meshv1alpha1.HealthDraining
	)
	o := HealthOptions{FailureThreshold: 3, SuccessThreshold: 2}
	cases := map[string]struct {
		start   meshv1alpha1.Health
		results []bool
		want    []meshv1alpha1.Health // health after each result
	}{
		"new endpoint, no health yet, fails once":  {start: "", results: []bool{false}, want: []meshv1alpha1.Health{pending}},
		"pending needs the success threshold":      {start: pending, results: []bool{true, true}, want: []meshv1alpha1.Health{pending, healthy}},
		"pending needs the failure threshold":      {start: pending, results: []bool{false, false, false}, want: []meshv1alpha1.Health{pending, pending, unhealthy}},
		"healthy survives fewer failures":          {start: healthy, results: []bool{false, false, true, false, false}, want: []meshv1alpha1.Health{healthy, healthy, healthy, healthy, healthy}},
		"healthy falls after consecutive failures": {start: healthy, results: []bool{false, false, false}, want: []meshv1alpha1.Health{healthy, healthy, unhealthy}},
		"unhealthy recovers after the threshold":   {start: unhealthy, results: []bool{true, false, true, true}, want: []meshv1alpha1.Health{unhealthy, unhealthy, unhealthy, healthy}},
		"draining is never changed by a probe":     {start: draining, results: []bool{true, true, false, false, false}, want: []meshv1alpha1.Health{draining, draining, draining, draining, draining}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st, h := &probeState{}, tc.start
			for i, ok := range tc.results {
				h = nextHealth(h, st, ok, o)
				if h != tc.want[i] {
					t.Fatalf("after result %d (%v): %q, want %q", i, ok, h, tc.want[i])
				}
			}
		})
	}
}
