// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package routes

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// serviceKind is the kind of the only parents and backends the mesh answers for: core Services.
const serviceKind = "Service"

// ControllerName is this controller's name in route status.
const ControllerName gwapiv1.GatewayController = "mesh.aether.io/controller"

// Kind is a route kind.
type Kind string

// The route kinds evaluated.
const (
	HTTPRoute Kind = "HTTPRoute"
	GRPCRoute Kind = "GRPCRoute"
	TCPRoute  Kind = "TCPRoute"
	TLSRoute  Kind = "TLSRoute"
	UDPRoute  Kind = "UDPRoute"
)

// Route is a route of any kind, as the evaluation reads it (and, through the fields the
// evaluation does not read, as the data plane does: MeshRoute).
type Route struct {
	Kind       Kind                      `json:"kind"`
	Namespace  string                    `json:"namespace"`
	Name       string                    `json:"name"`
	ParentRefs []gwapiv1.ParentReference `json:"parentRefs,omitempty"`
	Rules      []Rule                    `json:"rules,omitempty"`
	// Generation is the route's metadata.generation: our status entries speak for the spec of
	// that generation only.
	Generation int64 `json:"-"`
	// Hostnames are a TLSRoute's SNI names (and an HTTPRoute's or GRPCRoute's hostnames, which
	// the mesh's data plane does not read: GEP-1294).
	Hostnames []string `json:"-"`
}

// Rule is one rule of a route: its optional name and its backends, and for the data plane the
// backends' weights and the rule's matches.
type Rule struct {
	Name        *gwapiv1.SectionName             `json:"name,omitempty"`
	BackendRefs []gwapiv1.BackendObjectReference `json:"backendRefs,omitempty"`
	// Weights are the backendRefs' weights, index for index (Gateway API's default 1 where unset).
	Weights []int32 `json:"-"`
	// Matches are the HTTPRoute's or GRPCRoute's matches the data plane carries. MatchesNone says
	// the rule lists matches and none of them is carried: it matches no request (an empty Matches
	// alone means every request).
	Matches     []model.RouteMatch `json:"-"`
	MatchesNone bool               `json:"-"`
	// Timeouts are an HTTPRoute rule's timeouts the data plane carries.
	Timeouts model.RouteTimeouts `json:"-"`
	// Uncarried says, one sentence each, what of the rule the data plane leaves out (a match it
	// cannot express, filters, a timeout that is no duration).
	Uncarried []string `json:"-"`
}

// Input is everything one route's evaluation reads.
type Input struct {
	Route Route `json:"route"`
	// MeshServices are the MeshServices the route names (as parent or backend).
	MeshServices []meshv1alpha1.MeshService `json:"meshServices,omitempty"`
	// Services are the "namespace/name" of the Services the route names that exist.
	Services []string `json:"services,omitempty"`
	// ReferenceGrants are those of the namespaces the route's backends live in.
	ReferenceGrants []gwapiv1.ReferenceGrant `json:"referenceGrants,omitempty"`
}

