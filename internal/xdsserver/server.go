// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	sotwv3 "github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// kind is one resource type xds.Resources carries.
type kind struct {
	typ   cachetypes.ResponseType
	url   string
	short string // the metrics' and logs' name for it
}

// kinds are the types a node's snapshot holds, in ADS order (clusters before their endpoints,
// listeners before their routes, the secrets their TLS contexts name last). Publish serves the
// first five (xds.Resources), PublishSecrets the secrets (secrets.go).
var kinds = [...]kind{
	{cachetypes.Cluster, resourcev3.ClusterType, "cluster"},
	{cachetypes.Endpoint, resourcev3.EndpointType, "endpoint"},
	{cachetypes.Listener, resourcev3.ListenerType, "listener"},
	{cachetypes.Route, resourcev3.RouteType, "route"},
	{cachetypes.Runtime, resourcev3.RuntimeType, "runtime"},
	{cachetypes.Secret, resourcev3.SecretType, "secret"},
}

// secretKind is the index of the secrets in kinds; clusterKind and endpointKind those of the
// clusters and their load assignments.
const (
	secretKind   = len(kinds) - 1
	clusterKind  = 0
	endpointKind = 1
)

// otherType is the short name of any type outside kinds (a client's typo).
const otherType = "other"

// shortType is typeURL's short name.
func shortType(typeURL string) string {
	for _, k := range kinds {
		if k.url == typeURL {
			return k.short
		}
	}
	return otherType
}

// Options configure a Server.
type Options struct {
	// Listener is where the server serves (Listen).
	Listener net.Listener
	// ProxylessListener, when set, is where the server serves proxyless gRPC clients, and them
	// only (proxyless.go): the socket pods reach. A unix socket: each connection's caller is
	// learned from the kernel (peer.go).
	ProxylessListener net.Listener
	// NodeEnvoy says which callers on Listener are the node's Envoy: only their streams are served
	// (nodeenvoy.go). The zero value is no caller: every stream is refused.
	NodeEnvoy NodeEnvoy
	// PodOfProcess reads which pod a process calling on either listener runs in;
	// ProcPods("/proc") if nil (the node's, with the agent in the host's PID namespace).
	PodOfProcess PodOfProcess
	// Log receives the server's lines: connections, NACKs, refused snapshots.
	Log logr.Logger
	// AccessLog, when set, is served beside ADS on Listener, not on ProxylessListener: the node's
	// Envoy streams its access log over the bootstrap's xDS cluster (internal/xds's loggers,
	// internal/accesslog's server), so it needs no socket, cluster or permission of its own.
	AccessLog accesslogv3.AccessLogServiceServer
}

// Server serves each node's latest published snapshot over ADS.
type Server struct {
	listener          net.Listener
	proxylessListener net.Listener
	log               logr.Logger
	accessLog         accesslogv3.AccessLogServiceServer
	cache             cachev3.SnapshotCache
	// proxylessCache holds the proxyless clients' snapshots (proxyless.go): not in ADS mode.
	proxylessCache cachev3.SnapshotCache
	streams        *streams
	// proxylessStreams are the callbacks of the proxyless socket's streams (their own numbering).
	proxylessStreams *streams

	mu sync.Mutex
	// served is, per node ID, what the node's snapshot holds: each type's version and names.
	served map[string]served
	// secrets are, per node ID, the secrets PublishSecrets was last given: the snapshot serves
	// those its clusters and listeners reference (secrets.go).
	secrets map[string][]*tlsv3.Secret
	// proxyless are the connected proxyless clients, by node ID; onProxyless is told of changes.
	proxyless   map[string]*proxylessClient
	onProxyless []func()
	// onDemand are told of the clusters a node's Envoy asks for on demand (ondemand.go).
	onDemand []func(nodeID string, clusters []string)
	// nodePods reads a caller's pod UID as its pod (ResolvePodsWith).
	nodePods NodePods
	// peers are the proxyless socket's credentials: they learn each connection's caller (peer.go).
	peers *peerCredentials
	// envoyOnly admits the node Envoy's streams on the node's socket, and no other (nodeenvoy.go).
	envoyOnly *envoyGate
}

