// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// shared are the sub-messages the upstream clusters and load assignments of a build point to in
// common: one ADS config source, one EDS setting per load assignment, one TLS context per hop
// (its parts, the source's certificate reference and the validation context pinned to the
// destination, on the wire once per identity), one host per member (shared by its load
// assignments), and so on. A build of 1 000 services holds 8 000 clusters and 30 000 hosts; made
// once per resource, these were most of its allocations and validations.
//
// Each is validated once, when it is made (under the name of the first resource that needs it),
// and is never modified after: a change would reach every resource that points to it. Nothing
// modifies a built resource in place: the agent and xdsserver only read them (marshal, hash,
// serve), and the tests and gates break proto.Clone copies. A resource that points to shared
// parts is checked without them (see each caller) where its own message sets no rule on the
// field that holds them (a required field stays attached and is checked whole), so every rule
// of the whole is still checked, once.
type shared struct {
	ads            *corev3.ConfigSource
	edsOnDemand    *corev3.ConfigSource
	edsType        *clusterv3.Cluster_Type
	connectTimeout *durationpb.Duration
	healthyOnly    *clusterv3.Cluster_CommonLbConfig
	// edsConfigs are the clusters' EDS settings, by load assignment: a port's HTTP or TCP cluster
	// and the default TCP cluster of every source read the same one.
	edsConfigs map[servicePortKey]*clusterv3.Cluster_EdsClusterConfig
	// sourceKeys are SourceKey's answers, by identity.
	sourceKeys map[string]string
	// certificates are the upstream TLS contexts' SDS references to a source's certificate, on
	// the wire, by source identity (certificateField).
	certificates map[string][]byte
	// pinned are the upstream TLS contexts' validation contexts, on the wire, by destination
	// identity (pinnedField).
	pinned map[string][]byte
	// upstreamTLS are the packed upstream TLS contexts, by hop: a service's TCP port cluster and
	// its default TCP cluster make the same hop. checkedSNIs are the SNIs whose context has been
	// checked (its one rule reads the SNI alone).
	upstreamTLS map[hop]*corev3.TransportSocket
	// upstreamQUIC are the same contexts wrapped for QUIC, by hop (upstreamQUIC: model.Mesh.HopHTTP3).
	upstreamQUIC map[hop]*corev3.TransportSocket
	checkedSNIs  map[string]bool
	// hosts are the load assignments' hosts, by what a host says: a member of three ports is one
	// host in each of their load assignments.
	hosts map[hostKey]*endpointv3.LbEndpoint
	// hostMetadataChecked is whether a host has been checked with its metadata (host).
	hostMetadataChecked bool
	// weights are the load assignments' weights, by value: most hosts weigh the default 1024.
	weights map[uint32]*wrapperspb.UInt32Value
	// subsets are the HTTP clusters' subset configs, by the service's published keys, joined.
	subsets map[string]*clusterv3.Cluster_LbSubsetConfig
	// headerConfigs are the virtual hosts' header-to-metadata configs, by published keys, joined.
	headerConfigs map[string]map[string]*anypb.Any
	// localities are the load assignments' localities, by value.
	localities map[meshv1alpha1.Locality]*corev3.Locality
	// fromThePod is the capture chains' first filter and podBind the bind config of the
	// clusters they reach (from_the_pod.go).
	fromThePod *listenerv3.Filter
	podBind    *corev3.BindConfig
	// httpAccessLog and tcpAccessLog are every HCM's and every tcp_proxy's access log
	// (accesslog.go).
	httpAccessLog, tcpAccessLog []*accesslogv3.AccessLog
	// activeChecks are the probes of the actively checked services (healthcheck.go), and
	// outliers their clusters' outlier detection.
	activeChecks map[activeCheckKey]*corev3.HealthCheck
	outliers     *clusterv3.OutlierDetection
}

// servicePortKey is a port of a service, by the service's FQDN.
type servicePortKey struct {
	fqdn string
	port int32
}

// hostKey is what a load assignment's host derives from (hostMetadata: its pod's name and its
// metadata, spelled by metadataKey).
type hostKey struct {
	address, name, metadata string
	health                  meshv1alpha1.Health
	weight                  int32
}

// adsConfig is the build's config source "over the ADS stream" (adsSource), validated once.
func (b *builder) adsConfig(what about) *corev3.ConfigSource {
	if b.shared.ads == nil {
		b.shared.ads = adsSource()
		b.checkAbout(what.part("ADS config source"), b.shared.ads)
	}
	return b.shared.ads
}

// edsSource is where the clusters' load assignments come from: the ADS config source, with
// AssignmentFetchTimeout on a node that fetches on demand (warm.go).
func (b *builder) edsSource(what about) *corev3.ConfigSource {
	if !b.onDemand() {
		return b.adsConfig(what)
	}
	if b.shared.edsOnDemand == nil {
		b.shared.edsOnDemand = adsSource()
		b.shared.edsOnDemand.InitialFetchTimeout = durationpb.New(AssignmentFetchTimeout)
		b.checkAbout(what.part("EDS config source"), b.shared.edsOnDemand)
	}
	return b.shared.edsOnDemand
}

