// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// MaxServicePorts is how many ports a Service lists at most (the API's limit on a MeshService).
const MaxServicePorts = meshv1alpha1.MaxServicePorts

// Input is what a Service is built from: the MeshService's facts and its MeshEndpoints.
type Input struct {
	Namespace string
	Name      string
	// Identity is the service's SPIFFE ID.
	Identity string
	// VIP is the service's virtual IP; empty when it has none.
	VIP string
	// Endpoints are the service's MeshEndpoints, in any order, each object once (as a lister
	// returns them). They are read, never modified.
	Endpoints []meshv1alpha1.MeshEndpoint
}

// Service is one mesh service: what every renderer (status, xDS) reads.
type Service struct {
	Namespace string
	Name      string
	Identity  string
	VIP       string
	// Primary is the port the most endpoints declare primary (see BuildService); 0 without endpoints.
	Primary int32
	// Endpoints counts the service's endpoints; Ready those Healthy.
	Endpoints int32
	Ready     int32
	// Ports are the listed ports, sorted by number, each once, at most MaxServicePorts.
	Ports []Port
	// LeftOut are the declared ports the cap left out, sorted.
	LeftOut []int32
	// SubsetKeys are the metadata keys the service's endpoints publish
	// (metadata.endpoint.aether.io/<key>), sorted, each once: the vocabulary clients select
	// subsets with (x-aether-subset-<key>). A reserved key never appears (portspec refuses it; a
	// MeshEndpoint written by other means that carries one is not published under it).
	SubsetKeys []string
	// ActiveCheck is how the clients' proxies probe the service's endpoints themselves; the zero
	// value when no endpoint asks them to (the node agents' verdicts alone then decide).
	ActiveCheck ActiveCheck
}

// ActiveCheck is the clients' own probing of a service's endpoints, which an endpoint asks for
// with endpoint.aether.io/health-check-mode: active. A proxy's probe configuration belongs to a
// cluster, a service's port, not to one endpoint: so when any endpoint asks, every endpoint of
// the service is probed (during a rollout that turns it on, the others too), on top of the
// health its node agent publishes.
type ActiveCheck struct {
	// Path is the HTTP path probed on an HTTP primary: the one most of the asking endpoints
	// declare, ties to the lower path; empty when nothing is probed.
	Path string
}

// On reports whether the clients probe.
func (c ActiveCheck) On() bool { return c.Path != "" }

// Clone is a copy of s whose slices (its ports, their pairs and members, LeftOut, SubsetKeys) are
// its own, so that a change to the copy reaches nothing else. The members' Metadata stays shared,
// read only as BuildService leaves it.
func (s Service) Clone() Service {
	s.Ports = slices.Clone(s.Ports)
	for i := range s.Ports {
		s.Ports[i].Pairs = slices.Clone(s.Ports[i].Pairs)
		for j := range s.Ports[i].Pairs {
			s.Ports[i].Pairs[j].Members = slices.Clone(s.Ports[i].Pairs[j].Members)
		}
	}
	s.LeftOut = slices.Clone(s.LeftOut)
	s.SubsetKeys = slices.Clone(s.SubsetKeys)
	return s
}

// Port is one listed port of a service.
type Port struct {
	Number int32
	// Protocol is the protocol the port is reported and routed as: Pairs[0]'s.
	Protocol meshv1alpha1.Protocol
	// Pairs are the port's (port, protocol) declarations, one per protocol, in vote order: the
	// winner first. More than one is a conflict (a rollout that retypes the port).
	Pairs []Pair
}

// Declared is how many endpoints declare the port, whatever the protocol.
func (p Port) Declared() int32 {
	var n int32
	for _, pr := range p.Pairs {
		n += int32(len(pr.Members))
	}
	return n
}

// Pair is the membership of one (port, protocol) declaration.
type Pair struct {
	Protocol meshv1alpha1.Protocol
	// Members are the endpoints declaring the port with this protocol, sorted by namespace and
	// name, each once.
	Members []Member
	// Ready counts the Healthy members.
	Ready int32
	// Newest is the creation time of the youngest member.
	Newest time.Time
}