// served is a published snapshot's versions, resource names and resources, per kind (kinds'
// order), and the SDS names its clusters and listeners reference.
type served struct {
	versions [len(kinds)]string
	names    [len(kinds)][]string
	// hashes are each resource's version (the hash of its deterministic encoding), by name, with
	// the very message it was computed from: the next publish hashes only the messages it does
	// not find here (a Builder returns the same message for what a change left alone).
	hashes [len(kinds)]map[string]hashed
	// items are the resources as given, and versionMaps each one's version by name (what delta
	// xDS reads): a kind given the very same messages again reuses all of its parts.
	items       [len(kinds)][]cachetypes.Resource
	versionMaps [len(kinds)]map[string]string
	// groups are the snapshot's resources: a secrets-only change reuses the other four.
	groups [len(kinds)]cachev3.Resources
	// readers are, per load assignment, a digest of the names of the clusters that read it, and
	// assignmentVersions each load assignment's delta version: its content's and its readers'
	// (stampReaders).
	readers            map[string]string
	assignmentVersions map[string]string
	// secretRefs are the secrets the clusters' and listeners' TLS contexts name (xds.SecretNames).
	secretRefs map[string]bool
	// proxyless is set for a proxyless client's snapshot (in the proxyless cache): no secrets.
	proxyless bool
}

// hashed is one resource's version and the message it hashes, with the names of the resources
// it references (a cluster's load assignment, a listener's route configurations): what the
// consistency check reads, without unpacking every listener's filters again on each publish.
type hashed struct {
	resource cachetypes.Resource
	version  string
	refs     []string
}

// snapshot is the go-control-plane snapshot of sv, with its per-resource versions (delta xDS
// reads them) already known: go-control-plane would otherwise marshal and hash every resource
// again on the first delta watch of each snapshot (ConstructVersionMap), with the same function.
func (sv served) snapshot() *cachev3.Snapshot {
	snap := &cachev3.Snapshot{VersionMap: make(map[string]map[string]string, len(kinds))}
	for i, k := range kinds {
		snap.Resources[k.typ] = sv.groups[i]
		snap.VersionMap[k.url] = sv.versionMaps[i] // read only, by every snapshot that shares it
	}
	snap.VersionMap[kinds[endpointKind].url] = sv.assignmentVersions
	return snap
}

// New returns a server for o.Listener; it serves once started (Start).
func New(o Options) *Server {
	s := &Server{
		listener:          o.Listener,
		proxylessListener: o.ProxylessListener,
		log:               o.Log,
		accessLog:         o.AccessLog,
		// ADS mode: responses go out in the order clusters, endpoints, listeners, routes.
		cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, controlPlaneLogger(o.Log)),
		// Not in ADS mode: an ADS-mode cache answers a request only when it names every resource
		// of the snapshot's type (as Envoy's wildcard subscriptions do), and grpc-go asks for the
		// listeners and clusters of the targets it dials, a few of the snapshot's: it would never
		// be answered. Without ADS mode the cache answers with the named resources that exist; a
		// name that has none (a typo, a port not served) fails that target's RPCs and no other.
		proxylessCache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, controlPlaneLogger(o.Log)),
		served:         map[string]served{},
		secrets:        map[string][]*tlsv3.Secret{},
		proxyless:      map[string]*proxylessClient{},
	}
	podOf := o.PodOfProcess
	if podOf == nil {
		podOf = ProcPods("/proc")
	}
	s.peers = newPeerCredentials(podOf, o.Log, maxPerPod)
	s.envoyOnly = newEnvoyGate(s, o.NodeEnvoy, newPeerCredentials(podOf, o.Log, 0))
	s.streams = newStreams(s)
	s.proxylessStreams = newStreams(s)
	s.proxylessStreams.proxylessOnly = true
	return s
}

// Address is where the server listens, as ParseAddress spells it.
func (s *Server) Address() string { return addressOf(s.listener) }

// addressOf is where l listens, as ParseAddress spells it.
func addressOf(l net.Listener) string {
	a := l.Addr()
	if a.Network() == networkUnix {
		return "unix://" + a.String()
	}
	return a.Network() + "://" + a.String()
}

