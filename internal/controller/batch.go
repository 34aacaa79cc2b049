// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// settling holds a service's reconcile back while its inputs keep changing, so that a burst of
// changes is reconciled, and written, once: a rollout's endpoint going, its replacement coming,
// Pending then Healthy, cost one status write, not four (hack/bench, churn); a service's ten
// endpoints registered by ten agents over a few seconds, one (hack/bench, convergence). A
// service is due once its inputs have been quiet for window, or once its first change has waited
// maxWait: a steady trickle is written every maxWait, never starved. An urgent change (one that
// may leave a Verified=True standing on what changed: an endpoint's new spec, an addressed pod's
// change) is due at once, and so is an event of the initial list (batchingHandler.Create).
type settling struct {
	window, maxWait time.Duration
	now             func() time.Time

	mu      sync.Mutex
	batches map[reconcile.Request]changes
}

// changes is what a service's pending batch has seen.
type changes struct {
	first, last time.Time
	urgent      bool
}

// maxWaitWindows is maxWait in windows.
const maxWaitWindows = 5

// newSettling returns the settling of window, nil (no holding back) when window is not positive.
func newSettling(window time.Duration) *settling {
	if window <= 0 {
		return nil
	}
	return &settling{window: window, maxWait: maxWaitWindows * window, now: time.Now, batches: map[reconcile.Request]changes{}}
}

// changed records a change of req's inputs.
func (s *settling) changed(req reconcile.Request, urgent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c, ok := s.batches[req]
	if !ok {
		c.first = now
		settlingServices.Inc()
	}
	c.last, c.urgent = now, c.urgent || urgent
	s.batches[req] = c
}

// wait is how long req's reconcile must still wait; at 0 the batch is closed, and changes from
// now on start the next one.
func (s *settling) wait(req reconcile.Request) time.Duration {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.batches[req]
	if !ok || c.urgent {
		s.closeBatch(req, ok)
		return 0
	}
	due := c.last.Add(s.window)
	if capped := c.first.Add(s.maxWait); capped.Before(due) {
		due = capped
	}
	if left := due.Sub(s.now()); left > 0 {
		return left
	}
	s.closeBatch(req, true)
	return 0
}

// closeBatch ends req's batch (held: it had one); s.mu is held.
func (s *settling) closeBatch(req reconcile.Request, held bool) {
	if held {
		delete(s.batches, req)
		settlingServices.Dec()
	}
}

// batched is h recording every request it enqueues as a change in s and holding it back for
// s's window, but for the updates urgent reports (nil: none), which are due at once. The queue
// keeps one entry per service, due at the earliest time asked; the reconcile asks s whether the
// service has settled (settling.wait). A nil s returns h unchanged.
func batched(h handler.EventHandler, s *settling, urgent func(event.UpdateEvent) bool) handler.EventHandler {
	return batchedPrompt(h, s, urgent, nil)
}

// batchedPrompt is batched, with the updates prompt reports (nil: none) enqueued at once without
// closing the batch: the reconcile they bring finds the service still settling (settling.wait),
// and does only what cannot wait (MeshServiceReconciler.Reconcile: the endpoints' verdicts).
func batchedPrompt(h handler.EventHandler, s *settling, urgent, prompt func(event.UpdateEvent) bool) handler.EventHandler {
	if s == nil {
		return h
	}
	return batchingHandler{inner: h, settling: s, urgent: urgent, prompt: prompt}
}

type batchingHandler struct {
	inner    handler.EventHandler
	settling *settling
	urgent   func(event.UpdateEvent) bool
	prompt   func(event.UpdateEvent) bool
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// Create holds a new object's event, but not one of the initial list (a manager starting, a new
// leader): every input is there already, and the workers start only once the caches have synced,
// so there is no burst left to merge, only the window to lose.
func (b batchingHandler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	b.inner.Create(ctx, e, b.hold(q, e.IsInInitialList, false))
}

func (b batchingHandler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	urgent := b.urgent != nil && b.urgent(e)
	b.inner.Update(ctx, e, b.hold(q, urgent, !urgent && b.prompt != nil && b.prompt(e)))
}

func (b batchingHandler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	b.inner.Delete(ctx, e, b.hold(q, false, false))
}

func (b batchingHandler) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	b.inner.Generic(ctx, e, b.hold(q, false, false))
}

// newGeneration is urgent for an object whose spec changed (its generation moved).
func newGeneration(e event.UpdateEvent) bool {
	return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration()
}

// awaitsVerdict is prompt for an endpoint that is Healthy and awaits its verdict (no Verified
// condition for its generation): it is routable but for the verdict, so holding the verdict back
// for the window would hold back the endpoint's traffic by that much (hack/bench, latency: a new
// endpoint's first probe answer restarted the window, and the window was most of its time to
// every node's proxy). Prompt, not urgent: the verdicts are recorded at once, the service's
// status still waits for its batch (a scale-up is one status write).
func awaitsVerdict(e event.UpdateEvent) bool {
	ep, ok := e.ObjectNew.(*meshv1alpha1.MeshEndpoint)
	if !ok || ep.Status.Health != meshv1alpha1.HealthHealthy {
		return false
	}
	verdict := apimeta.FindStatusCondition(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified)
	return verdict == nil || verdict.ObservedGeneration != ep.Generation
}

// addressedPod is urgent for a pod that had an address (the pod watch passes on only the
// updates that change what verification reads): an endpoint may stand verified on what changed.
// A pod getting its first IP is not: no endpoint could be verified against it before.
func addressedPod(e event.UpdateEvent) bool {
	old, ok := e.ObjectOld.(*corev1.Pod)
	return !ok || old.Status.PodIP != "" || len(old.Status.PodIPs) > 0
}

// hold wraps q so that each add is recorded as a change and, unless urgent or prompt, waits the
// window (only urgent closes the batch). controller-runtime's default queue is a priority queue,
// whose handlers add with options (the initial list at a low priority): those keep their priority.
func (b batchingHandler) hold(q queue, urgent, prompt bool) queue {
	after := b.settling.window
	if urgent || prompt {
		after = 0
	}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return heldPriorityQueue{PriorityQueue: pq, settling: b.settling, after: after, urgent: urgent}
	}
	return heldQueue{queue: q, settling: b.settling, after: after, urgent: urgent}
}

type heldQueue struct {
	queue
	settling *settling
	after    time.Duration
	urgent   bool
}

func (q heldQueue) Add(item reconcile.Request) {
	q.settling.changed(item, q.urgent)
	if q.after > 0 {
		q.AddAfter(item, q.after)
		return
	}
	q.queue.Add(item)
}

type heldPriorityQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	settling *settling
	after    time.Duration
	urgent   bool
}

func (q heldPriorityQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q heldPriorityQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, item := range items {
		q.settling.changed(item, q.urgent)
	}
	o.After = max(o.After, q.after)
	q.PriorityQueue.AddWithOpts(o, items...)
}
