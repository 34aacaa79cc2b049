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

func init() {
	ctrlmetrics.Registry.MustRegister(refusedStatuses, settlingServices)
	// Exported at zero so an alert sees the series before the first refusal.
	refusedStatuses.WithLabelValues(string(metav1.StatusReasonInvalid))
}
