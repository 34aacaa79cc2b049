// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package routes_test

import (
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/routes"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out.yaml and delete orphaned ones")

const (
	inSuffix  = ".in.yaml"
	outSuffix = ".out.yaml"
)

// TestEvaluateGolden evaluates every testdata/<case>.in.yaml and compares the status.parents
// entries, as sigs.k8s.io/yaml marshals them, with testdata/<case>.out.yaml. With -update the
// outputs are rewritten and outputs without an input deleted; review them against DESIGN
// section 6 (each input's first line says what to expect).
func TestEvaluateGolden(t *testing.T) {
	cases := goldenCases(t)
	if len(cases) == 0 {
		t.Fatalf("no testdata/*%s found", inSuffix)
	}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			in := readInput(t, name)
			checkInput(t, in)
			out := routes.Evaluate(in)
			checkOutput(t, in, out)
			golden.Compare(t, "testdata", name, outSuffix, marshal(t, out), *update)
		})
	}

	golden.Orphans(t, "testdata", cases, inSuffix, outSuffix, *update)
}

// TestEvaluateKindProtocolMatrix states the kind × protocol table of DESIGN section 6 on its own,
// so that a golden file rewritten with -update cannot quietly change it: HTTPRoute reaches HTTP
// and HTTP2 ports, GRPCRoute only HTTP2, TCPRoute and TLSRoute only TCP, UDPRoute only UDP (and
// no other kind a UDP port); an undeclared port is BackendNotFound whatever the kind.
func TestEvaluateKindProtocolMatrix(t *testing.T) {
	const ok = gwapiv1.RouteReasonResolvedRefs
	const unsupported = gwapiv1.RouteReasonUnsupportedProtocol
	const notFound = gwapiv1.RouteReasonBackendNotFound
	ports := []int32{8080, 9090, 9000, 5353, 7777} // HTTP, HTTP2, TCP, UDP, undeclared
	want := map[routes.Kind][]gwapiv1.RouteConditionReason{
		routes.HTTPRoute: {ok, ok, unsupported, unsupported, notFound},
		routes.GRPCRoute: {unsupported, ok, unsupported, unsupported, notFound},
		routes.TCPRoute:  {unsupported, unsupported, ok, unsupported, notFound},
		routes.TLSRoute:  {unsupported, unsupported, ok, unsupported, notFound},
		routes.UDPRoute:  {unsupported, unsupported, unsupported, ok, notFound},
	}
	for kind, reasons := range want {
		for i, port := range ports {
			t.Run(fmt.Sprintf("%s-%d", kind, port), func(t *testing.T) {
				out := routes.Evaluate(matrixInput(kind, port))
				if len(out) != 1 {
					t.Fatalf("got %d entries, want 1", len(out))
				}
				acc := findCondition(out[0].Conditions, string(gwapiv1.RouteConditionAccepted))
				if acc == nil || acc.Status != metav1.ConditionTrue {
					t.Errorf("Accepted = %+v, want True (no parentRef.port)", acc)
				}
				rr := findCondition(out[0].Conditions, string(gwapiv1.RouteConditionResolvedRefs))
				if rr == nil {
					t.Fatal("no ResolvedRefs condition")
				}
				wantStatus := metav1.ConditionFalse
				if reasons[i] == ok {
					wantStatus = metav1.ConditionTrue
				}
				if rr.Status != wantStatus || rr.Reason != string(reasons[i]) {
					t.Errorf("ResolvedRefs = %s/%s (%s), want %s/%s", rr.Status, rr.Reason, rr.Message, wantStatus, reasons[i])
				}
				if reasons[i] == unsupported && !strings.Contains(rr.Message, fmt.Sprintf("rule 0: backendRef payments:%d is ", port)) {
					t.Errorf("message %q does not name rule 0 and payments:%d", rr.Message, port)
				}
			})
		}
	}
}

