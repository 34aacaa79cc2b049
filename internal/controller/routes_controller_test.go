// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	conformanceconfig "sigs.k8s.io/gateway-api/conformance/utils/config"
	gwkubernetes "sigs.k8s.io/gateway-api/conformance/utils/kubernetes"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/routes"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// meshPayments makes a namespace with the mesh service payments (8080/HTTP primary, 9090/HTTP2,
// 9000/TCP), built by the MeshService controller from endpoints, and waits until it is Ready.
func meshPayments(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns := namespaceWithSA(t, ctx, "payments")
	endpoint(t, ctx, ns, "payments-0", "payments", healthy, 8080, 8080, "HTTP", 9000, "TCP", 9090, "HTTP2")
	serviceReady(t, ctx, ns, "payments", 1)
	return ns
}

func serviceParent(name string, port int32) gwapiv1.ParentReference {
	ref := gwapiv1.ParentReference{Group: new(gwapiv1.Group("")), Kind: new(gwapiv1.Kind("Service")), Name: gwapiv1.ObjectName(name)}
	if port != 0 {
		ref.Port = new(port)
	}
	return ref
}

func backend(name string, port int32) gwapiv1.BackendObjectReference {
	return gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(name), Port: new(port)}
}

// newRoute builds a route of kind k with one parent and one rule with one backend.
func newRoute(k routes.Kind, ns, name string, parent gwapiv1.ParentReference, to gwapiv1.BackendObjectReference) client.Object {
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	parents := gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{parent}}
	ref := gwapiv1.BackendRef{BackendObjectReference: to}
	switch k {
	case routes.HTTPRoute:
		return &gwapiv1.HTTPRoute{ObjectMeta: meta, Spec: gwapiv1.HTTPRouteSpec{CommonRouteSpec: parents,
			Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: ref}}}}}}
	case routes.GRPCRoute:
		return &gwapiv1.GRPCRoute{ObjectMeta: meta, Spec: gwapiv1.GRPCRouteSpec{CommonRouteSpec: parents,
			Rules: []gwapiv1.GRPCRouteRule{{BackendRefs: []gwapiv1.GRPCBackendRef{{BackendRef: ref}}}}}}
	case routes.TCPRoute:
		return &gwapiv1.TCPRoute{ObjectMeta: meta, Spec: gwapiv1.TCPRouteSpec{CommonRouteSpec: parents,
			Rules: []gwapiv1.TCPRouteRule{{BackendRefs: []gwapiv1.BackendRef{ref}}}}}
	case routes.UDPRoute:
		return &gwapiv1.UDPRoute{ObjectMeta: meta, Spec: gwapiv1.UDPRouteSpec{CommonRouteSpec: parents,
			Rules: []gwapiv1.UDPRouteRule{{BackendRefs: []gwapiv1.BackendRef{ref}}}}}
	default:
		return &gwapiv1.TLSRoute{ObjectMeta: meta, Spec: gwapiv1.TLSRouteSpec{CommonRouteSpec: parents,
			Hostnames: []gwapiv1.Hostname{"payments.example"},
			Rules:     []gwapiv1.TLSRouteRule{{BackendRefs: []gwapiv1.BackendRef{ref}}}}}
	}
}

// parentsOf reads a route's status.parents.
func parentsOf(ctx context.Context, o client.Object) ([]gwapiv1.RouteParentStatus, error) {
	fresh := o.DeepCopyObject().(client.Object)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), fresh); err != nil {
		return nil, err
	}
	switch r := fresh.(type) {
	case *gwapiv1.HTTPRoute:
		return r.Status.Parents, nil
	case *gwapiv1.GRPCRoute:
		return r.Status.Parents, nil
	case *gwapiv1.TCPRoute:
		return r.Status.Parents, nil
	case *gwapiv1.TLSRoute:
		return r.Status.Parents, nil
	case *gwapiv1.UDPRoute:
		return r.Status.Parents, nil
	}
	return nil, fmt.Errorf("%T is no route", o)
}

