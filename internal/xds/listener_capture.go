// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	httpinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	originaldstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/meshidentity"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

// The capture listener (proposal 037 design (d), DESIGN section 5). Envoy picks a filter chain in
// a fixed order of criteria: destination port, destination IP (longest prefix), server name,
// transport protocol, application protocols; then, when nothing matched, the default chain. It
// never backtracks: FilterChainManagerImpl::findFilterChain (envoy
// source/common/listener_manager/filter_chain_manager_impl.cc; findFilterChainForDestinationPort
// in older releases) returns the default chain, not the port-less chains, when a connection's
// destination port has chains of its own and none of them matches further down; and
// findFilterChainForDestinationIP, ...ForTransportProtocol and ...ForApplicationProtocols each
// descend only into the most specific entry that matched. So the chains are designed per level:
//
//   - cap_tcp_<svc> (<VIP>/32, port 18082) and cap_tcp_<svc>_<p> (<VIP>/32, port p, p TCP): every
//     byte to that (VIP, port) is the TCP port's. A service without a VIP gets none.
//   - cap_http (no port, no IP): HTTP, by the inspectors' verdict (raw_buffer; http/1.1 or h2c),
//     routed by its Host header (CaptureRoutes).
//   - cap_http_<p>, one per port some chain above claims (port p, any IP): the same HCM. Without
//     it, HTTP to another service's VIP on p (or to :18082 of a service with no TCP port) would
//     match port p, miss every /32 of p and fall to the passthrough instead of the Host rule.
//   - port 80 declared TCP: http://<name>/ dials port 80 and resolve answers it 421 (port 80 is
//     not HTTP), while a TCP connection to <name>:80 reaches the port. So that (VIP, 80) has three
//     chains: cap_http_<svc>_80 (HTTP bytes → the HCM), cap_tcp_<svc>_80 (other cleartext) and
//     cap_tcp_<svc>_80_tls (TLS). The transport protocol splits them: once the HCM chain claims
//     raw_buffer there, a transport-less TCP chain would no longer see cleartext.
//   - Gateway API routes (route_gateway.go): a TCPRoute weights the tcp_proxy of its port's
//     chains; a TLSRoute adds <chain>_tlsroute_<route> beside them (same VIP and port, transport
//     tls, server_names its hostnames: a more specific match than theirs), and closes theirs.
//   - without a workload-identity issuer (model.Mesh.Issuer): the same cap_tcp chains, each to the
//     blackhole cluster (tcpRouting), and no TLSRoute chain: raw TCP rides mTLS only, so a dial of
//     a mesh VIP's TCP port is closed, never passed through in plaintext (the passthrough would
//     take it without those chains). The HTTP chains are as ever.
//   - scoped mode: cap_tcp_blackhole (port 18082, any IP, cleartext): what no service claims is
//     closed. TLS to such a :18082 takes the passthrough, which kube-proxy refuses (the Service's
//     18082 has no endpoints).
//   - the default chain: the passthrough (the original destination, untouched).
//
// The HCM chains require transport protocol raw_buffer: tls_inspector reports a TLS client's
// ALPN (often http/1.1) as its application protocols, and TLS must never reach the HCM.
// No two chains share a match: the TCP chains are keyed by (VIP, port), each VIP held by one
// service, the TLSRoute chains by (VIP, port, server name), each name on a port held by one
// route, and the HCM chains by port.

// captureListenerAddress is where a pod's capture listener listens, in the pod's netns: the
// nftables redirect's target.
const captureListenerAddress = "127.0.0.1"

// listenerFiltersTimeout bounds how long the inspectors wait for a client's first bytes; a
// server-first protocol (the client sends nothing) then continues with what is known (TCP).
const listenerFiltersTimeout = time.Second

// Transport protocols as Envoy's filter chain match names them: tls_inspector sets "tls"; a
// connection no listener filter classified is "raw_buffer".
const (
	transportRawBuffer = "raw_buffer"
	transportTLS       = "tls"
)

