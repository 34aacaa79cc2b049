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

func init() {
	ctrlmetrics.Registry.MustRegister(refusedStatuses)
	// Exported at zero so an alert sees the series before the first refusal.
	refusedStatuses.WithLabelValues(string(metav1.StatusReasonInvalid))
}
