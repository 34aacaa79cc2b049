// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

// FieldManager is the field manager of everything the controller applies.
const FieldManager = "aether-controller"

// EndpointServiceIndex indexes MeshEndpoints by spec.serviceName.
const EndpointServiceIndex = "spec.serviceName"

// MeshServiceReconciler maintains, for each (namespace, ServiceAccount) that has MeshEndpoints,
// one MeshService and its generated Service.
type MeshServiceReconciler struct {
	client.Client
	// Recorder emits Events on MeshServices.
	Recorder recorder.EventRecorder
	// MeshDomain is the mesh's DNS domain and SPIFFE trust domain.
	MeshDomain string
}

// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshservices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshservices/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshendpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler and the index it lists endpoints by.
func (r *MeshServiceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &meshv1alpha1.MeshEndpoint{}, EndpointServiceIndex,
		func(o client.Object) []string { return []string{o.(*meshv1alpha1.MeshEndpoint).Spec.ServiceName} }); err != nil {
		return err
	}
	byServiceName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.(*meshv1alpha1.MeshEndpoint).Spec.ServiceName}}}
	})
	byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("meshservice").
		For(&meshv1alpha1.MeshService{}).
		Watches(&meshv1alpha1.MeshEndpoint{}, byServiceName).
		// A Service of the same name matters whoever owns it (a user's one is a name conflict), and
		// the ServiceAccount decides the owner reference and deletion.
		Watches(&corev1.Service{}, byName).
		Watches(&corev1.ServiceAccount{}, byName).
		Complete(r)
}