// httpInspectorProtocols are the application protocols http_inspector reports for cleartext HTTP
// the HCM serves (codec AUTO). HTTP/1.0 (reported as http/1.0) is left to the TCP chains and the
// passthrough: the HCM refuses HTTP/1.0 by default, and a non-mesh HTTP/1.0 server keeps working.
var httpInspectorProtocols = []string{"http/1.1", "h2c"}

// listeners renders, per valid local pod, its capture and inbound listeners, sorted by name.
func (b *builder) listeners() []*listenerv3.Listener {
	in := b.in
	// A pod's capture chains depend on its identity (the clusters' source qualification) and on
	// whether it is scoped, not on the pod: pods alike share one list (read only).
	type chainSet struct {
		identity string
		scoped   bool
	}
	shared := map[chainSet][]*listenerv3.FilterChain{}
	out := make([]*listenerv3.Listener, 0, 2*len(in.pods))
	for _, p := range in.pods {
		set := chainSet{p.Identity, p.Capture == model.CaptureScoped}
		chains, ok := shared[set]
		if !ok {
			chains = b.captureChains(in.services, set.identity, set.scoped)
			shared[set] = chains
		}
		out = append(out, b.captureListener(p, chains), b.inboundListener(p, in.domain))
	}
	slices.SortFunc(out, func(a, b *listenerv3.Listener) int { return cmp.Compare(a.GetName(), b.GetName()) })
	for _, l := range out {
		b.check("listener "+l.GetName(), l)
	}
	return out
}

// fail records err as the build's error, unless one is recorded already.
func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// captureListener is pod p's capture listener: 127.0.0.1:18001 in its netns.
func (b *builder) captureListener(p model.LocalPod, chains []*listenerv3.FilterChain) *listenerv3.Listener {
	passthrough := b.tcpChain(CapturePassthroughChain, nil, PassthroughCluster)
	b.leaveFromThePod(passthrough)
	return &listenerv3.Listener{
		Name:    CaptureListener(PodKey(p.Namespace, p.Name)),
		Address: netnsAddress(captureListenerAddress, meshv1alpha1.ProxyCapturePort, p.NetNS),
		// original_dst restores the destination the nftables redirect rewrote, for chain matching
		// and the passthrough. The listener's use_original_dst (hand-off to a listener bound to
		// that destination) stays off: a 0.0.0.0:18008 inbound listener of another pod could
		// otherwise take a connection whose destination port is 18008.
		ListenerFilters: []*listenerv3.ListenerFilter{
			b.listenerFilter(wellknown.OriginalDestination, &originaldstv3.OriginalDst{}),
			b.listenerFilter(wellknown.TLSInspector, &tlsinspectorv3.TlsInspector{}),
			b.listenerFilter(wellknown.HTTPInspector, &httpinspectorv3.HttpInspector{}),
		},
		ListenerFiltersTimeout:           durationpb.New(listenerFiltersTimeout),
		ContinueOnListenerFiltersTimeout: true,
		FilterChains:                     chains,
		DefaultFilterChain:               passthrough,
		TrafficDirection:                 corev3.TrafficDirection_OUTBOUND,
	}
}

