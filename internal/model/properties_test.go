// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// builder is what the order-independence check runs: BuildService, or a control that is wrong.
type builder func(model.Input) model.Service

// orderDependence shuffles the input's endpoints (rounds times, seeded) and reports the first
// order whose Service differs from the given order's, or "" when none does.
func orderDependence(build builder, in model.Input, rng *rand.Rand, rounds int) string {
	want := build(in)
	for range rounds {
		shuffled := in
		shuffled.Endpoints = slices.Clone(in.Endpoints)
		rng.Shuffle(len(shuffled.Endpoints), func(a, b int) {
			shuffled.Endpoints[a], shuffled.Endpoints[b] = shuffled.Endpoints[b], shuffled.Endpoints[a]
		})
		if got := build(shuffled); !reflect.DeepEqual(got, want) {
			order := make([]string, len(shuffled.Endpoints))
			for i, ep := range shuffled.Endpoints {
				order[i] = ep.Name
			}
			return fmt.Sprintf("endpoints in the order %v build\n%+v\nnot\n%+v", order, got, want)
		}
	}
	return ""
}

// randomEndpoints draws 1..8 endpoints from small pools so that ports, protocols, health,
// primaries and creation times collide, and every tie-break is reached.
func randomEndpoints(rng *rand.Rand) []meshv1alpha1.MeshEndpoint {
	pool := []int32{80, 443, 5432, 8080, 9000, 9090}
	protocols := []meshv1alpha1.Protocol{meshv1alpha1.ProtocolHTTP, meshv1alpha1.ProtocolHTTP2, meshv1alpha1.ProtocolTCP}
	healths := []meshv1alpha1.Health{healthy, pending, unhealthy, draining}
	var out []meshv1alpha1.MeshEndpoint
	for i := range 1 + rng.IntN(8) {
		numbers := slices.Clone(pool)
		rng.Shuffle(len(numbers), func(a, b int) { numbers[a], numbers[b] = numbers[b], numbers[a] })
		numbers = numbers[:1+rng.IntN(4)]
		slices.Sort(numbers)
		ep := meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("payments-%d", i), Namespace: "shop",
			CreationTimestamp: metav1.NewTime(day.Add(time.Duration(9+rng.IntN(2)) * time.Hour))}}
		ep.Spec = meshv1alpha1.MeshEndpointSpec{ServiceName: "payments", Address: fmt.Sprintf("10.244.0.%d", i),
			NodeName: []string{"node-a", "node-b"}[rng.IntN(2)], Weight: int32(1 + rng.IntN(3)),
			PrimaryPort: numbers[rng.IntN(len(numbers))], Metadata: map[string]string{"i": fmt.Sprint(i)}}
		for _, n := range numbers {
			ep.Spec.Ports = append(ep.Spec.Ports, meshv1alpha1.PortProtocol{Port: n, Protocol: protocols[rng.IntN(len(protocols))]})
		}
		ep.Status.Health = healths[rng.IntN(len(healths))]
		out = append(out, ep)
	}
	return out
}

// TestOrderIndependence: BuildService gives the same Service (deep equality: every pair, member
// and field) for any order of the endpoints, and a valid one, over 300 random services.
func TestOrderIndependence(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260501, 12))
	conflicts := 0
	for i := range 300 {
		in := input(randomEndpoints(rng)...)
		svc := build(t, in)
		for _, p := range svc.Ports {
			if len(p.Pairs) > 1 {
				conflicts++
			}
		}
		if diff := orderDependence(model.BuildService, in, rng, 10); diff != "" {
			t.Fatalf("service %d: %s", i, diff)
		}
	}
	// The draw is meant to reach the votes: make sure it does.
	if conflicts < 100 {
		t.Errorf("only %d conflicting ports over 300 services: the draw no longer exercises the protocol vote", conflicts)
	}
}

// firstSeenWins is the negative control: BuildService, except that a port's vote tied on ready
// members and age goes to the protocol the earliest endpoint *in the given order* declares — a
// plausible tie-break that depends on the order of the list.
func firstSeenWins(in model.Input) model.Service {
	svc := model.BuildService(in)
	for i, p := range svc.Ports {
		tied := 1
		for tied < len(p.Pairs) && p.Pairs[tied].Ready == p.Pairs[0].Ready && p.Pairs[tied].Newest.Equal(p.Pairs[0].Newest) {
			tied++
		}
	seen:
		for _, ep := range in.Endpoints {
			for _, pp := range ep.Spec.Ports {
				if j := slices.IndexFunc(p.Pairs[:tied], func(pr model.Pair) bool { return pr.Protocol == pp.Protocol }); pp.Port == p.Number && j >= 0 {
					pairs := slices.Clone(p.Pairs)
					pairs[0], pairs[j] = pairs[j], pairs[0]
					svc.Ports[i].Pairs, svc.Ports[i].Protocol = pairs, pairs[0].Protocol
					break seen
				}
			}
		}
	}
	return svc
}

// TestOrderIndependenceCanFail: the check above catches an order-dependent tie-break, on a
// fixed full tie and on the random draw.
func TestOrderIndependenceCanFail(t *testing.T) {
	tie := input(eps(t, ep9000("a", "09:00", healthy, "TCP"), ep9000("b", "09:00", healthy, "HTTP"))...)
	if diff := orderDependence(firstSeenWins, tie, rand.New(rand.NewPCG(1, 2)), 20); diff == "" {
		t.Fatal("a first-seen tie-break passed the order-independence check on a 1-1 tie of equal age")
	} else {
		t.Logf("caught: %.200s", diff)
	}
	rng := rand.New(rand.NewPCG(20260501, 12))
	caught := 0
	for range 300 {
		if orderDependence(firstSeenWins, input(randomEndpoints(rng)...), rng, 10) != "" {
			caught++
		}
	}
	if caught == 0 {
		t.Fatal("the random draw never caught the first-seen tie-break: it reaches no full tie")
	}
	t.Logf("the first-seen tie-break was caught on %d of 300 random services", caught)
}

// TestGoldenInputs: every golden input of internal/meshservice builds a valid Service, the
// same in reverse order.
func TestGoldenInputs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "meshservice", "testdata", "*.in.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("golden inputs: %d files, %v", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var golden struct {
				Namespace string                      `json:"namespace"`
				Name      string                      `json:"name"`
				Endpoints []meshv1alpha1.MeshEndpoint `json:"endpoints"`
			}
			if err := yaml.Unmarshal(data, &golden); err != nil {
				t.Fatal(err)
			}
			in := model.Input{Namespace: golden.Namespace, Name: golden.Name, Endpoints: golden.Endpoints}
			svc := build(t, in)
			in.Endpoints = reversed(in.Endpoints)
			if again := build(t, in); !reflect.DeepEqual(again, svc) {
				t.Errorf("reversed endpoints build another service")
			}
		})
	}
}
