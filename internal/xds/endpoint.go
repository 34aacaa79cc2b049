// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// endpoints are the load assignments the upstream clusters read, sorted by name: one per listed
// port of every upstream service, LoadAssignment(fqdn, p). Its hosts are the members of the port's
// winning (port, protocol) pair, the endpoints declaring p with the protocol p is routed as; an
// endpoint that declares p with another protocol (a rollout retyping the port) is never in the
// pool (proposal 037 (c)). The name carries no source: whoever dials, the membership is the same.
func (b *builder) endpoints() []*endpointv3.ClusterLoadAssignment {
	if len(b.sources()) == 0 {
		// No pod dials, so no cluster reads a load assignment; a snapshot's EDS set must be
		// exactly the names its clusters read (go-control-plane's Consistent).
		return nil
	}
	var out []*endpointv3.ClusterLoadAssignment
	for _, u := range b.upstreams() {
		for _, p := range u.svc.Ports {
			out = append(out, b.loadAssignment(LoadAssignment(u.fqdn, p.Number), p.Pairs[0].Members))
		}
	}
	slices.SortFunc(out, func(x, y *endpointv3.ClusterLoadAssignment) int { return cmp.Compare(x.ClusterName, y.ClusterName) })
	requireUnique(b, "load assignment", out, (*endpointv3.ClusterLoadAssignment).GetClusterName)
	return out
}

// loadAssignment groups members by locality, each locality a priority by its distance from the
// node (localityTier), weighted by the sum of its members' weights. Members come sorted by
// namespace and name (model.Pair's invariant), so the groups list them in that order.
func (b *builder) loadAssignment(name string, members []model.Member) *endpointv3.ClusterLoadAssignment {
	groups := map[meshv1alpha1.Locality]*endpointv3.LocalityLbEndpoints{}
	for _, m := range b.oneMemberPerAddress(name, members) {
		g := groups[m.Locality]
		if g == nil {
			// Always a locality, even an empty one: grpc-go refuses a group without one.
			g = &endpointv3.LocalityLbEndpoints{Locality: &corev3.Locality{Region: m.Locality.Region, Zone: m.Locality.Zone}}
			groups[m.Locality] = g
		}
		g.LbEndpoints = append(g.LbEndpoints, lbEndpoint(m))
	}
	localities := slices.SortedFunc(maps.Keys(groups), func(x, y meshv1alpha1.Locality) int {
		return cmp.Or(cmp.Compare(b.localityTier(x), b.localityTier(y)),
			cmp.Compare(x.Region, y.Region), cmp.Compare(x.Zone, y.Zone))
	})
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: make([]*endpointv3.LocalityLbEndpoints, 0, len(groups))}
	var priority uint32
	for i, l := range localities {
		// Priorities are ranked densely: Envoy asks for 0..N without skipping, and grpc-go refuses
		// a gap. With no endpoint in the node's zone, the nearest tier present is priority 0.
		if i > 0 && b.localityTier(l) != b.localityTier(localities[i-1]) {
			priority++
		}
		g := groups[l]
		g.Priority = priority
		g.LoadBalancingWeight = wrapperspb.UInt32(localityWeight(g))
		cla.Endpoints = append(cla.Endpoints, g)
	}
	b.check("load assignment "+name, cla)
	return cla
}

// The distance of an endpoint's locality from the node's, in the order Envoy should prefer them.
const (
	sameZone = iota
	sameRegion
	elsewhere
)

// localityTier is how far l is from the node: the same zone of the same region, another zone of
// the same region, or another region.
func (b *builder) localityTier(l meshv1alpha1.Locality) int {
	node := b.mesh.Node.Locality
	switch {
	case l.Region != node.Region:
		return elsewhere
	case l.Zone != node.Zone:
		return sameRegion
	}
	return sameZone
}

// localityWeight is the sum of g's endpoints' weights (each at least 1, so the sum is > 0, and a
// locality with hosts is never ignored), capped at what the field holds.
func localityWeight(g *endpointv3.LocalityLbEndpoints) uint32 {
	var sum uint64
	for _, e := range g.LbEndpoints {
		sum += uint64(e.GetLoadBalancingWeight().GetValue())
	}
	return uint32(min(sum, math.MaxUint32))
}

// lbEndpoint is member m as a host: its pod's inbound, <address>:18008, where the mesh hop
// lands whatever the port (the SNI picks the port there), with m's health and weight.
func lbEndpoint(m model.Member) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: socketAddress(m.Address, meshv1alpha1.ProxyInboundPort),
		}},
		HealthStatus:        healthStatus(m.Health),
		LoadBalancingWeight: wrapperspb.UInt32(memberWeight(m.Weight)),
	}
}

// healthStatus is what Envoy is told of an endpoint's health. Only a Healthy endpoint receives
// traffic. Draining is DRAINING (no new requests; Envoy counts it apart). Unhealthy, Pending (not
// probed yet) and anything unknown are UNHEALTHY: not UNKNOWN, which Envoy treats as healthy, so a
// pod never receives traffic before its first probe passed. Clusters turn panic mode off
// (onlyHealthyHosts), so none of these is used even when few hosts are healthy.
func healthStatus(h meshv1alpha1.Health) corev3.HealthStatus {
	switch h {
	case meshv1alpha1.HealthHealthy:
		return corev3.HealthStatus_HEALTHY
	case meshv1alpha1.HealthDraining:
		return corev3.HealthStatus_DRAINING
	}
	return corev3.HealthStatus_UNHEALTHY
}

// memberWeight is an endpoint's load-balancing weight: the API defaults it to 1024 and bounds it
// to 1..65535; a zero (an object written before the default applied) counts as 1.
func memberWeight(w int32) uint32 {
	if w <= 0 {
		return 1
	}
	return uint32(w)
}

// oneMemberPerAddress keeps one member per address. Two endpoints share a pod IP for a moment
// when a deleted pod's endpoint (Draining) is still listed and a new pod was given its IP: both
// are the one host <ip>:18008 (Envoy keys hosts by address, and grpc-go refuses a load assignment
// listing an address twice). A Healthy member wins, else the first by namespace and name; the
// one left out is named in Resources.Skipped.
func (b *builder) oneMemberPerAddress(name string, members []model.Member) []model.Member {
	at := make(map[string]int, len(members)) // address → index in out
	out := make([]model.Member, 0, len(members))
	for _, m := range members {
		i, taken := at[m.Address]
		if !taken {
			at[m.Address] = len(out)
			out = append(out, m)
			continue
		}
		kept, dropped := out[i], m
		if m.Health == meshv1alpha1.HealthHealthy && kept.Health != meshv1alpha1.HealthHealthy {
			kept, dropped = m, kept
			out[i] = kept
		}
		b.skipped = append(b.skipped, fmt.Sprintf("load assignment %s: endpoint %s/%s (%s) is left out: it shares address %s with %s/%s (%s), which is kept",
			name, dropped.Namespace, dropped.Name, dropped.Health, m.Address, kept.Namespace, kept.Name, kept.Health))
	}
	return out
}

// socketAddress is ip:port over TCP.
func socketAddress(ip string, port int32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       ip,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}