// Member is one endpoint as a member of a (port, protocol) pair.
type Member struct {
	Namespace string
	Name      string
	Address   string
	Node      string
	Health    meshv1alpha1.Health
	Weight    int32
	Locality  meshv1alpha1.Locality
	// Metadata is the endpoint's metadata (a copy, shared by its pairs: read only).
	Metadata map[string]string
	// AppProtocol is what the endpoint declares the port speaks within the protocol (grpc or empty).
	AppProtocol meshv1alpha1.AppProtocol
	// Primary is the port the endpoint itself declares primary, which may not be the service's
	// (a rollout that moves the primary): what a connection without SNI reaches on its inbound.
	Primary int32
	// Created is the endpoint's creation time, which the votes' tie-breaks read.
	Created time.Time
}

// BuildService builds the service's model from its endpoints. Whatever their order, the result is
// the same:
//   - each (port, protocol) pair lists the endpoints declaring it;
//   - a port's protocol is the pair with the most ready members, ties to the newer declaration
//     (the pair whose newest member is younger), then to the protocol's name;
//   - the primary is the port the most endpoints declare primary, ties to the newer declaration,
//     then to the lower port;
//   - at most MaxServicePorts ports are listed: the primary, then those declared by the most
//     endpoints (whatever the protocol), ties to the lower port; the rest are LeftOut.
func BuildService(in Input) Service {
	svc := Service{Namespace: in.Namespace, Name: in.Name, Identity: in.Identity, VIP: in.VIP}
	// Sorted by namespace and name, so each pair lists its members in that order. Pointers: a
	// MeshEndpoint is about 2 KB, and moving 500 of them while sorting cost more than the rest.
	endpoints := make([]*meshv1alpha1.MeshEndpoint, len(in.Endpoints))
	for i := range in.Endpoints {
		endpoints[i] = &in.Endpoints[i]
	}
	slices.SortStableFunc(endpoints, func(a, b *meshv1alpha1.MeshEndpoint) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})

	// Each pair's members are counted first, so that its list is allocated once.
	type declaration struct {
		port     int32
		protocol meshv1alpha1.Protocol
	}
	counts := map[declaration]int{}
	for _, ep := range endpoints {
		for _, p := range ep.Spec.Ports {
			counts[declaration{p.Port, p.Protocol}]++
		}
	}
	pairs := map[int32]map[meshv1alpha1.Protocol]*Pair{}
	for _, ep := range endpoints {
		svc.Endpoints++
		healthy := ep.Status.Health == meshv1alpha1.HealthHealthy
		if healthy {
			svc.Ready++
		}
		m := Member{Namespace: ep.Namespace, Name: ep.Name, Address: ep.Spec.Address, Node: ep.Spec.NodeName,
			Health: ep.Status.Health, Weight: ep.Spec.Weight, Locality: ep.Spec.Locality,
			Metadata: maps.Clone(ep.Spec.Metadata), Created: ep.CreationTimestamp.Time, Primary: ep.Spec.PrimaryPort}
		for key := range ep.Spec.Metadata {
			if !portspec.ReservedMetadataKey(key) && !slices.Contains(svc.SubsetKeys, key) {
				svc.SubsetKeys = append(svc.SubsetKeys, key)
			}
		}
		for _, p := range ep.Spec.Ports {
			if pairs[p.Port] == nil {
				pairs[p.Port] = map[meshv1alpha1.Protocol]*Pair{}
			}
			pr := pairs[p.Port][p.Protocol]
			if pr == nil {
				pr = &Pair{Protocol: p.Protocol, Members: make([]Member, 0, counts[declaration{p.Port, p.Protocol}])}
				pairs[p.Port][p.Protocol] = pr
			}
			m.AppProtocol = p.AppProtocol
			pr.Members = append(pr.Members, m)
			if healthy {
				pr.Ready++
			}
			if pr.Newest.Before(m.Created) {
				pr.Newest = m.Created
			}
		}
	}
	slices.Sort(svc.SubsetKeys)
	if len(endpoints) == 0 {
		return svc
	}

	svc.Primary = primaryVote(endpoints)
	svc.ActiveCheck = activeCheckVote(endpoints)
	ports := make([]Port, 0, len(pairs))
	for _, number := range slices.Sorted(maps.Keys(pairs)) {
		port := Port{Number: number, Pairs: make([]Pair, 0, len(pairs[number]))}
		for _, pr := range pairs[number] {
			port.Pairs = append(port.Pairs, *pr)
		}
		slices.SortFunc(port.Pairs, protocolVote)
		port.Protocol = port.Pairs[0].Protocol
		ports = append(ports, port)
	}
	svc.Ports, svc.LeftOut = capPorts(ports, svc.Primary)
	return svc
}

