// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
)

// The two-phase drain of a terminating pod's endpoint:
//
//	phase 1, at the deletion request: health Draining (no new requests; open connections go on);
//	phase 2, 1 s before the kubelet sends SIGTERM: health Unhealthy, so clients close their
//	now idle connections before the application exits.
//
// The kubelet sends SIGTERM once the containers' preStop hooks are done. Only the native sleep
// action has a known length; an exec or HTTP preStop counts as none (its length is unknown, and
// closing early is the safe side). SIGTERM is then the deletion request plus the longest preStop
// sleep, that window capped at 2 s short of the grace period.
const (
	// closeLead is how long before SIGTERM phase 2 starts.
	closeLead = time.Second
	// graceReserve is how much of the grace period the preStop window never takes.
	graceReserve = 2 * time.Second
	// defaultGrace is the API's default terminationGracePeriodSeconds.
	defaultGrace = 30 * time.Second
)

// closeAt is when pod's endpoint enters drain phase 2, and whether it does at once (no window:
// no preStop sleep, a force delete, or a window of at most closeLead).
//
// The deletion request time is the pod's deletionTimestamp minus its deletionGracePeriodSeconds,
// not the moment this agent saw the deletion: it is the same after an agent restart, it does not
// move with watch lag (a late observation would close late, after SIGTERM), and the API server
// stores it in whole seconds, earlier than the real request by less than a second: closing
// slightly early is the safe side. The grace period is the deletion's (kubectl delete
// --grace-period overrides the spec's terminationGracePeriodSeconds; the kubelet uses it).
func closeAt(pod *corev1.Pod) (at time.Time, now bool) {
	grace := defaultGrace
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	window := min(preStopSleep(pod), grace-graceReserve)
	if pod.DeletionTimestamp == nil || window <= closeLead {
		return time.Time{}, true
	}
	request := pod.DeletionTimestamp.Add(-grace)
	return request.Add(window - closeLead), false
}

// preStopSleep is the longest native preStop sleep among pod's containers (zero without one).
func preStopSleep(pod *corev1.Pod) time.Duration {
	var longest time.Duration
	for _, c := range pod.Spec.Containers {
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			longest = max(longest, time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second)
		}
	}
	return longest
}

// drain writes the drain phase that terminating pod's endpoint ep is in (ep may be nil: nothing
// to drain) and arms the pod's timer for phase 2 when it is still ahead.
func (r *PodReconciler) drain(ctx context.Context, pod *corev1.Pod, ep *meshv1alpha1.MeshEndpoint) error {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if ep == nil {
		r.drainTimers().cancel(key)
		return nil
	}
	now := r.clock().Now()
	at, closeNow := closeAt(pod)
	// Once in phase 2, always: a clock stepped back (NTP) must not make the endpoint Draining again.
	closing := closeNow || !now.Before(at) || isTrue(ep, meshv1alpha1.EndpointConditionClosing)
	if closing {
		r.drainTimers().cancel(key)
	} else {
		r.drainTimers().arm(r.clock(), key, at, at.Sub(now))
	}

	desired := ep.Status.DeepCopy()
	stamp := metav1.NewTime(now)
	desired.Conditions = conditions.Set(desired.Conditions, metav1.Condition{Type: meshv1alpha1.EndpointConditionDraining,
		Status: metav1.ConditionTrue, Reason: meshv1alpha1.EndpointReasonDeletionRequested,
		Message: "the pod is being deleted: no new requests"}, ep.Generation, stamp)
	desired.Health = meshv1alpha1.HealthDraining
	if closing {
		desired.Conditions = conditions.Set(desired.Conditions, metav1.Condition{Type: meshv1alpha1.EndpointConditionClosing,
			Status: metav1.ConditionTrue, Reason: meshv1alpha1.EndpointReasonSigtermDue,
			Message: "SIGTERM is due within 1s: clients close their connections"}, ep.Generation, stamp)
		desired.Health = meshv1alpha1.HealthUnhealthy
	}
	if desired.Health == ep.Status.Health && conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionDraining) != nil &&
		(!closing || conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionClosing) != nil) {
		return nil
	}
	return r.patchStatus(ctx, ep, func(s *meshv1alpha1.MeshEndpointStatus) { *s = *desired })
}

// inDrain reports whether ep's pod is terminating (the prober leaves such an endpoint alone).
func inDrain(ep *meshv1alpha1.MeshEndpoint) bool {
	if ep.Status.Health == meshv1alpha1.HealthDraining || ep.DeletionTimestamp != nil {
		return true
	}
	return isTrue(ep, meshv1alpha1.EndpointConditionDraining)
}

// isTrue reports whether ep's condition typ is True.
func isTrue(ep *meshv1alpha1.MeshEndpoint, typ string) bool {
	c := conditions.Find(ep.Status.Conditions, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}

func (r *PodReconciler) drainTimers() *drainTimers {
	r.timersOnce.Do(func() { r.timers = newDrainTimers() })
	return r.timers
}

func (r *PodReconciler) clock() clock.WithDelayedExecution {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// drainTimers holds one timer per terminating pod whose phase 2 is ahead. A timer that fires
// sends the pod's key to the reconciler (fire), which writes phase 2.
type drainTimers struct {
	mu     sync.Mutex
	timers map[types.NamespacedName]armed
	fire   chan event.GenericEvent
}

type armed struct {
	at    time.Time
	timer clock.Timer
}

func newDrainTimers() *drainTimers {
	return &drainTimers{timers: map[types.NamespacedName]armed{}, fire: make(chan event.GenericEvent)}
}

// arm sets key's timer to fire after d (for phase 2 at at), unless it is set for at already.
func (t *drainTimers) arm(c clock.WithDelayedExecution, key types.NamespacedName, at time.Time, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.timers[key]; ok {
		if a.at.Equal(at) {
			return
		}
		a.timer.Stop()
	}
	t.timers[key] = armed{at: at, timer: c.AfterFunc(d, func() {
		// A goroutine of its own: a fake clock runs this under its lock (arm takes t.mu, then
		// that lock), and the controller may not be reading yet.
		go func() {
			t.mu.Lock()
			if a, ok := t.timers[key]; ok && a.at.Equal(at) {
				delete(t.timers, key)
			}
			t.mu.Unlock()
			t.fire <- event.GenericEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
		}()
	})}
}

// cancel stops key's timer, if any.
func (t *drainTimers) cancel(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.timers[key]; ok {
		a.timer.Stop()
		delete(t.timers, key)
	}
}