// TestEvaluateParentOwnership states on its own which Service parents get an entry of ours (so a
// golden file rewritten with -update cannot quietly change it): a mesh Service, and a Service
// that does not exist (NoMatchingParent); not a Service that exists without a MeshService, which
// another mesh may own. Messages name a parent in another namespace with its namespace.
func TestEvaluateParentOwnership(t *testing.T) {
	for name, tc := range map[string]struct {
		routeNS, parentNS, parent string
		port                      int32
		want                      string // "" for no entry, else "<reason>: <message substring>"
	}{
		"mesh Service":                         {"shop", "", "payments", 0, "Accepted: attached to mesh service payments"},
		"mesh Service, namespace spelt out":    {"shop", "shop", "payments", 0, "Accepted: attached to mesh service payments"},
		"mesh Service of another namespace":    {"other", "shop", "payments", 0, "Accepted: attached to mesh service shop/payments"},
		"port of a mesh Service elsewhere":     {"other", "shop", "payments", 8080, "Accepted: attached to port 8080 (HTTP) of mesh service shop/payments"},
		"TCP port of a mesh Service elsewhere": {"other", "shop", "payments", 9000, "NoMatchingParent: parentRef shop/payments:9000 is a raw-TCP port"},
		"undeclared port elsewhere":            {"other", "shop", "payments", 7777, "NoMatchingParent: parentRef shop/payments:7777: mesh service shop/payments does not declare port 7777"},
		"Service without MeshService":          {"shop", "", "legacy", 0, ""},
		"Service without MeshService, port":    {"shop", "", "legacy", 80, ""},
		"no Service":                           {"shop", "", "ghost", 0, "NoMatchingParent: parentRef ghost: Service shop/ghost does not exist"},
		"no Service, port":                     {"shop", "", "ghost", 80, "NoMatchingParent: parentRef ghost: Service shop/ghost does not exist"},
		"no Service in another namespace":      {"shop", "elsewhere", "payments", 0, "NoMatchingParent: parentRef elsewhere/payments: Service elsewhere/payments does not exist"},
	} {
		t.Run(name, func(t *testing.T) {
			in := matrixInput(routes.HTTPRoute, 8080)
			in.Route.Namespace = tc.routeNS
			ref := &in.Route.ParentRefs[0]
			ref.Name = gwapiv1.ObjectName(tc.parent)
			if tc.parentNS != "" {
				ref.Namespace = new(gwapiv1.Namespace(tc.parentNS))
			}
			if tc.port != 0 {
				ref.Port = new(tc.port)
			}
			out := routes.Evaluate(in)
			if tc.want == "" {
				if len(out) != 0 {
					t.Fatalf("got %d entries for a Service another mesh may own: %+v", len(out), out)
				}
				return
			}
			if len(out) != 1 {
				t.Fatalf("got %d entries, want 1", len(out))
			}
			acc := findCondition(out[0].Conditions, string(gwapiv1.RouteConditionAccepted))
			if got := acc.Reason + ": " + acc.Message; !strings.HasPrefix(got, tc.want) {
				t.Errorf("Accepted = %s\nwant it to begin %q", got, tc.want)
			}
			if !reflect.DeepEqual(out[0].ParentRef, *ref) {
				t.Errorf("parentRef %+v, want the spec's %+v", out[0].ParentRef, *ref)
			}
		})
	}
}

// TestEvaluateMessagesFit: a route of 16 rules of 16 backends, each to an undeclared port of a
// service of 256 ports, names every problem yet stays within a condition message's limit.
func TestEvaluateMessagesFit(t *testing.T) {
	in := matrixInput(routes.HTTPRoute, 7777)
	ms := &in.MeshServices[0]
	ms.Status.Ports = nil
	for p := range int32(meshv1alpha1.MaxServicePorts) {
		ms.Status.Ports = append(ms.Status.Ports, meshv1alpha1.ServicePort{Port: 10000 + p, Protocol: meshv1alpha1.ProtocolHTTP2})
	}
	rule := in.Route.Rules[0]
	for range 15 {
		rule.BackendRefs = append(rule.BackendRefs, rule.BackendRefs[0])
	}
	in.Route.Rules = nil
	for range 16 {
		in.Route.Rules = append(in.Route.Rules, rule)
	}
	out := routes.Evaluate(in)
	if len(out) != 1 {
		t.Fatalf("got %d entries, want 1", len(out))
	}
	rr := findCondition(out[0].Conditions, string(gwapiv1.RouteConditionResolvedRefs))
	if rr == nil || rr.Reason != string(gwapiv1.RouteReasonBackendNotFound) || len(rr.Message) > conditions.MaxConditionMessage ||
		!strings.HasPrefix(rr.Message, "rule 0: backendRef payments:7777: port 7777 is not declared") || !strings.HasSuffix(rr.Message, " bytes cut)") {
		t.Errorf("ResolvedRefs %v (%d bytes), want BackendNotFound cut to %d bytes", rr, len(rr.Message), conditions.MaxConditionMessage)
	}
}

