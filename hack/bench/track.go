// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// tracker watches MeshServices, Services and MeshEndpoints and knows, at each event, how many
// services are converged: the MeshService's status counts exactly the expected endpoints, all
// ready, its VIP is the generated Service's ClusterIP, Ready and ServiceReady are True for its
// generation, and the service's MeshEndpoints are exactly the expected ones, each Verified and
// Healthy. It records when the count last reached every service: the convergence time, read
// from watch events (no polling load on the API server).
type tracker struct {
	mu        sync.Mutex
	want      map[types.NamespacedName]map[string]bool // service → names of its expected endpoints
	status    map[types.NamespacedName]meshStatus
	clusterIP map[types.NamespacedName]string
	endpoints map[types.NamespacedName]map[string]endpointFacts
	converged map[types.NamespacedName]bool
	count     int
	allAt     time.Time // when count last reached len(want); zero while it has not
	changed   chan struct{}
}

// meshStatus is what convergence reads of a MeshService.
type meshStatus struct {
	ready, total     int32
	vip              string
	readyTrue        bool
	serviceReadyTrue bool
}

// endpointFacts is what convergence reads of a MeshEndpoint.
type endpointFacts struct {
	verified, healthy bool
}

func newTracker() *tracker {
	return &tracker{
		want:      map[types.NamespacedName]map[string]bool{},
		status:    map[types.NamespacedName]meshStatus{},
		clusterIP: map[types.NamespacedName]string{},
		endpoints: map[types.NamespacedName]map[string]endpointFacts{},
		converged: map[types.NamespacedName]bool{},
		changed:   make(chan struct{}, 1),
	}
}

// start runs informers on the three kinds, as the admin, until ctx ends; it returns once they
// have synced.
func (t *tracker) start(ctx context.Context, cfg *rest.Config) error {
	c, err := cache.New(cfg, cache.Options{Scheme: testenv.NewScheme(), DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{&meshv1alpha1.MeshService{}, &corev1.Service{}, &meshv1alpha1.MeshEndpoint{}} {
		informer, err := c.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { t.observe(o, false) },
			UpdateFunc: func(_, o any) { t.observe(o, false) },
			DeleteFunc: func(o any) {
				if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
					o = tomb.Obj
				}
				t.observe(o, true)
			},
		}); err != nil {
			return err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("the tracker's informers did not sync")
	}
	return nil
}

// expect sets the services and their endpoints that count from now on, and re-evaluates all.
func (t *tracker) expect(want map[types.NamespacedName][]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.want = map[types.NamespacedName]map[string]bool{}
	for svc, names := range want {
		set := map[string]bool{}
		for _, n := range names {
			set[n] = true
		}
		t.want[svc] = set
	}
	t.converged, t.count, t.allAt = map[types.NamespacedName]bool{}, 0, time.Time{}
	for svc := range t.want {
		t.evaluate(svc, time.Now())
	}
}

// observe records one object's event and re-evaluates its service.
func (t *tracker) observe(o any, deleted bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var svc types.NamespacedName
	switch obj := o.(type) {
	case *meshv1alpha1.MeshService:
		svc = client.ObjectKeyFromObject(obj)
		if deleted {
			delete(t.status, svc)
		} else {
			t.status[svc] = statusOf(obj)
		}
	case *corev1.Service:
		svc = client.ObjectKeyFromObject(obj)
		if deleted {
			delete(t.clusterIP, svc)
		} else {
			t.clusterIP[svc] = obj.Spec.ClusterIP
		}
	case *meshv1alpha1.MeshEndpoint:
		svc = types.NamespacedName{Namespace: obj.Namespace, Name: obj.Spec.ServiceName}
		eps := t.endpoints[svc]
		if eps == nil {
			eps = map[string]endpointFacts{}
			t.endpoints[svc] = eps
		}
		if deleted {
			delete(eps, obj.Name)
		} else {
			verified := conditions.Find(obj.Status.Conditions, meshv1alpha1.EndpointConditionVerified)
			eps[obj.Name] = endpointFacts{verified: verified != nil && verified.Status == metav1.ConditionTrue,
				healthy: obj.Status.Health == meshv1alpha1.HealthHealthy}
		}
	default:
		return
	}
	if _, ok := t.want[svc]; ok {
		t.evaluate(svc, now)
	}
}

func statusOf(ms *meshv1alpha1.MeshService) meshStatus {
	isTrue := func(typ string) bool {
		c := conditions.Find(ms.Status.Conditions, typ)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == ms.Generation
	}
	return meshStatus{ready: ms.Status.Endpoints.Ready, total: ms.Status.Endpoints.Total, vip: ms.Status.VIP,
		readyTrue: isTrue(meshv1alpha1.ServiceConditionReady), serviceReadyTrue: isTrue(meshv1alpha1.ServiceConditionServiceReady)}
}

// evaluate re-decides one service (t.mu held).
func (t *tracker) evaluate(svc types.NamespacedName, now time.Time) {
	done := t.problem(svc) == ""
	if done == t.converged[svc] {
		return
	}
	t.converged[svc] = done
	if done {
		t.count++
	} else {
		t.count--
	}
	if t.count == len(t.want) {
		t.allAt = now
	} else {
		t.allAt = time.Time{}
	}
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// problem says why svc is not converged ("" when it is; t.mu held).
func (t *tracker) problem(svc types.NamespacedName) string {
	want := t.want[svc]
	st, ok := t.status[svc]
	switch {
	case !ok:
		return "no MeshService"
	case st.total != int32(len(want)) || st.ready != int32(len(want)):
		return fmt.Sprintf("status counts %d/%d endpoints, want %d/%d", st.ready, st.total, len(want), len(want))
	case st.vip == "" || st.vip != t.clusterIP[svc]:
		return fmt.Sprintf("status.vip %q, Service's ClusterIP %q", st.vip, t.clusterIP[svc])
	case !st.readyTrue || !st.serviceReadyTrue:
		return "Ready or ServiceReady not True for the current generation"
	}
	eps := t.endpoints[svc]
	if len(eps) != len(want) {
		return fmt.Sprintf("%d MeshEndpoints, want %d", len(eps), len(want))
	}
	for name, facts := range eps {
		switch {
		case !want[name]:
			return "unexpected MeshEndpoint " + name
		case !facts.verified:
			return "MeshEndpoint " + name + " not Verified"
		case !facts.healthy:
			return "MeshEndpoint " + name + " not Healthy"
		}
	}
	return ""
}

// wait blocks until every expected service is converged, and returns when that happened; after
// timeout it returns an error naming a few services that are not, and why.
func (t *tracker) wait(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		t.mu.Lock()
		at, count, total := t.allAt, t.count, len(t.want)
		t.mu.Unlock()
		if !at.IsZero() {
			return at, nil
		}
		select {
		case <-t.changed:
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-deadline:
			return time.Time{}, fmt.Errorf("%d of %d services converged after %s; for example: %s", count, total, timeout, t.examples(5))
		}
	}
}

// examples names up to n services that are not converged, with the reason.
func (t *tracker) examples(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, svc := range slices.SortedFunc(maps.Keys(t.want), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
		if p := t.problem(svc); p != "" {
			out = append(out, svc.String()+": "+p)
			if len(out) == n {
				break
			}
		}
	}
	return strings.Join(out, "; ")
}
