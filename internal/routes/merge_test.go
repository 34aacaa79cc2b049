// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package routes_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/routes"
)

var (
	then = metav1.NewTime(time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC))
	now  = metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
)

const (
	gatewayController   gwapiv1.GatewayController = "gateway.example.com/edge"
	otherMeshController gwapiv1.GatewayController = "other-mesh.example.com/controller"
)

func serviceRef(name string) gwapiv1.ParentReference {
	core, kind := gwapiv1.Group(""), gwapiv1.Kind("Service")
	return gwapiv1.ParentReference{Group: &core, Kind: &kind, Name: gwapiv1.ObjectName(name)}
}

func gatewayRef(name string) gwapiv1.ParentReference {
	group, kind, section := gwapiv1.Group(gwapiv1.GroupName), gwapiv1.Kind("Gateway"), gwapiv1.SectionName("https")
	return gwapiv1.ParentReference{Group: &group, Kind: &kind, Name: gwapiv1.ObjectName(name), SectionName: &section}
}

func cond(t gwapiv1.RouteConditionType, status metav1.ConditionStatus, reason gwapiv1.RouteConditionReason, msg string, gen int64, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: status, Reason: string(reason), Message: msg, ObservedGeneration: gen, LastTransitionTime: at}
}

// entry is a status.parents entry as stored: conditions stamped with generation gen at time at.
func entry(ctrl gwapiv1.GatewayController, ref gwapiv1.ParentReference, resolved metav1.ConditionStatus, gen int64, at metav1.Time) gwapiv1.RouteParentStatus {
	reason, msg := gwapiv1.RouteReasonResolvedRefs, "all 1 backendRefs resolve"
	if resolved == metav1.ConditionFalse {
		reason, msg = gwapiv1.RouteReasonBackendNotFound, "rule 0: backendRef ghost: Service shop/ghost not found"
	}
	return gwapiv1.RouteParentStatus{
		ParentRef:      ref,
		ControllerName: ctrl,
		Conditions: []metav1.Condition{
			cond(gwapiv1.RouteConditionAccepted, metav1.ConditionTrue, gwapiv1.RouteReasonAccepted, "attached", gen, at),
			cond(gwapiv1.RouteConditionResolvedRefs, resolved, reason, msg, gen, at),
		},
	}
}

// ours is an entry as Evaluate returns it: this controller's, without timestamps or generation.
func ours(ref gwapiv1.ParentReference, resolved metav1.ConditionStatus) gwapiv1.RouteParentStatus {
	e := entry(routes.ControllerName, ref, resolved, 0, metav1.Time{})
	e.Conditions[0].Message = "attached to mesh service " + string(ref.Name)
	return e
}

// sameBytes reports whether a and b marshal to the same bytes, logging a diff when not.
func sameBytes(t testing.TB, what string, a, b any) bool {
	t.Helper()
	x, y := golden.YAML(t, a), golden.YAML(t, b)
	if bytes.Equal(x, y) {
		return true
	}
	t.Logf("%s differs (-before +after):\n%s", what, golden.Diff(string(x), string(y)))
	return false
}

