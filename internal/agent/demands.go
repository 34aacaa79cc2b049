// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"github.com/go-logr/logr"

	"github.com/aether-mesh/aether-operator/internal/demand"
)

// DemandsFile is the on-demand record's state file, in the agent's run directory beside the
// network namespace registry (a tmpfs on the host: it goes with a reboot, as Envoy's clusters do).
const DemandsFile = "demands.json"

// OpenDemands is the node's record of what it fetched on demand (internal/demand), kept in file
// (empty: in memory only), each miss counted in aether_agent_upstreams_miss_total.
func OpenDemands(file string, log logr.Logger) (*demand.Record, error) {
	return demand.Open(demand.Options{Log: log.WithName("demand"), File: file,
		Miss: func(service string) { upstreamMisses.WithLabelValues(service).Inc() }})
}
