// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// FieldManager is the field manager of everything the agent writes.
const FieldManager = "aether-agent"

// Reasons of the Warning Event on a refused pod (and of its endpoint's Registered=False).
const (
	// ReasonInvalidAnnotation: the pod's annotations do not parse.
	ReasonInvalidAnnotation = meshv1alpha1.EndpointReasonInvalidAnnotation
	// ReasonDefaultServiceAccount: the pod runs as the `default` ServiceAccount.
	ReasonDefaultServiceAccount = meshv1alpha1.EndpointReasonDefaultServiceAccount
)

// PodReconciler keeps one MeshEndpoint per managed pod of its node.
type PodReconciler struct {
	client.Client
	// NodeName is the node this agent serves; its cache holds only that node's pods.
	NodeName string
	// Ignored are the namespaces the mesh never takes: their pods are never registered.
	Ignored registration.IgnoredNamespaces
	// Health are the prober's options: a new endpoint's first status write carries the answer of
	// a first probe when one success makes it Healthy (firstProbe). The zero value probes nothing
	// at registration.
	Health HealthOptions

	// times, when set, records when a first probe made an endpoint Healthy.
	times *EndpointTimes

	// controllerName names the controller in logs and metrics; "agent-pods" when empty.
	controllerName string

	// Clock times drain phase 2 (tests step a fake one); the real clock when nil.
	Clock clock.WithDelayedExecution

	// timers fire each terminating pod's drain phase 2 (drain.go); made on first use, so a
	// reconciler built without SetupWithManager works too.
	timers     *drainTimers
	timersOnce sync.Once

	// uds says which pods serve on a Unix socket (the first probe goes there); nil: none.
	uds *udsResolver

	// apiReader reads past the cache: a new endpoint's first status write that lost to the
	// controller's verdict is retried on the endpoint as the API server holds it, which the cache
	// may not hold yet. Nil: the Client.
	apiReader client.Reader

	// refused maps each refused pod (namespace/name) to the name of the Event that said why, so
	// a resync neither repeats the Event nor counts it twice. An entry goes with its pod.
	refused sync.Map // types.NamespacedName → string
}

// podWorkers is how many of the node's pods are reconciled at once (never one pod twice at once).
// A registration waits on the API server twice and on the pod's first probe: one at a time, a
// node taking fifty new pods in a rollout (hack/bench, latency) registered the last one minutes
// after it started, on a busy API server.
const podWorkers = 4

