// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// Verification (DESIGN section 7): a MeshEndpoint joins its MeshService only when it is a real
// pod's, as NodeRestriction lets a kubelet write only its own pods. The node-authority policy
// (config/admission) ties an endpoint's node to the agent's token, nothing more; this check ties
// every other field to a pod. It sits in the aggregation, where no write path (a stolen agent
// token, a tenant granted MeshEndpoint writes, a webhook that is down) can get around it.
//
// The manager reads pods to compare, and reports its verdict on each endpoint's status as the
// Verified condition, next to the agent's Registered (each writer keeps the other's).
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshendpoints/status,verbs=get;update;patch

// CacheOptions are the manager's cache options: of pods it caches only managed ones (label
// aether.io/managed=true), each trimmed to what verification reads (registration.Trim), so the
// manager's memory grows with the mesh's pods, not with the cluster's pods or their specs. Every
// other object is cached without its managedFields (a third of a MeshEndpoint's size, read by
// nothing here; an update without them keeps the server's), but Services: whether a Service is
// the generated one depends on who wrote it (meshservice.IsGenerated).
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Label:     labels.SelectorFromSet(labels.Set{registration.LabelManaged: registration.ManagedValue}),
				Transform: trimPod,
			},
			&corev1.Service{}: {Transform: keepAsIs},
		},
	}
}

// keepAsIs is the transform of a kind whose managedFields are read.
func keepAsIs(obj any) (any, error) { return obj, nil }

// trimPod is the pod cache's transform.
func trimPod(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		return registration.Trim(pod), nil
	}
	return obj, nil
}

// verified returns the endpoints that are real pods' (registration.Verify against the pod
// cache), after recording each one's Verified condition where it changed. The result decides
// this reconcile even when a record is lost to a concurrent write: the endpoint's watch brings
// another reconcile, which records it.
func (r *MeshServiceReconciler) verified(ctx context.Context, endpoints []meshv1alpha1.MeshEndpoint) ([]meshv1alpha1.MeshEndpoint, error) {
	kept := make([]meshv1alpha1.MeshEndpoint, 0, len(endpoints))
	for i := range endpoints {
		ep := &endpoints[i]
		verdict, err := EndpointVerdict(ctx, r, ep, r.Ignored)
		if err != nil {
			return nil, err
		}
		if err := r.recordVerdict(ctx, ep, verdict); err != nil {
			return nil, err
		}
		if verdict.Status == metav1.ConditionTrue {
			kept = append(kept, *ep)
		}
	}
	return kept, nil
}

// EndpointVerdict is ep's Verified condition: registration.Verify against the pod it names, read
// through pods (nil when there is none, or when it is not managed: the manager's cache holds only
// managed pods, and Verify counts any other as none), or IgnoredVerdict in an ignored namespace.
// The reconciler decides membership by it; test/invariant recomputes it against the live pods.
func EndpointVerdict(ctx context.Context, pods client.Reader, ep *meshv1alpha1.MeshEndpoint, ignored registration.IgnoredNamespaces) (metav1.Condition, error) {
	if ignored.Ignores(ep.Namespace) {
		return registration.IgnoredVerdict(ep), nil
	}
	pod := &corev1.Pod{}
	if err := pods.Get(ctx, types.NamespacedName{Namespace: ep.Namespace, Name: ep.Spec.PodName}, pod); apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return metav1.Condition{}, err
	}
	return registration.Verify(ep, pod), nil
}

// recordVerdict writes verdict into ep's status when it differs, with an optimistic lock so it
// never overwrites a status the agent changed meanwhile, keeping the agent's conditions; and
// announces a flip with an Event on the endpoint (Warning when it is not verified).
func (r *MeshServiceReconciler) recordVerdict(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, verdict metav1.Condition) error {
	verdict.Message = conditions.Truncate(verdict.Message, conditions.MaxConditionMessage)
	before := ep.Status.Conditions
	after := conditions.Set(before, verdict, ep.Generation, metav1.NewTime(time.Now().Truncate(time.Second)))
	if equality.Semantic.DeepEqual(before, after) {
		return nil
	}
	updated := ep.DeepCopy()
	patch := client.MergeFromWithOptions(ep.DeepCopy(), client.MergeFromWithOptimisticLock{})
	updated.Status.Conditions = after
	if err := r.Status().Patch(ctx, updated, patch); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // changed or gone meanwhile: its watch brings the next reconcile
	} else if err != nil {
		return err
	}
	if verdict.Status == metav1.ConditionFalse {
		log.FromContext(ctx).Info("MeshEndpoint not verified: not counted", "endpoint", ep.Name, "reason", verdict.Reason, "message", verdict.Message)
	}
	r.announceVerdict(updated, before, after)
	return nil
}

