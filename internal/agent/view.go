// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/routes"
)

// View is the agent's read-only view of the whole cluster's mesh, for its xDS builder (DESIGN
// section 8: caches → model): every MeshService, MeshEndpoint and Gateway API route (HTTPRoute,
// GRPCRoute, TCPRoute, TLSRoute) of every namespace, in a cache of its own, separate from the
// manager's node-scoped one (CacheOptions), so that registration and probing never see another
// node's objects through it. Its transforms keep only what the model reads. Services and Routes
// are the thin listers; everything after them is pure (internal/model, internal/routes).
//
// A View is a manager Runnable (Options.View); the xDS publisher (Options.XDS) reads it.
type View struct {
	cache cache.Cache
	// held counts the objects of each kind in the cache, by its informers' adds and deletes; the
	// gauge aether_agent_view_objects adds them up over the running views (one, in an agent).
	held map[string]*atomic.Int64
	// routeKinds are the route kinds the API server serves (their informers run); skipped those
	// whose CRD it does not (the Gateway API CRDs are optional for the mesh).
	routeKinds []viewRouteKind
	skipped    []routes.Kind

	// services builds the model of the cached services, each from its previous build while its
	// objects are unchanged (Services is called on every rebuild), from the endpoints as index
	// keeps them grouped by service; indexed is index's registration on the MeshEndpoint informer.
	services model.ServiceBuilder
	index    *endpointIndex
	indexed  toolscache.ResourceEventHandlerRegistration

	mu sync.Mutex
	// noted is the generation of each route whose uncarried parts were last logged, by
	// "<kind> <ns>/<name>" (Routes logs them once per generation).
	noted map[string]int64
}

// The view reads routes (Routes: the xDS builder carries the routes the controller accepted).
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes;grpcroutes;tcproutes;tlsroutes,verbs=get;list;watch

// viewRouteKind is one route kind the view may cache.
type viewRouteKind struct {
	kind    routes.Kind
	obj     client.Object
	newList func() client.ObjectList
}

// allRouteKinds are the four route kinds the mesh carries.
var allRouteKinds = []viewRouteKind{
	{routes.HTTPRoute, &gwapiv1.HTTPRoute{}, func() client.ObjectList { return &gwapiv1.HTTPRouteList{} }},
	{routes.GRPCRoute, &gwapiv1.GRPCRoute{}, func() client.ObjectList { return &gwapiv1.GRPCRouteList{} }},
	{routes.TCPRoute, &gwapiv1.TCPRoute{}, func() client.ObjectList { return &gwapiv1.TCPRouteList{} }},
	{routes.TLSRoute, &gwapiv1.TLSRoute{}, func() client.ObjectList { return &gwapiv1.TLSRouteList{} }},
}

// NewView builds a View over cfg's API server; its cache starts with the manager it is added to.
// scheme must hold the mesh's and the Gateway API's (v1) types. A route kind whose CRD the API
// server does not serve is skipped, and logged once, here: Routes then has none of that kind
// (as the controller, which writes no status for it); installing the CRD later takes a restart.
func NewView(cfg *rest.Config, scheme *runtime.Scheme) (*View, error) {
	return newView(cfg, scheme, true, allRouteKinds)
}