// captureChains are the capture listener's chains for a pod of identity (see the comment at the
// top of this file), sorted by name; the default chain is not among them.
func (b *builder) captureChains(services []meshService, identity string, scoped bool) []*listenerv3.FilterChain {
	var chains []*listenerv3.FilterChain
	claimed := map[int32]bool{} // destination ports some chain matches
	for _, s := range services {
		if !s.vip.IsValid() {
			continue
		}
		vip := netip.PrefixFrom(s.vip, s.vip.BitLen())
		if port, ok := resolve.DefaultTCPPort(s.ports); ok {
			// :18082 reaches the default TCP port, so that port's routes apply here too.
			claimed[meshv1alpha1.MeshTCPPort] = true
			name := CaptureTCPChain(s.key)
			target, snis := b.tcpRouting(&s, port, identity, SourceCluster(TCPDefaultCluster(s.fqdn), identity))
			chains = append(chains, b.weightedTCPChain(name, chainMatch(vip, meshv1alpha1.MeshTCPPort, "", nil), target))
			chains = append(chains, b.tlsRouteChains(name, vip, meshv1alpha1.MeshTCPPort, snis)...)
		}
		for _, p := range s.ports.Ports {
			if p.Protocol != meshv1alpha1.ProtocolTCP {
				continue
			}
			claimed[p.Number] = true
			chains = append(chains, b.captureTCPPortChains(s, vip, p.Number, identity)...)
		}
	}
	if scoped {
		claimed[meshv1alpha1.MeshTCPPort] = true
		chains = append(chains, b.tcpChain(CaptureBlackholeChain,
			chainMatch(netip.Prefix{}, meshv1alpha1.MeshTCPPort, transportRawBuffer, nil), BlackholeCluster))
	}
	for _, port := range slices.Sorted(maps.Keys(claimed)) {
		chains = append(chains, b.captureHTTPChain(CaptureHTTPPortChain(port), netip.Prefix{}, port, identity))
	}
	chains = append(chains, b.captureHTTPChain(CaptureHTTPChain, netip.Prefix{}, 0, identity))
	slices.SortFunc(chains, func(a, b *listenerv3.FilterChain) int { return cmp.Compare(a.GetName(), b.GetName()) })
	b.leaveFromThePod(chains...)
	return chains
}

// captureTCPPortChains are the chains of <VIP>:<port>, port a TCP port of s: one, or three when an
// HTTP dial of the port has an HTTP answer (port 80, the port http://<name>/ dials); and one per
// TLSRoute that applies there (route_gateway.go).
func (b *builder) captureTCPPortChains(s meshService, vip netip.Prefix, port int32, identity string) []*listenerv3.FilterChain {
	name := CaptureTCPPortChain(s.key, port)
	target, snis := b.tcpRouting(&s, port, identity, SourceCluster(TCPCluster(s.fqdn, port), identity))
	sniChains := b.tlsRouteChains(name, vip, port, snis)
	if port != resolve.HTTPPort {
		return append([]*listenerv3.FilterChain{b.weightedTCPChain(name, chainMatch(vip, port, "", nil), target)}, sniChains...)
	}
	return append([]*listenerv3.FilterChain{
		b.captureHTTPChain(CaptureHTTPServicePortChain(s.key, port), vip, port, identity),
		b.weightedTCPChain(name, chainMatch(vip, port, transportRawBuffer, nil), target),
		b.weightedTCPChain(CaptureTCPPortTLSChain(s.key, port), chainMatch(vip, port, transportTLS, nil), target),
	}, sniChains...)
}

// tlsRouteChains are the SNI chains of the TLSRoutes on (vip, port), whose TCP chain is base:
// TLS whose server name is one of a route's hostnames goes to its backends. server_names is more
// specific than the TCP chains' match (Envoy matches it before the transport protocol), so the
// other connections keep taking those.
func (b *builder) tlsRouteChains(base string, vip netip.Prefix, port int32, snis []sniRoute) []*listenerv3.FilterChain {
	out := make([]*listenerv3.FilterChain, 0, len(snis))
	for _, r := range snis {
		match := chainMatch(vip, port, transportTLS, nil)
		match.ServerNames = r.hostnames
		out = append(out, b.weightedTCPChain(CaptureTLSRouteChain(base, r.route.namespace, r.route.name), match, r.target))
	}
	return out
}

