// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// endpointIndex keeps the view's MeshEndpoints grouped by service, fed by the MeshEndpoint
// informer's events, so that a rebuild regroups only the services whose endpoints changed: at
// ten thousand endpoints, grouping, sorting and fingerprinting all of them on every rebuild was
// most of its time. It holds the cache's own objects: read, never modified.
//
// It is also the MeshEndpoint informer's only handler of the view's subscribers (onChange): an
// informer calls each of its handlers on a goroutine of its own, so a rebuild triggered by
// another handler could read the index before this one had applied the change, and no later
// event would correct it. Forwarded after the change is applied, the trigger never runs ahead.
type endpointIndex struct {
	mu sync.Mutex
	// groups are each service's endpoints by name; serviceOf is the service of each endpoint, so
	// that a delete (whose tombstone may not carry the object) and a move find its group.
	groups    map[model.ServiceKey]map[string]*meshv1alpha1.MeshEndpoint
	serviceOf map[types.NamespacedName]string
	// dirty are the services whose endpoints changed since refresh last read them.
	dirty map[model.ServiceKey]struct{}
	// subscribers are called after each event is applied (onChange).
	subscribers []toolscache.ResourceEventHandler

	// members are each service's Members as of the last refresh; refreshMu serializes refreshes
	// and the builds that read members (mu alone guards the rest, so that the informer's events
	// wait for a refresh's bookkeeping only, never for a build).
	refreshMu sync.Mutex
	members   map[model.ServiceKey]model.Members
}

func newEndpointIndex() *endpointIndex {
	return &endpointIndex{
		groups:    map[model.ServiceKey]map[string]*meshv1alpha1.MeshEndpoint{},
		serviceOf: map[types.NamespacedName]string{},
		dirty:     map[model.ServiceKey]struct{}{},
		members:   map[model.ServiceKey]model.Members{},
	}
}

// OnAdd, OnUpdate and OnDelete make the index an informer's handler.
func (x *endpointIndex) OnAdd(obj any, isInInitialList bool) {
	x.apply(obj, false)
	for _, h := range x.subscribed() {
		h.OnAdd(obj, isInInitialList)
	}
}

func (x *endpointIndex) OnUpdate(oldObj, newObj any) {
	x.apply(newObj, false)
	for _, h := range x.subscribed() {
		h.OnUpdate(oldObj, newObj)
	}
}

func (x *endpointIndex) OnDelete(obj any) {
	x.apply(obj, true)
	for _, h := range x.subscribed() {
		h.OnDelete(obj)
	}
}

// subscribe adds h to the handlers called after each event; the events before are not replayed.
func (x *endpointIndex) subscribe(h toolscache.ResourceEventHandler) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.subscribers = append(x.subscribers, h)
}

func (x *endpointIndex) subscribed() []toolscache.ResourceEventHandler {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.subscribers // only appended to: the slice read stays as it is
}

// apply puts the endpoint obj in its service's group, out of any other (its spec.serviceName may
// have changed), or takes it out when deleted; each group it leaves or joins is marked dirty.
func (x *endpointIndex) apply(obj any, deleted bool) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		ns, name, err := toolscache.SplitMetaNamespaceKey(tombstone.Key)
		if err != nil {
			return
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		x.remove(types.NamespacedName{Namespace: ns, Name: name})
		return
	}
	ep, ok := obj.(*meshv1alpha1.MeshEndpoint)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: ep.Namespace, Name: ep.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	if deleted {
		x.remove(key)
		return
	}
	svc := model.ServiceKey{Namespace: ep.Namespace, Name: ep.Spec.ServiceName}
	if service, ok := x.serviceOf[key]; ok && service != ep.Spec.ServiceName {
		x.remove(key)
	} else if ok && x.groups[svc][ep.Name] == ep {
		return // a resync: the same object
	}
	group := x.groups[svc]
	if group == nil {
		group = map[string]*meshv1alpha1.MeshEndpoint{}
		x.groups[svc] = group
	}
	group[ep.Name] = ep
	x.serviceOf[key] = ep.Spec.ServiceName
	x.dirty[svc] = struct{}{}
}

// remove takes the endpoint out of its group, if indexed. x.mu is held.
func (x *endpointIndex) remove(key types.NamespacedName) {
	service, ok := x.serviceOf[key]
	if !ok {
		return
	}
	delete(x.serviceOf, key)
	svc := model.ServiceKey{Namespace: key.Namespace, Name: service}
	delete(x.groups[svc], key.Name)
	if len(x.groups[svc]) == 0 {
		delete(x.groups, svc)
	}
	x.dirty[svc] = struct{}{}
}

// build is b.BuildMembers of services over the index, the Members of the services changed since
// the last build computed again (model.NewMembers), the others' reused.
func (x *endpointIndex) build(b *model.ServiceBuilder, services []meshv1alpha1.MeshService) []model.Service {
	x.refreshMu.Lock()
	defer x.refreshMu.Unlock()
	changed := x.takeChanged()
	for svc, endpoints := range changed {
		if len(endpoints) == 0 {
			delete(x.members, svc)
			continue
		}
		x.members[svc] = model.NewMembers(endpoints)
	}
	return b.BuildMembers(services, x.members)
}

// takeChanged are the endpoints of each dirty service (none for a service that has none left),
// which are dirty no more.
func (x *endpointIndex) takeChanged() map[model.ServiceKey][]*meshv1alpha1.MeshEndpoint {
	x.mu.Lock()
	defer x.mu.Unlock()
	changed := make(map[model.ServiceKey][]*meshv1alpha1.MeshEndpoint, len(x.dirty))
	for svc := range x.dirty {
		var endpoints []*meshv1alpha1.MeshEndpoint
		for _, ep := range x.groups[svc] {
			endpoints = append(endpoints, ep)
		}
		changed[svc] = endpoints
	}
	clear(x.dirty)
	return changed
}

var _ toolscache.ResourceEventHandler = &endpointIndex{}