// newView is NewView, with the transforms off when slim is false (the benchmark's baseline), over
// the given route kinds.
func newView(cfg *rest.Config, scheme *runtime.Scheme, slim bool, routeKinds []viewRouteKind) (*View, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the agent's cluster view: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("the agent's cluster view: %w", err)
	}
	v := &View{noted: map[string]int64{}, held: map[string]*atomic.Int64{}, index: newEndpointIndex()}
	services, endpoints, routeObjects := cache.ByObject{}, cache.ByObject{}, cache.ByObject{}
	if slim {
		services.Transform, endpoints.Transform, routeObjects.Transform = slimMeshService, slimMeshEndpoint, slimRoute
	}
	// observed are the kinds the view caches, each with its one object: ByObject is keyed by
	// pointer, so a second &MeshEndpoint{} would be a second entry, and which of the two the cache
	// applies would be left to map order.
	type kindObject struct {
		kind string
		obj  client.Object
	}
	observed := []kindObject{{"MeshService", &meshv1alpha1.MeshService{}}, {"MeshEndpoint", &meshv1alpha1.MeshEndpoint{}}}
	byObject := map[client.Object]cache.ByObject{observed[0].obj: services, observed[1].obj: endpoints}
	for _, k := range routeKinds {
		gk := schema.GroupKind{Group: gwapiv1.GroupName, Kind: string(k.kind)}
		if _, err := mapper.RESTMapping(gk, gwapiv1.GroupVersion.Version); err != nil {
			if apimeta.IsNoMatchError(err) {
				v.skipped = append(v.skipped, k.kind)
				continue
			}
			return nil, fmt.Errorf("the agent's cluster view: is %s served: %w", gk, err)
		}
		if gvk := gk.WithVersion(gwapiv1.GroupVersion.Version); !scheme.Recognizes(gvk) {
			return nil, fmt.Errorf("the agent's cluster view: the scheme has no %s: install the Gateway API types (gwapiv1.Install) in the agent's scheme", gvk)
		}
		v.routeKinds = append(v.routeKinds, k)
		observed = append(observed, kindObject{string(k.kind), k.obj})
		byObject[k.obj] = routeObjects
	}
	if len(v.skipped) > 0 {
		log.Log.WithName("view").Info("Gateway API CRDs not installed: no routes of these kinds reach the data plane", "kinds", v.skipped)
	}
	v.cache, err = cache.New(cfg, cache.Options{
		Scheme: scheme, HTTPClient: httpClient, Mapper: mapper,
		// Services and Routes list only these kinds: any other read is a mistake, not a new informer.
		ReaderFailOnMissingInformer: true,
		ByObject:                    byObject,
	})
	if err != nil {
		return nil, fmt.Errorf("the agent's cluster view: %w", err)
	}
	// Registered now, so every informer starts (and syncs) with the cache, not on the first read;
	// each counts what it holds.
	for _, o := range observed {
		kind := o.kind
		informer, err := v.cache.GetInformer(context.Background(), o.obj)
		if err != nil {
			return nil, fmt.Errorf("the agent's cluster view of %ss: %w", kind, err)
		}
		held := &atomic.Int64{}
		v.held[kind] = held
		count := func(delta int64) { held.Add(delta); viewObjects.WithLabelValues(kind).Add(float64(delta)) }
		added, updated, deleted := viewEvents.WithLabelValues(kind, "add"), viewEvents.WithLabelValues(kind, "update"),
			viewEvents.WithLabelValues(kind, "delete")
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { count(1); added.Inc() },
			UpdateFunc: func(any, any) { updated.Inc() },
			DeleteFunc: func(any) { count(-1); deleted.Inc() }, // a tombstone too: the object is gone either way
		}); err != nil {
			return nil, fmt.Errorf("counting the agent's cluster view of %ss: %w", kind, err)
		}
		if kind == "MeshEndpoint" {
			// Before the cache starts: the index sees every endpoint from the first list on.
			if v.indexed, err = informer.AddEventHandler(v.index); err != nil {
				return nil, fmt.Errorf("indexing the agent's cluster view of MeshEndpoints: %w", err)
			}
		}
	}
	return v, nil
}

// Start runs the view's cache until ctx ends; then its objects leave the gauge.
func (v *View) Start(ctx context.Context) error {
	defer func() {
		for kind, held := range v.held {
			viewObjects.WithLabelValues(kind).Sub(float64(held.Load()))
		}
	}()
	return v.cache.Start(ctx)
}

// NeedLeaderElection is false: every node's agent keeps its own view.
func (v *View) NeedLeaderElection() bool { return false }

