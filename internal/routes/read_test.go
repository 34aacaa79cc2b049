// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package routes

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// TestRead: each of the four kinds reads as its Kind, with every rule's backends in order and a
// pointer to its own status.parents; anything else is not a route.
func TestRead(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "shop", Name: "r"}
	ref := func(name string) gwapiv1.BackendRef {
		return gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(name)}}
	}
	parents := []gwapiv1.RouteParentStatus{{ControllerName: ControllerName}}
	for _, tc := range []struct {
		obj  runtime.Object
		kind Kind
	}{
		{&gwapiv1.HTTPRoute{ObjectMeta: meta, Spec: gwapiv1.HTTPRouteSpec{Rules: []gwapiv1.HTTPRouteRule{
			{BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: ref("a")}}}, {BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: ref("b")}}}}},
			Status: gwapiv1.HTTPRouteStatus{RouteStatus: gwapiv1.RouteStatus{Parents: parents}}}, HTTPRoute},
		{&gwapiv1.GRPCRoute{ObjectMeta: meta, Spec: gwapiv1.GRPCRouteSpec{Rules: []gwapiv1.GRPCRouteRule{
			{BackendRefs: []gwapiv1.GRPCBackendRef{{BackendRef: ref("a")}, {BackendRef: ref("b")}}}}},
			Status: gwapiv1.GRPCRouteStatus{RouteStatus: gwapiv1.RouteStatus{Parents: parents}}}, GRPCRoute},
		{&gwapiv1.TCPRoute{ObjectMeta: meta, Spec: gwapiv1.TCPRouteSpec{Rules: []gwapiv1.TCPRouteRule{
			{BackendRefs: []gwapiv1.BackendRef{ref("a")}}, {BackendRefs: []gwapiv1.BackendRef{ref("b")}}}},
			Status: gwapiv1.TCPRouteStatus{RouteStatus: gwapiv1.RouteStatus{Parents: parents}}}, TCPRoute},
		{&gwapiv1.TLSRoute{ObjectMeta: meta, Spec: gwapiv1.TLSRouteSpec{Rules: []gwapiv1.TLSRouteRule{
			{BackendRefs: []gwapiv1.BackendRef{ref("a"), ref("b")}}}},
			Status: gwapiv1.TLSRouteStatus{RouteStatus: gwapiv1.RouteStatus{Parents: parents}}}, TLSRoute},
	} {
		route, got, ok := Read(tc.obj)
		if !ok || route.Kind != tc.kind || route.Namespace != "shop" || route.Name != "r" {
			t.Errorf("%T: read as %v %s/%s (ok %v)", tc.obj, route.Kind, route.Namespace, route.Name, ok)
			continue
		}
		backends := route.BackendRefs()
		if len(backends) != 2 || backends[0].Name != "a" || backends[1].Name != "b" {
			t.Errorf("%s: backends %v, want a then b", tc.kind, backends)
		}
		if got == nil || len(*got) != 1 || (*got)[0].ControllerName != ControllerName {
			t.Errorf("%s: status.parents %v, want the route's own", tc.kind, got)
		}
	}
	if _, _, ok := Read(&corev1.Service{}); ok {
		t.Error("a Service read as a route")
	}
}

// TestReadTimeouts: an HTTPRoute rule's timeouts are read as durations (0s: none), carried into
// the data plane's rule, and a value that is no duration (stored without Gateway
// API's CRD validation) is applied as none and named, field and value, in the route's
// Accepted message, so the user learns it is not applied.
func TestReadTimeouts(t *testing.T) {
	d := func(s string) *gwapiv1.Duration { v := gwapiv1.Duration(s); return &v }
	route := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r"}, Spec: gwapiv1.HTTPRouteSpec{Rules: []gwapiv1.HTTPRouteRule{
		{Timeouts: &gwapiv1.HTTPRouteTimeouts{Request: d("1m30s"), BackendRequest: d("500ms")}},
		{Timeouts: &gwapiv1.HTTPRouteTimeouts{Request: d("0s")}},
		{Timeouts: &gwapiv1.HTTPRouteTimeouts{Request: d("10 seconds")}},
		{},
	}}}
	r, _, _ := Read(route)
	want := []model.RouteTimeouts{{Request: 90 * time.Second, BackendRequest: 500 * time.Millisecond}, {}, {}, {}}
	for i, rule := range r.Rules {
		if rule.Timeouts != want[i] {
			t.Errorf("rule %d: timeouts %+v, want %+v", i, rule.Timeouts, want[i])
		}
	}
	notes := r.Uncarried()
	if len(notes) != 1 || !strings.Contains(notes[0], `rule 2: timeouts.request "10 seconds" is not a duration`) || !strings.Contains(notes[0], "no timeout is applied") {
		t.Errorf("notes %q, want one naming rule 2's timeouts.request and its value", notes)
	}
	group, kind := gwapiv1.Group(""), gwapiv1.Kind("Service")
	r.ParentRefs = []gwapiv1.ParentReference{{Group: &group, Kind: &kind, Name: "payments"}}
	in := Input{Route: r, MeshServices: []meshv1alpha1.MeshService{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments"}}}}
	acc := Evaluate(in)[0].Conditions[0]
	if acc.Status != metav1.ConditionTrue || !strings.Contains(acc.Message, "Not applied by the mesh: "+notes[0]) {
		t.Errorf("Accepted %s %q, want True, naming what is not applied", acc.Status, acc.Message)
	}
}
