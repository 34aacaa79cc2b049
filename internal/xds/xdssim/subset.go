// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	h2mv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// The subset decision, as Envoy makes it for a routed request:
//   - the header-to-metadata filter writes the request's dynamic metadata: the most specific
//     per-filter configuration (the route's, else its virtual host's, else its route
//     configuration's), else the filter's own; a rule whose header is present sets its key to
//     its value (or the header's);
//   - the router's metadata match criteria are the route's metadata_match under envoy.lb, with
//     the request's envoy.lb dynamic metadata merged over them;
//   - the subset load balancer of the cluster: with criteria, a selector whose keys are exactly
//     the criteria's picks the hosts whose envoy.lb metadata carry every criterion, and, when
//     none is healthy, its own fallback policy decides (NOT_DEFINED: the cluster's); without
//     criteria, or without such a selector, the cluster's fallback policy decides: ANY_ENDPOINT
//     every host, NO_FALLBACK none;
//   - only healthy hosts take a request (the clusters turn panic mode off).
//
// It reads no mesh rule: a test holds its answers to the workload page.

// lbNamespace is where the subset load balancer reads metadata.
const lbNamespace = "envoy.lb"

// Subset is the subset load balancer's decision on a routed request.
type Subset struct {
	// Criteria are the metadata match criteria under envoy.lb, by key.
	Criteria map[string]string
	// Selector is the keys of the selector that decided, sorted; nil when the cluster's
	// fallback policy decided (no criteria, or no selector with exactly their keys).
	Selector []string
	// Hosts are the addresses of the healthy hosts the request may land on, in the load
	// assignment's order; none is a 503 (no healthy upstream).
	Hosts []string
}

// Status is what the caller gets when no host takes the request: 503; 0 when one does.
func (s Subset) Status() int {
	if len(s.Hosts) == 0 {
		return 503
	}
	return 0
}

// Subset is the subset decision on o, a request routed to one cluster: the hosts of its load
// assignment it may land on.
func (s *Sim) Subset(o Outcome) (Subset, error) {
	if o.routed == nil || len(o.Targets) != 1 {
		return Subset{}, fmt.Errorf("xdssim: %s did not route an HTTP request to one cluster", o)
	}
	c := s.clusters[o.Targets[0].Cluster]
	cla := s.endpoints[o.Targets[0].LoadAssignment]
	if c == nil || cla == nil {
		return Subset{}, fmt.Errorf("xdssim: cluster %q or its load assignment %q is missing", o.Targets[0].Cluster, o.Targets[0].LoadAssignment)
	}
	criteria, err := o.routed.criteria()
	if err != nil {
		return Subset{}, err
	}
	return subsetDecision(c, cla, criteria)
}

// criteria are the router's metadata match criteria under envoy.lb for the routed request.
func (r *routed) criteria() (map[string]string, error) {
	out := map[string]string{}
	for k, v := range r.route.GetRoute().GetMetadataMatch().GetFilterMetadata()[lbNamespace].GetFields() {
		out[k] = v.GetStringValue()
	}
	for _, f := range r.hcm.GetHttpFilters() {
		base := &h2mv3.Config{}
		if f.GetTypedConfig() == nil || !unpack(f.GetTypedConfig(), base) {
			continue
		}
		config := base
		if a := mostSpecific(f.GetName(), r); a != nil {
			config = &h2mv3.Config{}
			if !unpack(a, config) {
				return nil, fmt.Errorf("%w: the per-filter configuration of %q is not a header-to-metadata Config", ErrUnsupported, f.GetName())
			}
		}
		for _, rule := range config.GetRequestRules() {
			value, present := r.request[strings.ToLower(rule.GetHeader())]
			kv := rule.GetOnHeaderPresent()
			if !present {
				kv = rule.GetOnHeaderMissing()
				if kv.GetValue() == "" {
					continue
				}
			}
			if kv == nil || kv.GetMetadataNamespace() != lbNamespace {
				continue
			}
			if kv.GetValue() != "" {
				value = kv.GetValue()
			}
			if value != "" { // an empty value adds no metadata
				out[kv.GetKey()] = value
			}
		}
	}
	return out, nil
}

