// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/routes"
)

// NewScheme is the types kubectl aether reads: MeshServices, MeshEndpoints, Gateway API routes,
// AccessPolicies (dial: who may call the port), pods (dial --from: the pod asked from, and its
// node's agent) and access reviews (proxy-config).
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := meshv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := configv1.AddToScheme(s); err != nil {
		return nil, err
	}
	// proxy-config asks whether the caller may port-forward to the agent.
	if err := authorizationv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := gwapiv1.Install(s); err != nil {
		return nil, err
	}
	return s, nil
}

// RouteRef is a route of any of the four kinds, as the plugin reads it: what it names and our
// controller's status of it.
type RouteRef struct {
	Kind        routes.Kind                      `json:"kind"`
	Namespace   string                           `json:"namespace"`
	Name        string                           `json:"name"`
	ParentRefs  []gwapiv1.ParentReference        `json:"-"`
	BackendRefs []gwapiv1.BackendObjectReference `json:"-"`
	Parents     []gwapiv1.RouteParentStatus      `json:"-"`
}

// listRoutes lists the routes of every kind in namespace ("" for all). A kind whose CRD is not
// installed is skipped: the cluster has no such routes.
func listRoutes(ctx context.Context, c client.Reader, namespace string) ([]RouteRef, error) {
	var out []RouteRef
	for _, l := range []client.ObjectList{&gwapiv1.HTTPRouteList{}, &gwapiv1.GRPCRouteList{}, &gwapiv1.TCPRouteList{}, &gwapiv1.TLSRouteList{}, &gwapiv1.UDPRouteList{}} {
		if err := c.List(ctx, l, client.InNamespace(namespace)); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("listing routes: %w", err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return nil, fmt.Errorf("listing routes: %w", err)
		}
		for _, item := range items {
			// The same reading of a route as the controller's (routes.Read).
			route, parents, ok := routes.Read(item)
			if !ok {
				continue
			}
			out = append(out, RouteRef{Kind: route.Kind, Namespace: route.Namespace, Name: route.Name,
				ParentRefs: route.ParentRefs, BackendRefs: route.BackendRefs(), Parents: *parents})
		}
	}
	slices.SortFunc(out, func(a, b RouteRef) int {
		return strings.Compare(string(a.Kind)+"/"+a.Namespace+"/"+a.Name, string(b.Kind)+"/"+b.Namespace+"/"+b.Name)
	})
	return out, nil
}

// AttachedRoute is a route that names a service's port, and what our controller says of it.
type AttachedRoute struct {
	Kind      routes.Kind `json:"kind"`
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	// Via is "parentRef" (the route is parented to the service) or "backendRef" (it sends to it).
	Via string `json:"via"`
	// Port is the port the reference names; 0 for a parentRef to the whole service.
	Port int32 `json:"port,omitempty"`
	// Conditions are our controller's conditions for the parentRef (Accepted, ResolvedRefs):
	// for a backendRef, those of each of the route's parents.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Route reference vias.
const (
	ViaParent  = "parentRef"
	ViaBackend = "backendRef"
)

// attached are the routes that name service svc: parented to it (on port, or on the whole
// service) or sending to it on port. port 0 means any port.
func attached(all []RouteRef, svc ServiceRef, port int32) []AttachedRoute {
	var out []AttachedRoute
	for _, r := range all {
		for _, p := range r.ParentRefs {
			if !parentIsService(p) || string(p.Name) != svc.Name || nsOf(p.Namespace, r.Namespace) != svc.Namespace {
				continue
			}
			if port != 0 && p.Port != nil && *p.Port != port {
				continue
			}
			a := AttachedRoute{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Via: ViaParent}
			if p.Port != nil {
				a.Port = *p.Port
			}
			a.Conditions = ourConditions(r.Parents, p, r.Namespace)
			out = append(out, a)
		}
		for _, b := range r.BackendRefs {
			if !isService(b.Group, b.Kind) || string(b.Name) != svc.Name || nsOf(b.Namespace, r.Namespace) != svc.Namespace ||
				b.Port == nil || (port != 0 && *b.Port != port) {
				continue
			}
			a := AttachedRoute{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Via: ViaBackend, Port: *b.Port}
			for _, ps := range r.Parents {
				if ps.ControllerName == routes.ControllerName {
					a.Conditions = append(a.Conditions, ps.Conditions...)
				}
			}
			out = append(out, a)
		}
	}
	return out
}

// parentIsService is whether a parentRef names a core Service: its group defaults to the Gateway
// API's and its kind to Gateway, so both are written (as the route controller reads them).
func parentIsService(p gwapiv1.ParentReference) bool {
	return p.Group != nil && *p.Group == "" && p.Kind != nil && *p.Kind == "Service"
}

// isService is whether a backendRef's group and kind name a core Service (they default to it).
func isService(group *gwapiv1.Group, kind *gwapiv1.Kind) bool {
	return (group == nil || *group == "") && (kind == nil || *kind == "Service")
}

func nsOf(ns *gwapiv1.Namespace, def string) string {
	if ns == nil || *ns == "" {
		return def
	}
	return string(*ns)
}

// ourConditions are our controller's conditions for parentRef ref of a route in routeNS.
func ourConditions(parents []gwapiv1.RouteParentStatus, ref gwapiv1.ParentReference, routeNS string) []metav1.Condition {
	for _, ps := range parents {
		if ps.ControllerName != routes.ControllerName || string(ps.ParentRef.Name) != string(ref.Name) ||
			nsOf(ps.ParentRef.Namespace, routeNS) != nsOf(ref.Namespace, routeNS) || !samePort(ps.ParentRef.Port, ref.Port) ||
			!sameSection(ps.ParentRef.SectionName, ref.SectionName) {
			continue
		}
		return ps.Conditions
	}
	return nil
}

func samePort(a, b *gwapiv1.PortNumber) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func sameSection(a, b *gwapiv1.SectionName) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// ProtocolCount is how many endpoints declare a port in one protocol, and how many of them are
// ready.
type ProtocolCount struct {
	Protocol meshv1alpha1.Protocol `json:"protocol"`
	Ready    int32                 `json:"ready"`
	Total    int32                 `json:"total"`
}

// endpointsByProtocol counts, for each port, the verified endpoints of the service by the
// protocol they declare it in (more than one during a rollout that retypes the port): the
// endpoints the MeshService counts, Verified=True, ready when healthy.
func endpointsByProtocol(eps []meshv1alpha1.MeshEndpoint, service string) map[int32][]ProtocolCount {
	out := map[int32][]ProtocolCount{}
	for _, ep := range eps {
		if ep.Spec.ServiceName != service || !meta.IsStatusConditionTrue(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified) {
			continue
		}
		for _, p := range ep.Spec.Ports {
			counts := out[p.Port]
			i := slices.IndexFunc(counts, func(c ProtocolCount) bool { return c.Protocol == p.Protocol })
			if i < 0 {
				counts = append(counts, ProtocolCount{Protocol: p.Protocol})
				i = len(counts) - 1
			}
			counts[i].Total++
			if ep.Status.Health == meshv1alpha1.HealthHealthy {
				counts[i].Ready++
			}
			out[p.Port] = counts
		}
	}
	for port := range out {
		slices.SortFunc(out[port], func(a, b ProtocolCount) int { return strings.Compare(string(a.Protocol), string(b.Protocol)) })
	}
	return out
}
