// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// FieldManager is the field manager of everything the controller applies.
const FieldManager = "aether-controller"

// EndpointServiceIndex indexes MeshEndpoints by spec.serviceName.
const EndpointServiceIndex = "spec.serviceName"

// MeshServiceReconciler maintains, for each (namespace, ServiceAccount) that has MeshEndpoints,
// one MeshService and its generated Service.
type MeshServiceReconciler struct {
	client.Client
	// APIReader reads from the API server around the cache, where a decision must not rest on a
	// cache that may lag: a verdict's retry after a conflict, the confirmation that an endpoint
	// squats another node's pod's name (verify.go). Nil: the manager's, set by SetupWithManager.
	APIReader client.Reader
	// Recorder emits Events on MeshServices, MeshEndpoints and pods whose name was squatted.
	Recorder recorder.EventRecorder
	// MeshDomain is the mesh's DNS domain and SPIFFE trust domain.
	MeshDomain string
	// Issuer is who issues the workload identities (--identity-issuer; spire when empty). Without
	// one, every raw-TCP spelling of a dial surface is refused, and each MeshService with a TCP
	// port gets a Warning Event saying why (warnNoIdentity).
	Issuer workloadidentity.Issuer
	// Ignored are the namespaces the mesh never takes: no endpoint there is counted.
	Ignored registration.IgnoredNamespaces
	// BatchWindow holds a service's reconcile back until its inputs have been quiet that long
	// (at most five windows after the first change), so that a burst of changes is reconciled and
	// written once (see settling). 0 reconciles at once.
	BatchWindow time.Duration

	// controllerName replaces "meshservice" in logs and metrics, for a test that runs a second
	// reconciler beside the package's.
	controllerName string
	// settling holds reconciles back while a service's inputs keep changing (BatchWindow).
	settling *settling
}

// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshservices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshservices/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=mesh.aether.io,resources=meshendpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Each port's status lists the AccessPolicies that govern it (status.ports[].accessPolicies), so
// the controller reads the policies of the service's namespace.
// +kubebuilder:rbac:groups=config.aether.io,resources=accesspolicies,verbs=get;list;watch

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
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	r.settling = newSettling(r.BatchWindow)
	// aether_controller_meshservices and _meshendpoints (inventory.go), from this manager's cache.
	if err := mgr.Add(countWhileRunning{r: mgr.GetCache()}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(cmp.Or(r.controllerName, "meshservice")).
		Watches(&meshv1alpha1.MeshService{}, batched(&handler.EnqueueRequestForObject{}, r.settling, nil)).
		Watches(&meshv1alpha1.MeshEndpoint{}, batchedPrompt(byServiceName, r.settling, newGeneration, awaitsVerdict)).
		// A Service of the same name matters whoever owns it (a user's one is a name conflict), and
		// the ServiceAccount decides the owner reference and deletion.
		Watches(&corev1.Service{}, batched(byName, r.settling, nil)).
		Watches(&corev1.ServiceAccount{}, batched(byName, r.settling, nil)).
		// An endpoint counts only while its pod matches (verify.go).
		Watches(&corev1.Pod{}, batched(r.podWatch(), r.settling, addressedPod)).
		// A policy's spec decides which of its services' ports list it; its status does not.
		Watches(&configv1.AccessPolicy{}, batched(r.policyTargets(), r.settling, nil),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// policyTargets maps an AccessPolicy to the services whose ports it may govern: its target, or,
// without one, every MeshService of its namespace. An update maps the old policy and the new one,
// so a service the policy no longer targets drops it too.
func (r *MeshServiceReconciler) policyTargets() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		pol := o.(*configv1.AccessPolicy)
		if pol.Spec.TargetRef != nil {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pol.Namespace, Name: pol.Spec.TargetRef.Name}}}
		}
		var list meshv1alpha1.MeshServiceList
		if err := r.List(ctx, &list, client.InNamespace(pol.Namespace)); err != nil {
			log.FromContext(ctx).Error(err, "listing the MeshServices a namespace-wide AccessPolicy governs", "namespace", pol.Namespace)
			return nil
		}
		reqs := make([]reconcile.Request, len(list.Items))
		for i := range list.Items {
			reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
		}
		return reqs
	})
}