// announceVerdict emits an Event when Verified flipped: Warning into False, Normal back to True.
// An endpoint whose own pod was deleted is no alarm (every scale-down does it, just before the
// agent or the garbage collector removes the endpoint): its condition says PodNotFound, quietly.
func (r *MeshServiceReconciler) announceVerdict(ep *meshv1alpha1.MeshEndpoint, before, after []metav1.Condition) {
	t := meshv1alpha1.EndpointConditionVerified
	if r.Recorder == nil || !conditions.Flipped(before, after, t) {
		return
	}
	c := conditions.Find(after, t)
	note := conditions.Truncate(c.Message, conditions.MaxEventNote)
	switch {
	case c.Status == metav1.ConditionFalse && c.Reason == meshv1alpha1.EndpointReasonPodNotFound && ownedByItsPod(ep):
	case c.Status == metav1.ConditionFalse:
		r.Recorder.Eventf(ep, nil, corev1.EventTypeWarning, c.Reason, "Verify", "%s", note)
	case conditions.Find(before, t) != nil:
		r.Recorder.Eventf(ep, nil, corev1.EventTypeNormal, c.Reason, "Verify", "%s", note)
	}
}

// servicesOfPod maps a pod to the MeshService its endpoint counts in (its ServiceAccount's), and
// to the service of a MeshEndpoint of its name that claims another one, so that a pod's IP
// arriving, its deletion or a change of its annotations re-verifies the endpoints naming it.
func (r *MeshServiceReconciler) servicesOfPod(ctx context.Context, o client.Object) []reconcile.Request {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return nil
	}
	service := registration.ServiceAccount(pod)
	reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: service}}}
	ep := &meshv1alpha1.MeshEndpoint{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(pod), ep); err == nil && ep.Spec.ServiceName != service {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: ep.Spec.ServiceName}})
	}
	return reqs
}

// podWatch is the handler of the pod watch. An update counts only when it changes something
// Verify reads: a pod's status churns (readiness, restarts) far more often than its IPs.
func (r *MeshServiceReconciler) podWatch() handler.EventHandler {
	enqueue := handler.EnqueueRequestsFromMapFunc(r.servicesOfPod)
	return handler.Funcs{
		CreateFunc:  enqueue.Create,
		DeleteFunc:  enqueue.Delete,
		GenericFunc: enqueue.Generic,
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if verificationInputsChanged(e.ObjectOld, e.ObjectNew) {
				enqueue.Update(ctx, e, q)
			}
		},
	}
}

// verificationInputsChanged reports whether two versions of a pod differ in what Verify reads.
func verificationInputsChanged(before, after client.Object) bool {
	old, oldOK := before.(*corev1.Pod)
	updated, newOK := after.(*corev1.Pod)
	if !oldOK || !newOK {
		return true
	}
	a, b := registration.Trim(old), registration.Trim(updated)
	a.ResourceVersion, b.ResourceVersion = "", ""
	return !equality.Semantic.DeepEqual(a, b)
}

// ownedByItsPod reports whether ep is controlled by the pod it names (by UID), as the agent
// writes it: such an endpoint whose pod is gone is the agent's, on its way out, not a forgery
// (an owner that does not exist gets its dependents garbage-collected).
func ownedByItsPod(ep *meshv1alpha1.MeshEndpoint) bool {
	ref := metav1.GetControllerOfNoCopy(ep)
	return ref != nil && ref.APIVersion == "v1" && ref.Kind == "Pod" && string(ref.UID) == ep.Spec.PodUID
}
