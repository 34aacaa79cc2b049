// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/conditions"
)

// AccessPolicyReconciler writes each AccessPolicy's conditions: Accepted, whether every part of it
// takes effect on the MeshServices it governs (authz.Ports' problems), and ResolvedRefs, whether
// every ServiceAccount it admits is the identity of a MeshService. The node agents enforce the
// policies as written whatever the conditions say; the conditions tell the policy's owner.
type AccessPolicyReconciler struct {
	client.Client
	// TrustDomain is the mesh's SPIFFE trust domain (the manager's --mesh-domain).
	TrustDomain string
}

// The controller reads the policies to judge them against the MeshServices, and writes their
// status (Accepted, ResolvedRefs). It reads MeshServices through the MeshService controller's
// own grant (get, list, watch).
// +kubebuilder:rbac:groups=config.aether.io,resources=accesspolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=config.aether.io,resources=accesspolicies/status,verbs=get;update;patch

// SetupWithManager registers the reconciler. A policy is judged again when its spec changes (not
// on its own status writes), and when a MeshService that can change its verdict comes, goes, or
// changes its ports or identity.
func (r *AccessPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("accesspolicy").
		For(&configv1.AccessPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&meshv1alpha1.MeshService{}, handler.EnqueueRequestsFromMapFunc(r.policiesOf),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: portsOrIdentityChanged})).
		Complete(r)
}

// portsOrIdentityChanged passes a MeshService update that changes what a policy is judged
// against: its ports (and their protocols) or its identity. Counts and conditions do not.
func portsOrIdentityChanged(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*meshv1alpha1.MeshService)
	updated, okNew := e.ObjectNew.(*meshv1alpha1.MeshService)
	if !okOld || !okNew {
		return true
	}
	return old.Status.Identity != updated.Status.Identity || !slices.Equal(declaredPorts(old.Status.Ports), declaredPorts(updated.Status.Ports))
}

// declaredPorts are ports' numbers and protocols, what authz reads a service by.
func declaredPorts(ports []meshv1alpha1.ServicePort) []meshv1alpha1.PortProtocol {
	out := make([]meshv1alpha1.PortProtocol, len(ports))
	for i, p := range ports {
		out[i] = meshv1alpha1.PortProtocol{Port: p.Port, Protocol: p.Protocol}
	}
	return out
}

// policiesOf maps a MeshService to the policies whose conditions it can change: those of its
// namespace that target it or no service, and those anywhere that admit its ServiceAccount.
func (r *AccessPolicyReconciler) policiesOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list configv1.AccessPolicyList
	if err := r.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing AccessPolicies")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		p := &list.Items[i]
		if authz.Targets(*p, o.GetNamespace(), o.GetName()) || slices.Contains(admitted(p), client.ObjectKeyFromObject(o)) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		}
	}
	return reqs
}

// admitted are the ServiceAccounts p's rules admit by name, in rule order, each once.
func admitted(p *configv1.AccessPolicy) []client.ObjectKey {
	var out []client.ObjectKey
	for _, rule := range p.Spec.Rules {
		for _, from := range rule.From {
			if sa := from.ServiceAccount; sa != nil {
				key := client.ObjectKey{Namespace: cmp.Or(sa.Namespace, p.Namespace), Name: sa.Name}
				if !slices.Contains(out, key) {
					out = append(out, key)
				}
			}
		}
	}
	return out
}

// Reconcile judges one policy and writes its conditions when they changed, retrying on a conflict
// with a fresh read.
func (r *AccessPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &configv1.AccessPolicy{}
		if err := r.Get(ctx, req.NamespacedName, p); err != nil {
			return client.IgnoreNotFound(err)
		}
		var services meshv1alpha1.MeshServiceList
		if err := r.List(ctx, &services, client.InNamespace(p.Namespace)); err != nil {
			return err
		}
		var unknown []client.ObjectKey
		for _, sa := range admitted(p) {
			ms := &meshv1alpha1.MeshService{}
			err := r.Get(ctx, sa, ms)
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			if apierrors.IsNotFound(err) || ms.Status.Identity != authz.IdentityOf(r.TrustDomain, sa.Namespace, sa.Name) {
				unknown = append(unknown, sa)
			}
		}
		judged := AccessPolicyConditions(r.TrustDomain, p, services.Items, unknown)
		merged := conditions.Merge(p.Status.Conditions, judged, p.Generation, metav1.NewTime(time.Now().Truncate(time.Second)))
		if equality.Semantic.DeepEqual(p.Status.Conditions, merged) {
			return nil
		}
		p.Status.Conditions = merged
		return r.Status().Update(ctx, p)
	})
}

