// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spireregistrar

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The registrar's metrics, in controller-runtime's registry (the manager's /metrics).
var (
	// entriesGauge is the last successful reconcile's count of entries by state: desired (what
	// the MeshServices and the configuration ask for), owned (entries of ours in SPIRE after it)
	// and provided (desired entries an entry not ours already provides).
	entriesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "aether_spire_registrar_entries",
		Help: "SPIRE registration entries after the registrar's last successful reconcile, by state: desired, owned (created by the registrar), provided (desired but provided by an entry the registrar did not create).",
	}, []string{"state"})
	// writesCounter counts the entries written, by operation.
	writesCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aether_spire_registrar_writes_total",
		Help: "Registration entries the registrar created, updated or deleted in SPIRE, by operation.",
	}, []string{"op"})
	// errorsCounter counts what went wrong, by reason: unreachable (SPIRE did not answer a
	// call), refused (SPIRE refused an entry or a whole request) and identity (a MeshService
	// identity that cannot be registered).
	errorsCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aether_spire_registrar_errors_total",
		Help: "Registrar errors by reason: unreachable (the SPIRE server API did not answer), refused (SPIRE refused an entry or a request), identity (a MeshService identity that cannot be registered).",
	}, []string{"reason"})
	// reachableGauge is 1 when the last reconcile reached the SPIRE server, else 0.
	reachableGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "aether_spire_registrar_server_reachable",
		Help: "1 when the registrar's last reconcile reached the SPIRE server API, 0 when it could not.",
	})
)

const (
	reasonUnreachable = "unreachable"
	reasonRefused     = "refused"
	reasonIdentity    = "identity"
)

func init() {
	ctrlmetrics.Registry.MustRegister(entriesGauge, writesCounter, errorsCounter, reachableGauge)
	// Every series exists from the start, at zero, so an alert sees it before the first event.
	for _, state := range []string{"desired", "owned", "provided"} {
		entriesGauge.WithLabelValues(state)
	}
	for _, op := range []string{"create", "update", "delete"} {
		writesCounter.WithLabelValues(op)
	}
	for _, reason := range []string{reasonUnreachable, reasonRefused, reasonIdentity} {
		errorsCounter.WithLabelValues(reason)
	}
}
