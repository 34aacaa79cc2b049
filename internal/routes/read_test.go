// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package routes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
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
