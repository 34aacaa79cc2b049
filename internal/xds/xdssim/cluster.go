// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"fmt"
	"net/netip"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// upstream is what a target's resolution needs from the downstream side.
type upstream struct {
	// http says the router (not tcp_proxy) connects: the HTTP pool's ALPN fallback applies.
	http bool
	// request is the HTTP request (http only).
	request *Request
	// local is the connection's destination, where an ORIGINAL_DST cluster connects.
	local netip.AddrPort
	// state is the downstream connection's filter state.
	state filterState
}

// target resolves one cluster a connection or request goes to: the cluster, its TLS context,
// its membership and which members receive traffic.
func (s *Sim) target(name string, weight uint32, up upstream) Target {
	t := Target{Cluster: name, Weight: weight}
	cl, ok := s.clusters[name]
	if !ok {
		t.Err = fmt.Errorf("%w: %q", ErrNoCluster, name)
		return t
	}
	if err := s.resolve(&t, cl, up); err != nil {
		t.Err = err
	}
	return t
}

func (s *Sim) resolve(t *Target, cl *clusterv3.Cluster, up upstream) error {
	if cl.GetClusterType() != nil || cl.GetLoadBalancingPolicy() != nil {
		return fmt.Errorf("%w: cluster %q uses a custom cluster type or load_balancing_policy", ErrUnsupported, cl.GetName())
	}
	for _, m := range cl.GetTransportSocketMatches() {
		// A match with criteria is chosen by an endpoint's envoy.transport_socket_match metadata
		// (checked in members: none may carry it) or by a health check's criteria: traffic keeps
		// the cluster's own socket. One without criteria takes every connection: not modelled.
		if len(m.GetMatch().GetFields()) == 0 {
			return fmt.Errorf("%w: cluster %q has a transport socket match without criteria (%q)", ErrUnsupported, cl.GetName(), m.GetName())
		}
	}
	t.Type = cl.GetType().String()
	var opts *upstreamhttpv3.HttpProtocolOptions
	var err error
	if up.http {
		if t.UpstreamHTTP, opts, err = upstreamHTTP(cl, up.request.HTTP2); err != nil {
			return err
		}
	}
	if t.TLS, err = upstreamTLS(cl, up, t.UpstreamHTTP, opts); err != nil {
		return err
	}
	if t.Netns, t.Mark, err = upstreamSource(cl, up.state); err != nil {
		return err
	}
	var cla *endpointv3.ClusterLoadAssignment
	switch cl.GetType() {
	case clusterv3.Cluster_ORIGINAL_DST:
		t.Passthrough = up.local.String()
		return sourceFamilies(cl, []string{up.local.Addr().String()})
	case clusterv3.Cluster_EDS:
		t.LoadAssignment = cl.GetEdsClusterConfig().GetServiceName()
		if t.LoadAssignment == "" {
			t.LoadAssignment = cl.GetName()
		}
		found, ok := s.endpoints[t.LoadAssignment]
		if !ok {
			return fmt.Errorf("%w: %q (cluster %q)", ErrNoLoadAssignment, t.LoadAssignment, cl.GetName())
		}
		cla = found
	default: // STATIC, STRICT_DNS, LOGICAL_DNS: the inline load assignment
		cla = cl.GetLoadAssignment()
		t.LoadAssignment = cla.GetClusterName()
	}
	if t.Endpoints, err = members(cla); err != nil {
		return fmt.Errorf("cluster %q: %w", cl.GetName(), err)
	}
	balance(t.Endpoints, cl, cla)
	if len(t.Receiving()) == 0 {
		return fmt.Errorf("%w: cluster %q has %d endpoints and none is routable", ErrNoHealthyUpstream, cl.GetName(), len(t.Endpoints))
	}
	var addrs []string
	for _, e := range t.Receiving() {
		addrs = append(addrs, e.Address)
	}
	return sourceFamilies(cl, addrs)
}

// transportSocketMatchKey is the metadata filter under which an endpoint picks one of its
// cluster's transport_socket_matches.
const transportSocketMatchKey = "envoy.transport_socket_match"

