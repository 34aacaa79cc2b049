// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// batched is h with the requests it enqueues held back for window, but for the updates urgent
// reports (nil: none). The queue keeps one entry per service, due at the earliest time asked, so
// every change of a service's inputs that arrives within window of the first is reconciled, and
// written, once: a rollout's endpoint going, its replacement coming, Pending then Healthy, cost
// one status write, not four (hack/bench, churn). A request already due stays due. An urgent
// update is due at once: one that may make a Verified=True stale (an endpoint's new spec, a
// pod's new address) is not left standing for a window. A window of 0 returns h unchanged.
func batched(h handler.EventHandler, window time.Duration, urgent func(event.UpdateEvent) bool) handler.EventHandler {
	if window <= 0 {
		return h
	}
	return batchingHandler{inner: h, window: window, urgent: urgent}
}

type batchingHandler struct {
	inner  handler.EventHandler
	window time.Duration
	urgent func(event.UpdateEvent) bool
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (b batchingHandler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	b.inner.Create(ctx, e, b.hold(q))
}

func (b batchingHandler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	if b.urgent != nil && b.urgent(e) {
		b.inner.Update(ctx, e, q)
		return
	}
	b.inner.Update(ctx, e, b.hold(q))
}

func (b batchingHandler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	b.inner.Delete(ctx, e, b.hold(q))
}

func (b batchingHandler) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	b.inner.Generic(ctx, e, b.hold(q))
}

// newGeneration is urgent for an object whose spec changed (its generation moved).
func newGeneration(e event.UpdateEvent) bool {
	return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration()
}

// addressedPod is urgent for a pod that had an address (the pod watch passes on only the
// updates that change what verification reads): an endpoint may stand verified on what changed.
// A pod getting its first IP is not: no endpoint could be verified against it before.
func addressedPod(e event.UpdateEvent) bool {
	old, ok := e.ObjectOld.(*corev1.Pod)
	return !ok || old.Status.PodIP != "" || len(old.Status.PodIPs) > 0
}

// hold wraps q so that adds wait b.window. controller-runtime's default queue is a priority
// queue, whose handlers add with options (the initial list at a low priority): those keep
// their priority and wait too.
func (b batchingHandler) hold(q queue) queue {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return heldPriorityQueue{PriorityQueue: pq, window: b.window}
	}
	return heldQueue{queue: q, window: b.window}
}

type heldQueue struct {
	queue
	window time.Duration
}

func (q heldQueue) Add(item reconcile.Request) { q.AddAfter(item, q.window) }

type heldPriorityQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	window time.Duration
}

func (q heldPriorityQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q heldPriorityQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	o.After = max(o.After, q.window)
	q.PriorityQueue.AddWithOpts(o, items...)
}