func TestMergeParents(t *testing.T) {
	gateway := entry(gatewayController, gatewayRef("edge"), metav1.ConditionTrue, 2, then)
	ourPayments := entry(routes.ControllerName, serviceRef("payments"), metav1.ConditionTrue, 3, then)
	otherMesh := entry(otherMeshController, serviceRef("payments"), metav1.ConditionFalse, 9, then)
	ourStale := entry(routes.ControllerName, serviceRef("orders"), metav1.ConditionTrue, 3, then)
	existing := []gwapiv1.RouteParentStatus{gateway, ourPayments, otherMesh, ourStale}
	existingBefore := golden.YAML(t, existing)

	// payments: Accepted unchanged (True), ResolvedRefs flips True -> False; inventory is new;
	// orders is no longer a mesh-Service parent.
	desired := []gwapiv1.RouteParentStatus{ours(serviceRef("payments"), metav1.ConditionFalse), ours(serviceRef("inventory"), metav1.ConditionTrue)}
	desiredBefore := golden.YAML(t, desired)

	got := routes.MergeParents(existing, desired, 4, now)

	if !bytes.Equal(golden.YAML(t, existing), existingBefore) {
		t.Error("MergeParents modified its existing argument")
	}
	if !bytes.Equal(golden.YAML(t, desired), desiredBefore) {
		t.Error("MergeParents modified its ours argument")
	}
	if len(got) != 4 {
		t.Fatalf("got %d entries, want 4 (gateway, ours payments, other mesh, ours inventory):\n%s", len(got), golden.YAML(t, got))
	}

	t.Run("other controllers' entries are byte-identical and in place", func(t *testing.T) {
		if !sameBytes(t, "the Gateway controller's entry", gateway, got[0]) {
			t.Error("entry 0 is not the Gateway controller's entry, unchanged")
		}
		if !sameBytes(t, "the other mesh controller's entry for payments", otherMesh, got[2]) {
			t.Error("entry 2 is not the other mesh controller's entry for the same parent, unchanged")
		}
	})

	t.Run("ours replaced in place", func(t *testing.T) {
		e := got[1]
		if e.ControllerName != routes.ControllerName || e.ParentRef.Name != "payments" {
			t.Fatalf("entry 1 = %s %s, want ours for payments", e.ControllerName, e.ParentRef.Name)
		}
		if !sameBytes(t, "payments parentRef", serviceRef("payments"), e.ParentRef) {
			t.Error("payments parentRef changed")
		}
		acc := findCondition(e.Conditions, string(gwapiv1.RouteConditionAccepted))
		rr := findCondition(e.Conditions, string(gwapiv1.RouteConditionResolvedRefs))
		if acc == nil || rr == nil {
			t.Fatalf("conditions %+v lack Accepted or ResolvedRefs", e.Conditions)
		}
		if acc.Message != "attached to mesh service payments" || rr.Status != metav1.ConditionFalse || rr.Reason != string(gwapiv1.RouteReasonBackendNotFound) {
			t.Errorf("conditions are not the new evaluation's: %+v", e.Conditions)
		}
		if !acc.LastTransitionTime.Equal(&then) {
			t.Errorf("Accepted stayed True but lastTransitionTime = %v, want %v", acc.LastTransitionTime, then)
		}
		if !rr.LastTransitionTime.Equal(&now) {
			t.Errorf("ResolvedRefs flipped but lastTransitionTime = %v, want %v", rr.LastTransitionTime, now)
		}
	})

	t.Run("new entry appended", func(t *testing.T) {
		e := got[3]
		if e.ControllerName != routes.ControllerName || e.ParentRef.Name != "inventory" {
			t.Fatalf("entry 3 = %s %s, want ours for inventory", e.ControllerName, e.ParentRef.Name)
		}
		for _, c := range e.Conditions {
			if !c.LastTransitionTime.Equal(&now) {
				t.Errorf("new %s lastTransitionTime = %v, want %v", c.Type, c.LastTransitionTime, now)
			}
		}
	})

	t.Run("our stale entry dropped", func(t *testing.T) {
		for i, e := range got {
			if e.ParentRef.Name == "orders" {
				t.Errorf("entry %d is our stale entry for orders", i)
			}
		}
	})

	t.Run("observedGeneration stamped on ours", func(t *testing.T) {
		for _, i := range []int{1, 3} {
			for _, c := range got[i].Conditions {
				if c.ObservedGeneration != 4 {
					t.Errorf("entry %d %s observedGeneration = %d, want 4", i, c.Type, c.ObservedGeneration)
				}
			}
		}
	})

	t.Run("merging the same evaluation again changes nothing", func(t *testing.T) {
		later := metav1.NewTime(now.Add(time.Hour))
		again := routes.MergeParents(got, desired, 4, later)
		if !sameBytes(t, "second merge", got, again) {
			t.Error("an unchanged evaluation rewrote the status (the controller would write on every reconcile)")
		}
	})
}

