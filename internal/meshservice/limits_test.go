// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshservice_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

// wideEndpoint is an endpoint declaring the given ports, each in protocol p, its primary the
// first; created minutes after 09:00.
func wideEndpoint(t testing.TB, name string, minutes int, p meshv1alpha1.Protocol, numbers ...int32) meshv1alpha1.MeshEndpoint {
	t.Helper()
	slices.Sort(numbers)
	spellings := make([]string, len(numbers))
	for i, n := range numbers {
		spellings[i] = fmt.Sprintf("%d/%s", n, p)
	}
	created := time.Date(2026, 5, 1, 9, minutes, 0, 0, time.UTC).Format(time.RFC3339)
	return endpoint(t, name, created, numbers[0], meshv1alpha1.HealthHealthy, spellings...)
}

// portRange is n consecutive ports from first.
func portRange(first int32, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = first + int32(i)
	}
	return out
}

// checkFits checks everything in the status is within the MeshService CRD's limits (the
// contract test in api/v1alpha1 holds the constants equal to the CRD's), so the API server
// accepts it, and that PortsComplete tells the truth about what was left out.
func checkFits(t *testing.T, in meshservice.Input, st meshv1alpha1.MeshServiceStatus) {
	t.Helper()
	declared := map[int32]bool{}
	for _, ep := range in.Endpoints {
		for _, p := range ep.Spec.Ports {
			declared[p.Port] = true
		}
	}
	if len(in.Endpoints) == 0 {
		for _, p := range in.LastStatus.Ports {
			declared[p.Port] = true
		}
	}
	if len(st.Ports) > meshv1alpha1.MaxServicePorts {
		t.Errorf("%d ports in status, the CRD holds %d", len(st.Ports), meshv1alpha1.MaxServicePorts)
	}
	if len(st.PortsSummary) > meshv1alpha1.MaxPortsSummary {
		t.Errorf("portsSummary of %d bytes, the CRD holds %d", len(st.PortsSummary), meshv1alpha1.MaxPortsSummary)
	}
	if len(st.DialSurface) > meshv1alpha1.MaxDialSurface {
		t.Errorf("%d dial rows, the CRD holds %d", len(st.DialSurface), meshv1alpha1.MaxDialSurface)
	}
	for _, d := range st.DialSurface {
		if len(d.Reason) > meshv1alpha1.MaxDialReason || len(d.Address) > meshv1alpha1.MaxDialAddress {
			t.Errorf("dial %s: address of %d bytes, reason of %d (limits %d, %d)", d.Address[:min(len(d.Address), 60)], len(d.Address), len(d.Reason),
				meshv1alpha1.MaxDialAddress, meshv1alpha1.MaxDialReason)
		}
	}
	if len(st.Names) > meshv1alpha1.MaxNames {
		t.Errorf("%d names, the CRD holds %d", len(st.Names), meshv1alpha1.MaxNames)
	}
	for _, name := range st.Names {
		if len(name) > meshv1alpha1.MaxNameLength {
			t.Errorf("name %s…: %d bytes, the CRD holds %d", name[:60], len(name), meshv1alpha1.MaxNameLength)
		}
	}
	all := slices.Clone(st.Conditions)
	for _, p := range st.Ports {
		all = append(all, p.Conditions...)
	}
	for _, c := range all {
		if len(c.Message) > conditions.MaxConditionMessage {
			t.Errorf("condition %s: message of %d bytes", c.Type, len(c.Message))
		}
	}

	complete := conditions.Find(st.Conditions, meshv1alpha1.ServiceConditionPortsComplete)
	over := len(declared) > meshv1alpha1.MaxServicePorts
	switch {
	case complete == nil:
		t.Errorf("no %s condition", meshv1alpha1.ServiceConditionPortsComplete)
	case over && (complete.Status != metav1.ConditionFalse || complete.Reason != meshv1alpha1.ServiceReasonTooManyPorts):
		t.Errorf("%d ports declared, over %d, yet PortsComplete is %s/%s", len(declared), meshv1alpha1.MaxServicePorts, complete.Status, complete.Reason)
	case !over && (complete.Status != metav1.ConditionTrue || len(st.Ports) != len(declared)):
		t.Errorf("%d ports declared, %d listed, PortsComplete %s/%s", len(declared), len(st.Ports), complete.Status, complete.Reason)
	case over:
		want := fmt.Sprintf("the endpoints declare %d distinct ports; a service lists at most %d", len(declared), meshv1alpha1.MaxServicePorts)
		if len(st.Ports) != meshv1alpha1.MaxServicePorts || !strings.Contains(complete.Message, want) ||
			len(complete.Message) > conditions.MaxEventNote {
			t.Errorf("%d ports listed; PortsComplete message (%d bytes) %q, want it to contain %q and fit an Event note",
				len(st.Ports), len(complete.Message), complete.Message, want)
		}
	}
}

