// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
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
		Watches(&corev1.Pod{}, r.podWatch()). // an endpoint counts only while its pod matches (verify.go)
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
	// Only endpoints that are real pods' count, from here on (verify.go).
	verified, err := r.verified(ctx, endpoints.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	endpoints.Items = verified
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
// only when it differs, emitting Events on the flips users must hear about.
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
	before := ms.Status.Conditions
	ms.Status = desired
	if err := r.Status().Update(ctx, ms); err != nil {
		return err
	}
	r.announce(ms, before, desired.Conditions)
	return nil
}

// announce emits an Event for each condition that flipped into (or out of) a problem.
func (r *MeshServiceReconciler) announce(ms *meshv1alpha1.MeshService, before, after []metav1.Condition) {
	if r.Recorder == nil {
		return
	}
	for _, t := range []string{meshv1alpha1.ServiceConditionPortsConsistent, meshv1alpha1.ServiceConditionServiceReady} {
		if !conditions.Flipped(before, after, t) {
			continue
		}
		c := conditions.Find(after, t)
		switch {
		case c.Status == metav1.ConditionFalse:
			r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, c.Reason, "Reconcile", "%s", c.Message)
		case conditions.Find(before, t) != nil:
			r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, c.Reason, "Reconcile", "%s", c.Message)
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
