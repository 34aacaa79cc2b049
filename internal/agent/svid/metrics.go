// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package svid

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The states of aether_agent_identities.
const (
	// StateIssued: SPIRE has issued the identity's SVID; it is served.
	StateIssued = "issued"
	// StatePending: a local pod holds the identity and SPIRE has not issued its SVID (no entry
	// yet, or the stream is down since before the first): its secret is absent, and Envoy waits.
	StatePending = "pending"
)

// The streams of aether_agent_identity_stream_failures_total.
const (
	streamSVID   = "svid"
	streamBundle = "bundle"
)

// identities gauges the identities the node's pods hold, by state.
var identities = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "aether_agent_identities",
	Help: "Identities (SPIFFE IDs) the node's meshed pods hold, by state: issued (SPIRE issued the SVID, served by SDS) or pending (not issued yet: the secret is absent and Envoy waits for it).",
}, []string{"state"})

// streamFailures counts the Delegated Identity API streams that failed, each re-opened with backoff.
var streamFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_identity_stream_failures_total",
	Help: "Delegated Identity API streams that failed or could not be opened (each re-opened with backoff; an outage is logged once), by stream: svid or bundle.",
}, []string{"stream"})

func init() {
	ctrlmetrics.Registry.MustRegister(identities, streamFailures)
	for _, state := range []string{StateIssued, StatePending} {
		identities.WithLabelValues(state)
	}
	for _, stream := range []string{streamSVID, streamBundle} {
		streamFailures.WithLabelValues(stream)
	}
}