// captureHTTPChain is an HCM chain named name for cleartext HTTP to vip (any when invalid) and
// port (any when 0), routed by RDS CaptureRoutes(identity) over the ADS stream.
func (b *builder) captureHTTPChain(name string, vip netip.Prefix, port int32, identity string) *listenerv3.FilterChain {
	// No strip_any_host_port: the port in the Host header is the port (DESIGN section 5).
	// A trailing dot is stripped (payments.shop. is payments.shop).
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: name,
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: adsSource(), RouteConfigName: CaptureRoutes(identity),
		}},
		HttpFilters:          b.routerFilters(),
		StripTrailingHostDot: true,
	}
	return &listenerv3.FilterChain{
		Name:             name,
		FilterChainMatch: chainMatch(vip, port, transportRawBuffer, httpInspectorProtocols),
		Filters:          []*listenerv3.Filter{b.networkFilter(wellknown.HTTPConnectionManager, name, hcm)},
	}
}

// routerFilters are an HCM's HTTP filters: the router, last (and alone until routes add filters).
func (b *builder) routerFilters() []*hcmv3.HttpFilter {
	return []*hcmv3.HttpFilter{{
		Name:       wellknown.Router,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: b.pack("the router filter", &routerv3.Router{})},
	}}
}

// tcpChain is a chain named name that proxies what match selects to cluster.
func (b *builder) tcpChain(name string, match *listenerv3.FilterChainMatch, cluster string) *listenerv3.FilterChain {
	return b.weightedTCPChain(name, match, []weightedBase{{base: cluster, weight: 1}})
}

// weightedTCPChain is a chain named name that proxies what match selects to the clusters of
// target (full names), by weight: a TCPRoute's or TLSRoute's backends, or one cluster.
func (b *builder) weightedTCPChain(name string, match *listenerv3.FilterChainMatch, target []weightedBase) *listenerv3.FilterChain {
	proxy := &tcpproxyv3.TcpProxy{StatPrefix: name}
	if len(target) == 1 {
		proxy.ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: target[0].base}
	} else {
		weighted := &tcpproxyv3.TcpProxy_WeightedCluster{}
		for _, t := range target {
			weighted.Clusters = append(weighted.Clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: t.base, Weight: t.weight})
		}
		proxy.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: weighted}
	}
	return &listenerv3.FilterChain{
		Name:             name,
		FilterChainMatch: match,
		Filters:          []*listenerv3.Filter{b.networkFilter(wellknown.TCPProxy, name, proxy)},
	}
}

// chainMatch matches destination vip (any when invalid), destination port (any when 0), transport
// protocol (any when empty) and one of the application protocols (any when none).
func chainMatch(vip netip.Prefix, port int32, transport string, apps []string) *listenerv3.FilterChainMatch {
	m := &listenerv3.FilterChainMatch{TransportProtocol: transport, ApplicationProtocols: apps}
	if port != 0 {
		m.DestinationPort = wrapperspb.UInt32(uint32(port))
	}
	if vip.IsValid() {
		m.PrefixRanges = []*corev3.CidrRange{{
			AddressPrefix: vip.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(vip.Bits())),
		}}
	}
	return m
}

// networkFilter is a chain's network filter named name with config, packed (what names the config
// in an error).
func (b *builder) networkFilter(name, what string, config proto.Message) *listenerv3.Filter {
	return &listenerv3.Filter{
		Name:       name,
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: b.pack(name+" of "+what, config)},
	}
}

// listenerFilter is a listener filter named name with config, packed.
func (b *builder) listenerFilter(name string, config proto.Message) *listenerv3.ListenerFilter {
	return &listenerv3.ListenerFilter{
		Name:       name,
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: b.pack(name, config)},
	}
}

// netnsAddress is address:port in the network namespace at path netns.
func netnsAddress(address string, port int32, netns string) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:                  address,
		PortSpecifier:            &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
		NetworkNamespaceFilepath: netns,
	}}}
}

// listenerInputs are the pods and services the listeners and routes are built from.
type listenerInputs struct {
	domain   string
	pods     []model.LocalPod
	services []meshService
	// skipped says what was left out and why (Skipped).
	skipped []error
}