// Evaluate returns this controller's status.parents entries for the route, in parentRef order,
// conditions without timestamps: one per parentRef that is a core Service (in the route's
// namespace unless given) and either
//   - a mesh Service (a MeshService of that name exists): Accepted as accepted() decides; or
//   - no Service at all: Accepted=False, NoMatchingParent. GAMMA has no class on a Service to
//     say which mesh answers for it; a Service that exists but is not a mesh Service is whatever
//     mesh's serves it (another mesh may rightly own its routes), so it gets nothing from us. A
//     Service that does not exist can be claimed by no mesh that attaches to existing Services,
//     while this mesh creates the Service of every ServiceAccount whose pods join: the parent
//     is one only this mesh could bring into being, so it is ours to say it matches nothing.
//     When such a Service appears and is not a mesh Service, the entry goes (MergeParents drops
//     entries of ours the evaluation no longer produces).
//
// Gateways and other kinds get nothing.
func Evaluate(in Input) []gwapiv1.RouteParentStatus {
	resolved := resolvedRefs(in)
	var out []gwapiv1.RouteParentStatus
	for _, ref := range in.Route.ParentRefs {
		if ref.Group == nil || *ref.Group != "" || ref.Kind == nil || *ref.Kind != serviceKind {
			continue // Gateway API defaults a parentRef to a Gateway
		}
		ns, name := namespaceOr(ref.Namespace, in.Route.Namespace), string(ref.Name)
		var acc metav1.Condition
		switch ms := in.meshService(ns, name); {
		case ms != nil:
			acc = in.accepted(ref, ms)
			if notes := in.Route.Uncarried(); acc.Status == metav1.ConditionTrue && len(notes) > 0 {
				acc.Message += ". Not applied by the mesh: " + strings.Join(notes, "; ")
			}
		case !slices.Contains(in.Services, ns+"/"+name):
			acc = condition(gwapiv1.RouteConditionAccepted, false, gwapiv1.RouteReasonNoMatchingParent, fmt.Sprintf(
				"parentRef %s: Service %s/%s does not exist, so the route attaches to nothing. The mesh creates the Service of "+
					"each ServiceAccount whose pods join it, named like the ServiceAccount: check the parentRef's name and namespace",
				in.label(ns, name), ns, name))
		default:
			continue // a Service that is not a mesh Service: not ours to judge
		}
		out = append(out, gwapiv1.RouteParentStatus{
			ParentRef:      ref,
			ControllerName: ControllerName,
			Conditions:     []metav1.Condition{acc, resolved},
		})
	}
	return out
}

// label names a Service as the route's messages spell it: its name in the route's namespace,
// namespace/name in another (so a cross-namespace parent or backend is never ambiguous).
func (in Input) label(namespace, name string) string {
	if namespace == in.Route.Namespace {
		return name
	}
	return namespace + "/" + name
}

func (in Input) meshService(namespace, name string) *meshv1alpha1.MeshService {
	for i := range in.MeshServices {
		if in.MeshServices[i].Namespace == namespace && in.MeshServices[i].Name == name {
			return &in.MeshServices[i]
		}
	}
	return nil
}

func namespaceOr(ns *gwapiv1.Namespace, def string) string {
	if ns == nil || *ns == "" {
		return def
	}
	return string(*ns)
}

// Carries reports whether a route of kind k can carry traffic to a port of protocol p: the one
// rule the controller's verdicts (Accepted, ResolvedRefs UnsupportedProtocol) and the data plane
// (which ports a route attaches to, which backends it can reach: internal/xds) both read.
func Carries(k Kind, p meshv1alpha1.Protocol) bool {
	switch k {
	case HTTPRoute:
		return p.IsHTTP()
	case GRPCRoute:
		return p == meshv1alpha1.ProtocolHTTP2
	case UDPRoute: // datagrams: a UDP port, and no other route kind reaches one
		return p == meshv1alpha1.ProtocolUDP
	default: // TCPRoute, TLSRoute: bytes, or the application's own TLS, over TCP
		return p == meshv1alpha1.ProtocolTCP
	}
}

// condition is a route condition without timestamps, its message cut to the field's limit (a
// route of many rules and backends, each naming a service's ports, can exceed it).
func condition(t gwapiv1.RouteConditionType, ok bool, reason gwapiv1.RouteConditionReason, msg string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(t), Status: status, Reason: string(reason), Message: conditions.Truncate(msg, conditions.MaxConditionMessage)}
}

// accepted is the Accepted condition for one mesh-Service parent.
func (in Input) accepted(ref gwapiv1.ParentReference, ms *meshv1alpha1.MeshService) metav1.Condition {
	k, who := in.Route.Kind, in.label(ms.Namespace, ms.Name)
	if ref.Port == nil {
		return condition(gwapiv1.RouteConditionAccepted, true, gwapiv1.RouteReasonAccepted,
			fmt.Sprintf("attached to mesh service %s", who))
	}
	port := *ref.Port
	p, declared := declaredProtocol(ms, port)
	switch {
	case !declared:
		return condition(gwapiv1.RouteConditionAccepted, false, gwapiv1.RouteReasonNoMatchingParent,
			fmt.Sprintf("parentRef %s:%d: mesh service %s does not declare port %d (it serves %s)", who, port, who, port, portList(ms.Status.Ports, nil)))
	case !Carries(k, p):
		return condition(gwapiv1.RouteConditionAccepted, false, gwapiv1.RouteReasonNoMatchingParent,
			fmt.Sprintf("parentRef %s:%d is %s (declared %s); %s", who, port, describe(p), spelling(port, p), canReach(k, p, who, ms)))
	}
	return condition(gwapiv1.RouteConditionAccepted, true, gwapiv1.RouteReasonAccepted,
		fmt.Sprintf("attached to port %d (%s) of mesh service %s", port, p, who))
}

