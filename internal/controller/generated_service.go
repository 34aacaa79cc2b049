// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
)

// writeService makes the cluster's Service exactly the generated one and returns it as the API
// server holds it: created when live is nil, left alone when converged (no request at all), else
// replaced whole by an Update carrying live's resourceVersion.
//
// A whole replacement, not server-side apply: apply merges spec.ports (keyed by port and
// protocol) with the entries other field managers own, so a port a user renumbered stays beside
// the restored one and every apply fails on the duplicate name; and it would keep any field
// (a selector, external IPs) the controller does not set. An Update of the whole spec converges
// from any state a user can leave the Service in, keeping the VIP (see
// meshservice.ServiceToWrite). The resourceVersion makes a concurrent change a Conflict, which
// is requeued, never overwritten unseen.
func (r *MeshServiceReconciler) writeService(ctx context.Context, live *corev1.Service, generated *corev1ac.ServiceApplyConfiguration) (*corev1.Service, error) {
	if live != nil && meshservice.Headless(live) {
		// clusterIP None is immutable: only a new Service gets a VIP. Its cluster IP was None,
		// so no VIP is lost.
		if err := r.Delete(ctx, live, client.Preconditions{UID: &live.UID, ResourceVersion: &live.ResourceVersion}); err != nil {
			return nil, err
		}
		live = nil
	}
	want, err := meshservice.ServiceToWrite(live, generated)
	if err != nil {
		return nil, err
	}
	switch {
	case live == nil:
		err = r.Create(ctx, want, client.FieldOwner(FieldManager))
	case equality.Semantic.DeepEqual(live, want):
		return live, nil
	default:
		err = r.Update(ctx, want, client.FieldOwner(FieldManager))
	}
	if err != nil {
		return nil, err
	}
	return want, nil
}

// serviceWriteFailed reports a refused Service write: ServiceReady=False (ServiceWriteFailed,
// with the API server's answer), the rest of the status as derived, and a Warning Event. It
// returns the write's error, so that the write is retried with backoff.
func (r *MeshServiceReconciler) serviceWriteFailed(ctx context.Context, ms *meshv1alpha1.MeshService, status meshv1alpha1.MeshServiceStatus, writeErr error) error {
	failed := meshservice.WriteFailedCondition(ms.Namespace, ms.Name, writeErr.Error())
	if c := conditions.Find(status.Conditions, meshv1alpha1.ServiceConditionServiceReady); c != nil {
		*c = failed
	} else {
		status.Conditions = append(status.Conditions, failed)
	}
	status.Conditions = meshservice.WithSummary(status.Conditions) // Stalled, ServiceWriteFailed
	r.warnUnannounced(ms, failed)
	writeErr = fmt.Errorf("writing Service %s/%s: %w", ms.Namespace, ms.Name, writeErr)
	if err := r.writeStatus(ctx, ms, status); err != nil {
		if _, race := expectedRace(err); !race {
			return errors.Join(writeErr, err)
		}
	}
	return writeErr
}

// warnUnannounced emits the Warning Event for failed when writeStatus will not: it announces
// ServiceReady only when its status flips, so a refusal after another False reason (or with a
// new answer) is emitted here. The same refusal again emits nothing.
func (r *MeshServiceReconciler) warnUnannounced(ms *meshv1alpha1.MeshService, failed metav1.Condition) {
	previous := conditions.Find(ms.Status.Conditions, failed.Type)
	if r.Recorder == nil || previous == nil || previous.Status != failed.Status ||
		(previous.Reason == failed.Reason && previous.Message == failed.Message) {
		return
	}
	r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, failed.Reason, "Reconcile", "%s",
		conditions.Truncate(failed.Message, conditions.MaxEventNote))
}

// raceRequeueAfter is when a reconcile that lost a race runs again. The winner's own watch event
// usually brings it sooner; this is the safety net.
const raceRequeueAfter = time.Second

// racesRequeued counts the reconciles requeued quietly after an expected race, by controller and
// race (conflict, not_found, already_exists).
var racesRequeued = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_controller_races_requeued_total",
	Help: "Reconciles requeued quietly after an expected race with another writer or the cache, by controller and race.",
}, []string{"controller", "race"})

func init() { ctrlmetrics.Registry.MustRegister(racesRequeued) }

// expectedRace names the race err is, if it is one: an update or precondition that lost to
// another writer, an object deleted mid-reconcile, a create the informer cache had not caught
// up with.
func expectedRace(err error) (string, bool) {
	switch {
	case err == nil:
		return "", false
	case apierrors.IsConflict(err):
		return "conflict", true
	case apierrors.IsNotFound(err):
		return "not_found", true
	case apierrors.IsAlreadyExists(err):
		return "already_exists", true
	}
	return "", false
}