// TestMergeParentsKeepsOurOrder: entries of ours keep the order they have in status, not the
// order Evaluate returns them in; only new ones go to the end.
func TestMergeParentsKeepsOurOrder(t *testing.T) {
	existing := []gwapiv1.RouteParentStatus{
		entry(routes.ControllerName, serviceRef("b"), metav1.ConditionTrue, 1, then),
		entry(gatewayController, gatewayRef("edge"), metav1.ConditionTrue, 1, then),
		entry(routes.ControllerName, serviceRef("a"), metav1.ConditionTrue, 1, then),
	}
	desired := []gwapiv1.RouteParentStatus{
		ours(serviceRef("c"), metav1.ConditionTrue),
		ours(serviceRef("a"), metav1.ConditionTrue),
		ours(serviceRef("b"), metav1.ConditionTrue),
	}
	got := routes.MergeParents(existing, desired, 2, now)
	var order []string
	for _, e := range got {
		order = append(order, string(e.ControllerName)+" "+string(e.ParentRef.Name))
	}
	want := []string{
		string(routes.ControllerName) + " b",
		string(gatewayController) + " edge",
		string(routes.ControllerName) + " a",
		string(routes.ControllerName) + " c",
	}
	if !slices.Equal(order, want) {
		t.Errorf("order = %q, want %q", order, want)
	}
	for _, i := range []int{0, 2} {
		for _, c := range got[i].Conditions {
			if !c.LastTransitionTime.Equal(&then) {
				t.Errorf("entry %d %s: status unchanged but lastTransitionTime = %v, want %v", i, c.Type, c.LastTransitionTime, then)
			}
		}
	}
}

// TestMergeParentsNothingOfOurs: with no mesh-Service parents left, only other controllers'
// entries remain, untouched; with nothing at all, nothing.
func TestMergeParentsNothingOfOurs(t *testing.T) {
	gateway := entry(gatewayController, gatewayRef("edge"), metav1.ConditionTrue, 2, then)
	existing := []gwapiv1.RouteParentStatus{entry(routes.ControllerName, serviceRef("payments"), metav1.ConditionTrue, 3, then), gateway}
	got := routes.MergeParents(existing, nil, 4, now)
	if len(got) != 1 || !sameBytes(t, "the Gateway controller's entry", gateway, got[0]) {
		t.Errorf("got %s, want only the Gateway controller's entry, unchanged", golden.YAML(t, got))
	}
	if got := routes.MergeParents(nil, nil, 1, now); len(got) != 0 {
		t.Errorf("MergeParents(nil, nil) = %v, want none", got)
	}
}

// TestSameBytesDetectsChange is the negative control of the byte comparisons above: a change in
// any part of another controller's entry, even one level down behind a pointer or a timestamp,
// makes them fail.
func TestSameBytesDetectsChange(t *testing.T) {
	base := func() gwapiv1.RouteParentStatus {
		return entry(otherMeshController, gatewayRef("edge"), metav1.ConditionTrue, 9, then)
	}
	mutations := map[string]func(*gwapiv1.RouteParentStatus){
		"message":            func(e *gwapiv1.RouteParentStatus) { e.Conditions[1].Message += "!" },
		"lastTransitionTime": func(e *gwapiv1.RouteParentStatus) { e.Conditions[0].LastTransitionTime = now },
		"observedGeneration": func(e *gwapiv1.RouteParentStatus) { e.Conditions[0].ObservedGeneration = 10 },
		"sectionName": func(e *gwapiv1.RouteParentStatus) {
			s := gwapiv1.SectionName("http")
			e.ParentRef.SectionName = &s
		},
		"condition order": func(e *gwapiv1.RouteParentStatus) {
			e.Conditions[0], e.Conditions[1] = e.Conditions[1], e.Conditions[0]
		},
	}
	if !sameBytes(t, "identical entries", base(), base()) {
		t.Fatal("two identical entries compare different")
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			changed := base()
			mutate(&changed)
			if sameBytes(&quietT{t}, name, base(), changed) {
				t.Errorf("changing the %s is not detected", name)
			}
		})
	}
}

// quietT swallows the diff sameBytes logs, which is expected in the negative control.
type quietT struct{ *testing.T }

func (quietT) Logf(string, ...any) {}
