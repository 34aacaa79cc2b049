// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package invariant

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/routes"
)

// routeLists are the lists of the five route kinds the controller answers for.
func routeLists() map[routes.Kind]client.ObjectList {
	return map[routes.Kind]client.ObjectList{
		routes.HTTPRoute: &gwapiv1.HTTPRouteList{},
		routes.GRPCRoute: &gwapiv1.GRPCRouteList{},
		routes.TCPRoute:  &gwapiv1.TCPRouteList{},
		routes.TLSRoute:  &gwapiv1.TLSRouteList{},
		routes.UDPRoute:  &gwapiv1.UDPRouteList{},
	}
}

// checkRoutes: every status.parents entry of the mesh's controller is what a fresh evaluation
// of its route writes, and there is one for each parent the evaluation answers for. A kind
// whose CRD the cluster does not serve has no routes (the controller skips it too).
func checkRoutes(ctx context.Context, c client.Reader, s snapshot, now time.Time) []Violation {
	var out []Violation
	for _, route := range s.routes {
		out = append(out, checkRoute(ctx, c, route, now)...)
	}
	return out
}

func checkRoute(ctx context.Context, c client.Reader, obj client.Object, now time.Time) []Violation {
	route, parents, ok := routes.Read(obj)
	if !ok {
		return nil
	}
	in, err := controller.GatherRoute(ctx, c, route)
	if err != nil {
		return []Violation{readFailed(string(route.Kind), route.Namespace, route.Name, err)}
	}
	want := ours(routes.MergeParents(*parents, routes.Evaluate(in), obj.GetGeneration(), metav1.NewTime(now.Truncate(time.Second))))
	got := ours(*parents)
	var diffs []fieldDiff
	for _, w := range want {
		prefix := "status.parents[" + describeParent(w.ParentRef) + "]"
		g := findParent(got, w.ParentRef)
		if g == nil {
			diffs = append(diffs, fieldDiff{prefix, "an entry of " + string(routes.ControllerName), "none"})
			continue
		}
		diffs = append(diffs, diffConditions(prefix+".conditions", w.Conditions, g.Conditions)...)
	}
	for _, g := range got {
		if findParent(want, g.ParentRef) == nil {
			diffs = append(diffs, fieldDiff{"status.parents[" + describeParent(g.ParentRef) + "]", "none: the route names no such mesh parent", "an entry of " + string(routes.ControllerName)})
		}
	}
	return violations(CheckRoutes, string(route.Kind), route.Namespace, route.Name, diffs)
}

// ours are the entries of the mesh's controller.
func ours(parents []gwapiv1.RouteParentStatus) []gwapiv1.RouteParentStatus {
	var out []gwapiv1.RouteParentStatus
	for _, p := range parents {
		if p.ControllerName == routes.ControllerName {
			out = append(out, p)
		}
	}
	return out
}

func findParent(list []gwapiv1.RouteParentStatus, ref gwapiv1.ParentReference) *gwapiv1.RouteParentStatus {
	for i := range list {
		if equality.Semantic.DeepEqual(list[i].ParentRef, ref) {
			return &list[i]
		}
	}
	return nil
}

// describeParent names a parentRef: Service payments/orders:8080.
func describeParent(ref gwapiv1.ParentReference) string {
	kind := "Gateway"
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	s := kind + " "
	if ref.Namespace != nil {
		s += string(*ref.Namespace) + "/"
	}
	s += string(ref.Name)
	if ref.Port != nil {
		s += fmt.Sprintf(":%d", *ref.Port)
	}
	if ref.SectionName != nil {
		s += "#" + string(*ref.SectionName)
	}
	return s
}
