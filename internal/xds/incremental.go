// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"maps"
	"net/netip"
	"reflect"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// Builder builds a node's resources exactly as Build does, byte for byte, and keeps what its
// last build made to reuse it: after one endpoint changes, the next build costs about that
// service's work, not the whole mesh's. Each reused output is keyed by everything it derives
// from, compared whole:
//
//   - what the selection derives from a service alone (serviceFacts: its validity, FQDN and port
//     set): the service itself (sameService, below);
//   - the VIPs and names the selected services hold (hold): their namespaces, names and VIPs, in
//     order;
//   - a service's upstream clusters, per source: the source, the service's FQDN, identity,
//     primary, default TCP port, ports with their protocols and published subset keys;
//   - a port's load assignment: the service's FQDN, the port and, per member, namespace, name,
//     address, health, weight, locality and metadata; and the node's locality;
//   - a pod's app clusters: its namespace, name, address and ports;
//   - the listeners and route configurations, together: the mesh without its endpoints
//     (listening). They are built from that projection alone, so they cannot read what the key
//     does not hold;
//   - the sorted lists of clusters and load assignments: the very resources, in the order they
//     were assembled.
//
// The mesh domain, the identity issuer, the upstreams mode and the hop protocol are part of every
// key (a change of any starts afresh), and so is the last build's success: a failed build keeps nothing, and its error reads
// exactly as Build's. What a build neither reuses nor makes is dropped. A Builder is not safe for
// concurrent use; its outputs, like Build's, must not be modified, neither the messages nor the
// lists of Resources (a later build may return the same messages, and the same lists of clusters
// and load assignments: read them, or copy them to change them; an append copies).
//
// Its inputs must not be modified either, once built: a service is compared by its slices'
// identities, not their contents. A Service whose other fields are equal and whose Ports,
// LeftOut and SubsetKeys are the very arrays of the last build's (the same first element, the
// same length) is taken as unchanged, its ports, pairs and members not read again; and a port's
// members that are the very array of the last build's keep its load assignment. So never modify
// a Service's slices, or what they hold (pairs, members, metadata), in place between builds:
// build a changed service anew, as model.BuildService does (model.ServiceBuilder shares an
// unchanged service's slices and builds a changed one anew), or change a copy (Service.Clone).
// Reading a thousand services' members again was most of a build after one endpoint changed.
type Builder struct {
	memo *memo
}

// Build renders m as Build does, reusing what the previous build made from equal inputs.
func (bl *Builder) Build(m model.Mesh) (Resources, error) {
	if bl.memo == nil || bl.memo.domain != m.Domain || bl.memo.issuer != m.Issuer || bl.memo.distribution != m.Upstreams ||
		bl.memo.hopHTTP3 != m.HopHTTP3 {
		bl.memo = &memo{domain: m.Domain, issuer: m.Issuer, distribution: m.Upstreams, hopHTTP3: m.HopHTTP3, services: map[serviceID]*serviceMemo{},
			upstreams: map[string]*upstreamMemo{}, loadAssignments: map[servicePortKey]*loadAssignmentMemo{},
			apps: map[podID]*appMemo{}}
	}
	res, err := build(m, bl.memo)
	if err != nil {
		// Nothing of a failed build is kept, and its failure is built afresh, so that it reads
		// exactly as Build's (the reused parts were valid, but the first error could otherwise
		// be reported by another part).
		bl.memo = nil
		return build(m, nil)
	}
	return res, nil
}