// TestEvaluateExampleMessage pins the example message of the brief, word for word, with the
// rule prefix the evaluation adds.
func TestEvaluateExampleMessage(t *testing.T) {
	out := routes.Evaluate(matrixInput(routes.HTTPRoute, 9000))
	if len(out) != 1 {
		t.Fatalf("got %d entries, want 1", len(out))
	}
	rr := findCondition(out[0].Conditions, string(gwapiv1.RouteConditionResolvedRefs))
	want := "rule 0: backendRef payments:9000 is a raw-TCP port (declared 9000=tcp); an HTTPRoute can only reach HTTP ports of payments (8080/HTTP, 9090/HTTP2). Point it at one of those, or use a TCPRoute."
	if rr == nil || rr.Message != want {
		t.Errorf("ResolvedRefs message\n got: %v\nwant: %q", rr, want)
	}
}

// matrixInput is a route of kind k in shop, parented to mesh Service payments, with one backend
// payments:port.
func matrixInput(k routes.Kind, port int32) routes.Input {
	core, service := gwapiv1.Group(""), gwapiv1.Kind("Service")
	p := port
	return routes.Input{
		Route: routes.Route{
			Kind: k, Namespace: "shop", Name: "checkout",
			ParentRefs: []gwapiv1.ParentReference{{Group: &core, Kind: &service, Name: "payments"}},
			Rules:      []routes.Rule{{BackendRefs: []gwapiv1.BackendObjectReference{{Name: "payments", Port: &p}}}},
		},
		MeshServices: []meshv1alpha1.MeshService{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments"},
			Status: meshv1alpha1.MeshServiceStatus{Ports: []meshv1alpha1.ServicePort{
				{Port: 5353, Protocol: meshv1alpha1.ProtocolUDP},
				{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP},
				{Port: 9000, Protocol: meshv1alpha1.ProtocolTCP},
				{Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2},
			}},
		}},
		Services: []string{"shop/payments", "shop/legacy"},
	}
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// goldenCases are the case names of testdata/*.in.yaml, sorted.
func goldenCases(t testing.TB) []string {
	return golden.Cases(t, "testdata", inSuffix)
}

// readInput reads testdata/<name>.in.yaml strictly: a misspelt field fails instead of silently
// leaving the input zero.
func readInput(t testing.TB, name string) routes.Input {
	return golden.ReadStrict[routes.Input](t, "testdata", name, inSuffix)
}

// checkInput refuses an input a cluster could not produce: an unknown route kind, a route
// without namespace or name, a MeshService whose ports are not sorted and unique (the CRD
// enforces it) or whose Service is not listed (the controller creates one per MeshService), a
// Service not spelt namespace/name.
func checkInput(t testing.TB, in routes.Input) {
	t.Helper()
	if !slices.Contains([]routes.Kind{routes.HTTPRoute, routes.GRPCRoute, routes.TCPRoute, routes.TLSRoute}, in.Route.Kind) {
		t.Fatalf("route kind %q is not one of the four", in.Route.Kind)
	}
	if in.Route.Namespace == "" || in.Route.Name == "" {
		t.Fatalf("route has no namespace or name")
	}
	for _, s := range in.Services {
		if ns, name, ok := strings.Cut(s, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			t.Fatalf("service %q is not namespace/name", s)
		}
	}
	for _, ms := range in.MeshServices {
		if ms.Namespace == "" || ms.Name == "" {
			t.Fatalf("mesh service %q has no metadata.namespace or metadata.name", ms.Name)
		}
		if !slices.Contains(in.Services, ms.Namespace+"/"+ms.Name) {
			t.Fatalf("mesh service %s/%s has no Service in services", ms.Namespace, ms.Name)
		}
		for i, p := range ms.Status.Ports {
			if i > 0 && ms.Status.Ports[i-1].Port >= p.Port {
				t.Fatalf("mesh service %s: status.ports not sorted and unique at %d", ms.Name, p.Port)
			}
		}
	}
	for _, g := range in.ReferenceGrants {
		if g.Namespace == "" || g.Name == "" {
			t.Fatalf("reference grant %q has no metadata.namespace or metadata.name", g.Name)
		}
	}
}

