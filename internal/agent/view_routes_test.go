// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/routes"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// meshHTTPRoute is an HTTPRoute in ns parented to core Service parent:parentPort, sending every
// request to Service backend:backendPort with weight.
func meshHTTPRoute(ns, name, parent string, parentPort int32, backend string, backendPort, weight int32) *gwapiv1.HTTPRoute {
	ref := gwapiv1.ParentReference{Group: new(gwapiv1.Group("")), Kind: new(gwapiv1.Kind("Service")), Name: gwapiv1.ObjectName(parent),
		Port: new(parentPort)}
	be := gwapiv1.HTTPBackendRef{BackendRef: gwapiv1.BackendRef{Weight: new(weight)}}
	be.Name, be.Port = gwapiv1.ObjectName(backend), new(backendPort)
	return &gwapiv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"note": strings.Repeat("x", 4096)}},
		Spec: gwapiv1.HTTPRouteSpec{CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{ref}},
			Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{be}}}},
	}
}

// routesOf are the view's routes of namespace ns.
func routesOf(ctx context.Context, v *View, ns string) ([]model.Route, error) {
	all, err := v.Routes(ctx)
	if err != nil {
		return nil, err
	}
	var out []model.Route
	for _, r := range all {
		if r.Namespace == ns {
			out = append(out, r)
		}
	}
	if !slices.IsSortedFunc(all, func(a, b model.Route) int {
		return strings.Compare(string(a.Kind)+" "+a.Namespace+"/"+a.Name, string(b.Kind)+" "+b.Namespace+"/"+b.Name)
	}) {
		return nil, fmt.Errorf("Routes are not sorted by kind, namespace and name")
	}
	return out, nil
}

// ourResolvedRefs is the ResolvedRefs condition of this controller's first entry, or nil.
func ourResolvedRefs(ctx context.Context, ns, name string) (*metav1.Condition, error) {
	r := &gwapiv1.HTTPRoute{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
		return nil, err
	}
	return resolvedRefsOf(r.Status.Parents, r.Generation), nil
}

// resolvedRefsOf is this controller's ResolvedRefs condition among a route's parents, for the
// route's generation, or nil.
func resolvedRefsOf(parents []gwapiv1.RouteParentStatus, generation int64) *metav1.Condition {
	for _, p := range parents {
		if p.ControllerName == routes.ControllerName {
			c := apimeta.FindStatusCondition(p.Conditions, string(gwapiv1.RouteConditionResolvedRefs))
			if c != nil && c.ObservedGeneration == generation {
				return c
			}
		}
	}
	return nil
}

// TestViewRoutes, on the real API server with the real route controller writing status: a route
// the controller accepted (ResolvedRefs=True) is in Routes as the model reads it; one it refused
// (an HTTPRoute to a TCP port: UnsupportedProtocol) is not, nor one whose only ResolvedRefs=True
// is another controller's; and when the accepted route's spec changes to one the controller
// refuses, it leaves Routes.
func TestViewRoutes(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	createPod(t, ctx, ns, "a", testNode, newPodIP(), true, map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9000=tcp"})
	plain := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}} // not a mesh Service: our controller says nothing
	if err := env.Client.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	v := startView(t, true)

	accepted := meshHTTPRoute(ns, "accepted", "payments", 8080, "payments", 8080, 9)
	refused := meshHTTPRoute(ns, "refused", "payments", 8080, "payments", 9000, 1)
	foreign := meshHTTPRoute(ns, "foreign", "plain", 80, "payments", 8080, 1)
	for _, r := range []*gwapiv1.HTTPRoute{accepted, refused, foreign} {
		if err := env.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Another mesh's verdict on foreign, as its controller would write it.
	foreign.Status.Parents = []gwapiv1.RouteParentStatus{{ParentRef: foreign.Spec.ParentRefs[0], ControllerName: "example.com/another-mesh",
		Conditions: []metav1.Condition{
			{Type: string(gwapiv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: foreign.Generation, LastTransitionTime: metav1.Now()},
			{Type: string(gwapiv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: "ResolvedRefs", ObservedGeneration: foreign.Generation, LastTransitionTime: metav1.Now()},
		}}}
	if err := env.Client.Status().Update(ctx, foreign); err != nil {
		t.Fatal(err)
	}

	want := model.Route{Kind: model.HTTPRoute, Namespace: ns, Name: "accepted",
		Parents: []model.ServiceRef{{Namespace: ns, Name: "payments", Port: 8080}},
		Rules: []model.RouteRule{{
			Matches:  []model.RouteMatch{{PathType: "PathPrefix", Path: "/"}}, // the API server's default
			Backends: []model.Backend{{ServiceRef: model.ServiceRef{Namespace: ns, Name: "payments", Port: 8080}, Weight: 9}},
		}}}
	testenv.Eventually(t, "the accepted route in Routes, the refused and the foreign ones not", func() error {
		c, err := ourResolvedRefs(ctx, ns, "refused")
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(gwapiv1.RouteReasonUnsupportedProtocol) {
			return fmt.Errorf("refused's ResolvedRefs = %+v, want False UnsupportedProtocol (else the test proves nothing)", c)
		}
		got, err := routesOf(ctx, v, ns)
		if err != nil {
			return err
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			return fmt.Errorf("routes of %s:\n %+v\nwant\n %+v", ns, got, []model.Route{want})
		}
		return nil
	})

	// The cache holds the slim route: no annotations or managed fields, our entries only, and
	// their conditions without messages. (The cache follows the API server: the refused route's
	// status, read above from the API server, reaches it a moment later.)
	cached := &gwapiv1.HTTPRoute{}
	testenv.Eventually(t, "the view's cache holds the refused route's status", func() error {
		if err := v.cache.Get(ctx, client.ObjectKeyFromObject(refused), cached); err != nil {
			return err
		}
		if len(cached.Status.Parents) == 0 {
			return fmt.Errorf("no status parents yet in the cached route")
		}
		return nil
	})
	if len(cached.Annotations)+len(cached.ManagedFields) != 0 || len(cached.Status.Parents) != 1 {
		t.Errorf("the view's cache holds more than the model needs: %d annotations, %d managed fields, %d parents",
			len(cached.Annotations), len(cached.ManagedFields), len(cached.Status.Parents))
	}
	for _, c := range cached.Status.Parents[0].Conditions {
		if c.Message != "" || c.Reason != "" {
			t.Errorf("condition %s kept its reason or message: %+v", c.Type, c)
		}
	}

	// The accepted route turns to a TCP port: the controller refuses it, and it leaves Routes.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r := &gwapiv1.HTTPRoute{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(accepted), r); err != nil {
			return err
		}
		r.Spec.Rules[0].BackendRefs[0].Port = new(gwapiv1.PortNumber(9000))
		return env.Client.Update(ctx, r)
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the route refused after its change, and gone from Routes", func() error {
		c, err := ourResolvedRefs(ctx, ns, "accepted")
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("accepted's ResolvedRefs for its new generation = %+v, want False", c)
		}
		got, err := routesOf(ctx, v, ns)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("routes of %s: %+v, want none", ns, got)
		}
		return nil
	})
}

