// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// isolatedNamespace creates the namespace the package's controller does not see, if no test did.
func isolatedNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: isolatedFromTheController}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return isolatedFromTheController
}

// seenVersions records the resourceVersion of each object the view's subscribers last saw (gone
// once deleted), by "<kind> <namespace>/<name>".
type seenVersions struct {
	mu   sync.Mutex
	seen map[string]string
}

func (s *seenVersions) record(obj any, deleted bool) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	key := fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName())
	s.mu.Lock()
	defer s.mu.Unlock()
	if deleted {
		delete(s.seen, key)
	} else {
		s.seen[key] = o.GetResourceVersion()
	}
}

func (s *seenVersions) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.record(obj, false) },
		UpdateFunc: func(_, obj any) { s.record(obj, false) },
		DeleteFunc: func(obj any) { s.record(obj, true) },
	}
}

// TestViewServicesFollowEndpoints: after every change of MeshEndpoints (a health flip, a verdict
// gone stale, a delete, a delete and a recreate under another service, spec.serviceName being
// immutable), once the view's subscribers have seen the API server's objects, Services equals
// model.BuildServices over a fresh list of the same objects: the index regroups every service a
// change touches. The test writes the verdicts itself, where the controller does not.
func TestViewServicesFollowEndpoints(t *testing.T) {
	ctx := testContext(t)
	ns := isolatedNamespace(t, ctx)
	for _, name := range []string{"idx-a", "idx-b"} {
		ms := &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := env.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ms) })
	}
	node := "other-" + ns // no agent serves it: only the test writes these endpoints
	// verified creates an endpoint of service, Verified and of the given health.
	verified := func(name, service string, health meshv1alpha1.Health) *meshEndpoint {
		t.Helper()
		ep := createTCPEndpoint(t, ctx, ns, name, service, node, newPodIP(), 9000)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ep) })
		setStatus(t, ctx, ep, health, ep.Generation)
		return ep
	}

	v, err := newView(env.Config, env.Scheme, true, allRouteKinds)
	if err != nil {
		t.Fatal(err)
	}
	seen := &seenVersions{seen: map[string]string{}}
	if err := v.onChange(ctx, seen.handler()); err != nil {
		t.Fatal(err)
	}
	e1 := verified("idx-1", "idx-a", meshv1alpha1.HealthHealthy)
	e2 := verified("idx-2", "idx-a", meshv1alpha1.HealthHealthy)
	e3 := verified("idx-3", "idx-b", meshv1alpha1.HealthHealthy)
	runView(t, v)

	agrees := func(step string) {
		t.Helper()
		testenv.Eventually(t, step+": the view's Services equal BuildServices over the API server's objects", func() error {
			var services meshv1alpha1.MeshServiceList
			var endpoints meshv1alpha1.MeshEndpointList
			if err := env.Client.List(ctx, &services, client.InNamespace(ns)); err != nil {
				return err
			}
			if err := env.Client.List(ctx, &endpoints, client.InNamespace(ns)); err != nil {
				return err
			}
			// The subscribers are called once Services sees a change (endpointIndex): having
			// seen every listed version, and nothing else, Services is of these objects.
			want := map[string]string{}
			for _, o := range services.Items {
				want[fmt.Sprintf("%T %s/%s", &o, ns, o.Name)] = o.ResourceVersion
			}
			for _, o := range endpoints.Items {
				want[fmt.Sprintf("%T %s/%s", &o, ns, o.Name)] = o.ResourceVersion
			}
			seen.mu.Lock()
			got := maps.Clone(seen.seen)
			seen.mu.Unlock()
			maps.DeleteFunc(got, func(key, _ string) bool { return !strings.Contains(key, " "+ns+"/") })
			if !maps.Equal(got, want) {
				return fmt.Errorf("the view has seen %v, the API server lists %v", got, want)
			}
			built, err := v.Services(ctx)
			if err != nil {
				return err
			}
			var mine []model.Service
			for _, svc := range built {
				if svc.Namespace == ns {
					mine = append(mine, svc)
				}
			}
			if fresh := model.BuildServices(services.Items, endpoints.Items); !reflect.DeepEqual(mine, fresh) {
				return fmt.Errorf("the view's services\n%+v\ndiffer from BuildServices'\n%+v", mine, fresh)
			}
			return nil
		})
	}
	agrees("three endpoints")

	setStatus(t, ctx, e1, meshv1alpha1.HealthUnhealthy, e1.Generation)
	agrees("idx-1 turned Unhealthy")

	// A spec change leaves the verdict a generation behind: idx-2 is no longer verified.
	e2.Spec.Address = newPodIP()
	if err := env.Client.Update(ctx, e2); err != nil {
		t.Fatal(err)
	}
	agrees("idx-2's verdict stale")

	if err := env.Client.Delete(ctx, e1); err != nil {
		t.Fatal(err)
	}
	agrees("idx-1 deleted")

	// spec.serviceName is immutable: an endpoint moves by a delete and a recreate.
	if err := env.Client.Delete(ctx, e3); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyGone(t, env.Client, e3)
	verified("idx-3", "idx-a", meshv1alpha1.HealthHealthy)
	agrees("idx-3 recreated in idx-a")
}

