// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// refusedPods counts pods the agent refused to register, by the parser's error kind. Every kind
// is exported at zero so a dashboard or alert sees the series before the first refusal.
var refusedPods = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_refused_pods_total",
	Help: "Managed pods the node agent refused to register because their annotations do not parse, by error kind.",
}, []string{"reason"})

// viewObjects is how many objects the running View holds, by kind: it reaches the API server's
// count when the view has synced, and follows it after.
var viewObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "aether_agent_view_objects",
	Help: "Objects in the node agent's cluster-wide view (on with xDS serving, --xds-address), by kind: MeshService, MeshEndpoint.",
}, []string{"kind"})

// Results of an xDS rebuild, the values of xdsBuilds' label result.
const (
	// BuildBuilt: the node's configuration was built (and handed to the xDS server, which
	// publishes it if it changed).
	BuildBuilt = "built"
	// BuildFailed: the caches could not be read or the builder refused the model; the previous
	// configuration stays in service.
	BuildFailed = "failed"
)

// xdsBuilds counts the debounced rebuilds of the node's xDS configuration, by result.
var xdsBuilds = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_xds_builds_total",
	Help: "Debounced rebuilds of the node's xDS configuration, by result: built, or failed (logged with the reason; the previous configuration stays in service).",
}, []string{"result"})

// xdsSkipped is how many things the last build left out of the node's configuration (each logged
// once when it appears: "Left out of the node's xDS configuration").
var xdsSkipped = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "aether_agent_xds_skipped",
	Help: "What the last xDS build left out of the node's configuration (pods a proxy cannot serve, services without identity, VIPs or names another service holds, route backends it cannot carry): one each, logged when it appears.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(refusedPods, viewObjects, xdsBuilds, xdsSkipped)
	xdsBuilds.WithLabelValues(BuildBuilt)
	xdsBuilds.WithLabelValues(BuildFailed)
	for _, kind := range portspec.AllKinds() {
		refusedPods.WithLabelValues(string(kind))
	}
}