// checkOutput holds for every output, whatever the golden file says: entries only for parentRefs
// that are core Services with a MeshService or with no Service at all, in parentRef order, each
// with this controller's name and exactly Accepted then ResolvedRefs, without timestamps or
// generation, with a reason Gateway API defines for that condition.
func checkOutput(t testing.TB, in routes.Input, out []gwapiv1.RouteParentStatus) {
	t.Helper()
	var wantRefs []gwapiv1.ParentReference
	for _, ref := range in.Route.ParentRefs {
		if ref.Group == nil || *ref.Group != "" || ref.Kind == nil || *ref.Kind != "Service" {
			continue
		}
		ns := in.Route.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		if slices.ContainsFunc(in.MeshServices, func(ms meshv1alpha1.MeshService) bool {
			return ms.Namespace == ns && ms.Name == string(ref.Name)
		}) || !slices.Contains(in.Services, ns+"/"+string(ref.Name)) {
			wantRefs = append(wantRefs, ref)
		}
	}
	if len(out) != len(wantRefs) {
		t.Fatalf("got %d entries, want %d (one per parentRef that is a mesh Service or no Service)", len(out), len(wantRefs))
	}
	acceptedReasons := []string{string(gwapiv1.RouteReasonAccepted), string(gwapiv1.RouteReasonNoMatchingParent)}
	resolvedReasons := []string{
		string(gwapiv1.RouteReasonResolvedRefs), string(gwapiv1.RouteReasonInvalidKind), string(gwapiv1.RouteReasonRefNotPermitted),
		string(gwapiv1.RouteReasonBackendNotFound), string(gwapiv1.RouteReasonUnsupportedProtocol),
	}
	for i, e := range out {
		if e.ControllerName != routes.ControllerName {
			t.Errorf("entry %d: controllerName %q, want %q", i, e.ControllerName, routes.ControllerName)
		}
		if !reflect.DeepEqual(e.ParentRef, wantRefs[i]) {
			t.Errorf("entry %d: parentRef %+v, want %+v", i, e.ParentRef, wantRefs[i])
		}
		if len(e.Conditions) != 2 ||
			e.Conditions[0].Type != string(gwapiv1.RouteConditionAccepted) ||
			e.Conditions[1].Type != string(gwapiv1.RouteConditionResolvedRefs) {
			t.Fatalf("entry %d: conditions %+v, want Accepted then ResolvedRefs", i, e.Conditions)
		}
		for j, c := range e.Conditions {
			reasons := acceptedReasons
			if j == 1 {
				reasons = resolvedReasons
			}
			if !slices.Contains(reasons, c.Reason) {
				t.Errorf("entry %d: %s reason %q is not one of %v", i, c.Type, c.Reason, reasons)
			}
			if (c.Status == metav1.ConditionTrue) != (c.Reason == reasons[0]) {
				t.Errorf("entry %d: %s is %s with reason %s", i, c.Type, c.Status, c.Reason)
			}
			if !c.LastTransitionTime.IsZero() || c.ObservedGeneration != 0 {
				t.Errorf("entry %d: %s carries a timestamp or generation; MergeParents stamps them", i, c.Type)
			}
			if c.Message == "" {
				t.Errorf("entry %d: %s has no message", i, c.Type)
			}
		}
	}
}

func marshal(t testing.TB, v any) []byte {
	return golden.YAML(t, v)
}

// TestEvaluateUDPMessages: the UnsupportedProtocol messages between UDP and the other kinds say
// what the port is and what to use instead: a UDPRoute for a UDP port, the port's own kind for a
// UDPRoute that names another.
func TestEvaluateUDPMessages(t *testing.T) {
	for _, tc := range []struct {
		kind routes.Kind
		port int32
		want string
	}{
		{routes.TCPRoute, 5353, "backendRef payments:5353 is a UDP port (declared 5353=udp); a TCPRoute can only reach TCP ports of payments (9000/TCP). Point it at one of those, or use a UDPRoute."},
		{routes.HTTPRoute, 5353, "is a UDP port (declared 5353=udp); an HTTPRoute can only reach HTTP ports of payments (8080/HTTP, 9090/HTTP2). Point it at one of those, or use a UDPRoute."},
		{routes.UDPRoute, 9000, "is a raw-TCP port (declared 9000=tcp); a UDPRoute can only reach UDP ports of payments (5353/UDP). Point it at one of those, or use a TCPRoute."},
		{routes.UDPRoute, 8080, "a UDPRoute can only reach UDP ports of payments (5353/UDP). Point it at one of those, or use an HTTPRoute."},
	} {
		out := routes.Evaluate(matrixInput(tc.kind, tc.port))
		rr := findCondition(out[0].Conditions, string(gwapiv1.RouteConditionResolvedRefs))
		if rr == nil || rr.Reason != string(gwapiv1.RouteReasonUnsupportedProtocol) || !strings.Contains(rr.Message, tc.want) {
			t.Errorf("%s to port %d: ResolvedRefs %+v; want UnsupportedProtocol saying %q", tc.kind, tc.port, rr, tc.want)
		}
	}
}