// protocolVote orders a port's pairs, the winner first: most ready members, then the newer
// declaration, then the protocol's name. Each key is a fact of the whole set of endpoints.
func protocolVote(a, b Pair) int {
	return cmp.Or(-cmp.Compare(a.Ready, b.Ready), -a.Newest.Compare(b.Newest), cmp.Compare(a.Protocol, b.Protocol))
}

// activeCheckVote is the service's ActiveCheck: on when an endpoint asks for it, probing the path
// most of those that ask declare (ties to the lower path). A MeshEndpoint written by other means
// without a path probes "/", its CRD default.
func activeCheckVote(endpoints []*meshv1alpha1.MeshEndpoint) ActiveCheck {
	tally := map[string]int{}
	for _, ep := range endpoints {
		if ep.Spec.HealthCheck.Mode == meshv1alpha1.HealthCheckActive {
			tally[cmp.Or(ep.Spec.HealthCheck.Path, "/")]++
		}
	}
	var best string
	for path, n := range tally {
		if best == "" || n > tally[best] || n == tally[best] && path < best {
			best = path
		}
	}
	return ActiveCheck{Path: best}
}

// primaryVote is the primary port most endpoints declare; ties go to the newer declaration (the
// port whose newest declaring endpoint is younger), then to the lower port.
func primaryVote(endpoints []*meshv1alpha1.MeshEndpoint) int32 {
	type votes struct {
		count  int
		newest time.Time
	}
	tally := map[int32]*votes{}
	for _, ep := range endpoints {
		v := tally[ep.Spec.PrimaryPort]
		if v == nil {
			v = &votes{}
			tally[ep.Spec.PrimaryPort] = v
		}
		v.count++
		if v.newest.Before(ep.CreationTimestamp.Time) {
			v.newest = ep.CreationTimestamp.Time
		}
	}
	ports := slices.Collect(maps.Keys(tally))
	slices.SortFunc(ports, func(a, b int32) int {
		va, vb := tally[a], tally[b]
		return cmp.Or(-cmp.Compare(va.count, vb.count), -va.newest.Compare(vb.newest), cmp.Compare(a, b))
	})
	return ports[0]
}

