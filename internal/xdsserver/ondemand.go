// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"slices"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// On-demand cluster discovery. A node that carries its declared upstreams only
// (model.UpstreamsDeclared) leaves the other services' clusters out of its snapshot; when a
// request names one, the node's Envoy asks for it on its delta ADS stream
// (resource_names_subscribe on the cluster type, beside its wildcard subscription). The
// go-control-plane delta server answers a subscribed name only with what the snapshot holds, so
// the name is handed to the agent (OnClusterDemand), which builds the node's configuration with
// that service carried (xds.Demand, from its full model) and publishes it: the snapshot then
// holds the cluster and its load assignment, and the delta server sends them on the open watch.
// A name the agent has no cluster for is never answered; Envoy fails the request after its
// on-demand timeout.

// maxDemandedNames bounds the names one request hands over: a stream cannot make the agent hold
// more than that at once (each is resolved against the model, and only a local identity's
// cluster of an existing service is kept).
const maxDemandedNames = 1024

// OnClusterDemand makes the server call f with the node ID and the cluster names each time the
// node's Envoy subscribes to clusters by name on a delta stream (on-demand discovery). f is
// called on the stream's goroutine, without the server's locks held, and must not block. Each
// call adds one more f.
func (s *Server) OnClusterDemand(f func(nodeID string, clusters []string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDemand = append(s.onDemand, f)
}

// clusterDemand hands the names a delta request subscribes to (but the wildcard) to every
// OnClusterDemand function, when the request is for clusters.
func (s *Server) clusterDemand(nodeID, typeURL string, subscribe []string) {
	if typeURL != resourcev3.ClusterType || nodeID == "" {
		return
	}
	names := slices.DeleteFunc(slices.Clone(subscribe), func(n string) bool { return n == "*" || n == "" })
	if len(names) == 0 {
		return
	}
	if len(names) > maxDemandedNames {
		names = names[:maxDemandedNames]
	}
	s.mu.Lock()
	fs := slices.Clone(s.onDemand)
	s.mu.Unlock()
	for _, f := range fs {
		f(nodeID, names)
	}
}
