// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package routes

import (
	"cmp"
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// MeshRoute is route as the data plane carries it (model.Route), when this controller's status
// entries say it may, for the route's current spec:
//   - some entry of ours has ResolvedRefs=True (the controller writes one verdict for all of the
//     route's backends into each entry);
//   - its parents are those whose entry of ours has Accepted=True (a parentRef port the route's
//     kind cannot carry is Accepted=False, and attaches nothing);
//   - every condition read has observedGeneration equal to the route's generation: a verdict on
//     an older spec says nothing about this one (the controller writes a new observedGeneration
//     for every spec change, so the route returns as soon as it has judged the new spec).
//
// ok is false otherwise, and also when a backendRef is not a core Service with a port (a spec the
// controller would have refused, ResolvedRefs=False: a status that says otherwise is not
// trusted). Each rule's backends carry their weights; a rule whose every match is Uncarried is
// left out (it matches no request, and an empty match list would mean every request). Parents
// are sorted and listed once; rules keep their order.
func MeshRoute(route Route, parents []gwapiv1.RouteParentStatus) (model.Route, bool) {
	out := model.Route{Kind: model.RouteKind(route.Kind), Namespace: route.Namespace, Name: route.Name}
	if len(route.Hostnames) > 0 {
		out.Hostnames = slices.Clone(route.Hostnames)
	}
	resolved := false
	for _, p := range parents {
		if p.ControllerName != ControllerName {
			continue
		}
		resolved = resolved || current(p.Conditions, gwapiv1.RouteConditionResolvedRefs, route.Generation)
		if current(p.Conditions, gwapiv1.RouteConditionAccepted, route.Generation) && parentIsService(p.ParentRef) {
			ref := model.ServiceRef{Namespace: namespaceOr(p.ParentRef.Namespace, route.Namespace), Name: string(p.ParentRef.Name)}
			if p.ParentRef.Port != nil {
				ref.Port = *p.ParentRef.Port
			}
			out.Parents = append(out.Parents, ref)
		}
	}
	if !resolved || len(out.Parents) == 0 {
		return model.Route{}, false
	}
	slices.SortFunc(out.Parents, func(a, b model.ServiceRef) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port))
	})
	out.Parents = slices.Compact(out.Parents)
	for _, rule := range route.Rules {
		if rule.MatchesNone {
			continue
		}
		r := model.RouteRule{Timeouts: rule.Timeouts}
		if len(rule.Matches) > 0 {
			r.Matches = slices.Clone(rule.Matches)
		}
		for i, ref := range rule.BackendRefs {
			if !backendIsService(ref) || ref.Port == nil || i >= len(rule.Weights) {
				return model.Route{}, false
			}
			r.Backends = append(r.Backends, model.Backend{ServiceRef: model.ServiceRef{
				Namespace: namespaceOr(ref.Namespace, route.Namespace), Name: string(ref.Name), Port: *ref.Port,
			}, Weight: rule.Weights[i]})
		}
		out.Rules = append(out.Rules, r)
	}
	return out, true
}

// current reports whether condition t is True and speaks for generation.
func current(conditions []metav1.Condition, t gwapiv1.RouteConditionType, generation int64) bool {
	c := apimeta.FindStatusCondition(conditions, string(t))
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}

// parentIsService reports whether a parentRef names a core Service, as Evaluate reads it: a
// parentRef without group and kind is a Gateway (Gateway API's defaults).
func parentIsService(ref gwapiv1.ParentReference) bool {
	return ref.Group != nil && *ref.Group == "" && ref.Kind != nil && *ref.Kind == serviceKind
}

// backendIsService reports whether a backendRef names a core Service (its defaults).
func backendIsService(ref gwapiv1.BackendObjectReference) bool {
	return (ref.Group == nil || *ref.Group == "") && (ref.Kind == nil || *ref.Kind == serviceKind)
}