// meshService is a valid service as the listeners and routes read it.
type meshService struct {
	model.Service
	key   string // ServiceKey
	fqdn  string
	ports portspec.PortSet
	// vip is the service's VIP when valid and held by it alone; invalid otherwise.
	vip netip.Addr
	// names are the names of resolve.Names the service holds, lower-cased: the mesh name, the
	// Kubernetes names, minus those another service holds.
	names []string
	// localName is its bare name (resolve.LocalName), lower-cased, which holds from its own
	// namespace only: the capture routes of that namespace's identities carry it. Empty when
	// another service holds it as one of its names (holdNames).
	localName string
}

// What Build leaves out of the node's configuration, and why (Resources.Skipped, one sentence each). Build does not fail for these (one pod's or service's bad facts must not take
// the node's other pods down); the agent logs each and puts it in an Event on the pod:
//   - a local pod whose facts a proxy cannot use (model.LocalPod.Validate, its ports, an identity
//     not of the shape spiffe://<domain>/ns/<ns>/sa/<sa>), listed twice, or sharing another pod's
//     netns: it gets no listeners, so its captured connections are refused (fail closed, never
//     unprotected);
//   - a service that fails model.Service.Validate or lists a port of the mesh's own: no chains,
//     virtual hosts or routes; a service listed twice: its first listing counts;
//   - a service VIP that is not an IP address, or that an earlier service (by namespace and name)
//     holds: no TCP capture chains for the service (its HTTP still routes by Host);
//   - a name (resolve.Names) that a service earlier in the order (mesh names first, then the
//     Kubernetes names; by namespace and name) holds: no virtual hosts for it; a bare name
//     (resolve.LocalName) that is any service's name of resolve.Names: no domains for it;
//   - without a workload-identity issuer (model.Mesh.Issuer), a service's raw TCP: no raw-TCP
//     clusters, its TCP capture chains closed (withoutRawTCP).
//
// selectInputs sorts and checks the mesh's pods and services. Its error is a fault of the whole
// mesh.
func selectInputs(m model.Mesh) (listenerInputs, error) {
	if m.Domain == "" {
		return listenerInputs{}, fmt.Errorf("xds: the mesh domain is empty: set the agent's mesh domain (the default is %s)",
			resolve.DefaultMeshDomain)
	}
	in := listenerInputs{domain: m.Domain}
	in.pods, in.skipped = selectPods(m.Domain, m.Pods)
	var skipped []error
	in.services, skipped = selectServices(m.Domain, m.Services)
	in.skipped = append(in.skipped, skipped...)
	if !m.Issuer.Issues() {
		in.skipped = append(in.skipped, withoutRawTCP(in.services)...)
	}
	return in, nil
}

// withoutRawTCP names each service with a TCP port, in a mesh without a workload-identity issuer:
// it gets no raw-TCP cluster (serviceClusters), TCPRoutes and TLSRoutes are not applied to it, and
// a captured TCP dial of its VIP takes a chain to the blackhole cluster (tcpRouting): closed,
// never passed through in plaintext. Its HTTP ports are built as ever.
func withoutRawTCP(services []meshService) []error {
	var out []error
	for _, s := range services {
		var tcp []string
		for _, p := range s.ports.Ports {
			if p.Protocol == meshv1alpha1.ProtocolTCP {
				tcp = append(tcp, itoa(p.Number))
			}
		}
		if len(tcp) > 0 {
			out = append(out, fmt.Errorf("xds: no raw-TCP clusters for service %s/%s (TCP ports %s; a captured TCP dial of its VIP is closed by cluster %s): no workload identity: %s",
				s.Namespace, s.Name, strings.Join(tcp, ", "), BlackholeCluster, meshidentity.NoIssuerTCP))
		}
	}
	return out
}

