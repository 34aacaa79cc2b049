// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// View is the agent's read-only view of the whole cluster's mesh, for its xDS builder (DESIGN
// section 8: caches → model): every MeshService and MeshEndpoint of every namespace, in a cache
// of its own, separate from the manager's node-scoped one (CacheOptions), so that registration
// and probing never see another node's objects through it. Its transforms keep only what the
// model reads. Services is the thin lister; everything after it is pure (internal/model).
//
// A View is a manager Runnable (Options.View); the xDS publisher (Options.XDS) reads it.
type View struct {
	cache cache.Cache
	// held counts the objects of each kind in the cache, by its informers' adds and deletes; the
	// gauge aether_agent_view_objects adds them up over the running views (one, in an agent).
	held map[string]*atomic.Int64
}

// NewView builds a View over cfg's API server; its cache starts with the manager it is added to.
func NewView(cfg *rest.Config, scheme *runtime.Scheme) (*View, error) {
	return newView(cfg, scheme, true)
}

// newView is NewView, with the transforms off when slim is false (the benchmark's baseline).
func newView(cfg *rest.Config, scheme *runtime.Scheme, slim bool) (*View, error) {
	services, endpoints := cache.ByObject{}, cache.ByObject{}
	if slim {
		services.Transform, endpoints.Transform = slimMeshService, slimMeshEndpoint
	}
	// One entry per type: ByObject is keyed by pointer, so a second &MeshEndpoint{} would be a
	// second entry, and which of the two the cache applies would be left to map order.
	c, err := cache.New(cfg, cache.Options{
		Scheme: scheme,
		// Services lists only these two kinds: any other read is a mistake, not a new informer.
		ReaderFailOnMissingInformer: true,
		ByObject: map[client.Object]cache.ByObject{
			&meshv1alpha1.MeshService{}:  services,
			&meshv1alpha1.MeshEndpoint{}: endpoints,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("the agent's cluster view: %w", err)
	}
	v := &View{cache: c, held: map[string]*atomic.Int64{}}
	// Registered now, so both informers start (and sync) with the cache, not on the first read.
	for kind, obj := range map[string]client.Object{"MeshService": &meshv1alpha1.MeshService{}, "MeshEndpoint": &meshv1alpha1.MeshEndpoint{}} {
		informer, err := c.GetInformer(context.Background(), obj)
		if err != nil {
			return nil, fmt.Errorf("the agent's cluster view of %T: %w", obj, err)
		}
		held := &atomic.Int64{}
		v.held[kind] = held
		count := func(delta int64) { held.Add(delta); viewObjects.WithLabelValues(kind).Add(float64(delta)) }
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { count(1) },
			DeleteFunc: func(any) { count(-1) }, // a tombstone too: the object is gone either way
		}); err != nil {
			return nil, fmt.Errorf("counting the agent's cluster view of %T: %w", obj, err)
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

// onChange registers handler on the view's informers: every change to a MeshService or a
// MeshEndpoint of the cluster reaches it (the xDS publisher's rebuild trigger).
func (v *View) onChange(ctx context.Context, handler toolscache.ResourceEventHandler) error {
	for _, obj := range []client.Object{&meshv1alpha1.MeshService{}, &meshv1alpha1.MeshEndpoint{}} {
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

// WaitForCacheSync blocks until the view holds every object the API server listed, or ctx ends.
func (v *View) WaitForCacheSync(ctx context.Context) bool { return v.cache.WaitForCacheSync(ctx) }

// Services is the mesh as the model sees it: one Service per MeshService, sorted by namespace and
// name, built (model.BuildService) from the MeshService's VIP and identity and its verified
// endpoints (Verified=True, the controller's verdict that a real pod stands behind them). An
// endpoint whose service has no MeshService is left out: without the service's identity, no
// client could pin its certificate.
func (v *View) Services(ctx context.Context) ([]model.Service, error) {
	var services meshv1alpha1.MeshServiceList
	if err := v.cache.List(ctx, &services, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing MeshServices: %w", err)
	}
	var endpoints meshv1alpha1.MeshEndpointList
	// No deep copy: BuildService reads the endpoints and copies what it keeps.
	if err := v.cache.List(ctx, &endpoints, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing MeshEndpoints: %w", err)
	}
	byService := map[types.NamespacedName][]meshv1alpha1.MeshEndpoint{}
	for _, ep := range endpoints.Items {
		if apimeta.IsStatusConditionTrue(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified) {
			key := types.NamespacedName{Namespace: ep.Namespace, Name: ep.Spec.ServiceName}
			byService[key] = append(byService[key], ep)
		}
	}
	out := make([]model.Service, 0, len(services.Items))
	for _, ms := range services.Items {
		out = append(out, model.BuildService(model.Input{Namespace: ms.Namespace, Name: ms.Name,
			Identity: ms.Status.Identity, VIP: ms.Status.VIP,
			Endpoints: byService[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}]}))
	}
	slices.SortFunc(out, func(a, b model.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// slimMeta is the part of an object's metadata the view keeps: its key, its resourceVersion (the
// cache's), its UID and its creation time (the model's votes break ties on it).
func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
}

// slimMeshEndpoint keeps of a MeshEndpoint what the model and the xDS builder read: the spec's
// service, node, address, ports, weight, health check, metadata and locality; the status's health
// and whether it is Verified (the condition's type and status only: its message may be 32 KiB).
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
		slim.Status.Conditions = []metav1.Condition{{Type: c.Type, Status: c.Status}}
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
var _ toolscache.TransformFunc = slimMeshEndpoint
