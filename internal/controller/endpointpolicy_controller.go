// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/endpointpolicy"
)

// EndpointPolicyReconciler writes each EndpointPolicy's Accepted condition: whether it is the
// policy that applies to its Service (endpointpolicy.Accepted). The node agents read the
// policies themselves and apply the same rule; the condition tells the policy's owner.
type EndpointPolicyReconciler struct {
	client.Client
}

// The controller reads the policies to judge each against the others of its namespace, and writes
// their status (Accepted).
// +kubebuilder:rbac:groups=config.aether.io,resources=endpointpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=config.aether.io,resources=endpointpolicies/status,verbs=get;update;patch

// SetupWithManager registers the reconciler. A policy created, changed or deleted can change the
// verdict on every other policy of its namespace (a new smallest name wins), so each change
// brings those back too.
func (r *EndpointPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	siblings := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list configv1.EndpointPolicyList
		if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing EndpointPolicies", "namespace", o.GetNamespace())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("endpointpolicy").
		For(&configv1.EndpointPolicy{}).
		Watches(&configv1.EndpointPolicy{}, siblings).
		Complete(r)
}

// Reconcile judges one policy against the others of its namespace and writes its Accepted
// condition when it changed, retrying on a conflict with a fresh read.
func (r *EndpointPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &configv1.EndpointPolicy{}
		if err := r.Get(ctx, req.NamespacedName, p); err != nil {
			return client.IgnoreNotFound(err)
		}
		var list configv1.EndpointPolicyList
		if err := r.List(ctx, &list, client.InNamespace(p.Namespace)); err != nil {
			return err
		}
		accepted := endpointpolicy.Accepted(p, list.Items)
		merged := conditions.Set(p.Status.Conditions, accepted, p.Generation, metav1.NewTime(time.Now().Truncate(time.Second)))
		if equality.Semantic.DeepEqual(p.Status.Conditions, merged) {
			return nil
		}
		p.Status.Conditions = merged
		return r.Status().Update(ctx, p)
	})
}
