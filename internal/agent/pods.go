// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// FieldManager is the field manager of everything the agent applies.
const FieldManager = "aether-agent"

// ReasonInvalidAnnotation is the reason of the Warning Event on a refused pod.
const ReasonInvalidAnnotation = meshv1alpha1.EndpointReasonInvalidAnnotation

// PodReconciler keeps one MeshEndpoint per managed pod of its node.
type PodReconciler struct {
	client.Client
	// NodeName is the node this agent serves; its cache holds only that node's pods.
	NodeName string
	// Recorder emits the Warning Event on a refused pod.
	Recorder recorder.EventRecorder

	// refused remembers the error each refused pod was last refused with, so a resync neither
	// repeats its Event nor counts it twice.
	refused sync.Map // types.UID → string
}

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
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("agent-pods").
		For(&corev1.Pod{}).
		Watches(&meshv1alpha1.MeshEndpoint{}, podOfEndpoint).
		Watches(&corev1.Node{}, allPods, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(r)
}

// Reconcile registers, refreshes, drains or removes one pod's MeshEndpoint.
func (r *PodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	ep := &meshv1alpha1.MeshEndpoint{}
	if err := r.Get(ctx, req.NamespacedName, ep); apierrors.IsNotFound(err) {
		ep = nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if ep != nil && ep.Spec.NodeName != r.NodeName {
		return ctrl.Result{}, nil // another node's: not ours to touch
	}

	pod := &corev1.Pod{}
	if err := r.Get(ctx, req.NamespacedName, pod); apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	// Gone, moved off the mesh, or replaced by a new pod of the same name: the endpoint goes.
	if pod == nil || pod.Spec.NodeName != r.NodeName || !Managed(pod) || (ep != nil && ep.Spec.PodUID != string(pod.UID)) {
		if ep != nil {
			logger.Info("Removing MeshEndpoint: its pod is gone or no longer managed")
			return ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, ep, client.Preconditions{UID: &ep.UID}))
		}
		return ctrl.Result{}, nil
	}

	if pod.DeletionTimestamp != nil {
		if ep != nil && ep.Status.Health != meshv1alpha1.HealthDraining {
			return ctrl.Result{}, r.patchStatus(ctx, ep, func(s *meshv1alpha1.MeshEndpointStatus) { s.Health = meshv1alpha1.HealthDraining })
		}
		return ctrl.Result{}, nil
	}

	node := &corev1.Node{}
	if err := r.Get(ctx, types.NamespacedName{Name: r.NodeName}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		node = nil // no locality until the Node is seen
	}
	spec, err := registration.Registration(pod, node)
	var invalid portspec.ErrorList
	switch {
	case errors.As(err, &invalid):
		return ctrl.Result{}, r.refuse(ctx, pod, ep, invalid)
	case errors.Is(err, registration.ErrNoAddress):
		return ctrl.Result{}, nil // registered when the pod gets its IP (a pod update)
	case err != nil:
		return ctrl.Result{}, err
	}

	if ep == nil || !equality.Semantic.DeepEqual(ep.Spec, spec) || !ownedBy(ep, pod) {
		if err := r.apply(ctx, pod, spec); err != nil {
			return ctrl.Result{}, err
		}
		if ep == nil {
			logger.Info("Registered MeshEndpoint", "ports", spec.PortsSummary)
		}
		// The MeshEndpoint's own watch brings it back here to set its status.
		return ctrl.Result{}, nil
	}
	r.refused.Delete(pod.UID)
	registered := metav1.Condition{Type: meshv1alpha1.EndpointConditionRegistered, Status: metav1.ConditionTrue,
		Reason: meshv1alpha1.EndpointReasonRegistered, Message: "the MeshEndpoint matches the pod's annotations"}
	return ctrl.Result{}, r.setStatus(ctx, ep, registered)
}

// refuse handles a pod whose annotations do not parse: no new registration, the last valid one
// (if any) stays in service with Registered=False, and the pod gets a Warning Event.
func (r *PodReconciler) refuse(ctx context.Context, pod *corev1.Pod, ep *meshv1alpha1.MeshEndpoint, invalid portspec.ErrorList) error {
	// Said once per error; the status below is written until it lands (a conflict with the
	// controller's Verified write is retried; setStatus writes only what differs).
	if last, seen := r.refused.Load(pod.UID); !seen || last != invalid.Error() {
		r.refused.Store(pod.UID, invalid.Error())
		log.FromContext(ctx).Info("Refusing pod: its annotations do not parse", "error", invalid.Error())
		refusedPods.WithLabelValues(string(invalid[0].Kind)).Inc()
		if r.Recorder != nil {
			r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonInvalidAnnotation, "Register", "%s", invalid.Error())
		}
	}
	if ep == nil {
		return nil
	}
	return r.setStatus(ctx, ep, metav1.Condition{Type: meshv1alpha1.EndpointConditionRegistered, Status: metav1.ConditionFalse,
		Reason:  meshv1alpha1.EndpointReasonInvalidAnnotation,
		Message: "the pod's annotations no longer parse; the last valid registration stays in service: " + invalid.Error()})
}

// apply writes the MeshEndpoint's spec by server-side apply, owned by the pod.
func (r *PodReconciler) apply(ctx context.Context, pod *corev1.Pod, spec meshv1alpha1.MeshEndpointSpec) error {
	specMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": specMap}}
	u.SetAPIVersion(meshv1alpha1.GroupVersion.String())
	u.SetKind("MeshEndpoint")
	u.SetNamespace(pod.Namespace)
	u.SetName(pod.Name)
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: new(true)}})
	return r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership)
}

// setStatus sets the Registered condition (and Pending health on a new endpoint), writing only
// when something changes.
func (r *PodReconciler) setStatus(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, registered metav1.Condition) error {
	desired := ep.Status.DeepCopy()
	if desired.Health == "" {
		desired.Health = meshv1alpha1.HealthPending
	}
	desired.ObservedGeneration = ep.Generation
	// Set, not Merge: Verified is the controller's condition on the same object; keep it.
	desired.Conditions = conditions.Set(ep.Status.Conditions, registered, ep.Generation,
		metav1.NewTime(time.Now().Truncate(time.Second)))
	if equality.Semantic.DeepEqual(&ep.Status, desired) {
		return nil
	}
	return r.patchStatus(ctx, ep, func(s *meshv1alpha1.MeshEndpointStatus) { *s = *desired })
}

// patchStatus changes ep's status with an optimistic lock, so it never overwrites a concurrent
// health change it did not see (a conflict is retried by the next reconcile).
func (r *PodReconciler) patchStatus(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, change func(*meshv1alpha1.MeshEndpointStatus)) error {
	patch := client.MergeFromWithOptions(ep.DeepCopy(), client.MergeFromWithOptimisticLock{})
	change(&ep.Status)
	return r.Status().Patch(ctx, ep, patch)
}

func ownedBy(ep *meshv1alpha1.MeshEndpoint, pod *corev1.Pod) bool {
	for _, ref := range ep.OwnerReferences {
		if ref.UID == pod.UID && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}
