// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/routes"
)

// routeRefsIndex indexes routes by what they name: "svc:<ns>/<name>" for every core Service
// named as parent or backend, "ns:<ns>" for every namespace a backend lives in (whose
// ReferenceGrants matter).
const routeRefsIndex = "aether.routeRefs"

// routeKind adapts one route type to the shared evaluation.
type routeKind struct {
	kind    routes.Kind
	newObj  func() client.Object
	newList func() client.ObjectList
	items   func(client.ObjectList) []client.Object
	// read returns the route as the evaluation sees it, and its status.parents to merge into.
	read func(client.Object) (routes.Route, *[]gwapiv1.RouteParentStatus)
}

// readRoute is routes.Read for an object this kind's informer delivered (always a route).
func readRoute(o client.Object) (routes.Route, *[]gwapiv1.RouteParentStatus) {
	route, parents, _ := routes.Read(o)
	return route, parents
}

// RouteKinds are the five route kinds the mesh answers for.
var routeKinds = []routeKind{
	{
		kind: routes.HTTPRoute, newObj: func() client.Object { return &gwapiv1.HTTPRoute{} },
		newList: func() client.ObjectList { return &gwapiv1.HTTPRouteList{} },
		items: func(l client.ObjectList) []client.Object {
			return objects(l.(*gwapiv1.HTTPRouteList).Items)
		},
		read: readRoute,
	},
	{
		kind: routes.GRPCRoute, newObj: func() client.Object { return &gwapiv1.GRPCRoute{} },
		newList: func() client.ObjectList { return &gwapiv1.GRPCRouteList{} },
		items: func(l client.ObjectList) []client.Object {
			return objects(l.(*gwapiv1.GRPCRouteList).Items)
		},
		read: readRoute,
	},
	{
		kind: routes.TCPRoute, newObj: func() client.Object { return &gwapiv1.TCPRoute{} },
		newList: func() client.ObjectList { return &gwapiv1.TCPRouteList{} },
		items: func(l client.ObjectList) []client.Object {
			return objects(l.(*gwapiv1.TCPRouteList).Items)
		},
		read: readRoute,
	},
	{
		kind: routes.UDPRoute, newObj: func() client.Object { return &gwapiv1.UDPRoute{} },
		newList: func() client.ObjectList { return &gwapiv1.UDPRouteList{} },
		items: func(l client.ObjectList) []client.Object {
			return objects(l.(*gwapiv1.UDPRouteList).Items)
		},
		read: readRoute,
	},
	{
		kind: routes.TLSRoute, newObj: func() client.Object { return &gwapiv1.TLSRoute{} },
		newList: func() client.ObjectList { return &gwapiv1.TLSRouteList{} },
		items: func(l client.ObjectList) []client.Object {
			return objects(l.(*gwapiv1.TLSRouteList).Items)
		},
		read: readRoute,
	},
}