// selectPods are the pods that get listeners, sorted by namespace and name.
func selectPods(domain string, pods []model.LocalPod) (kept []model.LocalPod, skipped []error) {
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b model.LocalPod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	listed := map[string]bool{}
	netnsHolder := map[string]string{}
	for _, p := range sorted {
		key := PodKey(p.Namespace, p.Name)
		err := podProblem(domain, p)
		holder, shared := netnsHolder[p.NetNS]
		switch {
		case err != nil:
		case listed[key]:
			err = fmt.Errorf("local pod %s: it is listed twice; only its first listing counts", key)
		case shared:
			err = fmt.Errorf("local pod %s: netNS %q is also pod %s's: one capture listener per network namespace; the first pod keeps it",
				key, p.NetNS, holder)
		}
		listed[key] = true
		if err != nil {
			skipped = append(skipped, fmt.Errorf("xds: no listeners for %w", err))
			continue
		}
		netnsHolder[p.NetNS] = key
		kept = append(kept, p)
	}
	return kept, skipped
}

// podProblem names the first fact of p a proxy cannot use: LocalPod.Validate, then an identity
// of the mesh's shape in its trust domain (the inbound listener accepts only that domain's peers)
// and what the inbound listener needs (its ports, each once, the primary among them).
func podProblem(domain string, p model.LocalPod) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if !meshIdentity(domain, p.Identity) {
		return fmt.Errorf("local pod %s/%s: identity %q is not of the mesh's shape %s/ns/<namespace>/sa/<serviceaccount>",
			p.Namespace, p.Name, p.Identity, TrustBundleSecret(domain))
	}
	primary := false
	seen := map[int32]bool{}
	for i, pp := range p.Ports {
		switch {
		case pp.Port < 1 || pp.Port > 65535:
			return fmt.Errorf("local pod %s/%s: ports[%d] is %d, not a port (1..65535)", p.Namespace, p.Name, i, pp.Port)
		case portspec.Reserved[pp.Port] != "":
			return fmt.Errorf("local pod %s/%s: ports[%d] is %d, a port of the mesh's own: %s", p.Namespace, p.Name, i, pp.Port,
				portspec.Reserved[pp.Port])
		case seen[pp.Port]:
			return fmt.Errorf("local pod %s/%s: ports[%d]: port %d is listed twice: one chain per port", p.Namespace, p.Name, i, pp.Port)
		case !pp.Protocol.IsHTTP() && pp.Protocol != meshv1alpha1.ProtocolTCP:
			return fmt.Errorf("local pod %s/%s: ports[%d] (port %d) has protocol %q, none of HTTP, HTTP2, TCP",
				p.Namespace, p.Name, i, pp.Port, pp.Protocol)
		}
		seen[pp.Port] = true
		primary = primary || pp.Port == p.Primary
	}
	if !primary {
		return fmt.Errorf("local pod %s/%s: primary %d is not among its ports: the inbound floor chain serves the primary", p.Namespace, p.Name, p.Primary)
	}
	return nil
}

