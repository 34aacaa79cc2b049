// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package metricstest reads metrics out of a Prometheus registry the way tests need them: the
// series of one family whose labels include a given set, summed or counted. Tests read metrics to
// know that something happened (a reconcile, a NACK, a refused entry) without sleeping. Both the
// envtest helpers (internal/testenv, over controller-runtime's registry) and the access-log
// server's tests (over a registry of their own) read through it.
//
// It is test support: only tests link it.
package metricstest

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Read is what one series adds to a Sum.
type Read func(*dto.Metric) float64

// The values a series is read by.
var (
	// CounterValue is a counter's value.
	CounterValue Read = func(m *dto.Metric) float64 { return m.GetCounter().GetValue() }
	// GaugeValue is a gauge's value.
	GaugeValue Read = func(m *dto.Metric) float64 { return m.GetGauge().GetValue() }
)

// Sum adds read(series) over the series of family name in g whose labels include every one of
// want.
func Sum(g prometheus.Gatherer, name string, want map[string]string, read Read) (float64, error) {
	total := 0.0
	err := each(g, name, want, func(m *dto.Metric) { total += read(m) })
	return total, err
}

// Series is how many series of family name g holds whose labels include every one of want.
func Series(g prometheus.Gatherer, name string, want map[string]string) (int, error) {
	n := 0
	err := each(g, name, want, func(*dto.Metric) { n++ })
	return n, err
}

// each calls f with every series of family name in g whose labels include every one of want.
func each(g prometheus.Gatherer, name string, want map[string]string, f func(*dto.Metric)) error {
	families, err := g.Gather()
	if err != nil {
		return err
	}
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
		for _, m := range family.GetMetric() {
			if hasLabels(m, want) {
				f(m)
			}
		}
	}
	return nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			found = found || (l.GetName() == k && l.GetValue() == v)
		}
		if !found {
			return false
		}
	}
	return true
}