func objects[T any, P interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// refKeys are the index keys of a route: the Services it names and its backends' namespaces.
func refKeys(r routes.Route) []string {
	var keys []string
	for _, p := range r.ParentRefs {
		if p.Group != nil && *p.Group == "" && p.Kind != nil && *p.Kind == "Service" {
			keys = append(keys, "svc:"+nsOr(p.Namespace, r.Namespace)+"/"+string(p.Name))
		}
	}
	for _, rule := range r.Rules {
		for _, b := range rule.BackendRefs {
			ns := nsOr(b.Namespace, r.Namespace)
			keys = append(keys, "ns:"+ns)
			if (b.Group == nil || *b.Group == "") && (b.Kind == nil || *b.Kind == "Service") {
				keys = append(keys, "svc:"+ns+"/"+string(b.Name))
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func nsOr(ns *gwapiv1.Namespace, def string) string {
	if ns == nil || *ns == "" {
		return def
	}
	return string(*ns)
}

// RouteReconciler writes this controller's status.parents entries of one route kind.
type RouteReconciler struct {
	client.Client
	kind routeKind
}

// The routes of the five kinds (udproutes beside the others: a UDPRoute reaches a UDP port) are
// read to be evaluated, and only their status is written: this controller's status.parents entries
// (Accepted, ResolvedRefs). ReferenceGrants are read to judge a cross-namespace backendRef.
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes;grpcroutes;tcproutes;tlsroutes;udproutes,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes/status;grpcroutes/status;tcproutes/status;tlsroutes/status;udproutes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=referencegrants,verbs=get;list;watch

// SetupRouteControllers registers one reconciler per route kind whose CRD the cluster serves,
// and returns the kinds it skipped (the Gateway API CRDs are optional for the mesh).
func SetupRouteControllers(mgr ctrl.Manager) (skipped []routes.Kind, err error) {
	for _, k := range routeKinds {
		if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: gwapiv1.GroupName, Kind: string(k.kind)}, gwapiv1.GroupVersion.Version); err != nil {
			if meta.IsNoMatchError(err) {
				skipped = append(skipped, k.kind)
				continue
			}
			return nil, err
		}
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), k.newObj(), routeRefsIndex, func(o client.Object) []string {
			r, _ := k.read(o)
			return refKeys(r)
		}); err != nil {
			return nil, err
		}
		r := &RouteReconciler{Client: mgr.GetClient(), kind: k}
		byKey := func(key func(client.Object) string) handler.EventHandler {
			return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				list := k.newList()
				if err := r.List(ctx, list, client.MatchingFields{routeRefsIndex: key(o)}); err != nil {
					ctrl.LoggerFrom(ctx).Error(err, "listing routes", "kind", k.kind)
					return nil
				}
				var reqs []reconcile.Request
				for _, route := range k.items(list) {
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(route)})
				}
				return reqs
			})
		}
		svcKey := func(o client.Object) string { return "svc:" + o.GetNamespace() + "/" + o.GetName() }
		if err := ctrl.NewControllerManagedBy(mgr).
			Named(string(k.kind)).
			For(k.newObj()).
			Watches(&meshv1alpha1.MeshService{}, byKey(svcKey)).
			Watches(&corev1.Service{}, byKey(svcKey)).
			Watches(&gwapiv1.ReferenceGrant{}, byKey(func(o client.Object) string { return "ns:" + o.GetNamespace() })).
			Complete(r); err != nil {
			return nil, err
		}
	}
	return skipped, nil
}

// Reconcile evaluates one route and writes its status.parents when they change, retrying on a
// conflict with a fresh read.
func (r *RouteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := r.kind.newObj()
		if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		route, parents := r.kind.read(obj)
		in, err := GatherRoute(ctx, r, route)
		if err != nil {
			return err
		}
		merged := routes.MergeParents(*parents, routes.Evaluate(in), obj.GetGeneration(), metav1.NewTime(time.Now().Truncate(time.Second)))
		if equality.Semantic.DeepEqual(*parents, merged) || (len(*parents) == 0 && len(merged) == 0) {
			return nil
		}
		*parents = merged
		return r.Status().Update(ctx, obj)
	})
	return ctrl.Result{}, err
}

// GatherRoute reads, through r, the MeshServices, Services and ReferenceGrants route names: the
// input of its evaluation (routes.Evaluate). The reconciler gathers from its cache;
// test/invariant gathers from the API server, to evaluate the route afresh.
func GatherRoute(ctx context.Context, r client.Reader, route routes.Route) (routes.Input, error) {
	in := routes.Input{Route: route}
	for _, key := range refKeys(route) {
		if ns, ok := strings.CutPrefix(key, "ns:"); ok {
			if ns == route.Namespace {
				continue
			}
			var grants gwapiv1.ReferenceGrantList
			if err := r.List(ctx, &grants, client.InNamespace(ns)); err != nil {
				return in, err
			}
			in.ReferenceGrants = append(in.ReferenceGrants, grants.Items...)
			continue
		}
		nsName, _ := strings.CutPrefix(key, "svc:")
		ns, name, _ := strings.Cut(nsName, "/")
		id := types.NamespacedName{Namespace: ns, Name: name}
		ms := &meshv1alpha1.MeshService{}
		if err := r.Get(ctx, id, ms); err == nil {
			in.MeshServices = append(in.MeshServices, *ms)
		} else if !apierrors.IsNotFound(err) {
			return in, err
		}
		if err := r.Get(ctx, id, &corev1.Service{}); err == nil {
			in.Services = append(in.Services, nsName)
		} else if !apierrors.IsNotFound(err) {
			return in, err
		}
	}
	return in, nil
}