func declaredProtocol(ms *meshv1alpha1.MeshService, port int32) (meshv1alpha1.Protocol, bool) {
	for _, p := range ms.Status.Ports {
		if p.Port == port {
			return p.Protocol, true
		}
	}
	return "", false
}

// resolvedRefs is the ResolvedRefs condition: the first broken backendRef, in rule order, gives
// the reason; every broken one is named in the message.
func resolvedRefs(in Input) metav1.Condition {
	var reason gwapiv1.RouteConditionReason
	var problems []string
	refs := 0
	for i, rule := range in.Route.Rules {
		for _, ref := range rule.BackendRefs {
			refs++
			r, msg := in.checkBackend(ruleName(i, rule), ref)
			if r == "" {
				continue
			}
			if reason == "" {
				reason = r
			}
			problems = append(problems, msg)
		}
	}
	if reason == "" {
		return condition(gwapiv1.RouteConditionResolvedRefs, true, gwapiv1.RouteReasonResolvedRefs,
			fmt.Sprintf("all %d backendRefs resolve", refs))
	}
	for i, p := range problems {
		if !strings.HasSuffix(p, ".") {
			problems[i] = p + "."
		}
	}
	return condition(gwapiv1.RouteConditionResolvedRefs, false, reason, strings.Join(problems, " "))
}

// Uncarried says what of the route's rules the data plane leaves out, one note each, named by
// its rule; none for nothing.
func (r Route) Uncarried() []string {
	var notes []string
	for i, rule := range r.Rules {
		for _, n := range rule.Uncarried {
			notes = append(notes, ruleName(i, rule)+": "+n)
		}
	}
	return notes
}

func ruleName(i int, rule Rule) string {
	if rule.Name != nil && *rule.Name != "" {
		return fmt.Sprintf("rule %q", *rule.Name)
	}
	return fmt.Sprintf("rule %d", i)
}

// checkBackend returns the reason and message of what is wrong with one backendRef, or "".
func (in Input) checkBackend(rule string, ref gwapiv1.BackendObjectReference) (gwapiv1.RouteConditionReason, string) {
	group, kind := "", serviceKind
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	ns := namespaceOr(ref.Namespace, in.Route.Namespace)
	name := string(ref.Name)
	who := in.label(ns, name)
	if group != "" || kind != serviceKind {
		return gwapiv1.RouteReasonInvalidKind, fmt.Sprintf("%s: backendRef %s is a %s; the mesh routes only to core Services", rule, who, groupKind(group, kind))
	}
	if ns != in.Route.Namespace && !in.granted(ns, name) {
		return gwapiv1.RouteReasonRefNotPermitted, fmt.Sprintf(
			"%s: backendRef %s/%s is in another namespace and no ReferenceGrant in %s allows %ss from %s to reach it",
			rule, ns, name, ns, in.Route.Kind, in.Route.Namespace)
	}
	if !slices.Contains(in.Services, ns+"/"+name) {
		return gwapiv1.RouteReasonBackendNotFound, fmt.Sprintf("%s: backendRef %s: Service %s/%s not found", rule, who, ns, name)
	}
	ms := in.meshService(ns, name)
	if ms == nil {
		return gwapiv1.RouteReasonBackendNotFound, fmt.Sprintf("%s: backendRef %s: Service %s/%s is not a mesh service (it has no MeshService)", rule, who, ns, name)
	}
	if ref.Port == nil {
		return gwapiv1.RouteReasonBackendNotFound, fmt.Sprintf("%s: backendRef %s names no port; the mesh service serves %s", rule, who, portList(ms.Status.Ports, nil))
	}
	port := *ref.Port
	p, declared := declaredProtocol(ms, port)
	if !declared {
		return gwapiv1.RouteReasonBackendNotFound, fmt.Sprintf("%s: backendRef %s:%d: port %d is not declared by %s (it serves %s)",
			rule, who, port, port, who, portList(ms.Status.Ports, nil))
	}
	if !Carries(in.Route.Kind, p) {
		return gwapiv1.RouteReasonUnsupportedProtocol, fmt.Sprintf("%s: backendRef %s:%d is %s (declared %s); %s",
			rule, who, port, describe(p), spelling(port, p), canReach(in.Route.Kind, p, who, ms))
	}
	return "", ""
}

