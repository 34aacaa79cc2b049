// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"testing"
	"time"

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
// endpoint's new generation and a change to an addressed pod do not; a window of 0 holds nothing
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
	byKey := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	for qname, newQueue := range queues {
		for name, tc := range cases {
			t.Run(qname+"/"+name, func(t *testing.T) {
				q := newQueue()
				defer q.ShutDown()
				tc.send(batched(byKey, tc.window, urgent), q)
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
