// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// TestBatchedHoldsAllButUrgentUpdates drives the batching handler with controller-runtime's own
// queues (the priority queue managers use by default, and the plain rate-limited one): with an
// hour's window nothing it holds can come due during the test, so a request ready at once is one
// the handler did not hold. Creates, deletes, status-only updates and a pod's first IP wait; an
// endpoint's new generation, an endpoint turning Healthy while it awaits its verdict, a change to
// an addressed pod and the initial list's creates do not;
// a window of 0 holds nothing
// (the negative control: the same events, all due at once).
func TestBatchedHoldsAllButUrgentUpdates(t *testing.T) {
	ctx := context.Background()
	ep := func(generation int64) *meshv1alpha1.MeshEndpoint {
		return &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ledger-0", Generation: generation}}
	}
	queues := map[string]func() queue{
		"priority queue": func() queue { return priorityqueue.New[reconcile.Request]("batching-test") },
		"rate-limited queue": func() queue {
			return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		},
	}
	cases := map[string]struct {
		window time.Duration
		send   func(h handler.EventHandler, q queue)
		due    bool
	}{
		"create held": {window: time.Hour, send: func(h handler.EventHandler, q queue) {
			h.Create(ctx, event.CreateEvent{Object: ep(1)}, q)
		}},
		"initial list due at once": {window: time.Hour, due: true, send: func(h handler.EventHandler, q queue) {
			h.Create(ctx, event.CreateEvent{Object: ep(1), IsInInitialList: true}, q)
		}},
		"delete held": {window: time.Hour, send: func(h handler.EventHandler, q queue) {
			h.Delete(ctx, event.DeleteEvent{Object: ep(1)}, q)
		}},
		"status-only update held": {window: time.Hour, send: func(h handler.EventHandler, q queue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: ep(1), ObjectNew: ep(1)}, q)
		}},
		"new generation due at once": {window: time.Hour, due: true, send: func(h handler.EventHandler, q queue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: ep(1), ObjectNew: ep(2)}, q)
		}},
		"held, then urgent: due at once": {window: time.Hour, due: true, send: func(h handler.EventHandler, q queue) {
			h.Create(ctx, event.CreateEvent{Object: ep(1)}, q)
			h.Update(ctx, event.UpdateEvent{ObjectOld: ep(1), ObjectNew: ep(2)}, q)
		}},
		"turns Healthy awaiting its verdict: due at once": {window: time.Hour, due: true, send: func(h handler.EventHandler, q queue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: ep(1), ObjectNew: withStatus(ep(1), meshv1alpha1.HealthHealthy, nil)}, q)
		}},
		"turns Healthy with a verdict of an older generation: due at once": {window: time.Hour, due: true, send: func(h handler.EventHandler, q queue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: ep(2), ObjectNew: withStatus(ep(2), meshv1alpha1.HealthHealthy, verifiedAt(1))}, q)
		}},
		"turns Healthy, verified: held": {window: time.Hour, send: func(h handler.EventHandler, q queue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: ep(1), ObjectNew: withStatus(ep(1), meshv1alpha1.HealthHealthy, verifiedAt(1))}, q)
		}},
		"Pending awaiting its verdict: held": {window: time.Hour, send: func(h handler.EventHandler, q queue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: ep(1), ObjectNew: withStatus(ep(1), meshv1alpha1.HealthPending, nil)}, q)
		}},
		"no window: create due at once": {window: 0, due: true, send: func(h handler.EventHandler, q queue) {
			h.Create(ctx, event.CreateEvent{Object: ep(1)}, q)
		}},
		"no window: status-only update due at once": {window: 0, due: true, send: func(h handler.EventHandler, q queue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: ep(1), ObjectNew: ep(1)}, q)
		}},
	}
	pod := func(ip string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ledger-0"}, Status: corev1.PodStatus{PodIP: ip}}
	}
	podCases := map[string]struct {
		old, updated *corev1.Pod
		due          bool
	}{
		"pod gets its first IP: held":    {old: pod(""), updated: pod("10.0.0.7")},
		"addressed pod changes: at once": {old: pod("10.0.0.7"), updated: pod("10.0.0.8"), due: true},
	}
	for name, tc := range podCases {
		cases[name] = struct {
			window time.Duration
			send   func(h handler.EventHandler, q queue)
			due    bool
		}{window: time.Hour, due: tc.due, send: func(h handler.EventHandler, q queue) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.updated}, q)
		}}
	}
	// The controller's two urgent rules, each on its kind; requests by the object's key.
	urgent := func(e event.UpdateEvent) bool {
		if _, ok := e.ObjectOld.(*corev1.Pod); ok {
			return addressedPod(e)
		}
		return newGeneration(e)
	}
	prompt := awaitsVerdict
	byKey := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	for qname, newQueue := range queues {
		for name, tc := range cases {
			t.Run(qname+"/"+name, func(t *testing.T) {
				q := newQueue()
				defer q.ShutDown()
				tc.send(batchedPrompt(byKey, newSettling(tc.window), urgent, prompt), q)
				want := 0
				if tc.due {
					want = 1
				}
				if got := q.Len(); got != want {
					t.Errorf("%d requests due, want %d", got, want)
				}
			})
		}
	}
}

