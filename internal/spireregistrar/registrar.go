// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spireregistrar

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	bundlev1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/bundle/v1"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

const (
	// DefaultResync is how often the full diff runs when nothing changed (--spire-resync): it
	// repairs entries changed or deleted behind the registrar's back. A reconcile that finds
	// nothing to do costs one GetBundle (the server's trust domain) and one listing of every
	// entry (ListEntries, 500 a page, and the empty page that ends it), and no write.
	DefaultResync = 5 * time.Minute
	// LeaderElectionID is the lease of the registrar-only mode (a sidecar of the SPIRE server),
	// apart from the manager's own: each mode elects its own leader.
	LeaderElectionID = "spire-registrar.mesh.aether.io"
	// ControllerName names the registrar's controller (its logs and controller-runtime metrics).
	ControllerName = "spire-registrar"

	// callTimeout bounds one reconcile's SPIRE calls.
	callTimeout = time.Minute
	// retryMin and retryMax bound the backoff between reconciles that failed (SPIRE unreachable).
	retryMin, retryMax = time.Second, 2 * time.Minute
)

// everything is the registrar's only request: every reconcile is a full diff, so all events
// collapse into one queued item.
var everything = reconcile.Request{NamespacedName: client.ObjectKey{Name: "spire-entries"}}

// Registrar reconciles SPIRE's entries with the MeshServices' identities.
type Registrar struct {
	// Reader lists MeshServices: the manager's cache.
	Reader client.Reader
	// Conn reaches the SPIRE server API (Dial).
	Conn *grpc.ClientConn
	// Config is what the desired entries depend on besides the MeshServices.
	Config Config
	// Resync is the period of the full diff when nothing changes (DefaultResync when 0).
	Resync time.Duration

	// owned decides which entries are the registrar's; nil is Owned. A test replaces it to show
	// that the mark is what keeps other entries safe.
	owned func(Entry) bool
	// controllerName is ControllerName unless a test runs several registrars in one process
	// (controller-runtime wants unique names).
	controllerName string
	// unreachable remembers the last reconcile's failure, to log only when reachability flips.
	unreachable atomic.Bool
}

// SetupWithManager registers the registrar. It reconciles once at start (the alias and
// delegate entries are desired even without MeshServices), whenever a MeshService comes, goes or
// changes identity, a mesh pod is bound to a node, finishes or goes, a node comes or goes, and
// every Resync.
func (r *Registrar) SetupWithManager(mgr ctrl.Manager) error {
	if r.Resync <= 0 {
		r.Resync = DefaultResync
	}
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{everything}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(cmp.Or(r.controllerName, ControllerName)).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(everything)
			return nil
		})).
		Watches(&meshv1alpha1.MeshService{}, all, builder.WithPredicates(identityChanged)).
		Watches(&corev1.Pod{}, all, builder.WithPredicates(placementChanged)).
		WatchesMetadata(&corev1.Node{}, all, builder.WithPredicates(nodeCameOrWent)).
		WithOptions(controller.Options{
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](retryMin, retryMax),
		}).
		Complete(r)
}

// identityChanged passes creations, deletions and the updates that change status.identity.
var identityChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*meshv1alpha1.MeshService)
		updated, okNew := e.ObjectNew.(*meshv1alpha1.MeshService)
		return !okOld || !okNew || old.Status.Identity != updated.Status.Identity
	},
}

// placementChanged passes the pod events that change which node must hold which identity: a
// pod bound to a node appears, is bound (spec.nodeName set: the registrar writes the node's entry
// at once, before the kubelet runs the pod's identity gate), finishes or goes.
var placementChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return bound(e.Object) },
	DeleteFunc: func(e event.DeleteEvent) bool { return bound(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Pod)
		updated, okNew := e.ObjectNew.(*corev1.Pod)
		return !okOld || !okNew || needsIdentity(old) != needsIdentity(updated) || old.Spec.NodeName != updated.Spec.NodeName
	},
}

func bound(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	return !ok || pod.Spec.NodeName != ""
}

// nodeCameOrWent passes nodes' creations and deletions: a node's name and UID, all its agent's
// ID is made of, never change.
var nodeCameOrWent = predicate.Funcs{
	UpdateFunc: func(event.UpdateEvent) bool { return false },
}

// Reconcile runs the full diff. A failure is retried with backoff (retryMin to retryMax) by the
// workqueue; a success comes back after Resync.
func (r *Registrar) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if _, err := r.Sync(ctx); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: r.Resync}, nil
}