// selectServices are the valid services, sorted by namespace and name, each with the VIP and the
// names it holds.
func selectServices(domain string, services []model.Service) (kept []meshService, skipped []error) {
	sorted := slices.Clone(services)
	slices.SortStableFunc(sorted, func(a, b model.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	vipHolder := map[netip.Addr]string{}
	listed := map[string]bool{}
	for _, s := range sorted {
		key := s.Namespace + "/" + s.Name
		if listed[key] {
			skipped = append(skipped, fmt.Errorf("xds: service %s is listed twice; only its first listing counts", key))
			continue
		}
		listed[key] = true
		if err := serviceProblem(s); err != nil {
			skipped = append(skipped, fmt.Errorf("xds: no chains, virtual hosts or routes for %w", err))
			continue
		}
		ms := meshService{Service: s, key: ServiceKey(s.Name, s.Namespace), fqdn: FQDN(s.Name, s.Namespace, domain), ports: s.PortSet()}
		if vip, err := holdVIP(s, vipHolder); err != nil {
			skipped = append(skipped, err)
		} else {
			ms.vip = vip
		}
		kept = append(kept, ms)
	}
	skipped = append(skipped, holdNames(domain, kept)...)
	return kept, skipped
}

// serviceProblem is model.Service.Validate's verdict, or a port of the mesh's own among s's
// ports (the API refuses them; one would make a listener ambiguous).
func serviceProblem(s model.Service) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Identity == "" {
		return fmt.Errorf("service %s/%s: identity is empty, so no TLS context can be pinned to it; "+
			"it is left out until its MeshService has an identity", s.Namespace, s.Name)
	}
	for i, p := range s.Ports {
		if why := portspec.Reserved[p.Number]; why != "" {
			return fmt.Errorf("service %s/%s: ports[%d] is %d, a port of the mesh's own: %s", s.Namespace, s.Name, i, p.Number, why)
		}
	}
	return nil
}

// holdVIP is s's VIP when it is an IP address no earlier service holds (invalid when s has none),
// recording it in holder.
func holdVIP(s model.Service, holder map[netip.Addr]string) (netip.Addr, error) {
	if s.VIP == "" {
		return netip.Addr{}, nil
	}
	vip, err := netip.ParseAddr(s.VIP)
	if err != nil || vip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("xds: no TCP capture chains for service %s/%s: VIP %q is not an IP address", s.Namespace, s.Name, s.VIP)
	}
	vip = vip.Unmap()
	if h, taken := holder[vip]; taken {
		return netip.Addr{}, fmt.Errorf("xds: no TCP capture chains for service %s/%s: VIP %s is also service %s's, which keeps it",
			s.Namespace, s.Name, vip, h)
	}
	holder[vip] = s.Namespace + "/" + s.Name
	return vip, nil
}

// holdNames gives each service the names of resolve.Names no other service holds first: a name
// is one virtual host's (Envoy refuses a domain in two). Mesh names are held first, then the
// Kubernetes names in their order, each by the first service in namespace-and-name order. Hosts
// match case-insensitively, so names are compared (and kept) lower-cased.
func holdNames(domain string, services []meshService) (skipped []error) {
	names := make([][]string, len(services))
	for i, s := range services {
		names[i] = resolve.Names(s.Name, s.Namespace, domain)
	}
	holder := map[string]int{}
	for kind := range len(resolve.Names("", "", domain)) {
		for i := range services {
			name := strings.ToLower(names[i][kind])
			h, taken := holder[name]
			switch {
			case !taken:
				holder[name] = i
				services[i].names = append(services[i].names, name)
			case h != i: // the same service twice (a mesh domain of svc.cluster.local) is no conflict
				skipped = append(skipped, fmt.Errorf("xds: no virtual hosts for name %q of service %s/%s: it is also a name of service %s/%s, which keeps it",
					name, services[i].Namespace, services[i].Name, services[h].Namespace, services[h].Name))
			}
		}
	}
	return append(skipped, holdLocalNames(services, holder)...)
}

// holdLocalNames gives each service that holds names its bare name (resolve.LocalName), unless a
// service holds it as one of its names (holder): a name that spells a namespace keeps its meaning
// everywhere, and a domain is one virtual host's. Two services of one namespace have two bare
// names, and the bare names of two namespaces are in two route configurations (one per source
// identity, so per namespace: captureRoutes), so bare names never collide with each other.
func holdLocalNames(services []meshService, holder map[string]int) (skipped []error) {
	for i := range services {
		s := &services[i]
		if len(s.names) == 0 {
			continue // a service without virtual hosts has no bare-name domains to join
		}
		name := strings.ToLower(resolve.LocalName(s.Name))
		if h, taken := holder[name]; taken {
			skipped = append(skipped, fmt.Errorf("xds: no virtual hosts for bare name %q of service %s/%s (from namespace %s): it is a name of service %s/%s, which keeps it",
				name, s.Namespace, s.Name, s.Namespace, services[h].Namespace, services[h].Name))
			continue
		}
		s.localName = name
	}
	return skipped
}
