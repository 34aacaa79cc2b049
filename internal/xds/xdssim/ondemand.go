// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// On-demand cluster discovery (ODCDS), as Envoy 1.40 does it:
//   - HTTP: the on-demand filter (envoy.filters.http.on_demand) with odcds set pauses a request
//     whose route names a cluster Envoy does not have, asks the config source for that one name
//     (delta xDS, resource_names_subscribe), and resumes when the cluster arrives or its timeout
//     (5 s unless set) passes; the router then forwards, or answers cluster_not_found (503).
//   - TCP: tcp_proxy's on_demand does the same for its one cluster; without an answer the
//     connection is closed (NO_CLUSTER_FOUND).
// The fetched cluster stays: later requests find it at once. Only ADS is modelled as the source
// (the agent answers there); the answer is the Fetcher's (a test wires the server's).

// Fetcher answers an on-demand request for one cluster as the control plane would: the cluster
// and the load assignments it reads, or ok false when it has none of that name.
type Fetcher func(cluster string) (c *clusterv3.Cluster, endpoints []*endpointv3.ClusterLoadAssignment, ok bool)

// FetchOnDemand makes f the control plane's answer to on-demand requests. Without one, every
// on-demand request goes unanswered (a control plane that has no such cluster).
func (s *Sim) FetchOnDemand(f Fetcher) { s.fetch = f }

// defaultOnDemandTimeout is the on-demand filter's timeout when its config sets none.
const defaultOnDemandTimeout = 5 * time.Second

// odcds is an on-demand configuration: where to ask and how long to wait.
type odcds struct {
	source  *corev3.ConfigSource
	timeout time.Duration
}

// newODCDS reads a config source and timeout; nil when source is nil (discovery disabled).
func newODCDS(source *corev3.ConfigSource, timeout *durationpb.Duration) *odcds {
	if source == nil {
		return nil
	}
	o := &odcds{source: source, timeout: defaultOnDemandTimeout}
	if timeout != nil {
		o.timeout = timeout.AsDuration()
	}
	return o
}

// httpOnDemand is the HCM's on-demand filter's discovery configuration, nil when it has none.
func httpOnDemand(hcm *hcmv3.HttpConnectionManager) *odcds {
	for _, f := range hcm.GetHttpFilters() {
		var config ondemandv3.OnDemand
		if tc := f.GetTypedConfig(); tc != nil && unpack(tc, &config) {
			return newODCDS(config.GetOdcds().GetSource(), config.GetOdcds().GetTimeout())
		}
	}
	return nil
}

// discover is on-demand discovery of the cluster name before a request or connection goes to
// it: nothing when Envoy has it or discovery is off; else the request waits, recorded in out,
// for the Fetcher's answer, which Envoy keeps, or for the timeout. An error for what is not
// modelled.
func (s *Sim) discover(out *Outcome, name string, o *odcds) error {
	if _, have := s.clusters[name]; have || o == nil {
		return nil
	}
	if o.source.GetAds() == nil {
		return fmt.Errorf("%w: on-demand discovery of %q from a source other than ADS", ErrUnsupported, name)
	}
	out.OnDemand = append(out.OnDemand, name)
	var c *clusterv3.Cluster
	var endpoints []*endpointv3.ClusterLoadAssignment
	ok := false
	if s.fetch != nil {
		c, endpoints, ok = s.fetch(name)
	}
	if !ok || c.GetName() != name {
		out.OnDemandWaited += o.timeout
		return nil
	}
	s.clusters[name] = c
	for _, e := range endpoints {
		s.endpoints[e.GetClusterName()] = e
	}
	return nil
}
