// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Counter sums counter metric name, in controller-runtime's registry (where this process's
// controllers, webhooks and the agent count), over the series whose label has value. Tests read
// it to know that something ran: a reconcile, a webhook call, a refusal.
func Counter(name, label, value string) (float64, error) {
	return sum(name, label, value, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
}

// Gauge sums gauge metric name the same way. Tests read it to know that nothing runs: a
// controller's workqueue_depth and controller_runtime_active_workers both at 0.
func Gauge(name, label, value string) (float64, error) {
	return sum(name, label, value, func(m *dto.Metric) float64 { return m.GetGauge().GetValue() })
}

func sum(name, label, value string, read func(*dto.Metric) float64) (float64, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += read(m)
				}
			}
		}
	}
	return total, nil
}
