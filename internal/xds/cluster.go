// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"
	"slices"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// kindCluster names a cluster in the build's errors and notes (about.kind).
const kindCluster = "cluster"

// connectTimeout bounds every connection attempt of every cluster Build emits: 1 s. Each upstream
// is a pod on the cluster network (a peer's inbound, or a local pod's own port), where a live peer
// answers within milliseconds; waiting longer only delays the next attempt on another host.
const connectTimeout = time.Second

// httpProtocolOptionsKey is the typed_extension_protocol_options key Envoy reads an
// HttpProtocolOptions under: the message's full name.
var httpProtocolOptionsKey = string((&httpv3.HttpProtocolOptions{}).ProtoReflect().Descriptor().FullName())

// upstream is a service the node's pods dial over the mesh, with what its clusters and load
// assignments derive from.
type upstream struct {
	// svc is the selected service's (b.in.services: read only).
	svc       *model.Service
	key, fqdn string // ServiceKey, FQDN
	// defaultTCP is what <fqdn>:18082 reaches (resolve.DefaultTCPPort); 0 when the service has no
	// TCP port, and then no TCPDefaultCluster exists.
	defaultTCP int32
}

// upstreams are the services Build emits upstream clusters and load assignments for: the
// selected services (selectInputs, the same the chains and routes are built from) that have ports.
// A service without an identity is not among them (it cannot be SAN-pinned, and Build never
// emits an unpinned mesh cluster): Resources.Skipped names it. Listed once per build (the
// clusters and the load assignments read the same list), each pointing to its selected service:
// a thousand copies of a service, twice, were most of what a build allocated after one endpoint
// changed.
func (b *builder) upstreams() []upstream {
	if b.upstreamList != nil {
		return b.upstreamList
	}
	out := make([]upstream, 0, len(b.in.services))
	for i := range b.in.services {
		s := &b.in.services[i]
		if len(s.Ports) == 0 {
			continue
		}
		u := upstream{svc: &s.Service, key: s.key, fqdn: s.fqdn}
		if p, ok := resolve.DefaultTCPPort(s.ports); ok && b.carries(meshv1alpha1.ProtocolTCP) {
			u.defaultTCP = p
		}
		out = append(out, u)
	}
	b.upstreamList = out
	return out
}

// carries reports whether the node's configuration has upstream clusters, and so load
// assignments, for a port of protocol p: an HTTP-class port always; a raw-TCP port only in a mesh
// with a workload-identity issuer (model.Mesh.Issuer), as raw TCP rides mTLS only; a UDP port
// never (the node proxy does not carry UDP yet).
func (b *builder) carries(p meshv1alpha1.Protocol) bool {
	return p.IsHTTP() || !p.IsUDP() && b.mesh.Issuer.Issues()
}

