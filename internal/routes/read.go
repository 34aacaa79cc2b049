// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package routes

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// Read is a route of any of the four kinds as the evaluation sees it, and its status.parents
// (to merge into, or to read our entries from). ok is false for any other object. The controller,
// kubectl aether and the node agent (through MeshRoute) all read routes through it.
func Read(o runtime.Object) (route Route, parents *[]gwapiv1.RouteParentStatus, ok bool) {
	switch r := o.(type) {
	case *gwapiv1.HTTPRoute:
		return read(HTTPRoute, r.ObjectMeta, r.Spec.CommonRouteSpec, r.Spec.Hostnames, r.Spec.Rules, httpRule), &r.Status.Parents, true
	case *gwapiv1.GRPCRoute:
		return read(GRPCRoute, r.ObjectMeta, r.Spec.CommonRouteSpec, r.Spec.Hostnames, r.Spec.Rules, grpcRule), &r.Status.Parents, true
	case *gwapiv1.TCPRoute:
		return read(TCPRoute, r.ObjectMeta, r.Spec.CommonRouteSpec, nil, r.Spec.Rules, func(rule gwapiv1.TCPRouteRule) Rule {
			return plainRule(rule.Name, rule.BackendRefs)
		}), &r.Status.Parents, true
	case *gwapiv1.UDPRoute:
		return read(UDPRoute, r.ObjectMeta, r.Spec.CommonRouteSpec, nil, r.Spec.Rules, func(rule gwapiv1.UDPRouteRule) Rule {
			return plainRule(rule.Name, rule.BackendRefs)
		}), &r.Status.Parents, true
	case *gwapiv1.TLSRoute:
		return read(TLSRoute, r.ObjectMeta, r.Spec.CommonRouteSpec, r.Spec.Hostnames, r.Spec.Rules, func(rule gwapiv1.TLSRouteRule) Rule {
			return plainRule(rule.Name, rule.BackendRefs)
		}), &r.Status.Parents, true
	}
	return Route{}, nil, false
}

// read is a route of kind: its identity, parents and hostnames, and each of its rules as rule
// reads it.
func read[R any](kind Kind, meta metav1.ObjectMeta, spec gwapiv1.CommonRouteSpec, hosts []gwapiv1.Hostname, rules []R, rule func(R) Rule) Route {
	route := Route{Kind: kind, Namespace: meta.Namespace, Name: meta.Name, ParentRefs: spec.ParentRefs,
		Generation: meta.Generation, Hostnames: hostnames(hosts)}
	for _, r := range rules {
		route.Rules = append(route.Rules, rule(r))
	}
	return route
}

// httpRule reads an HTTPRoute rule: its backends and weights, its matches as the data plane
// carries them, and its timeouts.
func httpRule(rule gwapiv1.HTTPRouteRule) Rule {
	r := requestRule(rule.Name, len(rule.Filters), rule.BackendRefs, func(b gwapiv1.HTTPBackendRef) (gwapiv1.BackendRef, int) {
		return b.BackendRef, len(b.Filters)
	}, rule.Matches, httpMatch)
	if t := rule.Timeouts; t != nil {
		r.Timeouts.Request = r.timeout("timeouts.request", t.Request)
		r.Timeouts.BackendRequest = r.timeout("timeouts.backendRequest", t.BackendRequest)
	}
	return r
}

// timeout is a Gateway API duration (GEP-2257: 1 to 4 of <number><h|m|s|ms>, "0s" for none) as
// the data plane carries it; 0 when unset, and when it is no duration, which is noted with the
// field's name (Gateway API's CRDs refuse such a value; one stored without them is not applied).
func (r *Rule) timeout(field string, d *gwapiv1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	v, err := time.ParseDuration(string(*d))
	if err != nil || v < 0 {
		r.Uncarried = append(r.Uncarried, fmt.Sprintf("%s %q is not a duration (write e.g. 10s, 1m30s or 500ms; 0s for none): no timeout is applied", field, *d))
		return 0
	}
	return v
}

// grpcRule reads a GRPCRoute rule as httpRule reads an HTTPRoute rule.
func grpcRule(rule gwapiv1.GRPCRouteRule) Rule {
	return requestRule(rule.Name, len(rule.Filters), rule.BackendRefs, func(b gwapiv1.GRPCBackendRef) (gwapiv1.BackendRef, int) {
		return b.BackendRef, len(b.Filters)
	}, rule.Matches, grpcMatch)
}