// TestViewSkipsRouteKindsNotServed: a route kind whose CRD the API server does not serve is
// skipped (the Gateway API CRDs are optional), and the view runs and lists the others.
func TestViewSkipsRouteKindsNotServed(t *testing.T) {
	ctx := testContext(t)
	missing := viewRouteKind{kind: "NoSuchRoute", obj: &gwapiv1.HTTPRoute{}, newList: func() client.ObjectList { return &gwapiv1.HTTPRouteList{} }}
	v, err := newView(env.Config, env.Scheme, true, append(slices.Clone(allRouteKinds), missing))
	if err != nil {
		t.Fatalf("a kind the API server does not serve failed the view: %v", err)
	}
	if !slices.Equal(v.skipped, []routes.Kind{"NoSuchRoute"}) || len(v.routeKinds) != len(allRouteKinds) {
		t.Errorf("skipped %v, caching %d kinds; want NoSuchRoute skipped and the %d served ones cached", v.skipped, len(v.routeKinds), len(allRouteKinds))
	}
	runView(t, v)
	if _, err := v.Routes(ctx); err != nil {
		t.Errorf("Routes: %v", err)
	}
}

// TestViewNeedsNoMoreThanItsShippedAuthority: a view speaking as the agent's ServiceAccount, with
// exactly the shipped RBAC (config/rbac/agent), syncs every informer and lists services and
// routes. Without the route rule of the role its route informers cannot list, and it never syncs.
func TestViewNeedsNoMoreThanItsShippedAuthority(t *testing.T) {
	ctx := testContext(t)
	cfg := agentCredentials(t, ctx, "")
	v, err := newView(cfg, env.Scheme, true, allRouteKinds)
	if err != nil {
		t.Fatal(err)
	}
	runView(t, v)
	if _, err := v.Routes(ctx); err != nil {
		t.Errorf("Routes: %v", err)
	}
	if _, err := v.Services(ctx); err != nil {
		t.Errorf("Services: %v", err)
	}
}

// TestSlimRoute: the transform keeps what MeshRoute reads, so the model of a slimmed route is the
// model of the whole one, and drops the rest (a pure function: no API server).
func TestSlimRoute(t *testing.T) {
	whole := meshHTTPRoute("shop", "split", "payments", 8080, "payments", 8080, 3)
	whole.Generation = 2
	whole.Labels = map[string]string{"app": "x"}
	whole.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	long := strings.Repeat("a verdict, ", 1000)
	entry := func(controller gwapiv1.GatewayController) gwapiv1.RouteParentStatus {
		return gwapiv1.RouteParentStatus{ParentRef: whole.Spec.ParentRefs[0], ControllerName: controller, Conditions: []metav1.Condition{
			{Type: string(gwapiv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: "Accepted", Message: long, ObservedGeneration: 2},
			{Type: string(gwapiv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: "ResolvedRefs", Message: long, ObservedGeneration: 2},
		}}
	}
	whole.Status.Parents = []gwapiv1.RouteParentStatus{entry("example.com/another-mesh"), entry(routes.ControllerName)}
	wholeRoute, wholeParents, _ := routes.Read(whole.DeepCopy())
	fromWhole, ok := routes.MeshRoute(wholeRoute, *wholeParents)
	if !ok {
		t.Fatal("the whole route is not carried: the test proves nothing")
	}
	out, err := slimRoute(whole.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*gwapiv1.HTTPRoute)
	if len(slim.Labels)+len(slim.Annotations)+len(slim.ManagedFields) != 0 || len(slim.Status.Parents) != 1 ||
		slim.Status.Parents[0].ControllerName != routes.ControllerName || slim.Status.Parents[0].Conditions[0].Message != "" {
		t.Errorf("kept beyond what the model reads: %+v", slim)
	}
	slimRouteRead, slimParents, _ := routes.Read(slim)
	if fromSlim, ok := routes.MeshRoute(slimRouteRead, *slimParents); !ok || !reflect.DeepEqual(fromSlim, fromWhole) {
		t.Errorf("the model differs once the route is slimmed:\nwhole %+v\n slim %+v (ok %v)", fromWhole, fromSlim, ok)
	}
	if out, _ := slimRoute("a tombstone"); out != "a tombstone" {
		t.Errorf("a non-route was changed: %v", out)
	}
}