// ourCondition waits until the route has our entry with condition t in the given status and
// reason, and returns it.
func ourCondition(t *testing.T, ctx context.Context, o client.Object, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	testenv.Eventually(t, fmt.Sprintf("%s %s=%s %s", o.GetName(), typ, status, reason), func() error {
		parents, err := parentsOf(ctx, o)
		if err != nil {
			return err
		}
		for _, p := range parents {
			if p.ControllerName == routes.ControllerName {
				got = condition(p.Conditions, typ)
				if got.Status == status && got.Reason == reason {
					return nil
				}
				return fmt.Errorf("%s=%s %s: %s", typ, got.Status, got.Reason, got.Message)
			}
		}
		return fmt.Errorf("no entry of %s among %d parents", routes.ControllerName, len(parents))
	})
	return got
}

// TestRouteMatrix: every route kind × every backend port protocol (HTTP, HTTP2, TCP, undeclared).
func TestRouteMatrix(t *testing.T) {
	ctx := testContext(t)
	ns := meshPayments(t, ctx)
	const (
		httpInstead = "or use an HTTPRoute."
		h2Instead   = "or use an HTTPRoute or a GRPCRoute."
	)
	notDeclared := "rule 0: backendRef payments:7777: port 7777 is not declared by payments (it serves 8080/HTTP, 9000/TCP, 9090/HTTP2)."
	checkRouteCases(t, ctx, ns, "payments", []routeCase{
		{routes.HTTPRoute, 8080, "ResolvedRefs", ""},
		{routes.HTTPRoute, 9090, "ResolvedRefs", ""},
		{routes.HTTPRoute, 9000, "UnsupportedProtocol", "rule 0: backendRef payments:9000 is a raw-TCP port (declared 9000=tcp); an HTTPRoute can only reach HTTP ports of payments (8080/HTTP, 9090/HTTP2). Point it at one of those, or use a TCPRoute."},
		{routes.HTTPRoute, 7777, "BackendNotFound", notDeclared},
		{routes.GRPCRoute, 8080, "UnsupportedProtocol", "rule 0: backendRef payments:8080 is an HTTP/1.1 port (declared 8080=h1); a GRPCRoute can only reach HTTP/2 ports of payments (9090/HTTP2). Point it at one of those, or declare the port h2 (or grpc), or use an HTTPRoute."},
		{routes.GRPCRoute, 9090, "ResolvedRefs", ""},
		{routes.GRPCRoute, 9000, "UnsupportedProtocol", "rule 0: backendRef payments:9000 is a raw-TCP port (declared 9000=tcp); a GRPCRoute can only reach HTTP/2 ports of payments (9090/HTTP2). Point it at one of those, or use a TCPRoute."},
		{routes.GRPCRoute, 7777, "BackendNotFound", notDeclared},
		{routes.TCPRoute, 8080, "UnsupportedProtocol", "rule 0: backendRef payments:8080 is an HTTP/1.1 port (declared 8080=h1); a TCPRoute can only reach TCP ports of payments (9000/TCP). Point it at one of those, " + httpInstead},
		{routes.TCPRoute, 9090, "UnsupportedProtocol", "rule 0: backendRef payments:9090 is an HTTP/2 port (declared 9090=h2); a TCPRoute can only reach TCP ports of payments (9000/TCP). Point it at one of those, " + h2Instead},
		{routes.TCPRoute, 9000, "ResolvedRefs", ""},
		{routes.TCPRoute, 7777, "BackendNotFound", notDeclared},
		{routes.TLSRoute, 8080, "UnsupportedProtocol", "rule 0: backendRef payments:8080 is an HTTP/1.1 port (declared 8080=h1); a TLSRoute can only reach TCP ports of payments (9000/TCP). Point it at one of those, " + httpInstead},
		{routes.TLSRoute, 9090, "UnsupportedProtocol", "rule 0: backendRef payments:9090 is an HTTP/2 port (declared 9090=h2); a TLSRoute can only reach TCP ports of payments (9000/TCP). Point it at one of those, " + h2Instead},
		{routes.TLSRoute, 9000, "ResolvedRefs", ""},
		{routes.TLSRoute, 7777, "BackendNotFound", notDeclared},
	})
}