// memo is what the builds of a Builder made, each part with its key, for the next build to
// reuse. A build updates it in place: it marks each part it reuses or makes with its generation,
// and drops the others at its end (sweep).
type memo struct {
	domain string
	// issuer is the mesh's identity issuer: whether raw-TCP clusters exist at all.
	issuer workloadidentity.Issuer
	// distribution is the mesh's upstreams mode: whether the listeners fetch on demand.
	distribution model.UpstreamsMode
	// hopHTTP3 is whether the hop prefers HTTP/3: every HTTP cluster's protocol and transport.
	hopHTTP3 bool
	// gen is the build under way: the parts it reused or made carry it.
	gen uint64
	// locality is the node's, which every load assignment's priorities derive from.
	locality meshv1alpha1.Locality
	// services are the facts selected from each service (serviceFacts), by namespace and name;
	// held is what the selected services held (hold).
	services map[serviceID]*serviceMemo
	held     *heldMemo
	// upstreams are each upstream service's clusters, by FQDN, for each of sources (sorted).
	upstreams map[string]*upstreamMemo
	sources   []string
	// loadAssignments are the load assignments, by service and port.
	loadAssignments map[servicePortKey]*loadAssignmentMemo
	// apps are each pod's app clusters; nodeWide the passthrough and blackhole clusters.
	apps     map[podID]*appMemo
	nodeWide []*clusterv3.Cluster
	// clusterList and loadAssignmentList are the lists as assembled and as sorted (sortByName).
	clusterList        sortedList[*clusterv3.Cluster]
	loadAssignmentList sortedList[*endpointv3.ClusterLoadAssignment]
	listening          *listeningMemo
}

// start begins a build of m.
func (mm *memo) start(m model.Mesh) {
	mm.gen++
	if mm.locality != m.Node.Locality {
		clear(mm.loadAssignments)
		mm.locality = m.Node.Locality
	}
}

// sweep drops what the build that ends did not reuse or make: what the mesh no longer holds.
func (mm *memo) sweep() {
	maps.DeleteFunc(mm.services, func(_ serviceID, e *serviceMemo) bool { return e.gen != mm.gen })
	maps.DeleteFunc(mm.upstreams, func(_ string, e *upstreamMemo) bool { return e.gen != mm.gen })
	for _, e := range mm.upstreams {
		for i := range e.bySource {
			if e.bySource[i].gen != mm.gen {
				e.bySource[i] = sourceClusters{}
			}
		}
	}
	maps.DeleteFunc(mm.loadAssignments, func(_ servicePortKey, e *loadAssignmentMemo) bool { return e.gen != mm.gen })
	maps.DeleteFunc(mm.apps, func(_ podID, e *appMemo) bool { return e.gen != mm.gen })
}

// serviceID is a service, by namespace and name.
type serviceID struct{ namespace, name string }

// serviceMemo is a service's facts (serviceFacts) and the service they derive from. Keeping the
// service keeps its arrays alive, so that no other array can take their address while they are
// compared with (sameService).
type serviceMemo struct {
	gen   uint64
	svc   model.Service
	facts serviceFacts
}

// serviceFacts are s's facts (deriveFacts): the last build's when s is the service they were
// derived from (sameService). The domain they read is the memo's.
func (mm *memo) serviceFacts(domain string, s *model.Service) serviceFacts {
	if mm == nil {
		return deriveFacts(domain, s)
	}
	k := serviceID{s.Namespace, s.Name}
	e := mm.services[k]
	switch {
	case e == nil:
		e = &serviceMemo{svc: *s, facts: deriveFacts(domain, s)}
		mm.services[k] = e
	case !sameService(&e.svc, s):
		*e = serviceMemo{svc: *s, facts: deriveFacts(domain, s)}
	}
	e.gen = mm.gen
	return e.facts
}

// sameService reports whether s is the service last was, as the Builder's contract has it: the
// same fields, its slices the very arrays (sameArray) of last's. TestSameServiceSeesEveryField
// changes each field of a Service in turn.
func sameService(last, s *model.Service) bool {
	return last.Namespace == s.Namespace && last.Name == s.Name && last.Identity == s.Identity && last.VIP == s.VIP &&
		last.Primary == s.Primary && last.Endpoints == s.Endpoints && last.Ready == s.Ready && last.ActiveCheck == s.ActiveCheck &&
		sameArray(last.Ports, s.Ports) && sameArray(last.LeftOut, s.LeftOut) && sameArray(last.SubsetKeys, s.SubsetKeys)
}

