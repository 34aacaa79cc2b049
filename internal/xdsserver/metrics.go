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

// Why the proxyless socket refused a caller, the values of proxylessRefused's label reason.
const (
	// refusedConnections: its pod holds maxPerPod connections already.
	refusedConnections = "connections"
	// refusedStreams: its pod holds maxPerPod streams already.
	refusedStreams = "streams"
	// refusedNoPod: the connection's caller is no pod of this node the agent knows.
	refusedNoPod = "no_pod"
	// refusedClaim: the stream announced a node ID that is not its caller's pod's.
	refusedClaim = "claim"
	// refusedNodeChange: a stream announced a second node ID.
	refusedNodeChange = "node_change"
	// refusedNotProxyless: not a proxyless client's announcement (or an ID of no pod's shape).
	refusedNotProxyless = "not_proxyless"
)

// proxylessRefused counts the connections and streams the proxyless socket refused, by reason.
var proxylessRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_xds_proxyless_refused_total",
	Help: "Connections and streams the node agent's proxyless socket refused, by reason: connections or streams (a pod over its bound), no_pod (the caller runs in no pod of the node), claim (a node ID that is not the caller's pod's), node_change (a second node ID on one stream), not_proxyless.",
}, []string{"reason"})

// nodeRefused counts the streams the node's socket refused, by reason (nodeenvoy.go).
var nodeRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_xds_node_refused_total",
	Help: "Streams the node agent's xDS socket (the node Envoy's: ADS, SDS, the access log) refused because their caller is not the node's Envoy, by reason: not_envoy (a pod of the node that is not one of the node Envoy's), unknown_pod (a pod the agent does not know), node_process (a process of the node, not served unless --node-envoy-host), no_caller (the kernel names no caller).",
}, []string{"reason"})

func init() {
	ctrlmetrics.Registry.MustRegister(snapshots, nacks, proxylessClients, proxylessRefused, nodeRefused)
	for _, r := range []string{refusedConnections, refusedStreams, refusedNoPod, refusedClaim, refusedNodeChange, refusedNotProxyless} {
		proxylessRefused.WithLabelValues(r)
	}
	for _, r := range []string{refusedNotEnvoy, refusedUnknownPod, refusedNodeProcess, refusedNoCaller} {
		nodeRefused.WithLabelValues(r)
	}
	// Every series exported at zero, so a dashboard or an alert sees it before the first event.
	for _, r := range []string{ResultPublished, ResultUnchanged, ResultInconsistent, ResultInvalid} {
		snapshots.WithLabelValues(r)
	}
	for _, k := range kinds {
		nacks.WithLabelValues(k.short)
	}
	nacks.WithLabelValues(otherType)
}