// sources are the identities that dial from this node, sorted, each once: the distinct identities
// of its selected pods. Each presents its own certificate, so each has its own copy of every
// upstream cluster (SourceCluster).
func (b *builder) sources() []string {
	out := make([]string, 0, len(b.in.pods))
	for _, p := range b.in.pods {
		out = append(out, p.Identity)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// clusters are every cluster of the node, sorted by name: the passthrough and blackhole
// clusters, each source's copy of each upstream service's clusters it carries up front (every
// one, or its warm ones: warm.go), and each local pod's app clusters.
func (b *builder) clusters() []*clusterv3.Cluster {
	out := assemble(b.memo.sortedClusters())
	out.add(b.nodeWideClusters()...)
	upstreams, sources := b.upstreams(), b.sources()
	kept := b.memo.keptUpstreams(upstreams, sources) // nil when nothing is kept
	warm := b.warm()
	for i, source := range sources {
		for j, u := range upstreams {
			if !warm.carriesFor(source, u.key) {
				continue // fetched on demand (warm.go)
			}
			var slot *sourceClusters
			if kept != nil {
				slot = &kept[j].bySource[i]
			}
			out.add(b.serviceClusters(u, source, slot)...)
		}
	}
	for _, pod := range b.in.pods {
		out.add(b.podAppClusters(pod)...)
	}
	return sortByName(b, kindCluster, out.list(), (*clusterv3.Cluster).GetName, b.memo.sortedClusters())
}

// serviceClusters are u's clusters as source dials them: one per listed port (HTTPCluster for an
// HTTP-class port, TCPCluster for a TCP port) and TCPDefaultCluster when u has a TCP port. A
// port's cluster reads the port's load assignment; TCPDefaultCluster reads the default TCP
// port's, and sends that port's SNI. Without a workload-identity issuer (model.Mesh.Issuer) there
// is no raw-TCP cluster (no TCPCluster, no TCPDefaultCluster): raw TCP rides mTLS only, the dial
// surface refuses it, and selectInputs names each service left without them in Skipped.
// kept, when not nil, holds the clusters the last builds made from the same inputs (a Builder's
// keptUpstreams), and keeps those made now.
func (b *builder) serviceClusters(u upstream, source string, kept *sourceClusters) []*clusterv3.Cluster {
	if kept != nil && kept.clusters != nil {
		kept.gen = b.memo.gen
		return kept.clusters
	}
	out := make([]*clusterv3.Cluster, 0, len(u.svc.Ports)+1)
	for _, p := range u.svc.Ports {
		switch {
		case !b.carries(p.Protocol):
		case p.Protocol.IsHTTP():
			out = append(out, b.upstreamCluster(u, source, HTTPCluster(u.fqdn, p.Number), p.Number, true))
		default:
			out = append(out, b.upstreamCluster(u, source, TCPCluster(u.fqdn, p.Number), p.Number, false))
		}
	}
	if u.defaultTCP != 0 {
		out = append(out, b.upstreamCluster(u, source, TCPDefaultCluster(u.fqdn), u.defaultTCP, false))
	}
	if kept != nil {
		*kept = sourceClusters{gen: b.memo.gen, clusters: out} // out is never nil: made
	}
	return out
}

// upstreamCluster is the EDS cluster base (qualified by source) that reaches u's port over mTLS:
// its hosts are the port's load assignment (each a peer's inbound, <pod_ip>:18008), its TLS
// context pinned to u's identity. An HTTP cluster speaks HTTP/2 on the hop, whatever the port's
// own protocol: the destination's inbound speaks the port's protocol to the application. When the
// hop prefers HTTP/3 (model.Mesh.HopHTTP3), it tries HTTP/3 over QUIC first (hop_http3.go).
func (b *builder) upstreamCluster(u upstream, source, base string, port int32, http bool) *clusterv3.Cluster {
	name := b.sourceCluster(base, source)
	what := about{kind: kindCluster, name: name}
	c := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: b.edsClusterType(),
		ConnectTimeout:       b.clusterConnectTimeout(),
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
		CircuitBreakers:      sharedCircuitBreakers,
	}
	h := hop{source: source, destination: u.svc.Identity, sni: ServerName(port), http: http}
	if http && b.mesh.HopHTTP3 {
		// No ALPN in the context: the grid offers it by itself (h3 over QUIC; h2 and http/1.1
		// over TLS, of which the inbound's HTTP chain takes h2). An h2 in the context would be
		// offered over QUIC too, and refused ("no application protocol").
		h.sni, h.http = HopServerName(port, u.fqdn), false
	}
	switch {
	case http && b.mesh.HopHTTP3:
		c.TypedExtensionProtocolOptions = b.hopHTTP3Options(what, h.sni)
	case http:
		c.TypedExtensionProtocolOptions = b.httpOptions(what, meshv1alpha1.ProtocolHTTP2)
	}
	// Checked before its shared parts are attached: each was checked when made, and Cluster sets
	// no rule of its own on eds_cluster_config, common_lb_config or transport_socket.
	b.checkAbout(what, c)
	c.UpstreamBindConfig = b.podBindConfig()
	c.EdsClusterConfig = b.edsConfig(what, u.fqdn, port)
	c.CommonLbConfig = b.healthyOnlyConfig(what)
	if http {
		// Subset routing (subset.go) is HTTP's: a raw-TCP connection carries no headers.
		c.LbSubsetConfig = b.subsetConfigOf(what, u.svc.SubsetKeys)
	}
	if http && b.mesh.HopHTTP3 {
		c.TransportSocket = b.upstreamQUIC(what, h) // hop_http3.go
	} else {
		c.TransportSocket = b.upstreamTLS(what, h)
	}
	b.activeChecking(what, c, u, source, port)
	return c
}

// onlyHealthyHosts turns Envoy's panic mode off (healthy_panic_threshold 0%). By default, when
// fewer than half a cluster's hosts are healthy Envoy balances over all of them, unhealthy,
// pending and draining included; the mesh publishes health so that those receive nothing
// (MeshEndpoint: Pending, Unhealthy and Draining are "not routable"), so a cluster without a
// healthy host fails fast instead.
func onlyHealthyHosts() *clusterv3.Cluster_CommonLbConfig {
	return &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}}
}

// passthroughCluster sends a connection to its original destination: the capture listener's
// default chain, for a captured connection no mesh chain claims (a mesh address's undeclared
// port), from the pod's namespace, as if there were no mesh. The capture HCM's catch-all
// (route_capture.go) sends it HTTP too: a Host no mesh service holds. There the router speaks
// the client's own protocol upstream (use_downstream_protocol_config): HTTP/2 to an h2c client's
// destination, HTTP/1.1 otherwise (HTTP/1.0 too: Envoy has no HTTP/1.0 upstream). Without it,
// an h2c request went out as HTTP/1.1. tcp_proxy (the default chain) reads no protocol options.
func (b *builder) passthroughCluster() *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 PassthroughCluster,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
		ConnectTimeout:       durationpb.New(connectTimeout),
		UpstreamBindConfig:   b.podBindConfig(),
		// The whole node's non-mesh egress goes through this one cluster.
		CircuitBreakers: sharedCircuitBreakers,
	}
	b.check("cluster "+PassthroughCluster, c)
	what := about{kind: kindCluster, name: PassthroughCluster}
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: b.packAbout(what.part("HTTP protocol options"),
		&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{
			UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
				HttpProtocolOptions: &corev3.Http1ProtocolOptions{}, Http2ProtocolOptions: http2Options(),
			},
		}})}
	return c
}

