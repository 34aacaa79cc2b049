// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of a Publish, the values of snapshots' label result.
const (
	// ResultPublished: a type changed and the snapshot is served.
	ResultPublished = "published"
	// ResultUnchanged: every type's version equals the served one; nothing is sent.
	ResultUnchanged = "unchanged"
	// ResultInconsistent: snapshot.Consistent() failed; the previous snapshot stays.
	ResultInconsistent = "inconsistent"
	// ResultInvalid: two resources of a type share a name (or one has none); the previous stays.
	ResultInvalid = "invalid"
)

// snapshots counts Publish calls by result.
var snapshots = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_xds_snapshots_total",
	Help: "xDS snapshots the node agent was asked to publish, by result: published, unchanged (nothing sent), inconsistent or invalid (refused; the previous snapshot stays).",
}, []string{"result"})

// nacks counts the responses an xDS client rejected, by resource type.
var nacks = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_xds_nacks_total",
	Help: "xDS responses the node's Envoy rejected (NACK), by resource type: each is a bug, logged with the resources and Envoy's reason.",
}, []string{"type"})

// proxylessClients gauges the proxyless gRPC clients connected (proxyless.go).
var proxylessClients = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "aether_agent_xds_proxyless_clients",
	Help: "Proxyless gRPC clients (pods annotated aether.io/proxyless) holding an xDS stream to the node agent.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(snapshots, nacks, proxylessClients)
	// Every series exported at zero, so a dashboard or an alert sees it before the first event.
	for _, r := range []string{ResultPublished, ResultUnchanged, ResultInconsistent, ResultInvalid} {
		snapshots.WithLabelValues(r)
	}
	for _, k := range kinds {
		nacks.WithLabelValues(k.short)
	}
	nacks.WithLabelValues(otherType)
}