// mostSpecific is the per-filter configuration of the filter named name for the routed request:
// the route's, else its virtual host's, else its route configuration's; nil when none.
func mostSpecific(name string, r *routed) *anypb.Any {
	for _, m := range []map[string]*anypb.Any{r.route.GetTypedPerFilterConfig(), r.vh.GetTypedPerFilterConfig(), r.rc.GetTypedPerFilterConfig()} {
		if a := m[name]; a != nil {
			return a
		}
	}
	return nil
}

// subsetDecision is the subset load balancer of c over cla for criteria.
func subsetDecision(c *clusterv3.Cluster, cla *endpointv3.ClusterLoadAssignment, criteria map[string]string) (Subset, error) {
	out := Subset{Criteria: criteria}
	sc := c.GetLbSubsetConfig()
	var all, matching []string
	for _, l := range cla.GetEndpoints() {
		for _, h := range l.GetLbEndpoints() {
			if h.GetHealthStatus() != corev3.HealthStatus_HEALTHY && h.GetHealthStatus() != corev3.HealthStatus_UNKNOWN {
				continue
			}
			address := h.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
			all = append(all, address)
			fields := h.GetMetadata().GetFilterMetadata()[lbNamespace].GetFields()
			if len(criteria) > 0 && maps.EqualFunc(criteria, pick(fields, criteria), func(a, b string) bool { return a == b }) {
				matching = append(matching, address)
			}
		}
	}
	if sc == nil { // no subset load balancer: the metadata is not read
		out.Hosts = all
		return out, nil
	}
	fallback := func(p clusterv3.Cluster_LbSubsetConfig_LbSubsetFallbackPolicy) (Subset, error) {
		switch p {
		case clusterv3.Cluster_LbSubsetConfig_ANY_ENDPOINT:
			out.Hosts = all
		case clusterv3.Cluster_LbSubsetConfig_NO_FALLBACK:
		default:
			return Subset{}, fmt.Errorf("%w: subset fallback policy %s", ErrUnsupported, p)
		}
		return out, nil
	}
	keys := slices.Sorted(maps.Keys(criteria))
	if len(keys) == 0 {
		return fallback(sc.GetFallbackPolicy())
	}
	i := slices.IndexFunc(sc.GetSubsetSelectors(), func(s *clusterv3.Cluster_LbSubsetConfig_LbSubsetSelector) bool {
		return slices.Equal(slices.Sorted(slices.Values(s.GetKeys())), keys)
	})
	if i < 0 {
		return fallback(sc.GetFallbackPolicy())
	}
	selector := sc.GetSubsetSelectors()[i]
	out.Selector = keys
	if len(matching) > 0 {
		out.Hosts = matching
		return out, nil
	}
	switch selector.GetFallbackPolicy() {
	case clusterv3.Cluster_LbSubsetConfig_LbSubsetSelector_NOT_DEFINED:
		return fallback(sc.GetFallbackPolicy())
	case clusterv3.Cluster_LbSubsetConfig_LbSubsetSelector_NO_FALLBACK:
		return out, nil
	case clusterv3.Cluster_LbSubsetConfig_LbSubsetSelector_ANY_ENDPOINT:
		out.Hosts = all
		return out, nil
	}
	return Subset{}, fmt.Errorf("%w: subset selector fallback policy %s", ErrUnsupported, selector.GetFallbackPolicy())
}

// pick is the string values of fields under criteria's keys (a key fields lacks is left out).
func pick(fields map[string]*structpb.Value, criteria map[string]string) map[string]string {
	out := make(map[string]string, len(criteria))
	for k := range criteria {
		if v, ok := fields[k]; ok {
			out[k] = v.GetStringValue()
		}
	}
	return out
}