// routeCase is a route of kind to one backend port of a mesh service, and the ResolvedRefs reason
// and message (when not empty) its status must reach.
type routeCase struct {
	kind    routes.Kind
	port    int32
	reason  string
	message string
}

// checkRouteCases creates one route per case in ns, parented to service and backed by its port,
// and waits until each reaches its ResolvedRefs reason and message and is Accepted for its
// generation.
func checkRouteCases(t *testing.T, ctx context.Context, ns, service string, cases []routeCase) {
	t.Helper()
	objs := make([]client.Object, len(cases))
	for i, tc := range cases {
		objs[i] = newRoute(tc.kind, ns, fmt.Sprintf("%s-%d", strings.ToLower(string(tc.kind)), tc.port), serviceParent(service, 0), backend(service, tc.port))
		if err := env.Client.Create(ctx, objs[i]); err != nil {
			t.Fatalf("creating %s to %d: %v", tc.kind, tc.port, err)
		}
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%s to %d", tc.kind, tc.port), func(t *testing.T) {
			status := metav1.ConditionFalse
			if tc.reason == "ResolvedRefs" {
				status = metav1.ConditionTrue
			}
			c := ourCondition(t, ctx, objs[i], "ResolvedRefs", status, tc.reason)
			if tc.message != "" && c.Message != tc.message {
				t.Errorf("message:\n got %s\nwant %s", c.Message, tc.message)
			}
			if a := ourCondition(t, ctx, objs[i], "Accepted", metav1.ConditionTrue, "Accepted"); a.ObservedGeneration != objs[i].GetGeneration() {
				t.Errorf("observedGeneration %d, want %d", a.ObservedGeneration, objs[i].GetGeneration())
			}
		})
	}
}