// withStatus is ep with health and, if set, a Verified=True verdict.
func withStatus(ep *meshv1alpha1.MeshEndpoint, health meshv1alpha1.Health, verdict *metav1.Condition) *meshv1alpha1.MeshEndpoint {
	ep.Status.Health = health
	if verdict != nil {
		ep.Status.Conditions = []metav1.Condition{*verdict}
	}
	return ep
}

// verifiedAt is a Verified=True condition observed at generation.
func verifiedAt(generation int64) *metav1.Condition {
	return &metav1.Condition{Type: meshv1alpha1.EndpointConditionVerified, Status: metav1.ConditionTrue, ObservedGeneration: generation,
		Reason: "PodMatches"}
}

// TestSettlingWaitsForQuiet: a service is due once its inputs have been quiet for the window, or
// once its first change has waited five windows; an urgent change makes it due at once; a due
// service's batch is closed, and a later change starts the next one. (A clock the test moves: the
// rule is arithmetic on the times of the changes.)
func TestSettlingWaitsForQuiet(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now := start
	at := func(d time.Duration) { now = start.Add(d) }
	s := newSettling(2 * time.Second)
	s.now = func() time.Time { return now }
	svc := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "shop", Name: "ledger"}}
	expect := func(when string, want time.Duration) {
		t.Helper()
		if got := s.wait(svc); got != want {
			t.Errorf("%s: wait %s, want %s", when, got, want)
		}
	}

	// The gauge of held-back services counts a batch from its first change until it closes.
	base := testutil.ToFloat64(settlingServices)
	settlingIs := func(when string, want float64) {
		t.Helper()
		if got := testutil.ToFloat64(settlingServices) - base; got != want {
			t.Errorf("%s: aether_controller_settling_services moved by %v, want %v", when, got, want)
		}
	}

	expect("no change", 0)
	settlingIs("no change", 0)
	at(0)
	s.changed(svc, false)
	at(1500 * time.Millisecond)
	s.changed(svc, false)
	settlingIs("two changes of one service", 1)
	at(2 * time.Second)
	expect("2s after the first change, 0.5s after the last", 1500*time.Millisecond)
	settlingIs("still held back", 1)
	at(3500 * time.Millisecond)
	expect("quiet for the window", 0)
	settlingIs("the batch closed", 0)
	expect("the batch is closed", 0)
	settlingIs("no batch to close", 0)

	// A trickle: a change every second, never quiet for 2s; due five windows after its first.
	for i := range 12 {
		at(10*time.Second + time.Duration(i)*time.Second)
		s.changed(svc, false)
	}
	at(21 * time.Second)
	expect("a trickle, 11s after its first change", 0)

	at(30 * time.Second)
	s.changed(svc, false)
	s.changed(svc, true)
	expect("urgent", 0)
	settlingIs("an urgent batch closed", 0)

	if negative := newSettling(0); negative.wait(svc) != 0 || batched(nil, negative, nil) != nil {
		t.Errorf("a window of 0 holds something back")
	}
}