// granted reports whether a ReferenceGrant in ns lets this route's kind from its namespace
// reach Service name.
func (in Input) granted(ns, name string) bool {
	for _, g := range in.ReferenceGrants {
		if g.Namespace != ns {
			continue
		}
		from := slices.ContainsFunc(g.Spec.From, func(f gwapiv1.ReferenceGrantFrom) bool {
			return f.Group == gwapiv1.GroupName && string(f.Kind) == string(in.Route.Kind) && string(f.Namespace) == in.Route.Namespace
		})
		to := slices.ContainsFunc(g.Spec.To, func(t gwapiv1.ReferenceGrantTo) bool {
			return t.Group == "" && t.Kind == serviceKind && (t.Name == nil || string(*t.Name) == name)
		})
		if from && to {
			return true
		}
	}
	return false
}

func groupKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

func describe(p meshv1alpha1.Protocol) string {
	switch p {
	case meshv1alpha1.ProtocolHTTP:
		return "an HTTP/1.1 port"
	case meshv1alpha1.ProtocolHTTP2:
		return "an HTTP/2 port"
	case meshv1alpha1.ProtocolUDP:
		return "a UDP port"
	}
	return "a raw-TCP port"
}

// spelling is how the port is declared in endpoint.aether.io/ports, in the grammar's own words.
func spelling(port int32, p meshv1alpha1.Protocol) string {
	return portspec.FormatPortsAnnotation([]portspec.Port{{Port: port, Protocol: p}})
}

// canReach says which ports of ms (named who) a route of kind k can reach, and what to do
// instead for a port of protocol p.
func canReach(k Kind, p meshv1alpha1.Protocol, who string, ms *meshv1alpha1.MeshService) string {
	ok := portList(ms.Status.Ports, func(q meshv1alpha1.Protocol) bool { return Carries(k, q) })
	class := map[Kind]string{HTTPRoute: "HTTP", GRPCRoute: "HTTP/2", UDPRoute: "UDP"}[k]
	if class == "" {
		class = "TCP"
	}
	var instead string
	switch {
	case p == meshv1alpha1.ProtocolUDP:
		instead = "use a UDPRoute"
	case p == meshv1alpha1.ProtocolTCP:
		instead = "use a TCPRoute"
	case k == GRPCRoute:
		instead = "declare the port h2 (or grpc), or use an HTTPRoute"
	case p == meshv1alpha1.ProtocolHTTP2:
		instead = "use an HTTPRoute or a GRPCRoute"
	default:
		instead = "use an HTTPRoute"
	}
	if ok == "no ports" {
		return fmt.Sprintf("a%s %s can only reach %s ports, and %s has none: %s.", article(k), k, class, who, instead)
	}
	return fmt.Sprintf("a%s %s can only reach %s ports of %s (%s). Point it at one of those, or %s.", article(k), k, class, who, ok, instead)
}

func article(k Kind) string {
	if k == HTTPRoute {
		return "n"
	}
	return ""
}

// portList spells the ports whose protocol keep accepts (all when keep is nil), each as the
// PORTS column does, in prose: "8080/HTTP, 9090/HTTP2".
func portList(ports []meshv1alpha1.ServicePort, keep func(meshv1alpha1.Protocol) bool) string {
	var parts []string
	for _, p := range ports {
		if keep == nil || keep(p.Protocol) {
			parts = append(parts, meshv1alpha1.FormatPort(p.Port, p.Protocol))
		}
	}
	if len(parts) == 0 {
		return "no ports"
	}
	return strings.Join(parts, ", ")
}
