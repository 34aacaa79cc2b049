// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package routes

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// meshParent is a parentRef to core Service name in namespace ns (0: no port).
func meshParent(ns, name string, port int32) gwapiv1.ParentReference {
	ref := gwapiv1.ParentReference{Group: new(gwapiv1.Group(""))}
	ref.Kind = new(gwapiv1.Kind("Service"))
	ref.Name = gwapiv1.ObjectName(name)
	if ns != "" {
		ref.Namespace = new(gwapiv1.Namespace(ns))
	}
	if port != 0 {
		ref.Port = new(port)
	}
	return ref
}

// entry is a status.parents entry of controller for ref, with Accepted and ResolvedRefs of
// generation.
func entry(controller gwapiv1.GatewayController, ref gwapiv1.ParentReference, accepted, resolved bool, generation int64) gwapiv1.RouteParentStatus {
	cond := func(t gwapiv1.RouteConditionType, ok bool) metav1.Condition {
		c := metav1.Condition{Type: string(t), Status: metav1.ConditionFalse, Reason: "R", ObservedGeneration: generation}
		if ok {
			c.Status = metav1.ConditionTrue
		}
		return c
	}
	return gwapiv1.RouteParentStatus{ParentRef: ref, ControllerName: controller,
		Conditions: []metav1.Condition{cond(gwapiv1.RouteConditionAccepted, accepted), cond(gwapiv1.RouteConditionResolvedRefs, resolved)}}
}

// backend is a backendRef to Service name:port in ns (empty: the route's), with weight (nil: unset).
func backend(ns, name string, port int32, weight *int32) gwapiv1.HTTPBackendRef {
	ref := gwapiv1.HTTPBackendRef{BackendRef: gwapiv1.BackendRef{Weight: weight}}
	ref.Name = gwapiv1.ObjectName(name)
	ref.Port = new(port)
	if ns != "" {
		ref.Namespace = new(gwapiv1.Namespace(ns))
	}
	return ref
}

// TestReadCarriesWhatTheDataPlaneReads: weights (1 when unset), HTTPRoute and GRPCRoute matches
// as model.RouteMatch (the API's path default, methods, exact headers, gRPC service and method),
// a TLSRoute's hostnames and the generation; a match the data plane cannot carry (regular
// expression, query parameters) is left out and said, filters are said, and a rule whose every
// match is left out matches nothing.
func TestReadCarriesWhatTheDataPlaneReads(t *testing.T) {
	regex, prefix := gwapiv1.PathMatchRegularExpression, gwapiv1.PathMatchPathPrefix
	http := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r", Generation: 4}, Spec: gwapiv1.HTTPRouteSpec{Rules: []gwapiv1.HTTPRouteRule{
		{Matches: []gwapiv1.HTTPRouteMatch{
			{Path: &gwapiv1.HTTPPathMatch{Type: &prefix, Value: new("/v2")}, Method: new(gwapiv1.HTTPMethodPost),
				Headers: []gwapiv1.HTTPHeaderMatch{{Name: "X-Canary", Value: "yes"}}},
			{Path: &gwapiv1.HTTPPathMatch{}}, // the API's defaults: PathPrefix /
			{Path: &gwapiv1.HTTPPathMatch{Type: &regex, Value: new("/v[0-9]+")}},
			{QueryParams: []gwapiv1.HTTPQueryParamMatch{{Name: "q", Value: "1"}}},
		}, Filters: []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterRequestHeaderModifier}},
			BackendRefs: []gwapiv1.HTTPBackendRef{backend("", "a", 8080, nil), backend("", "b", 8080, new(int32(9)))}},
		{Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: &regex, Value: new("/x")}}}},
	}}}
	route, _, _ := Read(http)
	if route.Generation != 4 {
		t.Errorf("generation %d, want 4", route.Generation)
	}
	r0 := route.Rules[0]
	if want := []int32{1, 9}; !reflect.DeepEqual(r0.Weights, want) {
		t.Errorf("weights %v, want %v", r0.Weights, want)
	}
	want := []model.RouteMatch{
		{PathType: "PathPrefix", Path: "/v2", Method: "POST", Headers: []model.HeaderMatch{{Name: "X-Canary", Value: "yes"}}},
		{PathType: "PathPrefix", Path: "/"},
	}
	if !reflect.DeepEqual(r0.Matches, want) || r0.MatchesNone {
		t.Errorf("matches %+v (none %v), want %+v", r0.Matches, r0.MatchesNone, want)
	}
	notes := strings.Join(r0.Uncarried, "\n")
	for _, part := range []string{"matches[2] is left out: path type RegularExpression is not carried",
		"matches[3] is left out: query parameter matches are not carried", "1 filter(s) are not applied"} {
		if !strings.Contains(notes, part) {
			t.Errorf("uncarried %q does not say %q", notes, part)
		}
	}
	if r1 := route.Rules[1]; !r1.MatchesNone || len(r1.Matches) != 0 {
		t.Errorf("a rule of regular expressions only: matches %v, none %v; want none carried, MatchesNone", r1.Matches, r1.MatchesNone)
	}

	grpc := &gwapiv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "g"}, Spec: gwapiv1.GRPCRouteSpec{Rules: []gwapiv1.GRPCRouteRule{{
		Matches: []gwapiv1.GRPCRouteMatch{{Method: &gwapiv1.GRPCMethodMatch{Service: new("pkg.Ledger"), Method: new("Get")},
			Headers: []gwapiv1.GRPCHeaderMatch{{Name: "tenant", Value: "a"}}}},
	}}}}
	route, _, _ = Read(grpc)
	if want := []model.RouteMatch{{GRPCService: "pkg.Ledger", GRPCMethod: "Get", Headers: []model.HeaderMatch{{Name: "tenant", Value: "a"}}}}; !reflect.DeepEqual(route.Rules[0].Matches, want) {
		t.Errorf("gRPC matches %+v, want %+v", route.Rules[0].Matches, want)
	}

	tls := &gwapiv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "t"}, Spec: gwapiv1.TLSRouteSpec{
		Hostnames: []gwapiv1.Hostname{"api.example.com"}, Rules: []gwapiv1.TLSRouteRule{{BackendRefs: []gwapiv1.BackendRef{backend("", "a", 443, new(int32(0))).BackendRef}}}}}
	route, _, _ = Read(tls)
	if !reflect.DeepEqual(route.Hostnames, []string{"api.example.com"}) || !reflect.DeepEqual(route.Rules[0].Weights, []int32{0}) {
		t.Errorf("TLSRoute hostnames %v, weights %v", route.Hostnames, route.Rules[0].Weights)
	}
}

