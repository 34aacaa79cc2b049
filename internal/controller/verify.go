// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
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
//
// It deletes a MeshEndpoint that holds the name of another node's pod (removeSquatter): no agent
// may (the node-authority policy keeps each to its own node's endpoints), and while it stands,
// that pod cannot get its own.
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshendpoints,verbs=delete

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
// cache), after recording each one's Verified condition where it changed, and deleting each that
// squats another node's pod's name (removeSquatter). A record that keeps losing to concurrent
// writes fails the reconcile, which is requeued: a verdict is never dropped. The records of one
// service are written concurrently, at most verdictWrites at once: a new service's endpoints
// all await theirs, and written one after another they cost the reconcile one API round trip
// each (a thousand new services of ten endpoints took the manager eight minutes on a loaded API
// server).
func (r *MeshServiceReconciler) verified(ctx context.Context, endpoints []meshv1alpha1.MeshEndpoint) ([]meshv1alpha1.MeshEndpoint, error) {
	verdicts := make([]metav1.Condition, len(endpoints))
	judged := make([]bool, len(endpoints))
	for i := range endpoints {
		ep := &endpoints[i]
		if removed, err := r.removeSquatter(ctx, ep); err != nil {
			return nil, err
		} else if removed {
			continue
		}
		verdict, err := EndpointVerdict(ctx, r, ep, r.Ignored)
		if err != nil {
			return nil, err
		}
		verdicts[i], judged[i] = verdict, true
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(verdictWrites)
	for i := range endpoints {
		if judged[i] {
			g.Go(func() error { return r.recordVerdict(gctx, &endpoints[i], verdicts[i]) })
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	kept := make([]meshv1alpha1.MeshEndpoint, 0, len(endpoints))
	for i := range endpoints {
		if judged[i] && verdicts[i].Status == metav1.ConditionTrue {
			kept = append(kept, endpoints[i])
		}
	}
	return kept, nil
}

// verdictWrites is how many Verified records of one service's endpoints are written at once.
const verdictWrites = 8

// removeSquatter deletes ep when it holds the name of a managed pod bound to another node
// (registration.Squats): the agent of the pod's node could neither create the pod's endpoint
// nor remove this one, so the pod would stay out of the mesh for as long as it stood. The
// cached pod only raises the suspicion; the pod read from the API server confirms it (the cache
// may still hold an earlier pod of the same name, on the node ep rightly names), and the delete
// is conditional on ep's UID and resourceVersion, so only the endpoint judged goes. removed is
// true when ep is deleted or no longer there: either way it counts for nothing. A Warning Event
// on the pod and a log line name the node the endpoint claimed.
func (r *MeshServiceReconciler) removeSquatter(ctx context.Context, ep *meshv1alpha1.MeshEndpoint) (removed bool, err error) {
	if r.Ignored.Ignores(ep.Namespace) || ep.DeletionTimestamp != nil {
		return false, nil
	}
	key := client.ObjectKeyFromObject(ep) // the pod the endpoint's name claims
	pod := &corev1.Pod{}
	if err := r.Get(ctx, key, pod); apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if !registration.Squats(ep, pod) {
		return false, nil
	}
	if err := r.apiReader().Get(ctx, key, pod); apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if !registration.Squats(ep, pod) {
		return false, nil
	}
	err = r.Delete(ctx, ep, client.Preconditions{UID: &ep.UID, ResourceVersion: &ep.ResourceVersion})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsConflict(err):
		return false, nil // rewritten meanwhile: judged again on its own watch event
	case err != nil:
		return false, err
	}
	squattersRemoved.Inc()
	log.FromContext(ctx).Info("Deleted a MeshEndpoint holding the name of another node's pod", "endpoint", ep.Name,
		"claimedNode", ep.Spec.NodeName, "claimedPodUID", ep.Spec.PodUID, "podNode", pod.Spec.NodeName, "podUID", pod.UID)
	if r.Recorder != nil {
		r.Recorder.Eventf(pod, ep, corev1.EventTypeWarning, meshv1alpha1.EndpointReasonNameSquatted, "Delete",
			"MeshEndpoint %s/%s named node %s (pod UID %s) while this pod runs on node %s: deleted, so that node %s's agent registers this pod",
			ep.Namespace, ep.Name, ep.Spec.NodeName, ep.Spec.PodUID, pod.Spec.NodeName, pod.Spec.NodeName)
	}
	return true, nil
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
// announces a flip with an Event on the endpoint (Warning when it is not verified). A conflict
// is retried from the endpoint read anew from the API server (the cache may not have the winning
// write yet), as long as its spec is the one judged (same generation); a newer spec's own watch
// event brings the reconcile that judges it. Conflicts on every attempt return the conflict,
// which requeues the reconcile.
func (r *MeshServiceReconciler) recordVerdict(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, verdict metav1.Condition) error {
	verdict.Message = conditions.Truncate(verdict.Message, conditions.MaxConditionMessage)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	current, attempts := ep, 0
	var written *meshv1alpha1.MeshEndpoint
	var before, after []metav1.Condition
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempts++; attempts > 1 {
			fresh := &meshv1alpha1.MeshEndpoint{}
			if err := r.apiReader().Get(ctx, client.ObjectKeyFromObject(ep), fresh); err != nil {
				return err
			}
			if fresh.UID != ep.UID || fresh.Generation != ep.Generation {
				return errJudgedAnotherSpec
			}
			current = fresh
		}
		before = current.Status.Conditions
		after = conditions.Set(before, verdict, current.Generation, now)
		if equality.Semantic.DeepEqual(before, after) {
			return nil
		}
		updated := current.DeepCopy()
		patch := client.MergeFromWithOptions(current.DeepCopy(), client.MergeFromWithOptimisticLock{})
		updated.Status.Conditions = after
		if err := r.Status().Patch(ctx, updated, patch); err != nil {
			return err
		}
		written = updated
		return nil
	})
	if attempts > 1 {
		verdictConflicts.Add(float64(attempts - 1))
	}
	switch {
	case errors.Is(err, errJudgedAnotherSpec) || apierrors.IsNotFound(err):
		return nil // changed or gone meanwhile: its watch brings the next reconcile
	case err != nil:
		return err
	case written == nil:
		return nil // already recorded (by the time of a retry, the same verdict stood)
	}
	if verdict.Status == metav1.ConditionFalse {
		log.FromContext(ctx).Info("MeshEndpoint not verified: not counted", "endpoint", ep.Name, "reason", verdict.Reason, "message", verdict.Message)
	}
	r.announceVerdict(written, before, after)
	return nil
}

// errJudgedAnotherSpec stops recordVerdict's retries when the endpoint's spec changed since the
// verdict was reached.
var errJudgedAnotherSpec = errors.New("the MeshEndpoint's spec changed since it was judged")

// apiReader reads from the API server, around the cache (SetupWithManager sets the manager's).
func (r *MeshServiceReconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
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
	// Trim keeps the phase for the SPIRE registrar (a finished pod leaves its node); the verdict
	// does not read it, and every pod's start would otherwise re-verify its endpoint.
	a.Status.Phase, b.Status.Phase = "", ""
	return !equality.Semantic.DeepEqual(a, b)
}

// ownedByItsPod reports whether ep is controlled by the pod it names (by UID), as the agent
// writes it: such an endpoint whose pod is gone is the agent's, on its way out, not a forgery
// (an owner that does not exist gets its dependents garbage-collected).
func ownedByItsPod(ep *meshv1alpha1.MeshEndpoint) bool {
	ref := metav1.GetControllerOfNoCopy(ep)
	return ref != nil && ref.APIVersion == "v1" && ref.Kind == "Pod" && string(ref.UID) == ep.Spec.PodUID
}
