// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/aether-mesh/aether-operator/internal/metricstest"
)

// Counter sums counter metric name, in controller-runtime's registry (where this process's
// controllers, webhooks and the agent count), over the series whose label has value. Tests read
// it to know that something ran: a reconcile, a webhook call, a refusal.
func Counter(name, label, value string) (float64, error) {
	return metricstest.Sum(ctrlmetrics.Registry, name, map[string]string{label: value}, metricstest.CounterValue)
}

// Gauge sums gauge metric name the same way. Tests read it to know that nothing runs: a
// controller's workqueue_depth and controller_runtime_active_workers both at 0.
func Gauge(name, label, value string) (float64, error) {
	return metricstest.Sum(ctrlmetrics.Registry, name, map[string]string{label: value}, metricstest.GaugeValue)
}
