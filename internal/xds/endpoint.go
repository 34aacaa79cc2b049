// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// endpoints are the load assignments the upstream clusters read, sorted by name: one per listed
// port of every upstream service that has clusters (carries), LoadAssignment(fqdn, p). Its hosts are the members of the port's
// winning (port, protocol) pair, the endpoints declaring p with the protocol p is routed as; an
// endpoint that declares p with another protocol (a rollout retyping the port) is never in the
// pool (proposal 037 (c)). The name carries no source: whoever dials, the membership is the same.
func (b *builder) endpoints() []*endpointv3.ClusterLoadAssignment {
	if len(b.sources()) == 0 {
		// No pod dials, so no cluster reads a load assignment; a snapshot's EDS set must be
		// exactly the names its clusters read (go-control-plane's Consistent).
		return nil
	}
	out := assemble(b.memo.sortedLoadAssignments())
	warm := b.warm()
	for _, u := range b.upstreams() {
		if !warm.carriedByAny(u.key) {
			continue // no cluster reads it until one is fetched on demand (warm.go)
		}
		for _, p := range u.svc.Ports {
			if b.carries(p.Protocol) {
				out.add(b.portLoadAssignment(u.fqdn, p.Number, p.Pairs[0].Members))
			}
		}
	}
	return sortByName(b, "load assignment", out.list(), (*endpointv3.ClusterLoadAssignment).GetClusterName,
		b.memo.sortedLoadAssignments())
}

// portLoadAssignment is the load assignment of port of the service fqdn, whose members are
// members: the last build's when it was made from the same members (Builder).
func (b *builder) portLoadAssignment(fqdn string, port int32, members []model.Member) *endpointv3.ClusterLoadAssignment {
	if reused := b.reusedLoadAssignment(fqdn, port, members); reused != nil {
		return reused
	}
	before := len(b.skipped)
	cla := b.loadAssignment(LoadAssignment(fqdn, port), members)
	b.recordLoadAssignment(fqdn, port, members, cla, b.skipped[before:])
	return cla
}

// loadAssignment groups members by locality, each locality a priority by its distance from the
// node (localityTier), weighted by the sum of its members' weights. Members come sorted by
// namespace and name (model.Pair's invariant), so the groups list them in that order.
func (b *builder) loadAssignment(name string, members []model.Member) *endpointv3.ClusterLoadAssignment {
	what := about{kind: "load assignment", name: name}
	groups := b.localityGroups(what, b.oneMemberPerAddress(name, members))
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	// Checked without its localities, each checked below (ClusterLoadAssignment sets no rule on
	// endpoints).
	b.checkAbout(what, cla)
	cla.Endpoints = make([]*endpointv3.LocalityLbEndpoints, len(groups))
	var priority uint32
	for i, g := range groups {
		// Priorities are ranked densely: Envoy asks for 0..N without skipping, and grpc-go refuses
		// a gap. With no endpoint in the node's zone, the nearest tier present is priority 0.
		if i > 0 && g.tier != groups[i-1].tier {
			priority++
		}
		l := &endpointv3.LocalityLbEndpoints{
			// Always a locality, even an empty one: grpc-go refuses a group without one.
			Locality:            b.localityOf(g.locality),
			Priority:            priority,
			LoadBalancingWeight: b.weight(localityWeight(g.weight)),
		}
		// Checked without its hosts, shared and checked when made (host; LocalityLbEndpoints sets
		// no rule on lb_endpoints).
		b.checkAbout(what, l)
		l.LbEndpoints = g.hosts
		cla.Endpoints[i] = l
	}
	return cla
}

// localityGroup is the hosts of one locality of a load assignment.
type localityGroup struct {
	locality meshv1alpha1.Locality
	tier     int
	hosts    []*endpointv3.LbEndpoint
	// weight is the sum of the hosts' weights.
	weight uint64
}