// edsClusterType is the build's cluster type EDS (a oneof wrapper: Cluster checks its value).
func (b *builder) edsClusterType() *clusterv3.Cluster_Type {
	if b.shared.edsType == nil {
		b.shared.edsType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
	}
	return b.shared.edsType
}

// clusterConnectTimeout is the build's connectTimeout. It stays attached when a cluster is
// checked (Cluster's rule on connect_timeout: more than 0 s).
func (b *builder) clusterConnectTimeout() *durationpb.Duration {
	if b.shared.connectTimeout == nil {
		b.shared.connectTimeout = durationpb.New(connectTimeout)
	}
	return b.shared.connectTimeout
}

// healthyOnlyConfig is the build's onlyHealthyHosts, validated once.
func (b *builder) healthyOnlyConfig(what about) *clusterv3.Cluster_CommonLbConfig {
	if b.shared.healthyOnly == nil {
		b.shared.healthyOnly = onlyHealthyHosts()
		b.checkAbout(what.part("common LB config"), b.shared.healthyOnly)
	}
	return b.shared.healthyOnly
}

// edsConfig is the EDS setting of the clusters that read the load assignment of port of the
// service fqdn, validated once.
func (b *builder) edsConfig(what about, fqdn string, port int32) *clusterv3.Cluster_EdsClusterConfig {
	k := servicePortKey{fqdn, port}
	if c, ok := b.shared.edsConfigs[k]; ok {
		return c
	}
	c := &clusterv3.Cluster_EdsClusterConfig{ServiceName: LoadAssignment(fqdn, port), EdsConfig: b.edsSource(what)}
	b.checkAbout(what.part("EDS config"), c)
	b.shared.edsConfigs = store(b.shared.edsConfigs, k, c)
	return c
}

// sourceCluster is SourceCluster(base, source), with source's key spelled once per build.
func (b *builder) sourceCluster(base, source string) string {
	key, ok := b.shared.sourceKeys[source]
	if !ok {
		key = SourceKey(source)
		b.shared.sourceKeys = store(b.shared.sourceKeys, source, key)
	}
	return qualifiedBySourceKey(base, key)
}

// host is the host of member m (lbEndpoint, with its subset metadata), validated once and shared
// by every load assignment the member is in.
func (b *builder) host(what about, m *model.Member) *endpointv3.LbEndpoint {
	k := hostKey{m.Address, m.Name, metadataKey(m.Metadata), m.Health, m.Weight}
	if e, ok := b.shared.hosts[k]; ok {
		return e
	}
	e := lbEndpoint(m.Address, m.Health, b.weight(memberWeight(m.Weight)))
	metadata := hostMetadata(m)
	// The first host is checked with its metadata, every other without: Metadata's one rule is on
	// its keys (the one key, LBMetadataNamespace, in every host), and it sets none on a Struct.
	// Checked, each host's metadata was a third of a load assignment's allocations.
	if !b.shared.hostMetadataChecked {
		e.Metadata, b.shared.hostMetadataChecked = metadata, true
	}
	b.checkAbout(what.part("host"), e)
	e.Metadata = metadata
	if b.shared.hosts == nil && b.memo == nil {
		// A build afresh makes every host: about one per member of the service's largest port
		// (most members serve every port).
		n := 0
		for _, s := range b.in.services {
			most := 0
			for _, p := range s.Ports {
				for _, pr := range p.Pairs {
					most = max(most, len(pr.Members))
				}
			}
			n += most
		}
		b.shared.hosts = make(map[hostKey]*endpointv3.LbEndpoint, n)
	}
	b.shared.hosts = store(b.shared.hosts, k, e)
	return e
}

// weight is the weight v, one message per value per build (never modified: shared).
func (b *builder) weight(v uint32) *wrapperspb.UInt32Value {
	w, ok := b.shared.weights[v]
	if !ok {
		w = wrapperspb.UInt32(v)
		b.shared.weights = store(b.shared.weights, v, w)
	}
	return w
}

// localityOf is l as a message, one per value per build. It is checked with each group that
// holds it (LocalityLbEndpoints sets no rule on it, and Locality none of its own).
func (b *builder) localityOf(l meshv1alpha1.Locality) *corev3.Locality {
	if m, ok := b.shared.localities[l]; ok {
		return m
	}
	m := &corev3.Locality{Region: l.Region, Zone: l.Zone}
	b.shared.localities = store(b.shared.localities, l, m)
	return m
}

// store sets m[k] = v, making m if it is nil, and returns m.
func store[K comparable, V any](m map[K]V, k K, v V) map[K]V {
	if m == nil {
		m = map[K]V{}
	}
	m[k] = v
	return m
}