// wantKept is the cap's rule stated on its own: the primary, then the ports declared by the most
// endpoints, ties to the lower port; at most MaxServicePorts, sorted.
func wantKept(in meshservice.Input, primary int32) []int32 {
	declaredBy := map[int32]int{}
	for _, ep := range in.Endpoints {
		for _, p := range ep.Spec.Ports {
			declaredBy[p.Port]++
		}
	}
	var numbers []int32
	for n := range declaredBy {
		numbers = append(numbers, n)
	}
	slices.SortFunc(numbers, func(a, b int32) int {
		if (a == primary) != (b == primary) {
			if a == primary {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(declaredBy[b], declaredBy[a]), cmp.Compare(a, b))
	})
	kept := numbers[:min(len(numbers), meshv1alpha1.MaxServicePorts)]
	slices.Sort(kept)
	return kept
}

func listed(st meshv1alpha1.MeshServiceStatus) []int32 {
	out := make([]int32, len(st.Ports))
	for i, p := range st.Ports {
		out[i] = p.Port
	}
	return out
}

// limitCases are services at, around and far over the limits, as admission lets them exist.
func limitCases(t testing.TB) map[string]meshservice.Input {
	fivePods := func(first int32) []meshv1alpha1.MeshEndpoint {
		var eps []meshv1alpha1.MeshEndpoint
		for i := range 5 {
			eps = append(eps, wideEndpoint(t, fmt.Sprintf("payments-%d", i), i, meshv1alpha1.ProtocolTCP, portRange(first+int32(64*i), 64)...))
		}
		return eps
	}
	cases := map[string]meshservice.Input{
		"64+31+21 (the frozen summary)": baseInput(
			wideEndpoint(t, "payments-a", 0, meshv1alpha1.ProtocolHTTP, portRange(20000, 64)...),
			wideEndpoint(t, "payments-b", 1, meshv1alpha1.ProtocolTCP, portRange(21000, 31)...),
			wideEndpoint(t, "payments-c", 2, meshv1alpha1.ProtocolHTTP2, portRange(22000, 21)...)),
		"five 64-port pods, 320 distinct": baseInput(fivePods(10000)...),
		"one 64-port TCP pod, no HTTP":    baseInput(wideEndpoint(t, "payments-a", 0, meshv1alpha1.ProtocolTCP, portRange(30000, 64)...)),
		"64 ports of one pod, 1-digit to 5-digit": baseInput(wideEndpoint(t, "payments-a", 0, meshv1alpha1.ProtocolHTTP2,
			append(portRange(1, 60), 10000, 20000, 30000, 65535)...)),
	}
	// Exactly at the cap (4 × 64), one over, and 63 over in one pod more.
	for name, extra := range map[string]int{"256, exactly the cap": 0, "257, one over": 1, "319, 63 over": 63} {
		eps := fivePods(10000)[:4]
		if extra > 0 {
			eps = append(eps, wideEndpoint(t, "payments-4", 4, meshv1alpha1.ProtocolHTTP, portRange(10256, extra)...))
		}
		cases[name] = baseInput(eps...)
	}
	// Not ours: one host name, no generated Service, same cap.
	notOurs := baseInput(fivePods(10000)...)
	notOurs.Service = meshservice.ServiceFacts{Exists: true}
	cases["320 distinct, the Service is not ours"] = notOurs
	// Every port but the mesh's, in 1024 pods of 64: the cap holds whatever the count.
	var everything []meshv1alpha1.MeshEndpoint
	var batch []int32
	for p := int32(1); p <= 65535; p++ {
		if slices.Contains([]int32{18001, 18008, 18081, 18082}, p) {
			continue
		}
		if batch = append(batch, p); len(batch) == 64 || p == 65535 {
			everything = append(everything, wideEndpoint(t, fmt.Sprintf("payments-%04d", len(everything)), len(everything)%60,
				meshv1alpha1.ProtocolTCP, batch...))
			batch = nil
		}
	}
	cases["every port"] = baseInput(everything...)
	// The longest names the API lets a service have, at the cap.
	longest := baseInput(fivePods(10000)...)
	longest.Name, longest.Namespace, longest.MeshDomain = dnsSubdomain(253), strings.Repeat("n", 63), dnsSubdomain(253)
	cases["the longest names"] = longest
	return cases
}

// dnsSubdomain is a DNS subdomain of n bytes: labels of 63 letters joined by dots.
func dnsSubdomain(n int) string {
	b := []byte(strings.Repeat("a", n))
	for i := 63; i < n-1; i += 64 {
		b[i] = '.'
	}
	return string(b)
}

// TestLongestNamesFit: a ServiceAccount name of 253 bytes, a namespace of 63 and a mesh domain
// of 253 make a mesh name of exactly MaxNameLength, and the status holds it.
func TestLongestNamesFit(t *testing.T) {
	in := baseInput(wideEndpoint(t, "payments-a", 0, meshv1alpha1.ProtocolHTTP, 8080))
	in.Name, in.Namespace, in.MeshDomain = dnsSubdomain(253), strings.Repeat("n", 63), dnsSubdomain(253)
	st := mustTranslate(t, in).Status
	checkFits(t, in, st)
	if len(st.Names) != 3 || len(st.Names[0]) != meshv1alpha1.MaxNameLength {
		t.Errorf("%d names, the mesh name of %d bytes; want 3, the first exactly %d", len(st.Names), len(st.Names[0]), meshv1alpha1.MaxNameLength)
	}
}

// TestStatusFitsTheCRD: for every service admission lets exist — at the caps, just over, far over
// — the status is within the CRD's limits, lists the ports the cap's rule keeps, and says
// whether any were left out. The golden cases are checked too.
func TestStatusFitsTheCRD(t *testing.T) {
	for name, in := range limitCases(t) {
		t.Run(name, func(t *testing.T) {
			out := mustTranslate(t, in)
			checkFits(t, in, out.Status)
			if want := wantKept(in, out.Status.PrimaryPort); !slices.Equal(listed(out.Status), want) {
				t.Errorf("listed %d ports %v…, the rule keeps %d: %v…", len(out.Status.Ports), listed(out.Status)[:min(8, len(out.Status.Ports))],
					len(want), want[:min(8, len(want))])
			}
			// Left out everywhere: the Service carries exactly the listed ports (and the mesh's).
			if out.Service != nil {
				var servicePorts []int32
				for _, p := range out.Service.Spec.Ports {
					if n := *p.Port; !slices.Contains([]int32{80, 443, 18081, 18082}, n) || slices.Contains(listed(out.Status), n) {
						servicePorts = append(servicePorts, n)
					}
				}
				if !slices.Equal(servicePorts, listed(out.Status)) {
					t.Errorf("the generated Service carries %d ports, the status lists %d", len(servicePorts), len(out.Status.Ports))
				}
			}
			// Scaled to zero, the kept ports stay and still fit.
			zero := in
			zero.Endpoints, zero.LastStatus = nil, out.Status
			down := mustTranslate(t, zero)
			checkFits(t, zero, down.Status)
			if !slices.Equal(listed(down.Status), listed(out.Status)) {
				t.Errorf("at zero endpoints %d ports are kept, %d were listed", len(down.Status.Ports), len(out.Status.Ports))
			}
		})
	}
	for _, name := range goldenCases(t) {
		t.Run("golden "+name, func(t *testing.T) {
			in := readInput(t, name)
			checkFits(t, in, mustTranslate(t, in).Status)
		})
	}
}

// TestCapIsOrderIndependent: which ports the cap keeps depends only on the set of endpoints.
// Endpoints draw 64 ports from a pool of 400 (so the union is over the cap and ports are declared
// by different numbers of endpoints), their primaries and ages collide; every shuffle must give
// the same Output, and the listed ports must be the rule's.
func TestCapIsOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(256, 320))
	protocols := []meshv1alpha1.Protocol{meshv1alpha1.ProtocolHTTP, meshv1alpha1.ProtocolHTTP2, meshv1alpha1.ProtocolTCP}
	pool := portRange(40000, 400)
	overCap := 0
	for i := range 20 {
		var eps []meshv1alpha1.MeshEndpoint
		for j := range 7 + rng.IntN(6) {
			numbers := slices.Clone(pool)
			rng.Shuffle(len(numbers), func(a, b int) { numbers[a], numbers[b] = numbers[b], numbers[a] })
			ep := wideEndpoint(t, fmt.Sprintf("payments-%d", j), rng.IntN(3), protocols[rng.IntN(3)], numbers[:meshv1alpha1.MaxPorts]...)
			ep.Spec.PrimaryPort = ep.Spec.Ports[rng.IntN(len(ep.Spec.Ports))].Port
			eps = append(eps, ep)
		}
		in := baseInput(eps...)
		st := mustTranslate(t, in).Status
		want := marshalJSON(t, mustTranslate(t, in))
		if c := conditions.Find(st.Conditions, meshv1alpha1.ServiceConditionPortsComplete); c != nil && c.Status == metav1.ConditionFalse {
			overCap++
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkFits(t, in, st)
			if kept := wantKept(in, st.PrimaryPort); !slices.Equal(listed(st), kept) {
				t.Fatalf("listed ports differ from the rule's (%d vs %d)", len(st.Ports), len(kept))
			}
			for range 6 {
				shuffled := in
				shuffled.Endpoints = slices.Clone(in.Endpoints)
				rng.Shuffle(len(shuffled.Endpoints), func(a, b int) {
					shuffled.Endpoints[a], shuffled.Endpoints[b] = shuffled.Endpoints[b], shuffled.Endpoints[a]
				})
				if same, diff := sameOutput(want, marshalJSON(t, mustTranslate(t, shuffled))); !same {
					t.Fatalf("shuffling the endpoints changed the Output:\n%s", diff)
				}
			}
		})
	}
	if overCap < 18 {
		t.Errorf("only %d of 20 services were over the cap: the test does not exercise the cap", overCap)
	}
}

// marshalJSON is the Output as indented JSON: the byte comparison of marshal, at a fraction of
// its cost for outputs of hundreds of ports.
func marshalJSON(t testing.TB, out meshservice.Output) []byte {
	t.Helper()
	data, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return data
}