// localityGroups are the kept members' hosts by locality, sorted by distance from the node, then
// region and zone; each group lists its hosts in the members' order.
func (b *builder) localityGroups(what about, kept []*model.Member) []localityGroup {
	groups := make([]localityGroup, 0, 3) // a load assignment spans a few zones
	for _, m := range kept {
		// Localities are few, so a scan finds a member's group.
		i := slices.IndexFunc(groups, func(g localityGroup) bool { return g.locality == m.Locality })
		if i < 0 {
			i = len(groups)
			groups = append(groups, localityGroup{locality: m.Locality, tier: b.localityTier(m.Locality)})
		}
		groups[i].weight += uint64(memberWeight(m.Weight))
	}
	slices.SortFunc(groups, func(x, y localityGroup) int {
		return cmp.Or(cmp.Compare(x.tier, y.tier), cmp.Compare(x.locality.Region, y.locality.Region),
			cmp.Compare(x.locality.Zone, y.locality.Zone))
	})
	// One list holds every group's hosts, each group a part of it (its capacity cut at its end,
	// so an append to one group's hosts could never write over the next group's).
	all := make([]*endpointv3.LbEndpoint, 0, len(kept))
	for i := range groups {
		start := len(all)
		for _, m := range kept {
			if m.Locality == groups[i].locality {
				all = append(all, b.host(what, m))
			}
		}
		groups[i].hosts = all[start:len(all):len(all)]
	}
	return groups
}

// The distance of an endpoint's locality from the node's, in the order Envoy should prefer them.
const (
	sameZone = iota
	sameRegion
	elsewhere
)

// localityTier is how far l is from the node: the same zone of the same region, another zone of
// the same region, or another region. A node without topology labels expresses no preference
// (every endpoint is as near as any), and one with a region but no zone prefers its region only:
// a missing label is not a place, and two nodes that both lack it are not neighbours. An
// endpoint whose node has no region is elsewhere to a node that has one.
func (b *builder) localityTier(l meshv1alpha1.Locality) int {
	node := b.mesh.Node.Locality
	switch {
	case node.Region == "" && node.Zone == "":
		return sameZone
	case l.Region != node.Region:
		return elsewhere
	case node.Zone != "" && l.Zone != node.Zone:
		return sameRegion
	}
	return sameZone
}

// localityWeight is the sum of a locality's endpoints' weights (each at least 1, so the sum is
// > 0, and a locality with hosts is never ignored), capped at what the field holds.
func localityWeight(sum uint64) uint32 { return uint32(min(sum, math.MaxUint32)) }

// lbEndpoint is the host of a member at address with health and weight (memberWeight's): its
// pod's inbound, <address>:18008, where the mesh hop lands whatever the port (the SNI picks the
// port there).
func lbEndpoint(address string, health meshv1alpha1.Health, weight *wrapperspb.UInt32Value) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: socketAddress(address, meshv1alpha1.ProxyInboundPort),
		}},
		HealthStatus:        healthStatus(health),
		LoadBalancingWeight: weight,
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
func (b *builder) oneMemberPerAddress(name string, members []model.Member) []*model.Member {
	out := make([]*model.Member, 0, len(members))
	var at map[string]int // address → index in out, for long lists (a scan is quicker on short ones)
	if len(members) > shortList {
		at = make(map[string]int, len(members))
	}
	for j := range members {
		m := &members[j]
		i := indexOfAddress(out, at, m.Address)
		if i < 0 {
			if at != nil {
				at[m.Address] = len(out)
			}
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

// shortList is how many members a load assignment has at most for oneMemberPerAddress to find
// a shared address by scanning rather than by a map.
const shortList = 16

// indexOfAddress is the index of the member at address in kept, or -1: by at when it is not nil.
func indexOfAddress(kept []*model.Member, at map[string]int, address string) int {
	if at != nil {
		if i, ok := at[address]; ok {
			return i
		}
		return -1
	}
	return slices.IndexFunc(kept, func(m *model.Member) bool { return m.Address == address })
}

// socketAddress is ip:port over TCP.
func socketAddress(ip string, port int32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       ip,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}