// requestRule reads a rule of a request route (HTTPRoute, GRPCRoute), whose backends carry filters
// of their own: the backends and weights, the matches the data plane carries, and the filters it
// does not (noted).
func requestRule[B, M any](name *gwapiv1.SectionName, filters int, backends []B, backend func(B) (gwapiv1.BackendRef, int),
	matches []M, match func(M) (model.RouteMatch, string)) Rule {
	r := Rule{Name: name}
	for _, b := range backends {
		ref, n := backend(b)
		r.BackendRefs = append(r.BackendRefs, ref.BackendObjectReference)
		r.Weights = append(r.Weights, weight(ref.Weight))
		filters += n
	}
	for i, m := range matches {
		carried, why := match(m)
		r.addMatch(i, carried, why)
	}
	r.MatchesNone = len(matches) > 0 && len(r.Matches) == 0
	r.noteFilters(filters)
	return r
}

// plainRule reads a TCPRoute, TLSRoute or UDPRoute rule: its backends and weights.
func plainRule(name *gwapiv1.SectionName, refs []gwapiv1.BackendRef) Rule {
	r := Rule{Name: name}
	for _, b := range refs {
		r.BackendRefs = append(r.BackendRefs, b.BackendObjectReference)
		r.Weights = append(r.Weights, weight(b.Weight))
	}
	return r
}

// weight is a backendRef's weight: Gateway API's default 1 when unset.
func weight(w *int32) int32 {
	if w == nil {
		return 1
	}
	return *w
}

// hostnames are a route's hostnames as strings; nil when it has none.
func hostnames(in []gwapiv1.Hostname) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, 0, len(in))
	for _, h := range in {
		out = append(out, string(h))
	}
	return out
}

// addMatch keeps match i, or says why the data plane leaves it out.
func (r *Rule) addMatch(i int, match model.RouteMatch, why string) {
	if why != "" {
		r.Uncarried = append(r.Uncarried, fmt.Sprintf("matches[%d] is left out: %s", i, why))
		return
	}
	r.Matches = append(r.Matches, match)
}

// noteFilters says the rule's filters (n of them, the backendRefs' included) are not applied.
func (r *Rule) noteFilters(n int) {
	if n > 0 {
		r.Uncarried = append(r.Uncarried, fmt.Sprintf("%d filter(s) are not applied: the mesh's data plane carries matches, backends and weights only", n))
	}
}

// httpMatch is an HTTPRoute match as model.RouteMatch, or why the data plane cannot carry it
// (a regular expression, a query parameter).
func httpMatch(m gwapiv1.HTTPRouteMatch) (model.RouteMatch, string) {
	var out model.RouteMatch
	if m.Path != nil {
		pathType, value := gwapiv1.PathMatchPathPrefix, "/" // the API's defaults
		if m.Path.Type != nil {
			pathType = *m.Path.Type
		}
		if m.Path.Value != nil {
			value = *m.Path.Value
		}
		if pathType != gwapiv1.PathMatchExact && pathType != gwapiv1.PathMatchPathPrefix {
			return out, fmt.Sprintf("path type %s is not carried (Exact and PathPrefix are)", pathType)
		}
		out.PathType, out.Path = string(pathType), value
	}
	if m.Method != nil {
		out.Method = string(*m.Method)
	}
	for _, h := range m.Headers {
		if h.Type != nil && *h.Type != gwapiv1.HeaderMatchExact {
			return out, fmt.Sprintf("header %s: match type %s is not carried (Exact is)", h.Name, *h.Type)
		}
		out.Headers = append(out.Headers, model.HeaderMatch{Name: string(h.Name), Value: h.Value})
	}
	if len(m.QueryParams) > 0 {
		return out, "query parameter matches are not carried"
	}
	return out, ""
}

// grpcMatch is a GRPCRoute match as model.RouteMatch, or why the data plane cannot carry it.
func grpcMatch(m gwapiv1.GRPCRouteMatch) (model.RouteMatch, string) {
	var out model.RouteMatch
	if m.Method != nil {
		if m.Method.Type != nil && *m.Method.Type != gwapiv1.GRPCMethodMatchExact {
			return out, fmt.Sprintf("method match type %s is not carried (Exact is)", *m.Method.Type)
		}
		if m.Method.Service != nil {
			out.GRPCService = *m.Method.Service
		}
		if m.Method.Method != nil {
			out.GRPCMethod = *m.Method.Method
		}
	}
	for _, h := range m.Headers {
		if h.Type != nil && *h.Type != gwapiv1.GRPCHeaderMatchExact {
			return out, fmt.Sprintf("header %s: match type %s is not carried (Exact is)", h.Name, *h.Type)
		}
		out.Headers = append(out.Headers, model.HeaderMatch{Name: string(h.Name), Value: h.Value})
	}
	return out, ""
}

// BackendRefs are every backend of every rule, in order.
func (r Route) BackendRefs() []gwapiv1.BackendObjectReference {
	var out []gwapiv1.BackendObjectReference
	for _, rule := range r.Rules {
		out = append(out, rule.BackendRefs...)
	}
	return out
}
