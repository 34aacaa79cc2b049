// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Counter sums counter metric name, in controller-runtime's registry (where this process's
// controllers, webhooks and the agent count), over the series whose label has value. Tests read
// it to know that something ran: a reconcile, a webhook call, a refusal.
func Counter(name, label, value string) (float64, error) {
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
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total, nil
}