// members flattens a load assignment into its endpoints.
func members(cla *endpointv3.ClusterLoadAssignment) ([]Endpoint, error) {
	var out []Endpoint
	for _, le := range cla.GetEndpoints() {
		loc := le.GetLocality()
		locality := loc.GetRegion() + "/" + loc.GetZone() + "/" + loc.GetSubZone()
		for _, lb := range le.GetLbEndpoints() {
			ep := lb.GetEndpoint()
			if ep == nil {
				return nil, fmt.Errorf("%w: a named endpoint (endpoint_name)", ErrUnsupported)
			}
			if _, ok := lb.GetMetadata().GetFilterMetadata()[transportSocketMatchKey]; ok {
				return nil, fmt.Errorf("%w: an endpoint that picks its transport socket (%s metadata)", ErrUnsupported, transportSocketMatchKey)
			}
			e := Endpoint{Health: lb.GetHealthStatus().String(), Priority: le.GetPriority(), Locality: locality, Weight: 1}
			if w := lb.GetLoadBalancingWeight(); w != nil {
				e.Weight = w.GetValue()
			}
			switch {
			case ep.GetAddress().GetSocketAddress() != nil:
				e.Address, e.Port = ep.GetAddress().GetSocketAddress().GetAddress(), ep.GetAddress().GetSocketAddress().GetPortValue()
			case ep.GetAddress().GetPipe() != nil:
				e.Address = "unix:" + ep.GetAddress().GetPipe().GetPath()
			default:
				return nil, fmt.Errorf("%w: endpoint address %v", ErrUnsupported, ep.GetAddress())
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// The coarse health Envoy gives an EDS status (HostImplBase::setEdsHealthFlag, coarseHealth):
// DRAINING is unhealthy and, with exclude_host_in_eds_status_draining (the default), excluded
// from the health computations.
func healthy(e Endpoint) bool  { return e.Health == "HEALTHY" || e.Health == "UNKNOWN" }
func degraded(e Endpoint) bool { return e.Health == "DEGRADED" }
func excluded(e Endpoint) bool { return e.Health == "DRAINING" }

// balance marks the endpoints that receive traffic, as LoadBalancerBase distributes it:
// recalculatePerPriorityState (each priority's health, scaled by the overprovisioning factor,
// takes load from the top priority down, healthy first, then degraded), recalculatePerPriorityPanic
// (a priority below the panic threshold balances over all its hosts, unless the normalized total
// health is 100), recalculateLoadInTotalPanic (every priority in panic: load by host count), and
// hostSourceToUse (a priority in panic uses all its hosts, a healthy one its healthy hosts, a
// degraded share its degraded hosts). With locality_weighted_lb_config a locality of weight 0
// receives nothing.
func balance(eps []Endpoint, cl *clusterv3.Cluster, cla *endpointv3.ClusterLoadAssignment) {
	levels := 0
	for _, e := range eps {
		levels = max(levels, int(e.Priority)+1)
	}
	if levels == 0 {
		return
	}
	health, degradedHealth := make([]int, levels), make([]int, levels)
	for p := range levels {
		health[p], degradedHealth[p] = availability(eps, uint32(p), cla)
	}
	normalized := min(100, sum(health)+sum(degradedHealth))
	healthyLoad, degradedLoad := make([]int, levels), make([]int, levels)
	if normalized > 0 {
		firstHealthy, rest := distribute(healthyLoad, health, 100, normalized)
		firstDegraded, rest := distribute(degradedLoad, degradedHealth, rest, normalized)
		if rest > 0 && firstHealthy >= 0 {
			healthyLoad[firstHealthy] += rest
		} else if rest > 0 {
			degradedLoad[firstDegraded] += rest
		}
	}
	threshold := panicThreshold(cl)
	panics := make([]bool, levels)
	if threshold == 0 && normalized == 0 {
		healthyLoad[0] = 100
	} else {
		total := true
		for p := range levels {
			panics[p] = normalized != 100 && inPanic(eps, uint32(p), threshold)
			total = total && panics[p]
		}
		if total {
			loadInTotalPanic(eps, healthyLoad, degradedLoad)
		}
	}
	failOnPanic := cl.GetCommonLbConfig().GetZoneAwareLbConfig().GetFailTrafficOnPanic()
	weighted := cl.GetCommonLbConfig().GetLocalityWeightedLbConfig() != nil
	zeroWeight := zeroWeightLocalities(cla)
	for i, e := range eps {
		p := e.Priority
		chosen := healthyLoad[p] > 0 || degradedLoad[p] > 0
		switch {
		case !chosen, weighted && zeroWeight[e.Locality]:
		case panics[p]:
			eps[i].Receives = !failOnPanic
		default:
			eps[i].Receives = healthyLoad[p] > 0 && healthy(e) || degradedLoad[p] > 0 && degraded(e)
		}
	}
}

// availability is a priority's healthy and degraded availability, 0..100: the overprovisioning
// factor (default 140) times the healthy (degraded) share of its non-excluded hosts, by count or,
// with weighted_priority_health, by weight.
func availability(eps []Endpoint, p uint32, cla *endpointv3.ClusterLoadAssignment) (int, int) {
	factor := 140
	if f := cla.GetPolicy().GetOverprovisioningFactor(); f != nil {
		factor = int(f.GetValue())
	}
	byWeight := cla.GetPolicy().GetWeightedPriorityHealth()
	var healthyW, degradedW, totalW int
	for _, e := range eps {
		if e.Priority != p || excluded(e) {
			continue
		}
		w := 1
		if byWeight {
			w = int(e.Weight)
		}
		totalW += w
		if healthy(e) {
			healthyW += w
		}
		if degraded(e) {
			degradedW += w
		}
	}
	if totalW == 0 {
		return 0, 0
	}
	return min(100, factor*healthyW/totalW), min(100, factor*degradedW/totalW)
}

// distribute is Envoy's distributeLoad: each priority takes its availability's share of what
// is left, top down. It returns the first priority with availability and the load left over.
func distribute(load, avail []int, total, normalized int) (int, int) {
	first := -1
	for i, a := range avail {
		if first < 0 && a > 0 {
			first = i
		}
		load[i] = min(total, a*100/normalized)
		total -= load[i]
	}
	return first, total
}

// panicThreshold is common_lb_config.healthy_panic_threshold rounded, 50 when unset, at most 100.
func panicThreshold(cl *clusterv3.Cluster) int {
	t := cl.GetCommonLbConfig().GetHealthyPanicThreshold()
	if t == nil {
		return 50
	}
	v := t.GetValue()
	return min(100, int(v+0.5))
}

// inPanic is isHostSetInPanic: the healthy and degraded share of the priority's non-excluded
// hosts, by count, is under the threshold (an empty priority is at 0).
func inPanic(eps []Endpoint, p uint32, threshold int) bool {
	var up, count int
	for _, e := range eps {
		if e.Priority != p || excluded(e) {
			continue
		}
		count++
		if healthy(e) || degraded(e) {
			up++
		}
	}
	share := 0.0
	if count > 0 {
		share = 100 * float64(up) / float64(count)
	}
	return share < float64(threshold)
}

// loadInTotalPanic is recalculateLoadInTotalPanic: load by each priority's share of all hosts
// (excluded ones included), the remainder to the first non-empty priority.
func loadInTotalPanic(eps []Endpoint, healthyLoad, degradedLoad []int) {
	counts := make([]int, len(healthyLoad))
	for _, e := range eps {
		counts[e.Priority]++
	}
	total := sum(counts)
	rest, first := 100, -1
	for p, n := range counts {
		if first < 0 && n > 0 {
			first = p
		}
		healthyLoad[p], degradedLoad[p] = 100*n/total, 0
		rest -= healthyLoad[p]
	}
	healthyLoad[first] += rest
}

// zeroWeightLocalities are the localities whose load_balancing_weight is 0 or unset.
func zeroWeightLocalities(cla *endpointv3.ClusterLoadAssignment) map[string]bool {
	zero := map[string]bool{}
	for _, le := range cla.GetEndpoints() {
		loc := le.GetLocality()
		if le.GetLoadBalancingWeight().GetValue() == 0 {
			zero[loc.GetRegion()+"/"+loc.GetZone()+"/"+loc.GetSubZone()] = true
		}
	}
	return zero
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}