// AccessPolicyConditions are p's Accepted and ResolvedRefs given services, the MeshServices of its
// namespace, and unknown, the ServiceAccounts it admits that are the identity of no MeshService.
// Messages are in a stable order (services by name, then authz.Ports' order), so an unchanged
// verdict is never written again.
func AccessPolicyConditions(trustDomain string, p *configv1.AccessPolicy, services []meshv1alpha1.MeshService, unknown []client.ObjectKey) []metav1.Condition {
	return []metav1.Condition{accepted(trustDomain, p, services), resolvedRefs(trustDomain, unknown)}
}

func accepted(trustDomain string, p *configv1.AccessPolicy, services []meshv1alpha1.MeshService) metav1.Condition {
	sorted := slices.Clone(services)
	slices.SortFunc(sorted, func(a, b meshv1alpha1.MeshService) int { return cmp.Compare(a.Name, b.Name) })
	var (
		problems []authz.Problem
		governed []string
	)
	for _, ms := range sorted {
		if !authz.Targets(*p, ms.Namespace, ms.Name) {
			continue
		}
		ports, found := authz.Ports(trustDomain, authz.Service{Namespace: ms.Namespace, Name: ms.Name, Ports: declaredPorts(ms.Status.Ports)},
			[]configv1.AccessPolicy{*p})
		for _, port := range ports {
			if port.Governed {
				governed = append(governed, fmt.Sprintf("%s:%d", ms.Name, port.Port))
			}
		}
		for _, problem := range found {
			if p.Spec.TargetRef == nil { // the message names a port, not which service's
				problem.Message = fmt.Sprintf("MeshService %s: %s", ms.Name, problem.Message)
			}
			problems = append(problems, problem)
		}
	}
	c := metav1.Condition{Type: configv1.AccessConditionAccepted}
	switch {
	case p.Spec.TargetRef != nil && !slices.ContainsFunc(sorted, func(ms meshv1alpha1.MeshService) bool { return ms.Name == p.Spec.TargetRef.Name }):
		c.Status, c.Reason = metav1.ConditionFalse, configv1.AccessReasonTargetNotFound
		c.Message = fmt.Sprintf("spec.targetRef: no MeshService %s/%s (yet): the policy governs the Service's ports once a meshed pod "+
			"runs as ServiceAccount %s; check the name, or start the pods", p.Namespace, p.Spec.TargetRef.Name, p.Spec.TargetRef.Name)
	case len(problems) > 0:
		messages := make([]string, len(problems))
		for i, problem := range problems {
			messages[i] = problem.Message
		}
		c.Status, c.Reason = metav1.ConditionFalse, problems[0].Reason
		c.Message = strings.Join(messages, "; ")
	case len(governed) == 0:
		c.Status, c.Reason = metav1.ConditionTrue, configv1.AccessReasonAccepted
		c.Message = "no MeshService of the namespace yet: the policy governs every port of each one that comes"
	default:
		c.Status, c.Reason = metav1.ConditionTrue, configv1.AccessReasonAccepted
		c.Message = "governs " + strings.Join(governed, ", ")
	}
	c.Message = conditions.Truncate(c.Message, conditions.MaxConditionMessage)
	return c
}

func resolvedRefs(trustDomain string, unknown []client.ObjectKey) metav1.Condition {
	if len(unknown) == 0 {
		return metav1.Condition{Type: configv1.AccessConditionResolvedRefs, Status: metav1.ConditionTrue, Reason: configv1.AccessReasonResolved,
			Message: "every ServiceAccount the policy admits is the identity of a MeshService"}
	}
	names := make([]string, len(unknown))
	for i, sa := range unknown {
		names[i] = fmt.Sprintf("%s (%s)", sa, authz.IdentityOf(trustDomain, sa.Namespace, sa.Name))
	}
	return metav1.Condition{Type: configv1.AccessConditionResolvedRefs, Status: metav1.ConditionFalse, Reason: configv1.AccessReasonUnknownIdentity,
		Message: conditions.Truncate(fmt.Sprintf("no meshed pod runs as ServiceAccount %s: no MeshService has that identity, so the rule "+
			"admits no one by it (check the name and namespace in spec.rules[].from[].serviceAccount, or start the pods)",
			strings.Join(names, ", ")), conditions.MaxConditionMessage)}
}
