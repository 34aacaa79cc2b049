// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// resultLabel is the label of the agent's counters that say how something ended.
const resultLabel = "result"

// refusedPods counts pods the agent refused to register, by the parser's error kind (or
// DefaultServiceAccount for a pod running as the default ServiceAccount). Every kind
// is exported at zero so a dashboard or alert sees the series before the first refusal.
var refusedPods = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_refused_pods_total",
	Help: "Managed pods the node agent refused to register, by the parser's error kind, or DefaultServiceAccount for a pod running as the default ServiceAccount.",
}, []string{"reason"})

// viewObjects is how many objects the running View holds, by kind: it reaches the API server's
// count when the view has synced, and follows it after.
var viewObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "aether_agent_view_objects",
	Help: "Objects in the node agent's cluster-wide view (on with xDS serving, --xds-address), by kind: MeshService, MeshEndpoint.",
}, []string{"kind"})

// viewEvents counts the watch events the View's informers delivered, by kind and event (add,
// update, delete; the initial list's objects are adds): the API server's fan-out to this agent,
// which grows with the cluster's churn, not with the node's.
var viewEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_view_events_total",
	Help: "Watch events the node agent's cluster-wide view received (on with xDS serving), by kind (MeshService, MeshEndpoint) and event (add, update, delete; the initial list's objects count as adds).",
}, []string{"kind", "event"})

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
}, []string{resultLabel})

// xdsSkipped is how many things the last build left out of the node's configuration (each logged
// once when it appears: "Left out of the node's xDS configuration").
var xdsSkipped = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "aether_agent_xds_skipped",
	Help: "What the last xDS build left out of the node's configuration (pods a proxy cannot serve, services without identity, VIPs or names another service holds, route backends it cannot carry): one each, logged when it appears.",
})

// Outcomes of a CNI plugin's request, the values of cniRequests' label result.
const (
	// CNIManaged: the pod is in the mesh and was handed over (ADD), is recorded from this sandbox
	// (CHECK), or its recorded namespace was forgotten (DEL).
	CNIManaged = "managed"
	// CNIUnmanaged: the mesh does not take the pod (its label, its namespace, a pod already gone),
	// or a DEL found nothing recorded from its sandbox; the plugin passes it through.
	CNIUnmanaged = "unmanaged"
	// CNIFailed: the agent could not decide or could not do what the pod needs (logged with why);
	// the plugin fails the ADD or CHECK, and the kubelet retries.
	CNIFailed = "failed"
)

// cniCommands names each path of the CNI protocol by its CNI command.
var cniCommands = map[string]string{cni.PathAdd: "ADD", cni.PathDel: "DEL", cni.PathCheck: "CHECK"}

// cniRequests counts the CNI plugin's requests, by command and outcome.
var cniRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_cni_requests_total",
	Help: "Requests of the node's CNI plugin, by command (ADD, DEL, CHECK, or unknown) and result: managed (the pod was handed over, is recorded, or was forgotten), unmanaged (not in the mesh, or nothing recorded), failed (logged with the reason; the plugin fails the pod's ADD or CHECK).",
}, []string{"command", resultLabel})

// cniResult is the result label of an answer.
func cniResult(a answer) string {
	switch {
	case a.status != http.StatusOK:
		return CNIFailed
	case a.Managed:
		return CNIManaged
	}
	return CNIUnmanaged
}

func init() {
	ctrlmetrics.Registry.MustRegister(refusedPods, viewObjects, viewEvents, xdsBuilds, xdsSkipped, cniRequests, upstreamMisses)
	for _, command := range cniCommands {
		for _, result := range []string{CNIManaged, CNIUnmanaged, CNIFailed} {
			cniRequests.WithLabelValues(command, result)
		}
	}
	xdsBuilds.WithLabelValues(BuildBuilt)
	xdsBuilds.WithLabelValues(BuildFailed)
	for _, kind := range portspec.AllKinds() {
		refusedPods.WithLabelValues(string(kind))
	}
	refusedPods.WithLabelValues(ReasonDefaultServiceAccount)
}

// upstreamMisses counts the on-demand fetches of a service a local identity does not declare
// (config.aether.io/upstreams), by service (<name>.<namespace>): the signal to declare it.
var upstreamMisses = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_upstreams_miss_total",
	Help: "On-demand fetches by the node's Envoy of a service that no local pod of the calling identity declares in config.aether.io/upstreams (and that is not its own), by service (<name>.<namespace>): each is a first request that waited for the cluster; declare the service to keep it warm. Counted with --upstreams=declared only.",
}, []string{"service"})
