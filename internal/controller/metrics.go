// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// refusedStatuses counts MeshService statuses the API server refused, by the reason it gave
// (Invalid for a status outside the CRD's limits). After the caps of api/v1alpha1 no admitted
// input should produce one: a rising count is a bug to report, with the Event's message.
var refusedStatuses = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_controller_meshservice_status_refused_total",
	Help: "MeshService status writes the API server refused (other than conflicts), by the API server's reason.",
}, []string{"reason"})

// settlingServices is how many services have changed inputs whose reconcile is held back by the
// batching window (settling): work the manager owes that is in neither the workqueue's depth nor
// a worker yet. Together with workqueue_depth and controller_runtime_active_workers it tells
// that the manager has nothing left to do (hack/bench waits on the three).
var settlingServices = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "aether_controller_settling_services",
	Help: "Services whose inputs changed and whose reconcile waits out the batching window (--batch-window).",
})

// squattersRemoved counts the MeshEndpoints the controller deleted because they held the name of
// a pod on another node (verify.go, removeSquatter). Any rise is worth a look: a node agent that
// did it is compromised or broken, and the Warning Event on the pod names the node.
var squattersRemoved = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "aether_controller_squatting_endpoints_removed_total",
	Help: "MeshEndpoints deleted because they held the name of a pod bound to another node than the one they named.",
})

// verdictConflicts counts the Verified writes that lost to a concurrent write and were retried
// from a fresh read (verify.go, recordVerdict).
var verdictConflicts = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "aether_controller_verdict_conflicts_total",
	Help: "Writes of a MeshEndpoint's Verified condition that met a conflict and were retried from a fresh read.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(refusedStatuses, settlingServices, squattersRemoved, verdictConflicts)
	// Exported at zero so an alert sees the series before the first refusal.
	refusedStatuses.WithLabelValues(string(metav1.StatusReasonInvalid))
}