// TestRouteReferences: cross-namespace backends with and without a ReferenceGrant (granting one
// later re-evaluates the route), a Service without MeshService, a non-Service backend, and a
// parentRef port that cannot carry the route.
func TestRouteReferences(t *testing.T) {
	ctx := testContext(t)
	ns := meshPayments(t, ctx)
	other := namespaceWithSA(t, ctx, "ledger")
	endpoint(t, ctx, other, "ledger-0", "ledger", healthy, 8080, 8080, "HTTP")
	serviceReady(t, ctx, other, "ledger", 1)

	cross := backend("ledger", 8080)
	cross.Namespace = new(gwapiv1.Namespace(other))
	crossRoute := newRoute(routes.HTTPRoute, ns, "cross", serviceParent("payments", 0), cross)
	if err := env.Client.Create(ctx, crossRoute); err != nil {
		t.Fatal(err)
	}
	c := ourCondition(t, ctx, crossRoute, "ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted")
	if want := fmt.Sprintf("rule 0: backendRef %s/ledger is in another namespace and no ReferenceGrant in %s allows HTTPRoutes from %s to reach it.", other, other, ns); c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
	grant := &gwapiv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "from-" + ns},
		Spec: gwapiv1.ReferenceGrantSpec{
			From: []gwapiv1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "HTTPRoute", Namespace: gwapiv1.Namespace(ns)}},
			To:   []gwapiv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		}}
	if err := env.Client.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	ourCondition(t, ctx, crossRoute, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")

	legacy := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := env.Client.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	noMesh := newRoute(routes.HTTPRoute, ns, "no-mesh", serviceParent("payments", 0), backend("legacy", 80))
	bucket := backend("photos", 443)
	bucket.Group, bucket.Kind = new(gwapiv1.Group("storage.example.com")), new(gwapiv1.Kind("Bucket"))
	wrongKind := newRoute(routes.HTTPRoute, ns, "wrong-kind", serviceParent("payments", 0), bucket)
	tcpParent := newRoute(routes.HTTPRoute, ns, "tcp-parent", serviceParent("payments", 9000), backend("payments", 8080))
	for _, r := range []client.Object{noMesh, wrongKind, tcpParent} {
		if err := env.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if c := ourCondition(t, ctx, noMesh, "ResolvedRefs", metav1.ConditionFalse, "BackendNotFound"); !strings.Contains(c.Message, "is not a mesh service (it has no MeshService)") {
		t.Errorf("no-mesh message %q", c.Message)
	}
	if c := ourCondition(t, ctx, wrongKind, "ResolvedRefs", metav1.ConditionFalse, "InvalidKind"); !strings.Contains(c.Message, "Bucket.storage.example.com") {
		t.Errorf("wrong-kind message %q", c.Message)
	}
	c = ourCondition(t, ctx, tcpParent, "Accepted", metav1.ConditionFalse, "NoMatchingParent")
	if want := "parentRef payments:9000 is a raw-TCP port (declared 9000=tcp); an HTTPRoute can only reach HTTP ports of payments (8080/HTTP, 9090/HTTP2). Point it at one of those, or use a TCPRoute."; c.Message != want {
		t.Errorf("tcp-parent message %q, want %q", c.Message, want)
	}
}

// TestRouteStatusIsMergedNeverReplaced: a route parented only to a Gateway is never written;
// another controller's entry survives byte-identical beside ours when ours is rewritten.
func TestRouteStatusIsMergedNeverReplaced(t *testing.T) {
	ctx := testContext(t)
	ns := meshPayments(t, ctx)
	gatewayOnly := newRoute(routes.HTTPRoute, ns, "gateway-only", gwapiv1.ParentReference{Name: "edge"}, backend("payments", 8080))
	if err := env.Client.Create(ctx, gatewayOnly); err != nil {
		t.Fatal(err)
	}
	rv := gatewayOnly.GetResourceVersion()

	shared := newRoute(routes.HTTPRoute, ns, "shared", serviceParent("payments", 0), backend("payments", 8080)).(*gwapiv1.HTTPRoute)
	shared.Spec.ParentRefs = append([]gwapiv1.ParentReference{{Name: "edge"}}, shared.Spec.ParentRefs...)
	if err := env.Client.Create(ctx, shared); err != nil {
		t.Fatal(err)
	}
	ourCondition(t, ctx, shared, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	theirs := gwapiv1.RouteParentStatus{
		ParentRef:      shared.Spec.ParentRefs[0],
		ControllerName: "example.com/gateway-controller",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "theirs",
			ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}},
	}
	testenv.Eventually(t, "writing the other controller's entry", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(shared), shared); err != nil {
			return err
		}
		shared.Status.Parents = append([]gwapiv1.RouteParentStatus{theirs}, shared.Status.Parents...)
		return env.Client.Status().Update(ctx, shared)
	})
	want, _ := json.Marshal(theirs)

	// Make our controller rewrite its entry: port 8080 becomes raw TCP, which an HTTPRoute cannot
	// reach. The MeshService's change queues both routes (both name payments as a backend); ours
	// flipping proves the write, and settling proves both reconciles ran before the checks.
	before := routeReconciles(t, routes.HTTPRoute)
	retypeEndpointPort(t, ctx, ns, "payments-0", 8080, meshv1alpha1.ProtocolTCP)
	ourCondition(t, ctx, shared, "ResolvedRefs", metav1.ConditionFalse, "UnsupportedProtocol")
	testenv.Settle(t, string(routes.HTTPRoute), before+2)
	parents, err := parentsOf(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	if len(parents) != 2 {
		t.Fatalf("want 2 parent entries, got %+v", parents)
	}
	if got, _ := json.Marshal(parents[0]); string(got) != string(want) {
		t.Errorf("the other controller's entry changed:\n got %s\nwant %s", got, want)
	}
	if parents[1].ControllerName != routes.ControllerName {
		t.Errorf("second entry is %s's", parents[1].ControllerName)
	}

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(gatewayOnly), gatewayOnly); err != nil {
		t.Fatal(err)
	}
	if gatewayOnly.GetResourceVersion() != rv || len(gatewayOnly.(*gwapiv1.HTTPRoute).Status.Parents) != 0 {
		t.Errorf("a route parented only to a Gateway was written: rv %s → %s, parents %+v", rv, gatewayOnly.GetResourceVersion(), gatewayOnly.(*gwapiv1.HTTPRoute).Status.Parents)
	}
}