// Start serves ADS (state of the world and delta) until ctx ends, on the listener and, if set,
// the proxyless listener. It is a manager Runnable.
func (s *Server) Start(ctx context.Context) error {
	type serving struct {
		g        *grpc.Server
		listener net.Listener
	}
	envoy := s.grpcServer(ctx, s.cache, s.streams, append(s.envoyOnly.serverOptions(), grpc.MaxConcurrentStreams(1000))...)
	all := []serving{{envoy, s.listener}}
	s.log.Info("Serving xDS (ADS: state of the world and delta)", "address", s.Address())
	if s.accessLog != nil {
		accesslogv3.RegisterAccessLogServiceServer(envoy, s.accessLog)
		s.log.Info("Serving the access log (AccessLogService) to the node's Envoy", "address", s.Address())
	}
	if s.proxylessListener != nil {
		// Every pod may connect here: the caller is learned from the connection, and what one
		// can make the agent hold is bounded (peer.go).
		bounded := []grpc.ServerOption{
			grpc.Creds(s.peers),
			grpc.MaxRecvMsgSize(maxProxylessMessage),
			grpc.MaxHeaderListSize(maxProxylessHeaders),
			grpc.MaxConcurrentStreams(maxPerPod),
		}
		all = append(all, serving{s.grpcServer(ctx, s.proxylessCache, s.proxylessStreams, bounded...), s.proxylessListener})
		s.log.Info("Serving xDS to proxyless gRPC clients", "address", s.ProxylessAddress())
	}
	served := make(chan error, len(all))
	for _, sv := range all {
		go func() {
			err := sv.g.Serve(sv.listener)
			if err != nil {
				err = fmt.Errorf("serving xDS on %s: %w", addressOf(sv.listener), err)
			}
			served <- err
		}()
	}
	var err error
	received := 0
	select {
	case <-ctx.Done():
	case err = <-served: // one failed: Serve returns before Stop only on a failure
		received++
	}
	// Stop, not GracefulStop: an ADS stream lasts as long as its client, so a graceful stop
	// would wait for every Envoy to go away.
	for _, sv := range all {
		sv.g.Stop()
	}
	for ; received < len(all); received++ {
		err = errors.Join(err, <-served) // nil after Stop, unless serving had failed
	}
	return err
}

// grpcServer is a gRPC server of ADS on cache, its streams' callbacks cb, with options more.
func (s *Server) grpcServer(ctx context.Context, cache cachev3.SnapshotCache, cb *streams, more ...grpc.ServerOption) *grpc.Server {
	xdsServer := serverv3.NewServer(ctx, cache, cb, sotwv3.WithOrderedADS(), sotwv3.WithLogger(controlPlaneLogger(s.log)))
	g := grpc.NewServer(append([]grpc.ServerOption{
		// Envoy holds one stream open per connection for as long as it runs; keepalives find a
		// peer that vanished (the values are go-control-plane's example server's).
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 30 * time.Second, PermitWithoutStream: true}),
	}, more...)...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, xdsServer)
	return g
}

// NeedLeaderElection is false: every node's agent serves its own node's Envoy.
func (s *Server) NeedLeaderElection() bool { return false }

// Publish makes res the configuration of node nodeID, if it differs from the one served: each
// resource type is versioned by a hash of its content, so only the types that changed are sent
// (an endpoint-only change is an EDS push and nothing else). It reports whether it published.
//
// The resources must not be modified after they are given (xds.Builder's outputs are not): a
// resource is hashed once, and a later Publish given the very same message reuses its hash, so
// the cost of a publish follows what changed, not the size of the mesh.
//
// A snapshot that names a resource twice, or is not Consistent() (a cluster's EDS name without
// its load assignment, a listener's RDS name without its route configuration, or one too many),
// is refused with an error, logged and counted: the previous snapshot stays in service.
func (s *Server) Publish(nodeID string, res xds.Resources) (bool, error) {
	return s.publish(nodeID, res, false)
}

