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
	Help: "Objects in the node agent's cluster-wide view (--cluster-view), by kind: MeshService, MeshEndpoint.",
}, []string{"kind"})

func init() {
	ctrlmetrics.Registry.MustRegister(refusedPods, viewObjects)
	for _, kind := range portspec.AllKinds() {
		refusedPods.WithLabelValues(string(kind))
	}
}