// routeReconciles is how many times the route controller of kind has reconciled (controllers
// are named after their kind), from its own metric.
func routeReconciles(t *testing.T, kind routes.Kind) float64 {
	t.Helper()
	n, err := testenv.Counter("controller_runtime_reconcile_total", "controller", string(kind))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// retypeEndpointPort declares port of the endpoint with protocol p.
func retypeEndpointPort(t *testing.T, ctx context.Context, ns, name string, port int32, p meshv1alpha1.Protocol) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("retyping %d to %s", port, p), func() error {
		ep := &meshv1alpha1.MeshEndpoint{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ep); err != nil {
			return err
		}
		i := slices.IndexFunc(ep.Spec.Ports, func(pp meshv1alpha1.PortProtocol) bool { return pp.Port == port })
		if i < 0 {
			return fmt.Errorf("%s declares no port %d", name, port)
		}
		ep.Spec.Ports[i].Protocol = p
		ep.Spec.PortsSummary = meshv1alpha1.FormatPorts(ep.Spec.Ports)
		// The pod's annotation first, then the endpoint, as its agent would: an endpoint counts
		// only while it matches its pod.
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		pod.Annotations = declaring(ep.Spec.PrimaryPort, ep.Spec.Ports)
		if err := env.Client.Update(ctx, pod); err != nil {
			return err
		}
		return env.Client.Update(ctx, ep)
	})
}

func touchService(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	testenv.Eventually(t, "labelling the Service", func() error {
		svc := &corev1.Service{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
			return err
		}
		if svc.Labels == nil {
			svc.Labels = map[string]string{}
		}
		svc.Labels["touched"] = fmt.Sprint(time.Now().UnixNano())
		return env.Client.Update(ctx, svc)
	})
}

// TestRouteGitOps: kubectl apply twice changes nothing, and a resync of a converged route
// writes nothing.
func TestRouteGitOps(t *testing.T) {
	ctx := testContext(t)
	ns := meshPayments(t, ctx)
	manifest := filepath.Join(t.TempDir(), "route.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: payments-to-tcp
  namespace: `+ns+`
spec:
  parentRefs:
  - {group: "", kind: Service, name: payments}
  rules:
  - backendRefs:
    - {name: payments, port: 9000}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	apply := func() {
		t.Helper()
		if out, stderr, err := env.Kubectl(ctx, "apply", "-f", manifest); err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, out, stderr)
		}
	}
	apply()
	route := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments-to-tcp"}}
	ourCondition(t, ctx, route, "ResolvedRefs", metav1.ConditionFalse, "UnsupportedProtocol")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(route), route); err != nil {
		t.Fatal(err)
	}
	// The second apply of the same file is a no-op on the server: the route's spec and status
	// are as they were (kubectl may still say "configured": for a CRD it re-sends lists the API
	// server defaulted, and the API server finds nothing to change).
	rvApplied := route.ResourceVersion
	apply()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(route), route); err != nil {
		t.Fatal(err)
	}
	if route.ResourceVersion != rvApplied {
		t.Errorf("the second kubectl apply changed the route: resourceVersion %s → %s", rvApplied, route.ResourceVersion)
	}
	before := route.ResourceVersion
	generation := route.Generation
	// A resync: touching the Service the route names queues it; settling proves it reconciled.
	reconciled := routeReconciles(t, routes.HTTPRoute)
	touchService(t, ctx, ns, "payments")
	testenv.Settle(t, string(routes.HTTPRoute), reconciled+1)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(route), route); err != nil {
		t.Fatal(err)
	}
	if route.ResourceVersion != before || route.Generation != generation {
		t.Errorf("a resync wrote the converged route: resourceVersion %s → %s, generation %d → %d", before, route.ResourceVersion, generation, route.Generation)
	}
	// Positive control: a change of what the route reaches is written, and the same comparison
	// sees it (port 9000 becomes HTTP: the route resolves).
	retypeEndpointPort(t, ctx, ns, "payments-0", 9000, meshv1alpha1.ProtocolHTTP)
	ourCondition(t, ctx, route, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(route), route); err != nil {
		t.Fatal(err)
	}
	if route.ResourceVersion == before || route.Generation != generation {
		t.Errorf("the control: resolving the route left resourceVersion %s, generation %d → %d", before, generation, route.Generation)
	}
	for _, m := range route.ManagedFields {
		if m.Manager != "kubectl-client-side-apply" && m.Manager != "kubectl" && m.Subresource != "status" {
			t.Errorf("%s wrote %s of the route (only kubectl may write its spec): %s", m.Manager, m.Operation, m.FieldsV1)
		}
	}
}