// publish is Publish; forProxyless publishes in the proxyless cache, and only for a connected
// proxyless client.
func (s *Server) publish(nodeID string, res xds.Resources, forProxyless bool) (bool, error) {
	s.mu.Lock()
	last, had := s.served[nodeID]
	s.mu.Unlock()
	var reuse *served
	if had && last.proxyless == forProxyless {
		reuse = &last
	}
	// Hashed outside the lock: only this node's rebuild loop publishes its node ID.
	next, err := newServed(res, forProxyless, reuse)
	if err != nil {
		snapshots.WithLabelValues(ResultInvalid).Inc()
		s.log.Error(err, "Refusing an invalid xDS snapshot; the previous one stays in service", "node", nodeID)
		return false, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	cache := s.cache
	if forProxyless {
		if s.proxyless[nodeID] == nil {
			return false, nil // the client went: its snapshot was cleared, and must stay so
		}
		cache = s.proxylessCache
	}
	if err := next.setSecrets(s.secrets[nodeID]); err != nil {
		return false, err
	}
	prev, had := s.served[nodeID]
	if had && prev.versions == next.versions {
		snapshots.WithLabelValues(ResultUnchanged).Inc()
		return false, nil
	}
	snap := next.snapshot()
	if err := next.consistent(prev, had); err != nil {
		snapshots.WithLabelValues(ResultInconsistent).Inc()
		err = fmt.Errorf("the xDS snapshot for node %q is inconsistent (%w): %s", nodeID, err, danglingReferences(snap))
		s.log.Error(err, "Refusing an inconsistent xDS snapshot; the previous one stays in service", "node", nodeID)
		return false, err
	}
	if err := cache.SetSnapshot(context.Background(), nodeID, snap); err != nil {
		return false, fmt.Errorf("setting the xDS snapshot for node %q: %w", nodeID, err)
	}
	s.served[nodeID] = next
	snapshots.WithLabelValues(ResultPublished).Inc()
	s.log.V(1).Info("Published an xDS snapshot", "node", nodeID, "changed", changedKinds(prev, next, had), "versions", next.versions)
	return true, nil
}

// Versions are the versions of nodeID's served snapshot, by type URL; nil before its first
// publish.
func (s *Server) Versions(nodeID string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, ok := s.served[nodeID]
	if !ok {
		return nil
	}
	out := make(map[string]string, len(kinds))
	for i, k := range kinds {
		out[k.url] = sv.versions[i]
	}
	return out
}

// servedNames are the names of nodeID's typeURL resources, if version is what it serves (else
// none).
func (s *Server) servedNames(nodeID, typeURL, version string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, ok := s.served[nodeID]
	for i, k := range kinds {
		if ok && k.url == typeURL && sv.versions[i] == version {
			return sv.names[i]
		}
	}
	return nil
}

// changedKinds names the kinds whose version differs between prev and next.
func changedKinds(prev, next served, had bool) []string {
	var out []string
	for i, k := range kinds {
		if !had || prev.versions[i] != next.versions[i] {
			out = append(out, k.short)
		}
	}
	return out
}

// danglingReferences says what makes snap inconsistent, by name: the load assignments and route
// configurations that are named but missing, and those served but named by nothing.
func danglingReferences(snap *cachev3.Snapshot) string {
	refs := cachev3.GetAllResourceReferences(snap.Resources)
	var parts []string
	for _, k := range []struct {
		kind    kind
		namedBy string
	}{{kinds[1], "cluster"}, {kinds[3], "listener"}} {
		served := snap.GetResources(k.kind.url)
		var missing, unnamed []string
		for name := range refs[k.kind.url] {
			if _, ok := served[name]; !ok {
				missing = append(missing, name)
			}
		}
		for name := range served {
			if !refs[k.kind.url][name] {
				unnamed = append(unnamed, name)
			}
		}
		slices.Sort(missing)
		slices.Sort(unnamed)
		if len(missing) > 0 {
			parts = append(parts, fmt.Sprintf("%ss name %s resources that are missing: %q", k.namedBy, k.kind.short, missing))
		}
		if len(unnamed) > 0 {
			parts = append(parts, fmt.Sprintf("%s resources that no %s names: %q", k.kind.short, k.namedBy, unnamed))
		}
	}
	return strings.Join(parts, "; ")
}

// newServed is res's snapshot, each type at the version its content hashes to, its secrets not
// set yet (setSecrets), and the SDS names its TLS contexts reference; a proxyless client's
// references none. The hashes of last (nil: none) are reused for the very messages it holds.
func newServed(res xds.Resources, forProxyless bool, last *served) (served, error) {
	groups := [len(kinds)][]cachetypes.Resource{
		resources(res.Clusters), resources(res.Endpoints), resources(res.Listeners), resources(res.Routes),
		resources(res.Runtimes),
	}
	sv := served{proxyless: forProxyless}
	var same [len(kinds)]bool
	for i := range secretKind {
		var err error
		if same[i], err = sv.set(i, groups[i], last); err != nil {
			return served{}, err
		}
	}
	sv.stampReaders(last)
	if forProxyless {
		return sv, nil
	}
	if same[0] && same[2] && last.secretRefs != nil {
		// The very clusters and listeners of the last publish: they name the same secrets (the
		// map is only read once made).
		sv.secretRefs = last.secretRefs
		return sv, nil
	}
	refs, err := xds.SecretNames(res.Clusters, res.Listeners)
	if err != nil {
		return served{}, err
	}
	sv.secretRefs = make(map[string]bool, len(refs))
	for _, name := range refs {
		sv.secretRefs[name] = true
	}
	return sv, nil
}

// set makes items the resources of kinds[i], at the version their content hashes to. A resource
// that last (nil: none) holds as the very same message keeps its hash; when the kind's version
// comes out as last's, last's resources stay (their map is not built again). It reports whether
// items are the very messages of last, in the same order (all of last's parts reused).
func (sv *served) set(i int, items []cachetypes.Resource, last *served) (bool, error) {
	if last != nil && last.items[i] != nil && slices.Equal(last.items[i], items) {
		// The very messages of the last publish, in the same order: nothing to hash or check.
		sv.versions[i], sv.names[i], sv.hashes[i] = last.versions[i], last.names[i], last.hashes[i]
		sv.groups[i], sv.items[i], sv.versionMaps[i] = last.groups[i], last.items[i], last.versionMaps[i]
		return true, nil
	}
	if last != nil && sv.patch(i, items, last) {
		return false, nil
	}
	names, err := uniqueNames(kinds[i], items)
	if err != nil {
		return false, err
	}
	var known map[string]hashed
	if last != nil {
		known = last.hashes[i]
	}
	hashes := make(map[string]hashed, len(items))
	for _, r := range items {
		name := cachev3.GetResourceName(r)
		if h, ok := known[name]; ok && h.resource == r {
			hashes[name] = h
			continue
		}
		h, err := hashOf(i, name, r)
		if err != nil {
			return false, err
		}
		hashes[name] = h
	}
	version := kindVersion(names, hashes)
	if last != nil && last.versions[i] == version && last.groups[i].Items != nil {
		sv.groups[i], sv.hashes[i], sv.versionMaps[i] = last.groups[i], last.hashes[i], last.versionMaps[i]
	} else {
		versionMap := make(map[string]string, len(hashes))
		for name, h := range hashes {
			versionMap[name] = h.version
		}
		sv.groups[i], sv.hashes[i], sv.versionMaps[i] = cachev3.NewResources(version, items), hashes, versionMap
	}
	sv.versions[i], sv.names[i], sv.items[i] = version, names, slices.Clone(items)
	return false, nil
}

// stampReaders makes each load assignment's delta version its content's and its readers': the
// clusters that read it. Delta xDS sends a resource again only when its version changes, and
// Envoy subscribes to a load assignment once, whichever of its clusters read it (it sends no new
// subscription for a name it holds). So a cluster added later that reads an assignment the stream
// already holds (a service fetched on demand for a second identity, the clusters of a new pod's
// identity: the assignment's name carries no source) waits, warming, for a delivery that never
// comes; Envoy 1.40 gives it its cached copy only at the EDS config's initial_fetch_timeout (15 s),
// while every request for it fails at the on-demand timeout. With the readers in its version the
// assignment is sent again with the cluster that needs it; its content unchanged, Envoy rebuilds
// nothing for the clusters that held it. A state-of-the-world stream is left as it was (it reads
// the kind's version, which stays its content's).
func (sv *served) stampReaders(last *served) {
	content := sv.versionMaps[endpointKind]
	if last != nil && last.readers != nil && last.versions[clusterKind] == sv.versions[clusterKind] {
		sv.readers = last.readers // the same clusters read the same assignments
		if last.versions[endpointKind] == sv.versions[endpointKind] {
			sv.assignmentVersions = last.assignmentVersions
			return
		}
		if len(content) == len(last.assignmentVersions) {
			// An endpoint change: only the assignments whose content changed are stamped again.
			stamped := maps.Clone(last.assignmentVersions)
			for name, version := range content {
				if last.versionMaps[endpointKind][name] != version {
					stamped[name] = version + "+" + sv.readers[name]
				}
			}
			sv.assignmentVersions = stamped
			return
		}
	} else {
		sv.readers = readersOf(sv.hashes[clusterKind])
	}
	stamped := make(map[string]string, len(content))
	for name, version := range content {
		stamped[name] = version + "+" + sv.readers[name]
	}
	sv.assignmentVersions = stamped
}

// readersOf is, per load assignment the clusters reference, a digest of their names.
func readersOf(clusters map[string]hashed) map[string]string {
	by := map[string][]string{}
	for name, h := range clusters {
		for _, ref := range h.refs {
			by[ref] = append(by[ref], name)
		}
	}
	out := make(map[string]string, len(by))
	for ref, names := range by {
		slices.Sort(names)
		out[ref] = cachev3.HashResource([]byte(strings.Join(names, "\n")))
	}
	return out
}

// maxPatched is the most resources of a kind patch replaces; past it, set builds the kind anew.
const maxPatched = 64

// patch is set for items that are last's but for a few messages replaced in place, each by one of
// the same name (a Builder's output after an endpoint change: the changed service's load
// assignments are new messages, in the same places): the names are last's, and its maps are
// copied with the replaced messages' entries changed, rather than built again from every
// resource. It reports false, having set nothing, for any other change: set's full path then
// makes the kind. The result is the full path's (TestPatchedPublishIsTheFullOnes).
func (sv *served) patch(i int, items []cachetypes.Resource, last *served) bool {
	prev := last.items[i]
	if prev == nil || len(prev) != len(items) || last.groups[i].Items == nil {
		return false
	}
	var changed []int
	for j, r := range items {
		if r == prev[j] {
			continue
		}
		if len(changed) == maxPatched || r == nil || cachev3.GetResourceName(r) != cachev3.GetResourceName(prev[j]) {
			return false
		}
		changed = append(changed, j)
	}
	hashes := maps.Clone(last.hashes[i])
	for _, j := range changed {
		name := cachev3.GetResourceName(items[j])
		h, err := hashOf(i, name, items[j])
		if err != nil {
			return false // the full path reports it
		}
		hashes[name] = h
	}
	version := kindVersion(last.names[i], hashes)
	if version == last.versions[i] {
		sv.groups[i], sv.hashes[i], sv.versionMaps[i] = last.groups[i], last.hashes[i], last.versionMaps[i]
	} else {
		resources := maps.Clone(last.groups[i].Items)
		versionMap := maps.Clone(last.versionMaps[i])
		for _, j := range changed {
			name := cachev3.GetResourceName(items[j])
			resources[name] = cachetypes.ResourceWithTTL{Resource: items[j]}
			versionMap[name] = hashes[name].version
		}
		sv.groups[i], sv.hashes[i], sv.versionMaps[i] = cachev3.Resources{Version: version, Items: resources}, hashes, versionMap
	}
	sv.versions[i], sv.names[i], sv.items[i] = version, last.names[i], slices.Clone(items)
	return true
}

// hashOf is r's version (the hash of its deterministic encoding) and references; r is named name
// and of kinds[i].
func hashOf(i int, name string, r cachetypes.Resource) (hashed, error) {
	encoded, err := cachev3.MarshalResource(r)
	if err != nil {
		return hashed{}, fmt.Errorf("hashing the %s resource %q: %w", kinds[i].short, name, err)
	}
	return hashed{resource: r, version: cachev3.HashResource(encoded), refs: references(r)}, nil
}

// references are the names of the load assignments and route configurations r references (by
// EDS, by RDS), as go-control-plane's consistency check reads them.
func references(r cachetypes.Resource) []string {
	var out []string
	refs := cachev3.GetResourceReferences(map[string]cachetypes.ResourceWithTTL{cachev3.GetResourceName(r): {Resource: r}})
	for _, names := range refs {
		for name := range names {
			out = append(out, name)
		}
	}
	return out
}

// consistent is go-control-plane's Snapshot.Consistent from the references each resource was
// hashed with: the load assignments are exactly those the clusters name, the route configurations
// exactly those the listeners name. A pair of kinds prev (published, so consistent) served too is
// not checked again: the referencing kind at the same version, the referenced one under the same
// names (what its resources hold is no part of the check: an endpoint change is not checked).
func (sv served) consistent(prev served, had bool) error {
	for _, pair := range [...]struct{ from, to int }{{0, 1}, {2, 3}} {
		if had && prev.versions[pair.from] == sv.versions[pair.from] && slices.Equal(prev.names[pair.to], sv.names[pair.to]) {
			continue
		}
		named := map[string]bool{}
		for _, h := range sv.hashes[pair.from] {
			for _, name := range h.refs {
				named[name] = true
			}
		}
		url := kinds[pair.to].url
		if len(named) != len(sv.names[pair.to]) {
			return fmt.Errorf("mismatched %q reference and resource lengths: len(%v) != %d", url, named, len(sv.names[pair.to]))
		}
		for _, name := range sv.names[pair.to] {
			if !named[name] {
				return fmt.Errorf("inconsistent %q reference: %q not listed", url, name)
			}
		}
	}
	return nil
}

// resources are items as the cache takes them.
func resources[T cachetypes.Resource](items []T) []cachetypes.Resource {
	out := make([]cachetypes.Resource, len(items))
	for i, r := range items {
		out[i] = r
	}
	return out
}

// uniqueNames are the items' names, sorted; an item without a name, or a name given twice, is an
// error (the cache indexes by name and would keep one of the two silently).
func uniqueNames(k kind, items []cachetypes.Resource) ([]string, error) {
	names := make([]string, len(items))
	for i, r := range items {
		if names[i] = cachev3.GetResourceName(r); names[i] == "" {
			return nil, fmt.Errorf("%s resource %d has no name", k.short, i)
		}
	}
	slices.Sort(names)
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			return nil, fmt.Errorf("two %s resources are named %q: every name once", k.short, names[i])
		}
	}
	return names, nil
}