// Reconcile gathers one service's inputs, translates them and writes what differs.
func (r *MeshServiceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)

	ms := &meshv1alpha1.MeshService{}
	if err := r.Get(ctx, req.NamespacedName, ms); apierrors.IsNotFound(err) {
		ms = nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	sa := &corev1.ServiceAccount{}
	if err := r.Get(ctx, req.NamespacedName, sa); apierrors.IsNotFound(err) {
		sa = nil
	} else if err != nil {
		return ctrl.Result{}, err
	}

	// The ServiceAccount this MeshService was owned by is gone: remove the MeshService and its
	// Service, as the garbage collector would (and explicitly, where none runs).
	if ms != nil && ownerSAGone(ms, sa) {
		logger.Info("ServiceAccount deleted: removing its MeshService and Service")
		return ctrl.Result{}, r.remove(ctx, ms)
	}

	var endpoints meshv1alpha1.MeshEndpointList
	if err := r.List(ctx, &endpoints, client.InNamespace(req.Namespace), client.MatchingFields{EndpointServiceIndex: req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	if ms == nil {
		if len(endpoints.Items) == 0 {
			return ctrl.Result{}, nil
		}
		ms = &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
		setSAOwner(ms, sa)
		if err := r.Create(ctx, ms); err != nil {
			return ctrl.Result{}, err
		}
		logger.Info("Created MeshService", "endpoints", len(endpoints.Items))
	} else if sa != nil && !hasOwner(ms, sa.UID) {
		patch := client.MergeFrom(ms.DeepCopy())
		setSAOwner(ms, sa)
		if err := r.Patch(ctx, ms, patch); err != nil {
			return ctrl.Result{}, err
		}
	}

	svc := &corev1.Service{}
	facts := meshservice.ServiceFacts{}
	if err := r.Get(ctx, req.NamespacedName, svc); err == nil {
		facts = meshservice.ServiceFacts{Exists: true, Owned: hasOwner(svc, ms.UID), ClusterIP: svc.Spec.ClusterIP}
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}

	out, err := meshservice.Translate(meshservice.Input{
		Namespace: req.Namespace, Name: req.Name, UID: ms.UID, MeshDomain: r.MeshDomain,
		Endpoints: endpoints.Items, LastStatus: ms.Status, Service: facts,
	})
	if err != nil {
		return ctrl.Result{}, err
	}

	if out.Service != nil && (!facts.Exists || !serviceConverged(svc, out.Service)) {
		if err := r.Apply(ctx, out.Service, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return ctrl.Result{}, fmt.Errorf("applying Service %s: %w", req.NamespacedName, err)
		}
		if err := r.Get(ctx, req.NamespacedName, svc); err != nil {
			return ctrl.Result{}, err
		}
		out.Status.VIP = svc.Spec.ClusterIP
	}

	return ctrl.Result{}, r.writeStatus(ctx, ms, out.Status)
}

// writeStatus stamps the desired status's conditions against the current ones and writes it
// only when it differs, emitting Events on the flips users must hear about. A status the API
// server refuses (see refusal) is not dropped in silence: see statusRefused.
func (r *MeshServiceReconciler) writeStatus(ctx context.Context, ms *meshv1alpha1.MeshService, desired meshv1alpha1.MeshServiceStatus) error {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	desired.ObservedGeneration = ms.Generation
	desired.Conditions = conditions.Merge(ms.Status.Conditions, desired.Conditions, ms.Generation, now)
	for i := range desired.Ports {
		var previous []metav1.Condition
		for _, p := range ms.Status.Ports {
			if p.Port == desired.Ports[i].Port {
				previous = p.Conditions
			}
		}
		desired.Ports[i].Conditions = conditions.Merge(previous, desired.Ports[i].Conditions, ms.Generation, now)
	}
	if equality.Semantic.DeepEqual(ms.Status, desired) {
		return nil
	}
	last := *ms.Status.DeepCopy()
	ms.Status = desired
	err := r.Status().Update(ctx, ms)
	switch {
	case err == nil:
		r.announce(ms, last.Conditions, desired.Conditions)
		return nil
	case !refusal(err):
		return err // retried: a conflict or a transient failure
	}
	return r.statusRefused(ctx, ms, last, now, err)
}

// refusal reports whether err is the API server refusing the request itself: a 4xx answer that
// sending the same request again cannot change (Invalid, Forbidden, RequestEntityTooLarge …).
// A conflict (a newer object), NotFound (none) and TooManyRequests are not, nor are server errors
// and failures to reach the server: those are retried as they are.
func refusal(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	code := status.Status().Code
	return code >= 400 && code < 500 && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err)
}

// statusRefused is the safety net for a derived status the API server refuses (a field over
// its CRD limit, an admission policy's denial). It counts the refusal, keeps the last status
// written but for Ready=False StatusInvalid carrying the API server's message (so kubectl get
// and describe show it), and emits a Warning Event with the message. When the status already
// says so it writes nothing and emits nothing, so retries do not flood. The refusal is returned:
// the reconcile is retried with backoff, and any change of the inputs reconciles at once.
func (r *MeshServiceReconciler) statusRefused(ctx context.Context, ms *meshv1alpha1.MeshService, last meshv1alpha1.MeshServiceStatus,
	now metav1.Time, refused error) error {
	refusedStatuses.WithLabelValues(string(apierrors.ReasonForError(refused))).Inc()
	message := "the API server refused the status derived from this service's endpoints, so the rest of this status is the last " +
		"one written and may be stale: " + refused.Error()
	fallback := *last.DeepCopy()
	fallback.ObservedGeneration = ms.Generation
	stated := slices.DeleteFunc(slices.Clone(last.Conditions), func(c metav1.Condition) bool { return c.Type == meshv1alpha1.ServiceConditionReady })
	stated = append([]metav1.Condition{{Type: meshv1alpha1.ServiceConditionReady, Status: metav1.ConditionFalse,
		Reason: meshv1alpha1.ServiceReasonStatusInvalid, Message: conditions.Truncate(message, conditions.MaxConditionMessage)}}, stated...)
	fallback.Conditions = conditions.Merge(last.Conditions, stated, ms.Generation, now)
	if equality.Semantic.DeepEqual(last, fallback) {
		return fmt.Errorf("writing the status of MeshService %s/%s (already reported): %w", ms.Namespace, ms.Name, refused)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, meshv1alpha1.ServiceReasonStatusInvalid, "Reconcile", "%s",
			conditions.Truncate(message, conditions.MaxEventNote))
	}
	ms.Status = fallback
	if err := r.Status().Update(ctx, ms); err != nil {
		return errors.Join(fmt.Errorf("writing the status of MeshService %s/%s: %w", ms.Namespace, ms.Name, refused),
			fmt.Errorf("writing the fallback status that says so: %w", err))
	}
	return fmt.Errorf("writing the status of MeshService %s/%s (the last status is kept, Ready=False %s): %w",
		ms.Namespace, ms.Name, meshv1alpha1.ServiceReasonStatusInvalid, refused)
}