// onChange registers handler on the view's informers: every change to a MeshService, a
// MeshEndpoint or a route of the cluster reaches it (the xDS publisher's rebuild trigger; a
// route's status turning ResolvedRefs=True is a change of the route). A MeshEndpoint's change
// reaches it once Services sees it (endpointIndex); the changes before the call do not.
func (v *View) onChange(ctx context.Context, handler toolscache.ResourceEventHandler) error {
	v.index.subscribe(handler)
	objects := []client.Object{&meshv1alpha1.MeshService{}}
	for _, k := range v.routeKinds {
		objects = append(objects, k.obj)
	}
	for _, obj := range objects {
		informer, err := v.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching the view's %T: %w", obj, err)
		}
		if _, err := informer.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watching the view's %T: %w", obj, err)
		}
	}
	return nil
}

// WaitForCacheSync blocks until the view holds every object the API server listed, its endpoint
// index included (the informer's store syncs before its handlers have seen every object), or
// ctx ends.
func (v *View) WaitForCacheSync(ctx context.Context) bool {
	return v.cache.WaitForCacheSync(ctx) && toolscache.WaitForCacheSync(ctx.Done(), v.indexed.HasSynced)
}

// Services is the mesh as the model sees it: model.BuildServices of the cached MeshServices and
// MeshEndpoints, each unchanged service's model reused from the last call (model.ServiceBuilder),
// the endpoints grouped by service as they changed (endpointIndex).
func (v *View) Services(ctx context.Context) ([]model.Service, error) {
	var services meshv1alpha1.MeshServiceList
	if err := v.cache.List(ctx, &services, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing MeshServices: %w", err)
	}
	return v.index.build(&v.services, services.Items), nil
}

// Routes are the Gateway API routes the data plane carries, as the model sees them
// (routes.MeshRoute), sorted by kind, namespace and name: those of the kinds the API server
// serves whose status has an entry of this mesh's controller (routes.ControllerName) saying
// ResolvedRefs=True for the route's current generation, each with the parents that entry of ours
// Accepted. What of a route the data plane leaves out (a regular expression, filters) is logged
// once per generation.
func (v *View) Routes(ctx context.Context) ([]model.Route, error) {
	var out []model.Route
	seen := map[string]bool{}
	for _, k := range v.routeKinds {
		list := k.newList()
		// No deep copy: Read and MeshRoute copy what they keep.
		if err := v.cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing %ss: %w", k.kind, err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("listing %ss: %w", k.kind, err)
		}
		for _, obj := range items {
			route, parents, ok := routes.Read(obj)
			if !ok {
				continue
			}
			carried, ok := routes.MeshRoute(route, *parents)
			if !ok {
				continue
			}
			seen[routeKey(route)] = true
			v.noteUncarried(ctx, route)
			out = append(out, carried)
		}
	}
	v.forgetNotes(seen)
	slices.SortFunc(out, func(a, b model.Route) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

func routeKey(r routes.Route) string { return string(r.Kind) + " " + r.Namespace + "/" + r.Name }

// noteUncarried logs what of a carried route the data plane leaves out, once per generation.
func (v *View) noteUncarried(ctx context.Context, r routes.Route) {
	notes := r.Uncarried()
	if len(notes) == 0 {
		return
	}
	key := routeKey(r)
	v.mu.Lock()
	defer v.mu.Unlock()
	if g, ok := v.noted[key]; ok && g == r.Generation {
		return
	}
	v.noted[key] = r.Generation
	log.FromContext(ctx).Info("A route's data plane leaves part of it out", "route", key, "generation", r.Generation, "uncarried", notes)
}

// forgetNotes drops the logged generations of routes no longer carried.
func (v *View) forgetNotes(carried map[string]bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for key := range v.noted {
		if !carried[key] {
			delete(v.noted, key)
		}
	}
}

// slimRoute keeps of a route of any of the four kinds its key, generation and spec, and of its
// status only this controller's entries, each condition reduced to its type, status and
// observedGeneration (what MeshRoute reads; a message may be 32 KiB). Labels, annotations (a
// client-side apply's last-applied copy doubles the object), managed fields, owner references
// and other controllers' entries go. Anything that is not a route (a tombstone) passes unchanged.
func slimRoute(obj any) (any, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, nil
	}
	_, parents, ok := routes.Read(o)
	if !ok {
		return obj, nil
	}
	ours := make([]gwapiv1.RouteParentStatus, 0, 1)
	for _, p := range *parents {
		if p.ControllerName != routes.ControllerName {
			continue
		}
		kept := make([]metav1.Condition, len(p.Conditions))
		for i, c := range p.Conditions {
			kept[i] = metav1.Condition{Type: c.Type, Status: c.Status, ObservedGeneration: c.ObservedGeneration}
		}
		ours = append(ours, gwapiv1.RouteParentStatus{ParentRef: p.ParentRef, ControllerName: p.ControllerName, Conditions: kept})
	}
	*parents = ours
	o.SetLabels(nil)
	o.SetAnnotations(nil)
	o.SetManagedFields(nil)
	o.SetOwnerReferences(nil)
	o.SetFinalizers(nil)
	return o, nil
}