// TestRouteFollowsARetypedPort: retyping the backend port in the endpoints flips the route.
func TestRouteFollowsARetypedPort(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "orders")
	ep := endpoint(t, ctx, ns, "orders-0", "orders", healthy, 8080, 8080, "HTTP", 9000, "HTTP")
	serviceReady(t, ctx, ns, "orders", 1)
	route := newRoute(routes.HTTPRoute, ns, "orders", serviceParent("orders", 0), backend("orders", 9000))
	if err := env.Client.Create(ctx, route); err != nil {
		t.Fatal(err)
	}
	first := ourCondition(t, ctx, route, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")

	// The pod's annotation is edited, then its agent re-registers it (the controller counts an
	// endpoint only while it matches its pod's annotations).
	retype := func(p meshv1alpha1.Protocol) {
		testenv.Eventually(t, "retyping 9000 to "+string(p), func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ep), ep); err != nil {
				return err
			}
			ep.Spec.Ports[1].Protocol = p
			ep.Spec.PortsSummary = meshv1alpha1.FormatPorts(ep.Spec.Ports)
			pod := &corev1.Pod{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ep), pod); err != nil {
				return err
			}
			pod.Annotations = declaring(ep.Spec.PrimaryPort, ep.Spec.Ports)
			if err := env.Client.Update(ctx, pod); err != nil {
				return err
			}
			return env.Client.Update(ctx, ep)
		})
	}
	waitASecond(t)
	retype(meshv1alpha1.ProtocolTCP)
	flipped := ourCondition(t, ctx, route, "ResolvedRefs", metav1.ConditionFalse, "UnsupportedProtocol")
	// A second, independent reader of our status: Gateway API's own conformance checker.
	routeNN, parentNN := client.ObjectKeyFromObject(route), types.NamespacedName{Namespace: ns, Name: "orders"}
	timeouts := conformanceconfig.DefaultTimeoutConfig()
	gwkubernetes.HTTPRouteMustHaveCondition(t, env.Client, timeouts, routeNN, parentNN,
		metav1.Condition{Type: string(gwapiv1.RouteConditionResolvedRefs), Status: metav1.ConditionFalse, Reason: string(gwapiv1.RouteReasonUnsupportedProtocol)})
	if !strings.Contains(flipped.Message, "backendRef orders:9000 is a raw-TCP port (declared 9000=tcp)") {
		t.Errorf("message %q", flipped.Message)
	}
	if flipped.LastTransitionTime.Equal(&first.LastTransitionTime) {
		t.Errorf("lastTransitionTime did not move on the flip")
	}
	retype(meshv1alpha1.ProtocolHTTP)
	ourCondition(t, ctx, route, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	gwkubernetes.HTTPRouteMustHaveCondition(t, env.Client, timeouts, routeNN, parentNN,
		metav1.Condition{Type: string(gwapiv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: string(gwapiv1.RouteReasonResolvedRefs)})
	gwkubernetes.HTTPRouteMustHaveCondition(t, env.Client, timeouts, routeNN, parentNN,
		metav1.Condition{Type: string(gwapiv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gwapiv1.RouteReasonAccepted)})
}

// ourEntryGone waits until the route carries no entry of ours.
func ourEntryGone(t *testing.T, ctx context.Context, o client.Object) {
	t.Helper()
	testenv.Eventually(t, o.GetName()+" without an entry of ours", func() error {
		parents, err := parentsOf(ctx, o)
		if err != nil {
			return err
		}
		for _, p := range parents {
			if p.ControllerName == routes.ControllerName {
				return fmt.Errorf("our entry is still there: %+v", p.Conditions)
			}
		}
		return nil
	})
}

// TestRouteParentWithoutService: a route parented to a Service that does not exist gets
// Accepted=False NoMatchingParent naming it (namespace included when it is another); when a
// Service of that name appears that is not a mesh Service (another mesh's), our entry goes. A
// route in one namespace parented to a mesh Service of another is told which one it attached to.
func TestRouteParentWithoutService(t *testing.T) {
	ctx := testContext(t)
	ns := meshPayments(t, ctx)
	ghost := newRoute(routes.HTTPRoute, ns, "to-ghost", serviceParent("ghost", 0), backend("payments", 8080))
	elsewhere := serviceParent("payments", 0)
	elsewhere.Namespace = new(gwapiv1.Namespace("nowhere-" + ns))
	ghostElsewhere := newRoute(routes.TCPRoute, ns, "to-ghost-elsewhere", elsewhere, backend("payments", 9000))
	for _, r := range []client.Object{ghost, ghostElsewhere} {
		if err := env.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	c := ourCondition(t, ctx, ghost, "Accepted", metav1.ConditionFalse, "NoMatchingParent")
	if want := fmt.Sprintf("parentRef ghost: Service %s/ghost does not exist, so the route attaches to nothing.", ns); !strings.HasPrefix(c.Message, want) {
		t.Errorf("message %q, want it to begin %q", c.Message, want)
	}
	if c.ObservedGeneration != ghost.GetGeneration() {
		t.Errorf("observedGeneration %d, want %d", c.ObservedGeneration, ghost.GetGeneration())
	}
	ourCondition(t, ctx, ghost, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	c = ourCondition(t, ctx, ghostElsewhere, "Accepted", metav1.ConditionFalse, "NoMatchingParent")
	if want := fmt.Sprintf("parentRef nowhere-%s/payments: Service nowhere-%s/payments does not exist", ns, ns); !strings.HasPrefix(c.Message, want) {
		t.Errorf("message %q, want it to begin %q", c.Message, want)
	}

	// A Service named ghost appears, and it is not a mesh Service: not ours to judge any more.
	users := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := env.Client.Create(ctx, users); err != nil {
		t.Fatal(err)
	}
	ourEntryGone(t, ctx, ghost)

	// A consumer route in another namespace, parented to this namespace's mesh Service.
	consumerNS := namespaceWithSA(t, ctx, "client")
	parent := serviceParent("payments", 9000)
	parent.Namespace = new(gwapiv1.Namespace(ns))
	to := backend("payments", 8080)
	to.Namespace = new(gwapiv1.Namespace(ns))
	consumer := newRoute(routes.HTTPRoute, consumerNS, "consumer", parent, to)
	if err := env.Client.Create(ctx, consumer); err != nil {
		t.Fatal(err)
	}
	c = ourCondition(t, ctx, consumer, "Accepted", metav1.ConditionFalse, "NoMatchingParent")
	if want := fmt.Sprintf("parentRef %s/payments:9000 is a raw-TCP port (declared 9000=tcp); an HTTPRoute can only reach HTTP ports of %s/payments", ns, ns); !strings.HasPrefix(c.Message, want) {
		t.Errorf("message %q, want it to begin %q", c.Message, want)
	}
	parents, err := parentsOf(ctx, consumer)
	if err != nil {
		t.Fatal(err)
	}
	if len(parents) != 1 || parents[0].ParentRef.Namespace == nil || string(*parents[0].ParentRef.Namespace) != ns {
		t.Errorf("status.parents %+v: want one entry whose parentRef names namespace %s", parents, ns)
	}
}