// Sync makes SPIRE's entries of the registrar equal to the desired ones: it reads the
// MeshServices, the mesh's pods and the nodes (the cache), checks the server's trust domain
// (GetBundle) and reads every entry (ListEntries, paged), and writes the plan, at most one Batch
// call of each kind per batchSize entries. It returns the plan. SPIRE ends a paged listing with
// an empty page, so a reconcile with nothing to write makes one GetBundle call, one ListEntries
// call per 500 entries plus one, and no other.
func (r *Registrar) Sync(ctx context.Context) (Plan, error) {
	logger := log.FromContext(ctx).WithName(ControllerName)
	in, err := r.inputs(ctx)
	if err != nil {
		return Plan{}, err
	}
	desired, invalid := Desired(r.Config, in)
	for _, err := range invalid {
		errorsCounter.WithLabelValues(reasonIdentity).Inc()
		logger.Error(err, "Identity not registered in SPIRE")
	}

	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	api := spire{entries: entryv1.NewEntryClient(r.Conn), bundles: bundlev1.NewBundleClient(r.Conn)}
	if err := api.checkTrustDomain(ctx, r.Config.TrustDomain); err != nil {
		return Plan{}, r.failed(logger, err)
	}
	existing, err := api.candidates(ctx)
	if err != nil {
		return Plan{}, r.failed(logger, err)
	}
	owned := r.owned
	if owned == nil {
		owned = Owned
	}
	plan := Diff(desired, existing, owned)
	w, err := api.apply(ctx, plan)
	writesCounter.WithLabelValues("create").Add(float64(w.created))
	writesCounter.WithLabelValues("update").Add(float64(w.updated))
	writesCounter.WithLabelValues("delete").Add(float64(w.deleted))
	if plan.Writes() > 0 {
		logger.Info("Wrote SPIRE registration entries", "created", w.created, "updated", w.updated, "deleted", w.deleted,
			"refused", len(w.refused), "provided by entries of others", len(plan.Provided))
	}
	if err != nil {
		return plan, r.failed(logger, err)
	}
	r.reached(logger)
	entriesGauge.WithLabelValues("desired").Set(float64(len(desired)))
	entriesGauge.WithLabelValues("provided").Set(float64(len(plan.Provided)))
	entriesGauge.WithLabelValues("owned").Set(float64(plan.Kept + len(plan.Update) + w.created))
	if len(w.refused) > 0 {
		errorsCounter.WithLabelValues(reasonRefused).Add(float64(len(w.refused)))
		return plan, fmt.Errorf("SPIRE refused %d of the registrar's entries: %w", len(w.refused), errors.Join(w.refused...))
	}
	return plan, nil
}

// inputs reads the MeshServices, the mesh's pods and the nodes from the cache.
func (r *Registrar) inputs(ctx context.Context) (Inputs, error) {
	services := &meshv1alpha1.MeshServiceList{}
	if err := r.Reader.List(ctx, services); err != nil {
		return Inputs{}, fmt.Errorf("listing MeshServices: %w", err)
	}
	pods := &corev1.PodList{}
	if err := r.Reader.List(ctx, pods, client.MatchingLabels{registration.LabelManaged: registration.ManagedValue}); err != nil {
		return Inputs{}, fmt.Errorf("listing the mesh's pods: %w", err)
	}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.Reader.List(ctx, nodes); err != nil {
		return Inputs{}, fmt.Errorf("listing nodes: %w", err)
	}
	var in Inputs
	for _, ms := range services.Items {
		in.Services = append(in.Services, Service{Namespace: ms.Namespace, Name: ms.Name, Identity: ms.Status.Identity})
	}
	for _, p := range pods.Items {
		if needsIdentity(&p) {
			in.Pods = append(in.Pods, Pod{Namespace: p.Namespace, ServiceAccount: serviceAccountOf(&p), Node: p.Spec.NodeName})
		}
	}
	for _, n := range nodes.Items {
		in.Nodes = append(in.Nodes, Node{Name: n.Name, UID: string(n.UID)})
	}
	return in, nil
}

// needsIdentity reports whether pod's node must hold its identity: it is bound to a node and
// has not finished.
func needsIdentity(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// serviceAccountOf is the ServiceAccount pod runs as: "default" when the spec names none (the
// API server's admission fills it in; a pod read before that runs as "default" all the same).
func serviceAccountOf(pod *corev1.Pod) string {
	return cmp.Or(pod.Spec.ServiceAccountName, "default")
}

// failed records a SPIRE call that failed as a whole and returns the error the workqueue logs
// and backs off on: SPIRE unreachable (no answer), or refusing the request itself.
func (r *Registrar) failed(logger logr.Logger, err error) error {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
	default:
		r.reached(logger)
		errorsCounter.WithLabelValues(reasonRefused).Inc()
		return fmt.Errorf("SPIRE server API at %s refused the registrar's request: %w; check that --mesh-domain (%s) is the SPIRE server's trust_domain (retrying with backoff up to %s)",
			r.Conn.Target(), err, r.Config.TrustDomain.Name(), retryMax)
	}
	errorsCounter.WithLabelValues(reasonUnreachable).Inc()
	reachableGauge.Set(0)
	if !r.unreachable.Swap(true) {
		logger.Info("SPIRE server API unreachable: registration entries are not reconciled until it answers; retrying with backoff",
			"target", r.Conn.Target(), "retryMax", retryMax.String(), "error", err.Error())
	}
	return fmt.Errorf("SPIRE server API at %s: %w (retrying with backoff up to %s)", r.Conn.Target(), err, retryMax)
}

func (r *Registrar) reached(logger logr.Logger) {
	reachableGauge.Set(1)
	if r.unreachable.Swap(false) {
		logger.Info("SPIRE server API reachable again", "target", r.Conn.Target())
	}
}

// CacheOptions is the registrar-only manager's cache: MeshServices trimmed to their identity,
// the only field the registrar reads (a status's dial surface alone may hold 522 rows), and the
// mesh's pods trimmed as the manager's cache holds them (the label and registration.Trim), so
// both modes read the same. Nodes are watched as metadata only.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&meshv1alpha1.MeshService{}: {Transform: keepIdentity},
		&corev1.Pod{}: {
			Label:     labels.SelectorFromSet(labels.Set{registration.LabelManaged: registration.ManagedValue}),
			Transform: trimPod,
		},
	}}
}

func trimPod(o any) (any, error) {
	if pod, ok := o.(*corev1.Pod); ok {
		return registration.Trim(pod), nil
	}
	return o, nil
}

func keepIdentity(o any) (any, error) {
	ms, ok := o.(*meshv1alpha1.MeshService)
	if !ok {
		return o, nil
	}
	return &meshv1alpha1.MeshService{
		TypeMeta: ms.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: ms.Namespace, Name: ms.Name, UID: ms.UID,
			ResourceVersion: ms.ResourceVersion, Generation: ms.Generation},
		Status: meshv1alpha1.MeshServiceStatus{Identity: ms.Status.Identity},
	}, nil
}
