// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package routes

import (
	"k8s.io/apimachinery/pkg/runtime"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Read is a route of any of the four kinds as the evaluation sees it, and its status.parents
// (to merge into, or to read our entries from). ok is false for any other object. The controller
// and kubectl aether both read routes through it.
func Read(o runtime.Object) (route Route, parents *[]gwapiv1.RouteParentStatus, ok bool) {
	switch r := o.(type) {
	case *gwapiv1.HTTPRoute:
		route = Route{Kind: HTTPRoute, Namespace: r.Namespace, Name: r.Name, ParentRefs: r.Spec.ParentRefs}
		for _, rule := range r.Spec.Rules {
			route.Rules = append(route.Rules, Rule{Name: rule.Name, BackendRefs: backendRefs(rule.BackendRefs,
				func(b gwapiv1.HTTPBackendRef) gwapiv1.BackendObjectReference { return b.BackendObjectReference })})
		}
		return route, &r.Status.Parents, true
	case *gwapiv1.GRPCRoute:
		route = Route{Kind: GRPCRoute, Namespace: r.Namespace, Name: r.Name, ParentRefs: r.Spec.ParentRefs}
		for _, rule := range r.Spec.Rules {
			route.Rules = append(route.Rules, Rule{Name: rule.Name, BackendRefs: backendRefs(rule.BackendRefs,
				func(b gwapiv1.GRPCBackendRef) gwapiv1.BackendObjectReference { return b.BackendObjectReference })})
		}
		return route, &r.Status.Parents, true
	case *gwapiv1.TCPRoute:
		route = Route{Kind: TCPRoute, Namespace: r.Namespace, Name: r.Name, ParentRefs: r.Spec.ParentRefs}
		for _, rule := range r.Spec.Rules {
			route.Rules = append(route.Rules, Rule{Name: rule.Name, BackendRefs: backendRefs(rule.BackendRefs, plainBackend)})
		}
		return route, &r.Status.Parents, true
	case *gwapiv1.TLSRoute:
		route = Route{Kind: TLSRoute, Namespace: r.Namespace, Name: r.Name, ParentRefs: r.Spec.ParentRefs}
		for _, rule := range r.Spec.Rules {
			route.Rules = append(route.Rules, Rule{Name: rule.Name, BackendRefs: backendRefs(rule.BackendRefs, plainBackend)})
		}
		return route, &r.Status.Parents, true
	}
	return Route{}, nil, false
}

// BackendRefs are every backend of every rule, in order.
func (r Route) BackendRefs() []gwapiv1.BackendObjectReference {
	var out []gwapiv1.BackendObjectReference
	for _, rule := range r.Rules {
		out = append(out, rule.BackendRefs...)
	}
	return out
}

func plainBackend(b gwapiv1.BackendRef) gwapiv1.BackendObjectReference {
	return b.BackendObjectReference
}

func backendRefs[T any](refs []T, get func(T) gwapiv1.BackendObjectReference) []gwapiv1.BackendObjectReference {
	out := make([]gwapiv1.BackendObjectReference, 0, len(refs))
	for _, r := range refs {
		out = append(out, get(r))
	}
	return out
}