// Reconcile gathers one service's inputs, translates them and writes what differs. The races
// every controller meets — an update that lost to another writer (Conflict), an object deleted
// mid-reconcile (NotFound), a create the cache had not yet seen (AlreadyExists) — are requeued
// quietly: they are not errors, and the next reconcile reads the newer state.
func (r *MeshServiceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if wait := r.settling.wait(req); wait > 0 {
		// Its inputs are still changing (BatchWindow): only the verdicts are recorded now, so that
		// a Healthy endpoint awaiting one is routable without waiting out the window.
		if err := r.recordVerdicts(ctx, req); err != nil {
			if race, ok := expectedRace(err); ok {
				racesRequeued.WithLabelValues("meshservice", race).Inc()
				return ctrl.Result{RequeueAfter: raceRequeueAfter}, nil
			}
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	err := r.reconcile(ctx, req)
	if errors.Is(err, errRecheckForeign) {
		return ctrl.Result{RequeueAfter: foreignRecheck}, nil
	}
	if race, ok := expectedRace(err); ok {
		log.FromContext(ctx).V(1).Info("Requeueing after a race with another writer", "race", race, "detail", err.Error())
		racesRequeued.WithLabelValues("meshservice", race).Inc()
		return ctrl.Result{RequeueAfter: raceRequeueAfter}, nil
	}
	return ctrl.Result{}, err
}

// recordVerdicts records the Verified condition of each of the service's endpoints that awaits
// one, while the service's batch is still settling: nothing else is written.
func (r *MeshServiceReconciler) recordVerdicts(ctx context.Context, req ctrl.Request) error {
	endpoints, err := r.serviceEndpoints(ctx, req.NamespacedName)
	if err != nil {
		return err
	}
	var awaiting []meshv1alpha1.MeshEndpoint
	for _, ep := range endpoints {
		if verdict := apimeta.FindStatusCondition(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified); verdict == nil ||
			verdict.ObservedGeneration != ep.Generation {
			awaiting = append(awaiting, ep)
		}
	}
	_, err = r.verified(ctx, awaiting)
	return err
}

func (r *MeshServiceReconciler) reconcile(ctx context.Context, req ctrl.Request) error {
	ms := &meshv1alpha1.MeshService{}
	if err := r.Get(ctx, req.NamespacedName, ms); apierrors.IsNotFound(err) {
		ms = nil
	} else if err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{}
	if err := r.Get(ctx, req.NamespacedName, sa); apierrors.IsNotFound(err) {
		sa = nil
	} else if err != nil {
		return err
	}

	listed, err := r.serviceEndpoints(ctx, req.NamespacedName)
	if err != nil {
		return err
	}
	// Only endpoints that are real pods' count, from here on (verify.go).
	endpoints, err := r.verified(ctx, listed)
	if err != nil {
		return err
	}
	ms, err = r.lifecycle(ctx, req.NamespacedName, ms, sa, len(endpoints))
	if err != nil || ms == nil {
		return err
	}

	live := &corev1.Service{}
	if err := r.Get(ctx, req.NamespacedName, live); apierrors.IsNotFound(err) {
		live = nil
	} else if err != nil {
		return err
	}

	selected, err := r.selectedPods(ctx, ms, live)
	if err != nil {
		return err
	}
	// The manager writes no policy's spec, only their status, which is not read here: there is no
	// write of its own for the cache to catch up with.
	var policies configv1.AccessPolicyList
	if err := r.List(ctx, &policies, client.InNamespace(ms.Namespace), client.DisableReadYourWritesConsistency); err != nil {
		return err
	}
	out, err := Translate(ms, endpoints, live, selected, policies.Items, r.MeshDomain, r.Issuer)
	if err != nil {
		return err
	}

	if out.Service != nil {
		written, err := r.writeService(ctx, live, out.Service)
		if _, race := expectedRace(err); race {
			return err
		}
		if err != nil {
			return r.serviceWriteFailed(ctx, ms, out.Status, err)
		}
		out.Status.VIP = written.Spec.ClusterIP
		r.announceAdoptedGone(ms, out.Status.VIP)
	}

	if err := r.writeStatus(ctx, ms, out.Status); err != nil {
		return err
	}
	if live != nil && out.Service == nil {
		// A user's Service: the pods it selects are not all watched (the cache holds managed pods
		// only), so the verdict on it is looked at again now and then as well as on every change
		// of the Service, the MeshService or its endpoints.
		return errRecheckForeign
	}
	return nil
}

// serviceEndpoints are the MeshEndpoints of service (by EndpointServiceIndex), each as of this
// manager's own last write of it. A List through the read-your-writes client waits until the
// cache has seen the manager's latest write of any MeshEndpoint, every service's: under a loaded
// API server each reconcile then waited out the watch's lag behind all the workers' verdicts, so
// the workers took turns (about four reconciles a second at 1000x10, while the manager used 2 %
// of a core). So the index is read as the cache holds it, and each endpoint read again by its
// key, which waits only for the manager's own writes of that endpoint (its verdict, or its
// deletion as a squatter). An endpoint gone, or moved to another service, meanwhile is left out.
func (r *MeshServiceReconciler) serviceEndpoints(ctx context.Context, service types.NamespacedName) ([]meshv1alpha1.MeshEndpoint, error) {
	var list meshv1alpha1.MeshEndpointList
	if err := r.List(ctx, &list, client.InNamespace(service.Namespace), client.MatchingFields{EndpointServiceIndex: service.Name},
		client.DisableReadYourWritesConsistency); err != nil {
		return nil, err
	}
	out := list.Items[:0]
	for i := range list.Items {
		ep := &list.Items[i]
		if err := r.Get(ctx, client.ObjectKeyFromObject(ep), ep); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		if ep.Spec.ServiceName == service.Name {
			out = append(out, *ep)
		}
	}
	return out, nil
}

// errRecheckForeign asks Reconcile to look at a service whose name a user's Service holds again
// after foreignRecheck.
var errRecheckForeign = errors.New("recheck the Service of the service's name")

// foreignRecheck is how often the verdict on a user's Service of a service's name is re-read
// without a change of its own: a pod outside the mesh that its selector starts selecting (or
// stops) changes that verdict, and such pods are not watched.
const foreignRecheck = 2 * time.Minute

// selectedPods are the pods of ms's namespace that live selects, when live is a Service that is
// not the mesh's and has a selector (nil otherwise): read from the API server, not the cache,
// which holds only managed pods, and the pods a user's Service selects need not be.
func (r *MeshServiceReconciler) selectedPods(ctx context.Context, ms *meshv1alpha1.MeshService, live *corev1.Service) ([]corev1.Pod, error) {
	if live == nil || len(live.Spec.Selector) == 0 || meshservice.IsGenerated(live, ms.UID, FieldManager) {
		return nil, nil
	}
	var pods corev1.PodList
	if err := r.apiReader().List(ctx, &pods, client.InNamespace(ms.Namespace), client.MatchingLabels(live.Spec.Selector)); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// announceAdoptedGone emits a Warning Event (ExistingServiceDeleted) when ms's status says the
// mesh used a user's Service as its VIP and the controller just generated its own: that Service
// was deleted, and the VIP moves to vip.
func (r *MeshServiceReconciler) announceAdoptedGone(ms *meshv1alpha1.MeshService, vip string) {
	c := conditions.Find(ms.Status.Conditions, meshv1alpha1.ServiceConditionServiceReady)
	if r.Recorder == nil || c == nil || c.Reason != meshv1alpha1.ServiceReasonExistingService {
		return
	}
	r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, meshv1alpha1.ServiceReasonExistingServiceDeleted, "Reconcile",
		"Service %s/%s, which the mesh used read-only, was deleted: the mesh generated its own Service of that name, and the VIP "+
			"moved from %s to %s (clients holding the old address, outside the mesh, must resolve the name again)",
		ms.Namespace, ms.Name, ms.Status.VIP, vip)
}

// Translate is meshservice.Translate of the MeshService ms given its counted endpoints (those
// EndpointVerdict verifies) and live, the Service of its name (nil when none exists): what a
// reconcile writes, before the Service's write fills in the VIP of a new Service. The reconciler
// calls it; test/invariant calls it on what the cluster holds, to see that it holds this.
//
// pods are the pods of the namespace (or any subset holding them) that live selects, when live is
// a Service that is not the mesh's: whether the mesh can use it read-only depends on them
// (meshservice.Adoptable). policies are the AccessPolicies of ms's namespace (any superset does):
// each port lists those that govern it (ListAccessPolicies).
func Translate(ms *meshv1alpha1.MeshService, counted []meshv1alpha1.MeshEndpoint, live *corev1.Service, pods []corev1.Pod,
	policies []configv1.AccessPolicy, meshDomain string, issuer workloadidentity.Issuer) (meshservice.Output, error) {
	facts := meshservice.ServiceFacts{}
	if live != nil {
		facts = meshservice.ServiceFacts{Exists: true, Owned: meshservice.IsGenerated(live, ms.UID, FieldManager), ClusterIP: live.Spec.ClusterIP}
		if !facts.Owned {
			facts.Existing = meshservice.ExistingServiceOf(live, pods)
		}
	}
	out, err := meshservice.Translate(meshservice.Input{
		Namespace: ms.Namespace, Name: ms.Name, UID: ms.UID, MeshDomain: meshDomain, Issuer: issuer,
		Endpoints: counted, LastStatus: ms.Status, Service: facts,
	})
	if err != nil {
		return out, err
	}
	ListAccessPolicies(&out.Status, ms.Namespace, ms.Name, meshDomain, policies)
	return out, nil
}

// MaxListedPolicies is how many policies a port's status lists (the CRD's MaxItems): the first
// ones by name when more govern it. The list only reports; every governing policy is enforced.
const MaxListedPolicies = 32

// ListAccessPolicies sets each port of st's accessPolicies to the policies that govern it, as
// authz.Ports reads them (meshDomain is the trust domain).
func ListAccessPolicies(st *meshv1alpha1.MeshServiceStatus, namespace, name, meshDomain string, policies []configv1.AccessPolicy) {
	ports, _ := authz.Ports(meshDomain, authz.Service{Namespace: namespace, Name: name, Ports: declaredPorts(st.Ports)}, policies)
	for i := range st.Ports {
		st.Ports[i].AccessPolicies = nil
		if listed := ports[i].Policies; len(listed) > 0 {
			st.Ports[i].AccessPolicies = slices.Clone(listed[:min(len(listed), MaxListedPolicies)])
		}
	}
}

// writeStatus stamps the desired status's conditions against the current ones and writes it
// only when it differs, emitting Events on the flips users must hear about. A status the API
// server refuses (see refusal) is not dropped in silence: see statusRefused.
func (r *MeshServiceReconciler) writeStatus(ctx context.Context, ms *meshv1alpha1.MeshService, desired meshv1alpha1.MeshServiceStatus) error {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	desired = StampStatus(ms.Status, desired, ms.Generation, now)
	if equality.Semantic.DeepEqual(ms.Status, desired) {
		return nil
	}
	last := *ms.Status.DeepCopy()
	ms.Status = desired
	err := r.Status().Update(ctx, ms)
	switch {
	case err == nil:
		r.announce(ms, last.Conditions, desired.Conditions)
		r.warnNoIdentity(ms, last, desired)
		return nil
	case !refusal(err):
		return err // retried: a conflict or a transient failure
	}
	return r.statusRefused(ctx, ms, last, now, err)
}

// StampStatus is desired, a translated status, as written over current: observedGeneration set
// and every condition (the service's and each port's) merged with current's, so that a condition
// keeps its LastTransitionTime unless its status flips.
func StampStatus(current, desired meshv1alpha1.MeshServiceStatus, generation int64, now metav1.Time) meshv1alpha1.MeshServiceStatus {
	desired.ObservedGeneration = generation
	desired.Conditions = conditions.Merge(current.Conditions, desired.Conditions, generation, now)
	for i := range desired.Ports {
		var previous []metav1.Condition
		for _, p := range current.Ports {
			if p.Port == desired.Ports[i].Port {
				previous = p.Conditions
			}
		}
		desired.Ports[i].Conditions = conditions.Merge(previous, desired.Ports[i].Conditions, generation, now)
	}
	return desired
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
	stated = meshservice.WithSummary(stated) // Stalled, StatusInvalid
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

// warnNoIdentity emits a Warning Event (TCPRefusedNoIdentity) when the status just written refuses
// TCP ports for want of a workload identity and the status before it did not refuse the same
// ones: once when a service is first seen without an issuer, when the manager starts without one,
// and when the service's TCP ports change; never on a reconcile that writes nothing, nor again
// after a manager restart that changes nothing.
func (r *MeshServiceReconciler) warnNoIdentity(ms *meshv1alpha1.MeshService, before, after meshv1alpha1.MeshServiceStatus) {
	refused, news := tcpRefusalNews(before, after)
	if r.Recorder == nil || !news {
		return
	}
	r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, meshv1alpha1.ServiceReasonTCPRefusedNoIdentity, "Reconcile", "%s",
		meshservice.NoIdentityNote(refused))
}

// tcpRefusalNews are the TCP ports status after refuses for want of a workload identity
// (meshservice.RefusedTCPPorts), and whether that is news: after refuses some, and before did not
// refuse the same ones.
func tcpRefusalNews(before, after meshv1alpha1.MeshServiceStatus) (refused []int32, news bool) {
	refused = meshservice.RefusedTCPPorts(after)
	return refused, len(refused) > 0 && !slices.Equal(refused, meshservice.RefusedTCPPorts(before))
}

// lifecycle decides whether the MeshService lives, and returns it (nil when it does not). It
// lives while its ServiceAccount or any endpoint exists: pods keep running (and keep being
// meshed) after their ServiceAccount is deleted, so the MeshService and its Service, and so the
// VIP, stay until the last endpoint goes. With neither, the controller removes both itself.
//
// The MeshService carries no owner reference to the ServiceAccount: the garbage collector
// deletes a dependent whose owners are all gone, which would delete a MeshService that still has
// endpoints (and, through it, the Service and the VIP). The tie to the ServiceAccount is an
// annotation with its UID, informational only; it is removed while the ServiceAccount is gone and
// restored when it returns.
func (r *MeshServiceReconciler) lifecycle(ctx context.Context, key types.NamespacedName, ms *meshv1alpha1.MeshService,
	sa *corev1.ServiceAccount, endpoints int) (*meshv1alpha1.MeshService, error) {
	logger := log.FromContext(ctx)
	switch {
	case ms == nil && endpoints == 0:
		return nil, nil
	case ms != nil && sa == nil && endpoints == 0:
		logger.Info("Neither the ServiceAccount nor any endpoint exists: removing the MeshService and its Service")
		return nil, r.remove(ctx, ms)
	case ms == nil:
		ms = &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		tieToServiceAccount(ms, sa)
		if err := r.Create(ctx, ms); err != nil {
			return nil, err
		}
		logger.Info("Created MeshService", "endpoints", endpoints)
		return ms, nil
	}
	before := ms.DeepCopy()
	if !tieToServiceAccount(ms, sa) {
		return ms, nil
	}
	if sa == nil {
		logger.Info("ServiceAccount deleted: the MeshService and its Service stay while endpoints exist", "endpoints", endpoints)
	}
	return ms, r.Patch(ctx, ms, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// AnnotationServiceAccountUID on a MeshService holds the UID of the ServiceAccount it serves,
// while that ServiceAccount exists. It is informational: nothing is deleted through it.
const AnnotationServiceAccountUID = "aether.io/service-account-uid"

// tieToServiceAccount sets ms's annotation to sa's UID (removes it when sa is nil) and removes
// the owner references to ServiceAccounts an older version set. It reports whether ms changed.
func tieToServiceAccount(ms *meshv1alpha1.MeshService, sa *corev1.ServiceAccount) bool {
	changed := false
	refs := slices.DeleteFunc(slices.Clone(ms.OwnerReferences), func(ref metav1.OwnerReference) bool {
		return ref.Kind == "ServiceAccount" && ref.APIVersion == "v1"
	})
	if len(refs) != len(ms.OwnerReferences) {
		ms.OwnerReferences, changed = refs, true
	}
	uid, tied := ms.Annotations[AnnotationServiceAccountUID]
	switch {
	case sa == nil && tied:
		delete(ms.Annotations, AnnotationServiceAccountUID)
		changed = true
	case sa != nil && uid != string(sa.UID):
		if ms.Annotations == nil {
			ms.Annotations = map[string]string{}
		}
		ms.Annotations[AnnotationServiceAccountUID] = string(sa.UID)
		changed = true
	}
	return changed
}

// remove deletes the MeshService and its generated Service (never a user's Service of the same
// name). Both deletes carry the UID read, so an object replaced meanwhile is left alone.
func (r *MeshServiceReconciler) remove(ctx context.Context, ms *meshv1alpha1.MeshService) error {
	svc := &corev1.Service{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(ms), svc); err == nil && meshservice.IsGenerated(svc, ms.UID, FieldManager) {
		if err := r.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
	} else if client.IgnoreNotFound(err) != nil {
		return err
	}
	return client.IgnoreNotFound(r.Delete(ctx, ms, client.Preconditions{UID: &ms.UID}))
}