// blackholeCluster is a static cluster without hosts: a connection sent to it is closed at once
// (scoped mode's cap_tcp_blackhole chain; every cap_tcp chain in a mesh without an identity
// issuer).
func (b *builder) blackholeCluster() *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 BlackholeCluster,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(connectTimeout),
		// It has no host, so it opens nothing; bound like every cluster a capture chain reaches,
		// and given the same circuit breakers, so that no such cluster is an exception to read past.
		UpstreamBindConfig: b.podBindConfig(),
		CircuitBreakers:    sharedCircuitBreakers,
	}
	b.check("cluster "+BlackholeCluster, c)
	return c
}

// appClusters are where pod's inbound listener delivers: one static cluster per port the pod
// declares, its one host the pod's IP and that port, or the pod's Unix socket (appAddress). (The node's Envoy connects from the host's
// network namespace, so it dials the pod's IP, not loopback.) An HTTP-class port is spoken to in
// its own protocol, HTTP/1.1 or HTTP/2; a TCP port is a byte stream.
func (b *builder) appClusters(pod model.LocalPod) []*clusterv3.Cluster {
	key := PodKey(pod.Namespace, pod.Name)
	out := make([]*clusterv3.Cluster, 0, len(pod.Ports))
	for _, p := range pod.Ports {
		name := AppCluster(key, p.Port)
		c := &clusterv3.Cluster{
			Name:                 name,
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			ConnectTimeout:       durationpb.New(connectTimeout),
			LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
			CircuitBreakers:      sharedCircuitBreakers,
			LoadAssignment: &endpointv3.ClusterLoadAssignment{
				ClusterName: name,
				Endpoints: []*endpointv3.LocalityLbEndpoints{{
					LbEndpoints: []*endpointv3.LbEndpoint{{
						HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
							Address: appAddress(pod, p.Port),
						}},
					}},
				}},
			},
		}
		if p.Protocol.IsHTTP() {
			c.TypedExtensionProtocolOptions = b.httpOptions(about{kind: kindCluster, name: name}, p.Protocol)
		}
		b.check("cluster "+name, c)
		out = append(out, c)
	}
	return out
}

// appAddress is where pod's port is delivered: its Unix socket when it serves on one (every
// declared port to the one socket: the port demuxed inbound, the app multiplexes), else its IP
// and the port.
func appAddress(pod model.LocalPod, port int32) *corev3.Address {
	if pod.UDSPath != "" {
		return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: pod.UDSPath}}}
	}
	return socketAddress(pod.Address, port)
}

// httpOptions are the typed_extension_protocol_options that make a cluster speak protocol
// upstream, explicitly: HTTP/2 for ProtocolHTTP2, HTTP/1.1 otherwise, with that protocol's idle
// timeout (idleTimeout).
func (b *builder) httpOptions(what about, protocol meshv1alpha1.Protocol) map[string]*anypb.Any {
	// Every HTTP cluster of one protocol carries the same options: packed (and validated) once
	// per build and shared, read only, the map too (a build packs thousands of clusters).
	if options, ok := b.httpOptionsOf[protocol]; ok {
		return options
	}
	explicit := &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
		ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{
			HttpProtocolOptions: &corev3.Http1ProtocolOptions{},
		},
	}
	if protocol == meshv1alpha1.ProtocolHTTP2 {
		// allow_connect: a WebSocket goes to an HTTP/2 upstream as an extended CONNECT
		// (listener_capture.go, upgradeConfigs), as Envoy's own WebSocket tests configure it.
		explicit.ProtocolConfig = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
			Http2ProtocolOptions: http2Options(),
		}
	}
	opts := &httpv3.HttpProtocolOptions{
		CommonHttpProtocolOptions: idleTimeout(protocol),
		UpstreamProtocolOptions:   &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: explicit},
	}
	options := map[string]*anypb.Any{httpProtocolOptionsKey: b.packAbout(what.part("HTTP protocol options"), opts)}
	b.httpOptionsOf = store(b.httpOptionsOf, protocol, options)
	return options
}

// requireUnique records an error when two of the sorted items share a name: a snapshot keeps one
// resource per name, so the other would be lost without a word. One owner per name.
func requireUnique[T any](b *builder, kind string, sorted []T, name func(T) string) {
	for i := 1; i < len(sorted); i++ {
		if n := name(sorted[i]); n == name(sorted[i-1]) && b.err == nil {
			b.err = fmt.Errorf("xds: two %ss are named %q; each name must have one owner", kind, n)
		}
	}
}

// skipNotes are what Build left out and why, sorted: the pods and services the selection left
// out (selectInputs) and what the builders recorded (b.skipped).
func (b *builder) skipNotes() []string {
	out := slices.Clone(b.skipped)
	for _, err := range b.in.skipped {
		out = append(out, err.Error())
	}
	slices.Sort(out)
	return out
}