// sameArray reports whether a and b are the same elements of the same array (or both empty).
func sameArray[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// heldMemo is what the selected services held (hold), each with what it derives from.
type heldMemo struct {
	services []heldService
	skipped  []error
}

// heldService is what one selected service held, and its namespace, name and VIP.
type heldService struct {
	namespace, name, vipSpelled string
	vip                         netip.Addr
	names                       []string
	localName                   string
}

// holdServices is hold(domain, services): the last build's holdings, given again, when services
// are the same namespaces, names and VIPs, in the same order. The domain is the memo's.
func (mm *memo) holdServices(domain string, services []meshService) []error {
	if mm == nil {
		return hold(domain, services)
	}
	if h := mm.held; h != nil && slices.EqualFunc(h.services, services, func(e heldService, s meshService) bool {
		return e.namespace == s.Namespace && e.name == s.Name && e.vipSpelled == s.VIP
	}) {
		for i := range services {
			e := &h.services[i]
			services[i].vip, services[i].names, services[i].localName = e.vip, e.names, e.localName
		}
		return h.skipped
	}
	skipped := hold(domain, services)
	h := &heldMemo{services: make([]heldService, len(services)), skipped: skipped}
	for i, s := range services {
		h.services[i] = heldService{namespace: s.Namespace, name: s.Name, vipSpelled: s.VIP, vip: s.vip,
			names: slices.Clip(s.names), localName: s.localName}
	}
	mm.held = h
	return skipped
}

// sortedList is a list of resources as a build assembled it and as it sorted it.
type sortedList[T comparable] struct {
	in, out []T
}

// assembly is a list of resources being assembled. While each item is the one the last build
// assembled at its place (last.in), nothing is copied: at 50 local identities a build assembles
// 150 000 clusters, and a list of them per build was half of what it allocated.
type assembly[T comparable] struct {
	last []T
	// n items are last[:n]; items holds them instead from the first that is not.
	n     int
	items []T
}

// assemble begins a list assembled in the order of last's (nil when nothing is kept).
func assemble[T comparable](last *sortedList[T]) *assembly[T] {
	if last == nil {
		return &assembly[T]{items: []T{}}
	}
	return &assembly[T]{last: last.in}
}

// add appends xs to the list.
func (a *assembly[T]) add(xs ...T) {
	for _, x := range xs {
		if a.items == nil && a.n < len(a.last) && a.last[a.n] == x {
			a.n++
			continue
		}
		if a.items == nil {
			a.items = append(make([]T, 0, max(len(a.last), a.n+len(xs))), a.last[:a.n]...)
		}
		a.items = append(a.items, x)
	}
}

// list is the list as assembled: a part of last's while it is theirs (read it, never modify it).
func (a *assembly[T]) list() []T {
	if a.items == nil {
		return a.last[:a.n]
	}
	return a.items
}

// sortByName returns items sorted by name, each name once (requireUnique). When items are the
// very resources the last build assembled, in the same order (every part was reused), its sorted
// list is returned again: sorting 8 000 clusters took longer than the rest of such a build. The
// list returned is the memo's, its capacity cut at its end so that an append copies it (the
// Builder's outputs are read only, their lists as their messages): a copy of 200 000 clusters
// (50 local identities) was a quarter of a build after one endpoint changed. last is nil when
// nothing is kept.
func sortByName[T comparable](b *builder, kind string, items []T, name func(T) string, last *sortedList[T]) []T {
	if last != nil && slices.Equal(last.in, items) {
		return slices.Clip(last.out)
	}
	sorted := items
	if last != nil {
		sorted = slices.Clone(items) // items stay as assembled, for the next build to compare
	}
	slices.SortFunc(sorted, func(x, y T) int { return cmp.Compare(name(x), name(y)) })
	requireUnique(b, kind, sorted, name)
	if last == nil {
		return sorted
	}
	last.in, last.out = items, sorted
	return slices.Clip(sorted)
}

// The memo's parts, for a build that may keep none (a nil memo).

func (mm *memo) sortedClusters() *sortedList[*clusterv3.Cluster] {
	if mm == nil {
		return nil
	}
	return &mm.clusterList
}

func (mm *memo) sortedLoadAssignments() *sortedList[*endpointv3.ClusterLoadAssignment] {
	if mm == nil {
		return nil
	}
	return &mm.loadAssignmentList
}

// nodeWideClusters are the passthrough and blackhole clusters, made once per Builder.
func (b *builder) nodeWideClusters() []*clusterv3.Cluster {
	if b.memo != nil && b.memo.nodeWide != nil {
		return b.memo.nodeWide
	}
	clusters := []*clusterv3.Cluster{b.passthroughCluster(), b.blackholeCluster()}
	if b.memo != nil {
		b.memo.nodeWide = clusters
	}
	return clusters
}

// podID is a local pod, by namespace and name.
type podID struct{ namespace, name string }

// appMemo is a pod's app clusters and what they derive from.
type appMemo struct {
	gen      uint64
	address  string
	udsPath  string
	ports    []meshv1alpha1.PortProtocol
	clusters []*clusterv3.Cluster
}

// podAppClusters are pod's app clusters (appClusters): the last build's when they were made from
// the same address, socket and ports.
func (b *builder) podAppClusters(pod model.LocalPod) []*clusterv3.Cluster {
	if b.memo == nil {
		return b.appClusters(pod)
	}
	k := podID{pod.Namespace, pod.Name}
	e := b.memo.apps[k]
	if e == nil || e.address != pod.Address || e.udsPath != pod.UDSPath || !slices.Equal(e.ports, pod.Ports) {
		e = &appMemo{address: pod.Address, udsPath: pod.UDSPath, ports: slices.Clone(pod.Ports), clusters: b.appClusters(pod)}
		b.memo.apps[k] = e
	}
	e.gen = b.memo.gen
	return e.clusters
}

// upstreamMemo is one service's upstream clusters, for each source, and what they derive from.
type upstreamMemo struct {
	gen        uint64
	identity   string
	primary    int32
	defaultTCP int32
	ports      []portShape
	subsetKeys []string
	// activeCheck is the service's probing of its endpoints (healthcheck.go), and probesGRPC
	// whether the probe speaks gRPC (its primary's declaration, which ports does not hold).
	activeCheck model.ActiveCheck
	probesGRPC  bool
	// bySource are each source's clusters, by its index in memo.sources.
	bySource []sourceClusters
}

// sourceClusters are the clusters of a service as one source dials it; nil when not made.
type sourceClusters struct {
	gen      uint64
	clusters []*clusterv3.Cluster
}

// portShape is a listed port as the clusters read it.
type portShape struct {
	number   int32
	protocol meshv1alpha1.Protocol
}

// derivesFrom reports whether the clusters of e derive from u as they stand.
func (e *upstreamMemo) derivesFrom(u upstream) bool {
	return e.identity == u.svc.Identity && e.primary == u.svc.Primary && e.defaultTCP == u.defaultTCP &&
		e.activeCheck == u.svc.ActiveCheck && e.probesGRPC == probesGRPC(u.svc) && slices.Equal(e.subsetKeys, u.svc.SubsetKeys) && slices.EqualFunc(e.ports, u.svc.Ports, func(s portShape, p model.Port) bool {
		return s.number == p.Number && s.protocol == p.Protocol
	})
}

// keptUpstreams are, for each of upstreams, its entry of the memo, whose clusters (bySource,
// indexed as sources) derive from it as it stands: the last build's when they do, an empty one
// otherwise. Each service is looked up and compared once, not once per source: at 50 local
// identities, a thousand services are 50 000 lists of clusters. Nil when nothing is kept.
func (mm *memo) keptUpstreams(upstreams []upstream, sources []string) []*upstreamMemo {
	if mm == nil {
		return nil
	}
	if !slices.Equal(mm.sources, sources) {
		mm.reindexSources(sources)
	}
	out := make([]*upstreamMemo, len(upstreams))
	for j, u := range upstreams {
		e := mm.upstreams[u.fqdn]
		if e == nil || !e.derivesFrom(u) {
			ports := make([]portShape, len(u.svc.Ports))
			for i, p := range u.svc.Ports {
				ports[i] = portShape{p.Number, p.Protocol}
			}
			e = &upstreamMemo{identity: u.svc.Identity, primary: u.svc.Primary, defaultTCP: u.defaultTCP, ports: ports,
				subsetKeys: u.svc.SubsetKeys, activeCheck: u.svc.ActiveCheck, probesGRPC: probesGRPC(u.svc), bySource: make([]sourceClusters, len(sources))}
			mm.upstreams[u.fqdn] = e
		}
		e.gen = mm.gen
		out[j] = e
	}
	return out
}

// reindexSources moves each kept service's clusters to the index of their source in sources (the
// build's), dropping those of a source no longer listed.
func (mm *memo) reindexSources(sources []string) {
	for _, e := range mm.upstreams {
		bySource := make([]sourceClusters, len(sources))
		for i, source := range sources {
			if k, ok := slices.BinarySearch(mm.sources, source); ok {
				bySource[i] = e.bySource[k]
			}
		}
		e.bySource = bySource
	}
	mm.sources = slices.Clone(sources)
}

// loadAssignmentMemo is one load assignment, what it derives from, and the notes its build
// recorded (oneMemberPerAddress).
type loadAssignmentMemo struct {
	gen     uint64
	members []memberShape
	// from is the list of members last read: the same array again is the same members (the
	// Builder's contract). Kept, it keeps the array alive, so that no other takes its address.
	from    []model.Member
	cla     *endpointv3.ClusterLoadAssignment
	skipped []string
}

// memberShape is a member as a load assignment reads it.
type memberShape struct {
	namespace, name, address string
	health                   meshv1alpha1.Health
	weight                   int32
	locality                 meshv1alpha1.Locality
	// metadata is the member's (read only, shared with the model).
	metadata map[string]string
}

// reusedLoadAssignment is port's load assignment of the service fqdn that the last build made
// from the same members (and node locality, memo.start), its notes recorded again in this build;
// nil when there is none.
func (b *builder) reusedLoadAssignment(fqdn string, port int32, members []model.Member) *endpointv3.ClusterLoadAssignment {
	if b.memo == nil {
		return nil
	}
	e := b.memo.loadAssignments[servicePortKey{fqdn, port}]
	if e == nil || !sameArray(e.from, members) && !sameMembers(e.members, members) {
		return nil
	}
	e.from = members
	e.gen = b.memo.gen
	b.skipped = append(b.skipped, e.skipped...)
	return e.cla
}

// sameMembers reports whether members are, in order, the members shapes were taken from.
func sameMembers(shapes []memberShape, members []model.Member) bool {
	if len(shapes) != len(members) {
		return false
	}
	for i := range members {
		// What a health change changes first.
		m, s := &members[i], &shapes[i]
		if m.Health != s.health || m.Address != s.address || m.Weight != s.weight || m.Locality != s.locality ||
			m.Name != s.name || m.Namespace != s.namespace || !maps.Equal(m.Metadata, s.metadata) {
			return false
		}
	}
	return true
}

// recordLoadAssignment keeps cla, made from members, for the next build with the notes its
// build recorded.
func (b *builder) recordLoadAssignment(fqdn string, port int32, members []model.Member, cla *endpointv3.ClusterLoadAssignment, skipped []string) {
	if b.memo == nil {
		return
	}
	shapes := make([]memberShape, len(members))
	for i := range members {
		m := &members[i]
		shapes[i] = memberShape{namespace: m.Namespace, name: m.Name, address: m.Address, health: m.Health, weight: m.Weight,
			locality: m.Locality, metadata: maps.Clone(m.Metadata)}
	}
	b.memo.loadAssignments[servicePortKey{fqdn, port}] = &loadAssignmentMemo{gen: b.memo.gen, members: shapes, from: members,
		cla: cla, skipped: slices.Clone(skipped)}
}

// listeningMemo is a build's listeners and route configurations, the projection of the mesh
// they were built from (listening), and the notes their build recorded.
type listeningMemo struct {
	mesh model.Mesh
	in   listenerInputs
	// ports are the selected services' Ports, the very arrays in.services' were projected from
	// (or, since, found to project to the same): by the Builder's contract, the same array again
	// projects the same (madeFrom).
	ports     [][]model.Port
	listeners []*listenerv3.Listener
	routes    []*routev3.RouteConfiguration
	skipped   []string
}

// listenersAndRoutes are the listeners and route configurations of the build. They are built
// from the mesh without its endpoints (listening), so an endpoint-only change cannot reach them
// (the stability gate), and the last build's are reused when that projection is equal.
func (b *builder) listenersAndRoutes() ([]*listenerv3.Listener, []*routev3.RouteConfiguration) {
	if b.memo != nil && b.memo.listening != nil && b.memo.listening.madeFrom(b.mesh, b.in) {
		last := b.memo.listening
		b.skipped = append(b.skipped, last.skipped...)
		return slices.Clone(last.listeners), slices.Clone(last.routes) // the caller's lists: the memo's stay
	}
	mesh, in := listeningMesh(b.mesh), listeningInputs(b.in)
	full, fullIn := b.mesh, b.in
	b.mesh, b.in = mesh, in
	before := len(b.skipped)
	b.attached = b.attachRoutes() // the Gateway API routes, resolved once, read by chains and virtual hosts
	listeners, routes := b.listeners(), b.routes()
	b.mesh, b.in = full, fullIn
	if b.memo != nil {
		ports := make([][]model.Port, len(b.in.services))
		for i := range b.in.services {
			ports[i] = b.in.services[i].Ports
		}
		b.memo.listening = &listeningMemo{mesh: mesh, in: in, ports: ports, listeners: slices.Clone(listeners),
			routes: slices.Clone(routes), skipped: slices.Clone(b.skipped[before:])}
	}
	return listeners, routes
}

// madeFrom reports whether the projection e was built from is that of m and in (listening).
// The services, a thousand, are compared field by field with what they would project to
// (projectsTo), their ports only when they are not the very array compared last time (e.ports):
// after one endpoint changed, the others' pairs were most of a build's reading. The rest, a few
// pods and routes, are compared whole.
func (e *listeningMemo) madeFrom(m model.Mesh, in listenerInputs) bool {
	if len(e.in.services) != len(in.services) || !reflect.DeepEqual(e.mesh, listeningMesh(m)) {
		return false
	}
	for i := range in.services {
		s, p := in.services[i], e.in.services[i]
		if sameArray(s.Ports, e.ports[i]) {
			s.Ports, p.Ports = nil, nil // the very ports p's were projected from: the rest decides
		}
		if !projectsTo(s, p) {
			return false
		}
		e.ports[i] = in.services[i].Ports // projects to p's: the array to compare next time
	}
	rest, prevRest := in, e.in
	rest.services, rest.skipped, prevRest.services = nil, nil, nil
	return reflect.DeepEqual(rest, prevRest)
}

// listening is what the listeners and route configurations are built from: the mesh and the
// selection without the services' endpoints (listeningMesh, listeningInputs).
//
// listeningMesh is m's domain, issuer, node name, pods, routes, upstreams mode and hop protocol: the node's locality orders load
// assignments only, and the listeners read the selected services (in.services), not m's list.
func listeningMesh(m model.Mesh) model.Mesh {
	// Upstreams (whether they fetch on demand) but not Demanded: what was fetched changes no
	// listener or route (warm.go).
	return model.Mesh{Domain: m.Domain, Issuer: m.Issuer, Node: model.Node{Name: m.Node.Name}, Pods: m.Pods, Routes: m.Routes,
		Upstreams: m.Upstreams, HopHTTP3: m.HopHTTP3}
}

// listeningInputs is in with each selected service without its endpoints (withoutEndpoints), and
// without the notes of what was left out (Skipped reads the full selection's).
func listeningInputs(in listenerInputs) listenerInputs {
	projected := in
	projected.skipped = nil
	projected.services = slices.Clone(in.services)
	for i := range projected.services {
		projected.services[i].Service = withoutEndpoints(in.services[i].Service)
	}
	return projected
}

// projectsTo reports whether the selected service s projects to p (listeningInputs): it
// compares exactly the fields the projection keeps. TestProjectsToSeesEveryField changes each
// field of a service, one at a time, and checks that projectsTo and the projection agree.
func projectsTo(s, p meshService) bool {
	return s.key == p.key && s.fqdn == p.fqdn && s.vip == p.vip && slices.Equal(s.names, p.names) && s.localName == p.localName &&
		s.ports.Primary == p.ports.Primary && slices.Equal(s.ports.Ports, p.ports.Ports) &&
		s.Namespace == p.Namespace && s.Name == p.Name && s.Identity == p.Identity && s.VIP == p.VIP &&
		s.Primary == p.Primary && slices.Equal(s.LeftOut, p.LeftOut) && slices.Equal(s.SubsetKeys, p.SubsetKeys) && slices.EqualFunc(s.Ports, p.Ports, portProjectsTo)
}

// portProjectsTo reports whether port s projects to p (withoutEndpoints).
func portProjectsTo(s, p model.Port) bool {
	return s.Number == p.Number && s.Protocol == p.Protocol && slices.EqualFunc(s.Pairs, p.Pairs, pairProjectsTo)
}

// pairProjectsTo reports whether pair s projects to p (withoutEndpoints): its protocol, and one
// member holding the first member's AppProtocol.
func pairProjectsTo(s, p model.Pair) bool {
	if s.Protocol != p.Protocol || len(p.Members) != min(len(s.Members), 1) {
		return false
	}
	return len(p.Members) == 0 || p.Members[0].AppProtocol == s.Members[0].AppProtocol
}

// withoutEndpoints is s without its members and counts (see listening). It keeps the published
// subset keys: the capture virtual hosts map each to its header (subset.go). A key set changes
// when a key is first or last published, not with the values, so the routes change rarely.
func withoutEndpoints(s model.Service) model.Service {
	out := model.Service{Namespace: s.Namespace, Name: s.Name, Identity: s.Identity, VIP: s.VIP, Primary: s.Primary,
		LeftOut: s.LeftOut, SubsetKeys: s.SubsetKeys, Ports: make([]model.Port, len(s.Ports))}
	count := 0
	for _, p := range s.Ports {
		count += len(p.Pairs)
	}
	// One list of pairs and one of members for the whole service, each port's a part of them
	// (its capacity cut at its end): 1 000 services are projected in every build.
	pairs, members := make([]model.Pair, 0, count), make([]model.Member, count)
	for i, p := range s.Ports {
		start := len(pairs)
		for _, pr := range p.Pairs {
			pair := model.Pair{Protocol: pr.Protocol}
			if len(pr.Members) > 0 {
				k := len(pairs)
				members[k].AppProtocol = pr.Members[0].AppProtocol
				pair.Members = members[k : k+1 : k+1]
			}
			pairs = append(pairs, pair)
		}
		out.Ports[i] = model.Port{Number: p.Number, Protocol: p.Protocol, Pairs: pairs[start:len(pairs):len(pairs)]}
	}
	return out
}