// capPorts keeps at most MaxServicePorts of the sorted ports: the primary, then those declared by
// the most endpoints (whatever the protocol), ties to the lower port. It returns the kept ports,
// sorted, and the numbers of those left out, sorted.
func capPorts(ports []Port, primary int32) (kept []Port, leftOut []int32) {
	if len(ports) <= MaxServicePorts {
		return ports, nil
	}
	ranked := slices.Clone(ports)
	slices.SortFunc(ranked, func(a, b Port) int {
		return cmp.Or(-cmp.Compare(boolRank(a.Number == primary), boolRank(b.Number == primary)),
			-cmp.Compare(a.Declared(), b.Declared()), cmp.Compare(a.Number, b.Number))
	})
	kept = ranked[:MaxServicePorts]
	slices.SortFunc(kept, func(a, b Port) int { return cmp.Compare(a.Number, b.Number) })
	for _, p := range ranked[MaxServicePorts:] {
		leftOut = append(leftOut, p.Number)
	}
	slices.Sort(leftOut)
	return kept, leftOut
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BuildServices is the mesh's services as every reader of the cluster sees them: one Service per
// MeshService, sorted by namespace and name, built (BuildService) from the MeshService's VIP and
// identity and its verified endpoints (registration.Verified: the controller's verdict that a
// real pod stands behind them, for the endpoint's current generation). An endpoint whose service
// has no MeshService is left out: without the service's identity no client could pin its
// certificate. The node agent builds its data plane from it; `kubectl aether dial --from` its
// explanation of the same.
func BuildServices(services []meshv1alpha1.MeshService, endpoints []meshv1alpha1.MeshEndpoint) []Service {
	byService := GroupMembers(pointers(endpoints))
	out := make([]Service, 0, len(services))
	for i := range services {
		ms := &services[i]
		out = append(out, BuildService(inputOf(ms, byService[ServiceKey{ms.Namespace, ms.Name}].endpoints)))
	}
	sortServices(out)
	return out
}

// ServiceBuilder builds what BuildServices builds, reusing a service's model from its previous
// build while its MeshService and the verified MeshEndpoints it was built from are the same
// objects, by resourceVersion. The node agent rebuilds its whole mesh on every change it sees, and
// a change touches one service: at a thousand services of ten endpoints, building every service
// again was most of a rebuild. An object without a resourceVersion (one that did not come from
// the API server) is never taken for unchanged. Safe for concurrent use.
type ServiceBuilder struct {
	mu sync.Mutex
	// built is each service's model and what it was built from, kept in place across builds (a
	// new map per build was most of what a build of an unchanged mesh allocated); a service not
	// listed in a build is dropped at its end.
	built map[ServiceKey]builtService
	// builds counts the builds: each entry notes the last it was listed in.
	builds uint64
}

// builtService is one service's model, the resourceVersion and members' fingerprint it was built
// from, and the last build that listed it.
type builtService struct {
	version     string
	fingerprint string
	listed      uint64
	service     Service
}

// Build is BuildServices(services, endpoints), each unchanged service's model reused. The
// endpoints are read, never modified (they may be a cache's own objects). The Services returned
// share their slices with the builder's memory and later builds: read them, never modify them.
func (sb *ServiceBuilder) Build(services []meshv1alpha1.MeshService, endpoints []*meshv1alpha1.MeshEndpoint) []Service {
	return sb.BuildMembers(services, GroupMembers(endpoints))
}

// BuildMembers is Build with the endpoints already grouped by service (GroupMembers, or NewMembers
// per service): a caller that keeps its groups across builds recomputes only the changed
// services' Members, and the unchanged ones cost a lookup here. A service missing from members
// has no endpoints.
func (sb *ServiceBuilder) BuildMembers(services []meshv1alpha1.MeshService, members map[ServiceKey]Members) []Service {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.built == nil {
		sb.built = make(map[ServiceKey]builtService, len(services))
	}
	sb.builds++
	kept := 0
	out := make([]Service, 0, len(services))
	for i := range services {
		ms := &services[i]
		k := ServiceKey{ms.Namespace, ms.Name}
		m := members[k]
		// Equal resourceVersions and fingerprints are equal inputs: the API server gives an
		// object a new resourceVersion on every change. Without one, nothing says so.
		versioned := ms.ResourceVersion != "" && !m.unversioned
		prev, ok := sb.built[k]
		if !ok || !versioned || prev.version != ms.ResourceVersion || prev.fingerprint != m.fingerprint {
			prev = builtService{version: ms.ResourceVersion, fingerprint: m.fingerprint, service: BuildService(inputOf(ms, m.endpoints))}
		}
		if versioned {
			prev.listed = sb.builds
			sb.built[k] = prev
			kept++
		} else if ok {
			delete(sb.built, k)
		}
		out = append(out, prev.service)
	}
	if len(sb.built) > kept {
		maps.DeleteFunc(sb.built, func(_ ServiceKey, b builtService) bool { return b.listed != sb.builds })
	}
	sortServices(out)
	return out
}

// ServiceKey is a service's namespace and name (an endpoint's namespace and spec.serviceName).
type ServiceKey struct{ Namespace, Name string }

// Members are one service's verified endpoints (registration.Verified), sorted by name, and their
// fingerprint: what BuildMembers reads of a service's endpoints. Computed once per change of the
// service's endpoints, they spare a caller that keeps them the grouping, the sort and the
// fingerprint of every unchanged service on every build.
type Members struct {
	endpoints []*meshv1alpha1.MeshEndpoint
	// fingerprint names the endpoints: each one's name and resourceVersion, in name order.
	fingerprint string
	// unversioned is set when an endpoint has no resourceVersion: its service is always built.
	unversioned bool
}

// NewMembers are the Members of one service's endpoints, given in any order, each object once
// (verified or not: the others are left out). The endpoints are read, never modified.
func NewMembers(endpoints []*meshv1alpha1.MeshEndpoint) Members {
	var verified []*meshv1alpha1.MeshEndpoint
	for _, ep := range endpoints {
		if registration.Verified(ep) {
			verified = append(verified, ep)
		}
	}
	return membersOf(verified)
}

// membersOf are the Members of a service's verified endpoints, which it sorts in place.
func membersOf(verified []*meshv1alpha1.MeshEndpoint) Members {
	m := Members{endpoints: verified}
	// Sorted, so that a service's input reads the same however the lister ordered them.
	slices.SortFunc(m.endpoints, func(a, b *meshv1alpha1.MeshEndpoint) int { return cmp.Compare(a.Name, b.Name) })
	size := 0
	for _, ep := range m.endpoints {
		size += len(ep.Name) + len(ep.ResourceVersion) + 2
	}
	var b strings.Builder
	b.Grow(size) // one allocation: BuildServices fingerprints every service on every call
	for _, ep := range m.endpoints {
		if ep.ResourceVersion == "" {
			m.unversioned = true
		}
		b.WriteByte(0)
		b.WriteString(ep.Name)
		b.WriteByte('/')
		b.WriteString(ep.ResourceVersion)
	}
	m.fingerprint = b.String()
	return m
}

// GroupMembers are the Members of each service the verified endpoints name (namespace,
// spec.serviceName). The endpoints are read, never modified.
func GroupMembers(endpoints []*meshv1alpha1.MeshEndpoint) map[ServiceKey]Members {
	byService := map[ServiceKey][]*meshv1alpha1.MeshEndpoint{}
	for _, ep := range endpoints {
		if registration.Verified(ep) {
			k := ServiceKey{ep.Namespace, ep.Spec.ServiceName}
			byService[k] = append(byService[k], ep)
		}
	}
	out := make(map[ServiceKey]Members, len(byService))
	for k, verified := range byService {
		out[k] = membersOf(verified)
	}
	return out
}

// pointers are pointers to each of endpoints.
func pointers(endpoints []meshv1alpha1.MeshEndpoint) []*meshv1alpha1.MeshEndpoint {
	out := make([]*meshv1alpha1.MeshEndpoint, len(endpoints))
	for i := range endpoints {
		out[i] = &endpoints[i]
	}
	return out
}

// inputOf is the model's input of MeshService ms with its verified endpoints, copied.
func inputOf(ms *meshv1alpha1.MeshService, endpoints []*meshv1alpha1.MeshEndpoint) Input {
	in := Input{Namespace: ms.Namespace, Name: ms.Name, Identity: ms.Status.Identity, VIP: ms.Status.VIP}
	if len(endpoints) > 0 {
		in.Endpoints = make([]meshv1alpha1.MeshEndpoint, len(endpoints))
		for i, ep := range endpoints {
			in.Endpoints[i] = *ep
		}
	}
	return in
}

func sortServices(services []Service) {
	slices.SortFunc(services, func(a, b Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// WithoutUDP is s as a renderer of TCP sees it: its UDP ports left out (Ports; the Primary stays,
// so a UDP primary is then among no port). The node proxy's TCP and HTTP listeners, clusters and
// load assignments are built from it, so that a UDP port never gets a TCP chain or cluster. s
// itself when it has no UDP port (no copy).
func (s Service) WithoutUDP() Service {
	if !slices.ContainsFunc(s.Ports, func(p Port) bool { return p.Protocol.IsUDP() }) {
		return s
	}
	s.Ports = slices.DeleteFunc(slices.Clone(s.Ports), func(p Port) bool { return p.Protocol.IsUDP() })
	return s
}