// setStatus writes ep's health and a Verified=True verdict for generation observed.
func setStatus(t *testing.T, ctx context.Context, ep *meshEndpoint, health meshv1alpha1.Health, observed int64) {
	t.Helper()
	patch := client.MergeFrom(ep.DeepCopy())
	ep.Status.Health = health
	ep.Status.Conditions = []metav1.Condition{{Type: meshv1alpha1.EndpointConditionVerified, Status: metav1.ConditionTrue,
		Reason: meshv1alpha1.EndpointReasonPodMatches, Message: "the test's verdict", ObservedGeneration: observed,
		LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}}
	if err := env.Client.Status().Patch(ctx, ep, patch); err != nil {
		t.Fatal(err)
	}
}

// TestEndpointIndexMoves: an update that changes an endpoint's spec.serviceName moves it from one
// group to the other, both rebuilt, and a tombstone without the object still takes it out (no API
// server: the API makes serviceName immutable, but the index does not rely on it).
func TestEndpointIndexMoves(t *testing.T) {
	services, endpoints := []meshv1alpha1.MeshService{}, []*meshEndpoint{}
	for i, name := range []string{"a", "b"} {
		services = append(services, meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, ResourceVersion: "1"}})
		for j := range 2 {
			ep := fullEndpoint(fmt.Sprintf("%s-%d", name, j), metav1.Now().Rfc3339Copy(), meshv1alpha1.HealthHealthy, metav1.ConditionTrue)
			ep.Spec.ServiceName, ep.ResourceVersion = name, fmt.Sprint(10+2*i+j)
			endpoints = append(endpoints, &ep)
		}
	}
	x := newEndpointIndex()
	var sb model.ServiceBuilder
	agrees := func(step string) {
		t.Helper()
		var list []meshv1alpha1.MeshEndpoint
		for _, ep := range endpoints {
			list = append(list, *ep)
		}
		if got, want := x.build(&sb, services), model.BuildServices(services, list); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the index's services\n%+v\ndiffer from BuildServices'\n%+v", step, got, want)
		}
	}
	for _, ep := range endpoints {
		x.OnAdd(ep, true)
	}
	agrees("four endpoints")

	moved := endpoints[0].DeepCopy()
	moved.Spec.ServiceName, moved.ResourceVersion = "b", "20"
	x.OnUpdate(endpoints[0], moved)
	endpoints[0] = moved
	agrees("a-0 moved to b")

	x.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "shop/b-1"})
	endpoints = endpoints[:3]
	agrees("b-1 deleted, its tombstone without the object")
}