// SetupWithManager registers the reconciler: pods (the cache holds only this node's), this
// node's MeshEndpoints (so one whose pod vanished while the agent was down is found on start),
// and the Node (its topology labels are every endpoint's locality).
func (r *PodReconciler) SetupWithManager(mgr ctrl.Manager) error {
	podOfEndpoint := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	allPods := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var pods corev1.PodList
		if err := r.List(ctx, &pods); err != nil {
			log.FromContext(ctx).Error(err, "listing this node's pods")
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(pods.Items))
		for _, p := range pods.Items {
			if p.Spec.NodeName == r.NodeName { // explicit, whatever the client's view holds
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
			}
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(cmp.Or(r.controllerName, "agent-pods")).
		WithOptions(controller.Options{MaxConcurrentReconciles: podWorkers}).
		For(&corev1.Pod{}).
		Watches(&meshv1alpha1.MeshEndpoint{}, podOfEndpoint).
		Watches(&corev1.Node{}, allPods, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WatchesRawSource(source.Channel(r.drainTimers().fire, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// Reconcile registers, refreshes, drains or removes one pod's MeshEndpoint. A write that lost
// an expected race (see classify) is retried quietly: it is not an error.
func (r *PodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	err := r.reconcile(ctx, req)
	switch classify(err) {
	case raceGone:
		log.FromContext(ctx).V(1).Info("Nothing left to write: the object or its namespace is going away", "reason", err.Error())
		return ctrl.Result{}, nil
	case raceStale:
		log.FromContext(ctx).V(1).Info("Retrying from a fresh read: the write raced another writer", "reason", err.Error(), "after", staleRetry)
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	return ctrl.Result{}, err
}

func (r *PodReconciler) reconcile(ctx context.Context, req ctrl.Request) error {
	logger := log.FromContext(ctx)
	ep := &meshv1alpha1.MeshEndpoint{}
	if err := r.Get(ctx, req.NamespacedName, ep); apierrors.IsNotFound(err) {
		ep = nil
	} else if err != nil {
		return err
	}
	// Explicit node filters, here and on the pod below: the manager's cache holds only this
	// node's objects, but a reconcile must not depend on it (a wider view, a direct client).
	if ep != nil && ep.Spec.NodeName != r.NodeName {
		return nil // another node's: not ours to touch
	}

	pod := &corev1.Pod{}
	if err := r.Get(ctx, req.NamespacedName, pod); apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return err
	}
	// Gone, moved off the mesh, or replaced by a new pod of the same name: the endpoint goes.
	if pod == nil || pod.Spec.NodeName != r.NodeName || !r.Ignored.InMesh(pod) || (ep != nil && ep.Spec.PodUID != string(pod.UID)) {
		r.refused.Delete(req.NamespacedName)
		r.drainTimers().cancel(req.NamespacedName)
		if ep != nil {
			logger.Info("Removing MeshEndpoint: its pod is gone or no longer managed")
			return client.IgnoreNotFound(r.Delete(ctx, ep, client.Preconditions{UID: &ep.UID}))
		}
		return nil
	}

	if pod.DeletionTimestamp != nil {
		return r.drain(ctx, pod, ep)
	}

	node := &corev1.Node{}
	if err := r.Get(ctx, types.NamespacedName{Name: r.NodeName}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		node = nil // no locality until the Node is seen
	}
	// The webhook denies such a pod; one admitted while it was down is refused here, in the
	// same words: every problem at once (registration.Problems), its annotations' too.
	if err := registration.CheckServiceAccount(pod); err != nil {
		_, problems := registration.Problems(pod)
		return r.refuse(ctx, pod, ep, defaultServiceAccount(problems))
	}
	spec, err := registration.Registration(pod, node)
	var invalid portspec.ErrorList
	switch {
	case errors.As(err, &invalid):
		return r.refuse(ctx, pod, ep, invalidAnnotations(invalid))
	case errors.Is(err, registration.ErrNoAddress):
		return nil // registered when the pod gets its IP (a pod update)
	case err != nil:
		return err
	}

	registered := metav1.Condition{Type: meshv1alpha1.EndpointConditionRegistered, Status: metav1.ConditionTrue,
		Reason: meshv1alpha1.EndpointReasonRegistered, Message: "the MeshEndpoint matches the pod's annotations"}
	switch {
	case ep == nil:
		if ep, err = r.create(ctx, pod, spec); err != nil {
			return err
		}
		logger.Info("Registered MeshEndpoint", "ports", spec.PortsSummary)
		r.refused.Delete(req.NamespacedName)
		return r.firstStatus(ctx, ep, registered)
	case !equality.Semantic.DeepEqual(ep.Spec, spec) || !ownedBy(ep, pod):
		if err := r.replace(ctx, ep, pod, spec); err != nil {
			return err
		}
		logger.Info("Rewrote MeshEndpoint: its spec differed from the pod's registration", "ports", spec.PortsSummary)
		return nil
	}
	r.refused.Delete(req.NamespacedName)
	return r.setStatus(ctx, ep, registered)
}

// firstStatus writes a new endpoint's status at once, on the object the create returned. Left to
// the create's own watch event, it waited a watch round trip, and the controller's verdict on the
// new endpoint could land first: the write, from a cache without that verdict, then lost (a
// conflict) and was retried a second later. The verdict can still land between the create and
// this write (the first probe takes up to firstProbeTimeout): the write is then made again on the
// endpoint read from the API server (the cache may not hold it yet), as the controller retries
// its verdicts. Left to the next reconcile, it would find no endpoint in a lagging cache and
// create it again, failing until the cache caught up.
func (r *PodReconciler) firstStatus(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, registered metav1.Condition) error {
	reader := r.apiReader
	if reader == nil {
		reader = r.Client
	}
	attempts := 0
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempts++; attempts > 1 {
			fresh := &meshv1alpha1.MeshEndpoint{}
			if err := reader.Get(ctx, client.ObjectKeyFromObject(ep), fresh); err != nil {
				return err
			}
			ep = fresh
		}
		return r.setStatus(ctx, ep, registered)
	})
}

// create writes pod's new MeshEndpoint, owned by the pod, and returns it as the API server stored it.
func (r *PodReconciler) create(ctx context.Context, pod *corev1.Pod, spec meshv1alpha1.MeshEndpointSpec) (*meshv1alpha1.MeshEndpoint, error) {
	ep := &meshv1alpha1.MeshEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, OwnerReferences: []metav1.OwnerReference{podOwner(pod)}},
		Spec:       spec,
	}
	return ep, r.Create(ctx, ep, client.FieldOwner(FieldManager))
}

// replace overwrites ep's whole spec with the pod's registration and makes the pod its
// controller. It is an update guarded by ep's resourceVersion, not a server-side apply: an
// apply manages only the fields the agent names, so a port or a metadata key another writer
// added would stay forever; an update replaces the spec as a whole, whoever wrote which field.
// A concurrent write makes it fail with a conflict, retried from a fresh read.
func (r *PodReconciler) replace(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, pod *corev1.Pod, spec meshv1alpha1.MeshEndpointSpec) error {
	ep = ep.DeepCopy()
	ep.Spec = spec
	ep.OwnerReferences = withController(ep.OwnerReferences, podOwner(pod))
	return r.Update(ctx, ep, client.FieldOwner(FieldManager))
}

// firstProbeTimeout bounds the probe a new endpoint's first status write waits for: the pod
// controller has one worker, and a pod whose address does not answer (a timeout, not a refusal)
// must not hold up its neighbours' registration; its health then comes from the prober's round.
const firstProbeTimeout = 200 * time.Millisecond

// setStatus sets the Registered condition, its message cut to the API's limit (and the health of
// a new endpoint: Healthy when one success is enough and a first probe answers within
// firstProbeTimeout, else Pending for the prober to decide), writing only when something changes.
// One write then makes a new endpoint Registered and Healthy, where the prober's round would
// have made it a second write, up to a probe interval later. Conditions of other writers are kept
// as they are.
func (r *PodReconciler) setStatus(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, registered metav1.Condition) error {
	desired := ep.Status.DeepCopy()
	var healthyAt time.Time
	if desired.Health == "" {
		desired.Health = meshv1alpha1.HealthPending
		if r.Health.SuccessThreshold == 1 && !inDrain(ep) && probeEndpoint(ctx, ep, min(r.Health.Timeout, firstProbeTimeout), r.uds.endpointPath(ctx, ep)) {
			desired.Health, healthyAt = meshv1alpha1.HealthHealthy, time.Now()
		}
	}
	desired.ObservedGeneration = ep.Generation
	registered.Message = conditions.Truncate(registered.Message, conditions.MaxConditionMessage)
	// Set, not Merge: Verified is the controller's condition on the same object; keep it.
	desired.Conditions = conditions.Set(ep.Status.Conditions, registered, ep.Generation,
		metav1.NewTime(time.Now().Truncate(time.Second)))
	if equality.Semantic.DeepEqual(&ep.Status, desired) {
		return nil
	}
	if err := r.patchStatus(ctx, ep, func(s *meshv1alpha1.MeshEndpointStatus) { *s = *desired }); err != nil {
		return err
	}
	if !healthyAt.IsZero() {
		r.times.healthy(ep.Namespace+"/"+ep.Name, healthyAt)
	}
	return nil
}

// patchStatus changes ep's status with an optimistic lock, so it never overwrites a concurrent
// health change it did not see (a conflict is retried from a fresh read).
func (r *PodReconciler) patchStatus(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, change func(*meshv1alpha1.MeshEndpointStatus)) error {
	patch := client.MergeFromWithOptions(ep.DeepCopy(), client.MergeFromWithOptimisticLock{})
	change(&ep.Status)
	return r.Status().Patch(ctx, ep, patch)
}

// podOwner is the owner reference that makes pod its MeshEndpoint's controller.
func podOwner(pod *corev1.Pod) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: kindPod, Name: pod.Name, UID: pod.UID, Controller: new(true)}
}

// withController is refs with owner as their one controller: another controller reference
// goes (there can be only one), other owners stay.
func withController(refs []metav1.OwnerReference, owner metav1.OwnerReference) []metav1.OwnerReference {
	out := []metav1.OwnerReference{owner}
	for _, ref := range refs {
		if ref.UID != owner.UID && (ref.Controller == nil || !*ref.Controller) {
			out = append(out, ref)
		}
	}
	return out
}

func ownedBy(ep *meshv1alpha1.MeshEndpoint, pod *corev1.Pod) bool {
	for _, ref := range ep.OwnerReferences {
		if ref.UID == pod.UID && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}