// kindVersion is a hash of the resources' names and versions (each a hash of its deterministic
// encoding), in name order: equal contents give equal versions, whatever the order of the list,
// across agent restarts too.
func kindVersion(sortedNames []string, hashes map[string]hashed) string {
	// The bytes go to the hash in large writes: writing each part on its own (binary.Write) cost
	// as much as the hashing, on every publish of a changed kind.
	h := sha256.New()
	buf := make([]byte, 0, 16<<10)
	for _, name := range sortedNames {
		// Length-prefixed, so no two lists hash the same bytes.
		for _, part := range [2]string{name, hashes[name].version} {
			buf = binary.BigEndian.AppendUint64(buf, uint64(len(part)))
			buf = append(buf, part...)
		}
		if len(buf) >= cap(buf)/2 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// contentVersion is the version of items as a publish computes it (kindVersion), from nothing
// known.
func contentVersion(items []cachetypes.Resource) (string, error) {
	var sv served
	if _, err := sv.set(0, items, nil); err != nil {
		return "", err
	}
	return sv.versions[0], nil
}

// controlPlaneLogger sends go-control-plane's lines to l: its warnings (an ADS request that
// names fewer resources than the snapshot holds, a stale nonce) are routine during a change, so
// they are V(1); its errors are errors.
func controlPlaneLogger(l logr.Logger) controlPlaneLog {
	return controlPlaneLog{l.WithName("go-control-plane")}
}

type controlPlaneLog struct{ l logr.Logger }

func (c controlPlaneLog) Debugf(format string, args ...any) {
	c.l.V(2).Info(fmt.Sprintf(format, args...))
}
func (c controlPlaneLog) Infof(format string, args ...any) {
	c.l.V(1).Info(fmt.Sprintf(format, args...))
}
func (c controlPlaneLog) Warnf(format string, args ...any) {
	c.l.V(1).Info(fmt.Sprintf(format, args...))
}
func (c controlPlaneLog) Errorf(format string, args ...any) {
	c.l.Error(fmt.Errorf(format, args...), "go-control-plane")
}

// Published is what nodeID's snapshot serves, as Publish was given it, and each type's version by
// type URL; ok is false before its first publish. Secrets are not in it (xds.Resources holds
// none): what a debug reader may see of a node's configuration. The messages are the served ones:
// they must not be modified.
func (s *Server) Published(nodeID string) (res xds.Resources, versions map[string]string, ok bool) {
	s.mu.Lock()
	sv, ok := s.served[nodeID]
	s.mu.Unlock()
	if !ok || sv.proxyless {
		return xds.Resources{}, nil, false
	}
	versions = make(map[string]string, secretKind)
	for i := range secretKind {
		versions[kinds[i].url] = sv.versions[i]
	}
	return xds.Resources{
		Clusters:  typed[*clusterv3.Cluster](sv.items[0]),
		Endpoints: typed[*endpointv3.ClusterLoadAssignment](sv.items[1]),
		Listeners: typed[*listenerv3.Listener](sv.items[2]),
		Routes:    typed[*routev3.RouteConfiguration](sv.items[3]),
		Runtimes:  typed[*runtimev3.Runtime](sv.items[4]),
	}, versions, true
}

// typed are items as their own type (what Publish was given).
func typed[T cachetypes.Resource](items []cachetypes.Resource) []T {
	out := make([]T, 0, len(items))
	for _, r := range items {
		if t, ok := r.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
