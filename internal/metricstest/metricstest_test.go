// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestSumAndSeries: only the series of the named family whose labels include every wanted one
// are read; no wanted label reads them all.
func TestSumAndSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests_total"}, []string{"result", "node"})
	other := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "other_total"}, []string{"result"})
	depth := prometheus.NewGauge(prometheus.GaugeOpts{Name: "depth"})
	reg.MustRegister(requests, other, depth)
	requests.WithLabelValues("ok", "a").Add(2)
	requests.WithLabelValues("ok", "b").Add(3)
	requests.WithLabelValues("refused", "a").Add(5)
	other.WithLabelValues("ok").Add(7)
	depth.Set(4)

	for _, c := range []struct {
		name string
		want map[string]string
		read Read
		sum  float64
		n    int
	}{
		{"requests_total", map[string]string{"result": "ok"}, CounterValue, 5, 2},
		{"requests_total", map[string]string{"result": "ok", "node": "b"}, CounterValue, 3, 1},
		{"requests_total", nil, CounterValue, 10, 3},
		{"requests_total", map[string]string{"result": "missing"}, CounterValue, 0, 0},
		{"requests_total", map[string]string{"result": "ok"}, GaugeValue, 0, 2},
		{"depth", nil, GaugeValue, 4, 1},
	} {
		sum, err := Sum(reg, c.name, c.want, c.read)
		if err != nil || sum != c.sum {
			t.Errorf("Sum(%s, %v) = %v, %v; want %v", c.name, c.want, sum, err, c.sum)
		}
		n, err := Series(reg, c.name, c.want)
		if err != nil || n != c.n {
			t.Errorf("Series(%s, %v) = %v, %v; want %v", c.name, c.want, n, err, c.n)
		}
	}
}