// TestMeshRoute: a route is carried only when an entry of ours says ResolvedRefs=True for its
// current generation; its parents are those of our entries with Accepted=True for that
// generation; other controllers' entries count for nothing.
func TestMeshRoute(t *testing.T) {
	const gen = 3
	other := gwapiv1.GatewayController("example.com/other-mesh")
	payments, ledger := meshParent("", "payments", 8080), meshParent("bank", "ledger", 0)
	spec := func(entries ...gwapiv1.RouteParentStatus) *gwapiv1.HTTPRoute {
		return &gwapiv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "split", Generation: gen},
			Spec: gwapiv1.HTTPRouteSpec{CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{payments, ledger}},
				Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{backend("", "payments", 8080, new(int32(9))), backend("bank", "canary", 8080, nil)}}}},
			Status: gwapiv1.HTTPRouteStatus{RouteStatus: gwapiv1.RouteStatus{Parents: entries}},
		}
	}
	carried := model.Route{Kind: model.HTTPRoute, Namespace: "shop", Name: "split",
		Parents: []model.ServiceRef{{Namespace: "bank", Name: "ledger"}, {Namespace: "shop", Name: "payments", Port: 8080}},
		Rules: []model.RouteRule{{Backends: []model.Backend{
			{ServiceRef: model.ServiceRef{Namespace: "shop", Name: "payments", Port: 8080}, Weight: 9},
			{ServiceRef: model.ServiceRef{Namespace: "bank", Name: "canary", Port: 8080}, Weight: 1}}}}}
	onlyPayments := carried
	onlyPayments.Parents = carried.Parents[1:]
	for name, tc := range map[string]struct {
		route *gwapiv1.HTTPRoute
		want  *model.Route
	}{
		"accepted and resolved on both parents": {spec(entry(ControllerName, payments, true, true, gen), entry(ControllerName, ledger, true, true, gen)), &carried},
		"one parent refused (Accepted=False)":   {spec(entry(ControllerName, payments, true, true, gen), entry(ControllerName, ledger, false, true, gen)), &onlyPayments},
		"ResolvedRefs=False":                    {spec(entry(ControllerName, payments, true, false, gen), entry(ControllerName, ledger, true, false, gen)), nil},
		"no status of ours":                     {spec(), nil},
		"another controller's entries":          {spec(entry(other, payments, true, true, gen), entry(other, ledger, true, true, gen)), nil},
		"ours with another's beside":            {spec(entry(other, payments, false, false, gen), entry(ControllerName, payments, true, true, gen)), &onlyPayments},
		"a verdict on an older spec":            {spec(entry(ControllerName, payments, true, true, gen-1), entry(ControllerName, ledger, true, true, gen-1)), nil},
		"resolved, but no parent accepted":      {spec(entry(ControllerName, payments, false, true, gen)), nil},
	} {
		t.Run(name, func(t *testing.T) {
			route, parents, _ := Read(tc.route)
			got, ok := MeshRoute(route, *parents)
			switch {
			case tc.want == nil && ok:
				t.Errorf("carried %+v, want not carried", got)
			case tc.want != nil && !ok:
				t.Error("not carried")
			case tc.want != nil && !reflect.DeepEqual(got, *tc.want):
				t.Errorf("got  %+v\nwant %+v", got, *tc.want)
			}
		})
	}

	// A backendRef that is not a core Service with a port is a spec the controller refuses: a
	// status saying ResolvedRefs=True for it is not trusted.
	bad := spec(entry(ControllerName, payments, true, true, gen))
	bad.Spec.Rules[0].BackendRefs[1].Port = nil
	route, parents, _ := Read(bad)
	if got, ok := MeshRoute(route, *parents); ok {
		t.Errorf("a backendRef without a port carried: %+v", got)
	}
	// A rule whose every match is left out is left out (never "every request").
	regex := gwapiv1.PathMatchRegularExpression
	partial := spec(entry(ControllerName, payments, true, true, gen))
	partial.Spec.Rules = append([]gwapiv1.HTTPRouteRule{{Matches: []gwapiv1.HTTPRouteMatch{{Path: &gwapiv1.HTTPPathMatch{Type: &regex, Value: new("/x")}}},
		BackendRefs: []gwapiv1.HTTPBackendRef{backend("", "canary", 8080, nil)}}}, partial.Spec.Rules...)
	route, parents, _ = Read(partial)
	if got, ok := MeshRoute(route, *parents); !ok || len(got.Rules) != 1 || got.Rules[0].Backends[0].Weight != 9 {
		t.Errorf("the regex-only rule is carried: %+v (ok %v)", got.Rules, ok)
	}
}