// slimMeta is the part of an object's metadata the view keeps: its key, its resourceVersion (the
// cache's), its UID and its creation time (the model's votes break ties on it).
func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
}

// slimMeshEndpoint keeps of a MeshEndpoint what the model and the xDS builder read: the spec's
// service, node, address, ports, weight, health check, metadata and locality; the status's health
// and whether it is Verified (the condition's type, status and observed generation only: its
// message may be 32 KiB).
// Labels, annotations, managed fields, owner references, the pod's name and UID, the ports'
// summary and the Registered condition go. Anything that is not a MeshEndpoint (a tombstone)
// passes unchanged.
func slimMeshEndpoint(obj any) (any, error) {
	ep, ok := obj.(*meshv1alpha1.MeshEndpoint)
	if !ok {
		return obj, nil
	}
	slim := &meshv1alpha1.MeshEndpoint{ObjectMeta: slimMeta(&ep.ObjectMeta), Spec: meshv1alpha1.MeshEndpointSpec{
		ServiceName: ep.Spec.ServiceName, NodeName: ep.Spec.NodeName, Address: ep.Spec.Address,
		PrimaryPort: ep.Spec.PrimaryPort, Ports: ep.Spec.Ports, Weight: ep.Spec.Weight,
		HealthCheck: ep.Spec.HealthCheck, Metadata: ep.Spec.Metadata, Locality: ep.Spec.Locality,
	}, Status: meshv1alpha1.MeshEndpointStatus{Health: ep.Status.Health}}
	if c := apimeta.FindStatusCondition(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified); c != nil {
		slim.Status.Conditions = []metav1.Condition{{Type: c.Type, Status: c.Status, ObservedGeneration: c.ObservedGeneration}}
	}
	return slim, nil
}

// slimMeshService keeps of a MeshService its VIP, identity and ports (number and protocol); the
// dial surface, names, conditions and the rest go.
func slimMeshService(obj any) (any, error) {
	ms, ok := obj.(*meshv1alpha1.MeshService)
	if !ok {
		return obj, nil
	}
	slim := &meshv1alpha1.MeshService{ObjectMeta: slimMeta(&ms.ObjectMeta), Status: meshv1alpha1.MeshServiceStatus{
		VIP: ms.Status.VIP, Identity: ms.Status.Identity, PrimaryPort: ms.Status.PrimaryPort,
	}}
	if len(ms.Status.Ports) > 0 {
		slim.Status.Ports = make([]meshv1alpha1.ServicePort, len(ms.Status.Ports))
		for i, p := range ms.Status.Ports {
			slim.Status.Ports[i] = meshv1alpha1.ServicePort{Port: p.Port, Protocol: p.Protocol, Endpoints: p.Endpoints}
		}
	}
	return slim, nil
}

// The transforms are client-go's: fail the build if their type drifts.
var (
	_ toolscache.TransformFunc = slimMeshEndpoint
	_ toolscache.TransformFunc = slimRoute
)