// announce emits an Event for each condition that flipped into (or out of) a problem.
func (r *MeshServiceReconciler) announce(ms *meshv1alpha1.MeshService, before, after []metav1.Condition) {
	if r.Recorder == nil {
		return
	}
	for _, t := range []string{meshv1alpha1.ServiceConditionPortsConsistent, meshv1alpha1.ServiceConditionServiceReady,
		meshv1alpha1.ServiceConditionPortsComplete} {
		if !conditions.Flipped(before, after, t) {
			continue
		}
		c := conditions.Find(after, t)
		note := conditions.Truncate(c.Message, conditions.MaxEventNote)
		switch {
		case c.Status == metav1.ConditionFalse:
			r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, c.Reason, "Reconcile", "%s", note)
		case conditions.Find(before, t) != nil:
			r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, c.Reason, "Reconcile", "%s", note)
		}
	}
}

// remove deletes the MeshService and the Service it owns.
func (r *MeshServiceReconciler) remove(ctx context.Context, ms *meshv1alpha1.MeshService) error {
	svc := &corev1.Service{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(ms), svc); err == nil && hasOwner(svc, ms.UID) {
		if err := r.Delete(ctx, svc); client.IgnoreNotFound(err) != nil {
			return err
		}
	} else if client.IgnoreNotFound(err) != nil {
		return err
	}
	return client.IgnoreNotFound(r.Delete(ctx, ms))
}

// ownerSAGone reports whether ms is owned by a ServiceAccount that no longer exists (or was
// replaced by a new one of the same name).
func ownerSAGone(ms *meshv1alpha1.MeshService, sa *corev1.ServiceAccount) bool {
	for _, ref := range ms.OwnerReferences {
		if ref.Kind == "ServiceAccount" && ref.APIVersion == "v1" {
			return sa == nil || sa.UID != ref.UID
		}
	}
	return false
}

func setSAOwner(ms *meshv1alpha1.MeshService, sa *corev1.ServiceAccount) {
	if sa == nil {
		return
	}
	ms.OwnerReferences = append(ms.OwnerReferences, metav1.OwnerReference{
		APIVersion: "v1", Kind: "ServiceAccount", Name: sa.Name, UID: sa.UID,
	})
}

func hasOwner(o metav1.Object, uid types.UID) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// serviceConverged reports whether the live Service already carries everything the controller
// would apply, so a converged system sends no request at all.
func serviceConverged(live *corev1.Service, desired *corev1ac.ServiceApplyConfiguration) bool {
	for k, v := range desired.Labels {
		if live.Labels[k] != v {
			return false
		}
	}
	for k, v := range desired.Annotations {
		if live.Annotations[k] != v {
			return false
		}
	}
	for _, ref := range desired.OwnerReferences {
		if !hasOwner(live, *ref.UID) {
			return false
		}
	}
	if desired.Spec == nil || live.Spec.Type != *desired.Spec.Type || len(live.Spec.Ports) != len(desired.Spec.Ports) {
		return false
	}
	for i, want := range desired.Spec.Ports {
		got := live.Spec.Ports[i]
		if got.Name != *want.Name || got.Port != *want.Port || got.Protocol != *want.Protocol ||
			got.TargetPort != *want.TargetPort || deref(got.AppProtocol) != deref(want.AppProtocol) {
			return false
		}
	}
	return true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
