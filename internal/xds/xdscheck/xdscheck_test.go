// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck_test

import (
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	fileaccesslogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	grpcaccesslogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	setfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	h2mv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	httpinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netsetfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	filterstateoverridev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/local_address_selectors/filter_state_override/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The hand-built configuration every gate test starts from: frontend (web) on this node dials
// payments (shop), a service with HTTP port 8080 and TCP port 9000.
const (
	domain   = "aether.internal"
	source   = "spiffe://aether.internal/ns/web/sa/frontend"
	payments = "spiffe://aether.internal/ns/shop/sa/payments"
	vip      = "10.96.0.10"
)

var (
	fqdn         = xds.FQDN("payments", "shop", domain)
	svcKey       = xds.ServiceKey("payments", "shop")
	podKey       = xds.PodKey("web", "frontend-0")
	httpCluster  = xds.SourceCluster(xds.HTTPCluster(fqdn, 8080), source)
	tcpCluster   = xds.SourceCluster(xds.TCPDefaultCluster(fqdn), source)
	tcp9000      = xds.SourceCluster(xds.TCPCluster(fqdn, 9000), source)
	routeName    = xds.CaptureRoutes(source)
	captureName  = xds.CaptureListener(podKey)
	httpEDSName  = xds.LoadAssignment(fqdn, 8080)
	tcpEDSName   = xds.LoadAssignment(fqdn, 9000)
	listenerAddr = &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 18001},
		NetworkNamespaceFilepath: "/var/run/netns/cni-web-frontend-0"}}}
)

// fromThePod is the filter every capture chain starts with: the listener's namespace is the
// upstream's.
func fromThePod(t testing.TB) *listenerv3.Filter {
	config := &netsetfilterstatev3.Config{OnNewConnection: []*setfilterstatev3.FilterStateValue{{
		Key:        &setfilterstatev3.FilterStateValue_ObjectKey{ObjectKey: xds.UpstreamNetnsKey},
		FactoryKey: xds.HashableStringFactory,
		Value: &setfilterstatev3.FilterStateValue_FormatString{FormatString: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: "%FILTER_STATE(" + xds.ListenerNetnsKey + ":PLAIN)%"}}}}},
		SharedWithUpstream: setfilterstatev3.FilterStateValue_ONCE,
	}}}
	return &listenerv3.Filter{Name: xds.SetFilterStateFilter, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: pack(t, config)}}
}

// podBind is the bind config of every cluster a capture chain reaches.
func podBind(t testing.TB) *corev3.BindConfig {
	return &corev3.BindConfig{
		SourceAddress: &corev3.SocketAddress{Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{}},
		SocketOptions: []*corev3.SocketOption{{Level: 1, Name: 36, Value: &corev3.SocketOption_IntValue{IntValue: int64(model.ProxySocketMark)}}},
		LocalAddressSelector: &corev3.TypedExtensionConfig{Name: xds.PodBindSelector,
			TypedConfig: pack(t, &filterstateoverridev3.Config{})},
	}
}

// terminal is a chain's last filter (after set_filter_state).
func terminal(fc *listenerv3.FilterChain) *listenerv3.Filter {
	return fc.GetFilters()[len(fc.GetFilters())-1]
}

func pack(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
}

// meshCluster is an EDS cluster to payments over mTLS: the source's certificate by SDS, the
// trust bundle by SDS, the peer pinned to payments' SPIFFE ID.
func meshCluster(t testing.TB, name, eds, sni string) *clusterv3.Cluster {
	tls := &tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: xds.CertificateSecret(source), SdsConfig: ads()}},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
			DefaultValidationContext: &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
				SanType: tlsv3.SubjectAltNameMatcher_URI,
				Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: payments}},
			}}},
			ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: xds.TrustBundleSecret(domain), SdsConfig: ads()},
		}},
	}}
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads(), ServiceName: eds},
		ConnectTimeout:       durationpb.New(time.Second),
		UpstreamBindConfig:   podBind(t),
		TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.tls",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pack(t, tls)}},
	}
}

func loadAssignment(name, address string) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: address, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 18008}}}}}}}},
	}}}
}

// toTheAgent is the common configuration of a gRPC access log to the node agent.
func toTheAgent() *grpcaccesslogv3.CommonGrpcAccessLogConfig {
	return &grpcaccesslogv3.CommonGrpcAccessLogConfig{LogName: "aether", TransportApiVersion: corev3.ApiVersion_V3,
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: xds.XDSCluster}}}}
}

// httpLog and tcpLog are an HCM's and a tcp_proxy's access log to the node agent.
func httpLog(t testing.TB) *accesslogv3.AccessLog {
	return &accesslogv3.AccessLog{Name: "envoy.access_loggers.http_grpc", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: pack(t,
		&grpcaccesslogv3.HttpGrpcAccessLogConfig{CommonConfig: toTheAgent(), AdditionalResponseHeadersToLog: []string{xds.OutcomeHeader}})}}
}

func tcpLog(t testing.TB) *accesslogv3.AccessLog {
	return &accesslogv3.AccessLog{Name: "envoy.access_loggers.tcp_grpc", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: pack(t,
		&grpcaccesslogv3.TcpGrpcAccessLogConfig{CommonConfig: toTheAgent()})}}
}

func tcpProxyChain(t testing.TB, name string, port uint32, cluster string) *listenerv3.FilterChain {
	proxy := &tcpproxyv3.TcpProxy{StatPrefix: name, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster},
		AccessLog: []*accesslogv3.AccessLog{tcpLog(t)}}
	return &listenerv3.FilterChain{
		Name: name,
		FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(port),
			PrefixRanges: []*corev3.CidrRange{{AddressPrefix: vip, PrefixLen: wrapperspb.UInt32(32)}}},
		Filters: []*listenerv3.Filter{fromThePod(t), {Name: "envoy.filters.network.tcp_proxy",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: pack(t, proxy)}}},
	}
}

func hcmChain(t testing.TB) *listenerv3.FilterChain {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix:     xds.CaptureHTTPChain,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{ConfigSource: ads(), RouteConfigName: routeName}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: pack(t, &routerv3.Router{})}}},
		AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file",
			ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: pack(t, &fileaccesslogv3.FileAccessLog{Path: "/dev/stdout"})}}, httpLog(t)},
		UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}},
		Http2ProtocolOptions: &corev3.Http2ProtocolOptions{AllowConnect: true, MaxConcurrentStreams: wrapperspb.UInt32(100),
			InitialStreamWindowSize: wrapperspb.UInt32(64 << 10), InitialConnectionWindowSize: wrapperspb.UInt32(1 << 20)},
	}
	return &listenerv3.FilterChain{
		Name:             xds.CaptureHTTPChain,
		FilterChainMatch: &listenerv3.FilterChainMatch{TransportProtocol: "raw_buffer", ApplicationProtocols: []string{"http/1.1", "h2c"}},
		Filters: []*listenerv3.Filter{fromThePod(t), {Name: "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: pack(t, hcm)}}},
	}
}

// valid is a small configuration that passes every gate: two mesh clusters and a passthrough,
// their two load assignments, one capture listener (two TCP chains, the HCM chain, the
// passthrough default) and its route configuration (a plain and a weighted route).
func valid(t testing.TB) xds.Resources {
	t.Helper()
	inspector := func(name string, m proto.Message) *listenerv3.ListenerFilter {
		return &listenerv3.ListenerFilter{Name: name, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: pack(t, m)}}
	}
	passthrough := tcpProxyChain(t, xds.CapturePassthroughChain, 0, xds.PassthroughCluster)
	passthrough.FilterChainMatch = nil
	capture := &listenerv3.Listener{
		Name:            captureName,
		Address:         listenerAddr,
		UseOriginalDst:  wrapperspb.Bool(true),
		EnableReusePort: wrapperspb.Bool(true),
		ListenerFilters: []*listenerv3.ListenerFilter{
			inspector("envoy.filters.listener.tls_inspector", &tlsinspectorv3.TlsInspector{}),
			inspector("envoy.filters.listener.http_inspector", &httpinspectorv3.HttpInspector{}),
		},
		FilterChains: []*listenerv3.FilterChain{
			tcpProxyChain(t, xds.CaptureTCPChain(svcKey), 18082, tcpCluster),
			tcpProxyChain(t, xds.CaptureTCPPortChain(svcKey, 9000), 9000, tcp9000),
			hcmChain(t),
		},
		DefaultFilterChain:            passthrough,
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(xds.ConnectionBufferLimit),
	}
	routes := &routev3.RouteConfiguration{Name: routeName, ResponseHeadersToRemove: []string{xds.OutcomeHeader},
		RequestHeadersToRemove: []string{xds.OutcomeHeader, "x-envoy-retry-on", "x-envoy-retry-grpc-on", "x-envoy-max-retries",
			"x-envoy-retriable-status-codes", "x-envoy-retriable-header-names"}, VirtualHosts: []*routev3.VirtualHost{{
			Name:    fqdn + ":8080",
			Domains: []string{fqdn + ":8080", "payments.shop:8080"},
			Routes: []*routev3.Route{
				{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/v2"}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{
						WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
							{Name: httpCluster, Weight: wrapperspb.UInt32(1)}}}},
						RetryPolicy: retryPolicy(t, "unreachable", "app-503", "refused-stream")}}},
				{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: httpCluster},
						RetryPolicy: retryPolicy(t, "unreachable", "app-503", "refused-stream")}}},
			},
		}}}
	passthroughCluster := &clusterv3.Cluster{
		Name:                 xds.PassthroughCluster,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
		ConnectTimeout:       durationpb.New(time.Second),
		UpstreamBindConfig:   podBind(t),
	}
	return xds.Resources{
		// Sorted by name: "passthrough" < "payments…" < "tcp:…:9000|…" < "tcp:…|…" (':' < '|').
		Clusters:  []*clusterv3.Cluster{passthroughCluster, meshCluster(t, httpCluster, httpEDSName, ""), meshCluster(t, tcp9000, tcpEDSName, "9000"), meshCluster(t, tcpCluster, tcpEDSName, "9000")},
		Endpoints: []*endpointv3.ClusterLoadAssignment{loadAssignment(httpEDSName, "10.244.1.10"), loadAssignment(tcpEDSName, "10.244.1.10")},
		Listeners: []*listenerv3.Listener{capture},
		Routes:    []*routev3.RouteConfiguration{routes},
		Runtimes: []*runtimev3.Runtime{{Name: xds.ListenerLimitsLayer, Layer: &structpb.Struct{Fields: map[string]*structpb.Value{
			xds.ListenerConnectionLimitKey(captureName): structpb.NewNumberValue(xds.PodListenerConnections),
		}}}},
	}
}

// retryPolicy is the page's retry policy (written out here, not taken from the builder) retrying
// the outcome values.
func retryPolicy(t testing.TB, values ...string) *routev3.RetryPolicy {
	p := &routev3.RetryPolicy{
		RetryOn:    "connect-failure,refused-stream,reset-before-request,retriable-headers",
		NumRetries: wrapperspb.UInt32(2),
		RetryHostPredicate: []*routev3.RetryPolicy_RetryHostPredicate{{Name: "envoy.retry_host_predicates.previous_hosts",
			ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: pack(t, &previoushostsv3.PreviousHostsPredicate{})}}},
		RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(25 * time.Millisecond), MaxInterval: durationpb.New(250 * time.Millisecond)},
	}
	for _, v := range values {
		p.RetriableHeaders = append(p.RetriableHeaders, &routev3.HeaderMatcher{Name: xds.OutcomeHeader,
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}}})
	}
	return p
}

// inboundHCM edits the HCM of the chain named chain of the first inbound listener of res.
func inboundHCM(t testing.TB, res *xds.Resources, chain string, change func(*hcmv3.HttpConnectionManager)) {
	t.Helper()
	for _, l := range res.Listeners {
		if l.GetTrafficDirection() != corev3.TrafficDirection_INBOUND {
			continue
		}
		for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
			if fc.GetName() == chain {
				repack(t, terminal(fc).GetTypedConfig(), func(m proto.Message) { change(m.(*hcmv3.HttpConnectionManager)) })
				return
			}
		}
	}
	t.Fatalf("no inbound chain %q", chain)
}

// onBuilt breaks a build of a scenario's mesh instead of the valid configuration, which has no
// inbound listener: pure HTTP (the pod's inbound chains in_8080, in_8081 and the floor), checked
// to pass every gate before it is broken.
func onBuilt(breakCopy func(testing.TB, *xds.Resources)) func(testing.TB, *xds.Resources) {
	return func(t testing.TB, res *xds.Resources) {
		t.Helper()
		built, err := xds.Build(xdstest.PureHTTP())
		if err != nil {
			t.Fatal(err)
		}
		if v := xdscheck.All(built); v != nil {
			t.Fatalf("the build fails before it is broken:\n%s", strings.Join(v, "\n"))
		}
		*res = built
		breakCopy(t, res)
	}
}

// onSubsets breaks a build of the subsets scenario (payments' pods publish version and shard),
// checked to pass every gate before it is broken.
func onSubsets(breakCopy func(testing.TB, *xds.Resources)) func(testing.TB, *xds.Resources) {
	return func(t testing.TB, res *xds.Resources) {
		t.Helper()
		built, err := xds.Build(xdstest.Subsets())
		if err != nil {
			t.Fatal(err)
		}
		if v := xdscheck.All(built); v != nil {
			t.Fatalf("the build fails before it is broken:\n%s", strings.Join(v, "\n"))
		}
		*res = clone(built)
		breakCopy(t, res)
	}
}

// inboundTCPProxy lets change edit the tcp_proxy of chain in listener.
func inboundTCPProxy(t testing.TB, res *xds.Resources, listener, chain string, change func(*tcpproxyv3.TcpProxy)) {
	t.Helper()
	for _, l := range res.Listeners {
		for _, fc := range l.GetFilterChains() {
			if l.GetName() == listener && fc.GetName() == chain {
				repack(t, terminal(fc).GetTypedConfig(), func(m proto.Message) { change(m.(*tcpproxyv3.TcpProxy)) })
				return
			}
		}
	}
	t.Fatalf("no chain %q in listener %q", chain, listener)
}

// subsetCluster is frontend's cluster of payments' port 8080 in the subsets scenario.
func subsetCluster(t testing.TB, res *xds.Resources) *clusterv3.Cluster {
	t.Helper()
	for _, c := range res.Clusters {
		if c.GetName() == "payments.shop.aether.internal:8080|web/frontend" {
			return c
		}
	}
	t.Fatal("no cluster payments.shop.aether.internal:8080|web/frontend")
	return nil
}

// subsetVirtualHost is frontend's virtual host of payments' port 8080 in the subsets scenario.
func subsetVirtualHost(t testing.TB, res *xds.Resources) *routev3.VirtualHost {
	t.Helper()
	for _, rc := range res.Routes {
		for _, vh := range rc.GetVirtualHosts() {
			if rc.GetName() == "capture|web/frontend" && vh.GetName() == "payments.shop.aether.internal:8080" {
				return vh
			}
		}
	}
	t.Fatal("no virtual host payments.shop.aether.internal:8080 in capture|web/frontend")
	return nil
}

// clone deep-copies resources, so that a broken copy leaves the valid one alone.
func clone(res xds.Resources) xds.Resources {
	var out xds.Resources
	for _, c := range res.Clusters {
		out.Clusters = append(out.Clusters, proto.Clone(c).(*clusterv3.Cluster))
	}
	for _, e := range res.Endpoints {
		out.Endpoints = append(out.Endpoints, proto.Clone(e).(*endpointv3.ClusterLoadAssignment))
	}
	for _, l := range res.Listeners {
		out.Listeners = append(out.Listeners, proto.Clone(l).(*listenerv3.Listener))
	}
	for _, r := range res.Routes {
		out.Routes = append(out.Routes, proto.Clone(r).(*routev3.RouteConfiguration))
	}
	return out
}

// repack unpacks the Any a, lets change edit the message, and packs it back.
func repack(t testing.TB, a *anypb.Any, change func(proto.Message)) {
	t.Helper()
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	change(m)
	if err := a.MarshalFrom(m); err != nil {
		t.Fatal(err)
	}
}

// chain returns the capture listener's chain of that name.
func chain(t testing.TB, res xds.Resources, name string) *listenerv3.FilterChain {
	t.Helper()
	for _, c := range res.Listeners[0].GetFilterChains() {
		if c.GetName() == name {
			return c
		}
	}
	t.Fatalf("no chain %q", name)
	return nil
}

func upstreamTLS(t testing.TB, res xds.Resources, i int, change func(*tlsv3.CommonTlsContext)) {
	repack(t, res.Clusters[i].GetTransportSocket().GetTypedConfig(), func(m proto.Message) {
		change(m.(*tlsv3.UpstreamTlsContext).GetCommonTlsContext())
	})
}

func dropCluster(res *xds.Resources, name string) {
	for i, c := range res.Clusters {
		if c.GetName() == name {
			res.Clusters = append(res.Clusters[:i], res.Clusters[i+1:]...)
			return
		}
	}
}

// TestValidPasses: the hand-built configuration passes every gate, and two copies of it are
// stable. Every negative control below breaks a copy of it in one place.
func TestValidPasses(t *testing.T) {
	res := valid(t)
	if v := xdscheck.All(res); v != nil {
		t.Fatalf("the valid configuration fails:\n%s", strings.Join(v, "\n"))
	}
	if v := xdscheck.ListenersAndRoutesEqual(res, clone(res)); v != nil {
		t.Fatalf("a configuration differs from its copy:\n%s", strings.Join(v, "\n"))
	}
	if v := xdscheck.All(xds.Resources{}); v != nil {
		t.Fatalf("empty resources fail:\n%s", strings.Join(v, "\n"))
	}
}

// negative is one deliberately broken copy of the valid configuration and the violation the
// gate must report for it.
type negative struct {
	name      string
	gate      func(xds.Resources) []string
	breakCopy func(t testing.TB, res *xds.Resources)
	want      string
}

// TestGatesRejectBrokenCopies: each gate reports its violation on a copy broken in one place,
// and only that copy (the valid one, checked again after, still passes). The violation lines
// are logged (go test -v) so that they can be read as the gate's failure message.
func TestGatesRejectBrokenCopies(t *testing.T) {
	for _, tc := range []negative{
		{"from the pod: a cluster without a bind config", xdscheck.FromThePod, func(_ testing.TB, res *xds.Resources) {
			res.Clusters[2].UpstreamBindConfig = nil
		}, `cluster "tcp:payments.shop.aether.internal:9000|web/frontend" (reached by listener "capture_web/frontend-0" chain "cap_tcp_payments.shop_9000"): no upstream_bind_config: it connects from the node's network namespace`},
		{"from the pod: the passthrough without the proxy's mark", xdscheck.FromThePod, func(_ testing.TB, res *xds.Resources) {
			res.Clusters[0].UpstreamBindConfig.SocketOptions = nil
		}, `cluster "passthrough" (reached by listener "capture_web/frontend-0" chain "cap_passthrough"): its sockets do not carry the proxy's mark 0xae7`},
		{"from the pod: a chain without set_filter_state", xdscheck.FromThePod, func(t testing.TB, res *xds.Resources) {
			c := chain(t, *res, xds.CaptureHTTPChain)
			c.Filters = c.Filters[1:]
		}, `listener "capture_web/frontend-0" chain "cap_http": no set_filter_state before its terminal filter: its upstream would leave from the node`},
		{"from the pod: the plain string factory", xdscheck.FromThePod, func(t testing.TB, res *xds.Resources) {
			repack(t, chain(t, *res, xds.CaptureTCPChain(svcKey)).GetFilters()[0].GetTypedConfig(), func(m proto.Message) {
				m.(*netsetfilterstatev3.Config).OnNewConnection[0].FactoryKey = "envoy.string"
			})
		}, `it builds envoy.network.upstream_bind_override.network_namespace with factory "envoy.string", not "envoy.hashable_string"`},
		{"from the pod: a listener in the node's namespace", xdscheck.FromThePod, func(_ testing.TB, res *xds.Resources) {
			res.Listeners[0].Address = &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 18001}}}}
		}, `listener "capture_web/frontend-0": it is not bound in a pod's network namespace`},
		{"references: tcp_proxy names a deleted cluster", xdscheck.References, func(_ testing.TB, res *xds.Resources) {
			dropCluster(res, tcp9000)
		}, `listener "capture_web/frontend-0": filter_chains[cap_tcp_payments.shop_9000].filters[envoy.filters.network.tcp_proxy].typed_config<TcpProxy>: cluster "tcp:payments.shop.aether.internal:9000|web/frontend" is not among the clusters`},
		{"references: tcp_proxy names a deleted weighted cluster", xdscheck.References, func(t testing.TB, res *xds.Resources) {
			repack(t, terminal(chain(t, *res, xds.CaptureTCPChain(svcKey))).GetTypedConfig(), func(m proto.Message) {
				m.(*tcpproxyv3.TcpProxy).ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpproxyv3.TcpProxy_WeightedCluster{
					Clusters: []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: tcpCluster, Weight: 1}, {Name: "tcp:gone", Weight: 1}}}}
			})
		}, `typed_config<TcpProxy>: weighted cluster "tcp:gone" is not among the clusters`},
		{"references: a route names a deleted cluster", xdscheck.References, func(_ testing.TB, res *xds.Resources) {
			dropCluster(res, httpCluster)
		}, `route configuration "capture|web/frontend": virtual_hosts[payments.shop.aether.internal:8080].routes[1].route: cluster "payments.shop.aether.internal:8080|web/frontend" is not among the clusters`},
		{"references: a weighted route names a deleted cluster", xdscheck.References, func(_ testing.TB, res *xds.Resources) {
			dropCluster(res, httpCluster)
		}, `virtual_hosts[payments.shop.aether.internal:8080].routes[0].route: weighted cluster "payments.shop.aether.internal:8080|web/frontend" is not among the clusters`},
		{"references: an EDS cluster's load assignment is missing", xdscheck.References, func(_ testing.TB, res *xds.Resources) {
			res.Endpoints = res.Endpoints[1:]
		}, `cluster "payments.shop.aether.internal:8080|web/frontend": EDS load assignment "payments.shop.aether.internal:8080" is not among the load assignments`},
		{"references: the RDS name is missing", xdscheck.References, func(_ testing.TB, res *xds.Resources) {
			res.Routes = nil
		}, `filter_chains[cap_http].filters[envoy.filters.network.http_connection_manager].typed_config<HttpConnectionManager>: RDS route configuration "capture|web/frontend" is not among the route configurations`},
		{"references: an SDS secret asked of another source than ADS", xdscheck.References, func(t testing.TB, res *xds.Resources) {
			upstreamTLS(t, *res, 3, func(cc *tlsv3.CommonTlsContext) {
				cc.TlsCertificateSdsSecretConfigs[0].SdsConfig = &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3,
					ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{Path: "/etc/secrets.yaml"}}}
			})
		}, `tls_certificate_sds_secret_configs[spiffe://aether.internal/ns/web/sa/frontend]: SDS secret "spiffe://aether.internal/ns/web/sa/frontend" is not asked over ADS (sds_config.ads)`},
		{"references: an SDS secret without a name", xdscheck.References, func(t testing.TB, res *xds.Resources) {
			upstreamTLS(t, *res, 3, func(cc *tlsv3.CommonTlsContext) {
				cc.GetCombinedValidationContext().GetValidationContextSdsSecretConfig().Name = ""
			})
		}, `validation_context_sds_secret_config: an SDS secret without a name`},
		{"chains: two chains share a match", xdscheck.Chains, func(t testing.TB, res *xds.Resources) {
			chain(t, *res, xds.CaptureTCPChain(svcKey)).GetFilterChainMatch().DestinationPort = wrapperspb.UInt32(9000)
		}, `listener "capture_web/frontend-0": filter chains "cap_tcp_payments.shop" and "cap_tcp_payments.shop_9000" both match destination_port 9000, prefix_ranges 10.96.0.10/32`},
		{"chains: overlapping server names (not equal matches: proto.Equal would miss it)", xdscheck.Chains, func(t testing.TB, res *xds.Resources) {
			chain(t, *res, xds.CaptureTCPChain(svcKey)).GetFilterChainMatch().ServerNames = []string{"9000", "9001"}
			m := chain(t, *res, xds.CaptureTCPPortChain(svcKey, 9000)).GetFilterChainMatch()
			m.DestinationPort, m.ServerNames = wrapperspb.UInt32(18082), []string{"9001"}
		}, `filter chains "cap_tcp_payments.shop" and "cap_tcp_payments.shop_9000" both match destination_port 18082, prefix_ranges 10.96.0.10/32, server_names 9001`},
		{"chains: two chains without criteria", xdscheck.Chains, func(t testing.TB, res *xds.Resources) {
			chain(t, *res, xds.CaptureTCPChain(svcKey)).FilterChainMatch = nil
			chain(t, *res, xds.CaptureHTTPChain).FilterChainMatch = &listenerv3.FilterChainMatch{}
		}, `filter chains "cap_tcp_payments.shop" and "cap_http" both match every connection (no criteria)`},
		{"chains: two chains share a name", xdscheck.Chains, func(t testing.TB, res *xds.Resources) {
			chain(t, *res, xds.CaptureTCPPortChain(svcKey, 9000)).Name = xds.CaptureTCPChain(svcKey)
		}, `listener "capture_web/frontend-0": two filter chains are named "cap_tcp_payments.shop"`},
		{"chains: the default chain shares a name", xdscheck.Chains, func(_ testing.TB, res *xds.Resources) {
			res.Listeners[0].DefaultFilterChain.Name = xds.CaptureHTTPChain
		}, `two filter chains are named "cap_http"`},
		{"pinning: the SAN matcher is dropped", xdscheck.Pinning, func(t testing.TB, res *xds.Resources) {
			upstreamTLS(t, *res, 2, func(cc *tlsv3.CommonTlsContext) {
				cc.GetCombinedValidationContext().GetDefaultValidationContext().MatchTypedSubjectAltNames = nil
			})
		}, `cluster "tcp:payments.shop.aether.internal:9000|web/frontend": transport socket "envoy.transport_sockets.tls": is not SAN-pinned: no exact URI subject-alt-name matcher`},
		{"pinning: a DNS SAN is no pin", xdscheck.Pinning, func(t testing.TB, res *xds.Resources) {
			upstreamTLS(t, *res, 1, func(cc *tlsv3.CommonTlsContext) {
				cc.GetCombinedValidationContext().GetDefaultValidationContext().MatchTypedSubjectAltNames[0].SanType = tlsv3.SubjectAltNameMatcher_DNS
			})
		}, `cluster "payments.shop.aether.internal:8080|web/frontend": transport socket "envoy.transport_sockets.tls": is not SAN-pinned`},
		{"pinning: no SDS certificate", xdscheck.Pinning, func(t testing.TB, res *xds.Resources) {
			upstreamTLS(t, *res, 3, func(cc *tlsv3.CommonTlsContext) { cc.TlsCertificateSdsSecretConfigs = nil })
		}, `cluster "tcp:payments.shop.aether.internal|web/frontend": transport socket "envoy.transport_sockets.tls": presents no certificate`},
		{"pinning: no trust anchor", xdscheck.Pinning, func(t testing.TB, res *xds.Resources) {
			upstreamTLS(t, *res, 3, func(cc *tlsv3.CommonTlsContext) {
				cc.GetCombinedValidationContext().ValidationContextSdsSecretConfig = nil
			})
		}, `transport socket "envoy.transport_sockets.tls": trusts no anchor`},
		{"consistency: a load assignment is missing", xdscheck.Consistency, func(_ testing.TB, res *xds.Resources) {
			res.Endpoints = res.Endpoints[:1]
		}, `snapshot.Consistent(): mismatched "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment" reference and resource lengths`},
		{"consistency: a load assignment nobody references", xdscheck.Consistency, func(_ testing.TB, res *xds.Resources) {
			res.Endpoints = append(res.Endpoints, loadAssignment("orphan.shop.aether.internal:1", "10.244.1.11"))
		}, `snapshot.Consistent(): mismatched "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment" reference and resource lengths`},
		{"consistency: the route configuration is missing", xdscheck.Consistency, func(_ testing.TB, res *xds.Resources) {
			res.Routes = nil
		}, `snapshot.Consistent(): mismatched "type.googleapis.com/envoy.config.route.v3.RouteConfiguration" reference and resource lengths`},
		{"validation: a tcp_proxy with an empty stat_prefix inside a valid listener", xdscheck.Validation, func(t testing.TB, res *xds.Resources) {
			repack(t, terminal(chain(t, *res, xds.CaptureTCPChain(svcKey))).GetTypedConfig(), func(m proto.Message) {
				m.(*tcpproxyv3.TcpProxy).StatPrefix = ""
			})
			if err := res.Listeners[0].ValidateAll(); err != nil {
				t.Fatalf("the listener's own ValidateAll should not see inside the Any, but says %v", err)
			}
		}, `listener "capture_web/frontend-0": filter_chains[cap_tcp_payments.shop].filters[envoy.filters.network.tcp_proxy].typed_config<TcpProxy>: invalid TcpProxy.StatPrefix: value length must be at least 1 runes`},
		{"validation: an Any two levels down (access log in the HCM)", xdscheck.Validation, func(t testing.TB, res *xds.Resources) {
			repack(t, terminal(chain(t, *res, xds.CaptureHTTPChain)).GetTypedConfig(), func(m proto.Message) {
				hcm := m.(*hcmv3.HttpConnectionManager)
				hcm.GetAccessLog()[0].ConfigType = &accesslogv3.AccessLog_TypedConfig{TypedConfig: pack(t, &fileaccesslogv3.FileAccessLog{})}
			})
		}, `typed_config<HttpConnectionManager>.access_log[envoy.access_loggers.file].typed_config<FileAccessLog>: invalid FileAccessLog.Path: value length must be at least 1 runes`},
		{"validation: a resource's own field", xdscheck.Validation, func(_ testing.TB, res *xds.Resources) {
			res.Clusters[1].ConnectTimeout = durationpb.New(0)
		}, `cluster "payments.shop.aether.internal:8080|web/frontend": invalid Cluster.ConnectTimeout: value must be greater than 0s`},
		{"validation: an Any of a type not linked in", xdscheck.Validation, func(_ testing.TB, res *xds.Resources) {
			res.Listeners[0].ListenerFilters[0].ConfigType = &listenerv3.ListenerFilter_TypedConfig{TypedConfig: &anypb.Any{
				TypeUrl: "type.googleapis.com/envoy.extensions.filters.listener.nonesuch.v3.NoneSuch"}}
		}, `listener "capture_web/frontend-0": listener_filters[envoy.filters.listener.tls_inspector].typed_config: cannot unpack the Any of type "type.googleapis.com/envoy.extensions.filters.listener.nonesuch.v3.NoneSuch", so no gate can check it`},
		{"domains: a virtual host spells :18082", xdscheck.Domains, func(_ testing.TB, res *xds.Resources) {
			vh := res.Routes[0].GetVirtualHosts()[0]
			vh.Domains = append(vh.Domains, fqdn+":18082")
		}, `route configuration "capture|web/frontend": virtual_hosts[payments.shop.aether.internal:8080]: domain "payments.shop.aether.internal:18082" spells the TCP mesh port 18082`},
		{"names: two owners of one load assignment", xdscheck.Names, func(_ testing.TB, res *xds.Resources) {
			res.Endpoints = append(res.Endpoints, loadAssignment(tcpEDSName, "10.244.1.12"))
		}, `load assignment "payments.shop.aether.internal:9000": two resources are named "payments.shop.aether.internal:9000"`},
		{"retries: a route without a retry policy", xdscheck.Retries, func(_ testing.TB, res *xds.Resources) {
			res.Routes[0].GetVirtualHosts()[0].GetRoutes()[1].GetRoute().RetryPolicy = nil
		}, `route configuration "capture|web/frontend": virtual_hosts[payments.shop.aether.internal:8080].routes[1]: no retry policy: a connect failure or an unreachable application fails the request`},
		{"retries: 5xx retries a delivered POST on its status alone", xdscheck.Retries, func(_ testing.TB, res *xds.Resources) {
			res.Routes[0].GetVirtualHosts()[0].GetRoutes()[1].GetRoute().GetRetryPolicy().RetryOn += ",5xx"
		}, `route configuration "capture|web/frontend": virtual_hosts[payments.shop.aether.internal:8080].routes[1]: retry_on "connect-failure,refused-stream,reset-before-request,retriable-headers,5xx" has 5xx, which the page's table does not allow`},
		{"retries: envoy-ratelimited retries a rate-limited response", xdscheck.Retries, func(_ testing.TB, res *xds.Resources) {
			res.Routes[0].GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetRetryPolicy().RetryOn += ",envoy-ratelimited"
		}, `has envoy-ratelimited, which the page's table does not allow`},
		{"retries: reset-before-request missing", xdscheck.Retries, func(_ testing.TB, res *xds.Resources) {
			res.Routes[0].GetVirtualHosts()[0].GetRoutes()[1].GetRoute().GetRetryPolicy().RetryOn = "connect-failure,refused-stream,retriable-headers"
		}, `virtual_hosts[payments.shop.aether.internal:8080].routes[1]: retry_on "connect-failure,refused-stream,retriable-headers" lacks reset-before-request`},
		{"retries: a retriable status code beyond 503", xdscheck.Retries, func(_ testing.TB, res *xds.Resources) {
			res.Routes[0].GetVirtualHosts()[0].GetRoutes()[1].GetRoute().GetRetryPolicy().RetriableStatusCodes = []uint32{503, 500}
		}, `virtual_hosts[payments.shop.aether.internal:8080].routes[1]: retriable_status_codes has 500: only 503 may be`},
		{"retries: the application's reset retried for every method (a POST run twice)", xdscheck.Retries, func(t testing.TB, res *xds.Resources) {
			res.Routes[0].GetVirtualHosts()[0].GetRoutes()[1].GetRoute().RetryPolicy = retryPolicy(t, "unreachable", "app-503", "refused-stream", "app-reset")
		}, `virtual_hosts[payments.shop.aether.internal:8080].routes[1]: retries x-aether-outcome "app-reset" for a method that is not idempotent: a request the application received is run again`},
		{"retries: a method regex that admits POST", xdscheck.Retries, func(t testing.TB, res *xds.Resources) {
			r := res.Routes[0].GetVirtualHosts()[0].GetRoutes()[1]
			r.GetRoute().RetryPolicy = retryPolicy(t, "app-reset")
			r.Match.Headers = []*routev3.HeaderMatcher{{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "GET|POST"}}}}}}
		}, `virtual_hosts[payments.shop.aether.internal:8080].routes[1]: retries x-aether-outcome "app-reset" for a method that is not idempotent`},
		{"retries: a retriable x-envoy-ratelimited header", xdscheck.Retries, func(_ testing.TB, res *xds.Resources) {
			p := res.Routes[0].GetVirtualHosts()[0].GetRoutes()[1].GetRoute().GetRetryPolicy()
			p.RetriableHeaders = append(p.RetriableHeaders, &routev3.HeaderMatcher{Name: "x-envoy-ratelimited",
				HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}})
		}, `virtual_hosts[payments.shop.aether.internal:8080].routes[1]: retriable header x-envoy-ratelimited: only x-aether-outcome may make a response retriable`},
		{"retries: three retries", xdscheck.Retries, func(_ testing.TB, res *xds.Resources) {
			res.Routes[0].GetVirtualHosts()[0].GetRoutes()[1].GetRoute().GetRetryPolicy().NumRetries = wrapperspb.UInt32(3)
		}, `virtual_hosts[payments.shop.aether.internal:8080].routes[1]: num_retries 3, want 2`},
		{"retries: a retry may land on the endpoint that failed", xdscheck.Retries, func(_ testing.TB, res *xds.Resources) {
			res.Routes[0].GetVirtualHosts()[0].GetRoutes()[1].GetRoute().GetRetryPolicy().RetryHostPredicate = nil
		}, `virtual_hosts[payments.shop.aether.internal:8080].routes[1]: no envoy.retry_host_predicates.previous_hosts predicate: a retry may pick the endpoint that just failed`},
		{"retries: a client may ask for retries of its own", xdscheck.Retries, func(_ testing.TB, res *xds.Resources) {
			res.Routes[0].RequestHeadersToRemove = res.Routes[0].RequestHeadersToRemove[:1]
		}, `route configuration "capture|web/frontend": does not remove x-envoy-retry-on from requests: a client can ask for retries the table does not allow`},
		{"retries: the outcome header reaches the client", xdscheck.Retries, func(_ testing.TB, res *xds.Resources) {
			res.Routes[0].ResponseHeadersToRemove = nil
		}, `route configuration "capture|web/frontend": does not remove x-aether-outcome from responses: it reaches the client application`},
		{"inbound http: a client's x-forwarded-client-cert passed on", xdscheck.InboundHTTP, onBuilt(func(t testing.TB, res *xds.Resources) {
			inboundHCM(t, res, "in_8080", func(h *hcmv3.HttpConnectionManager) {
				h.ForwardClientCertDetails = hcmv3.HttpConnectionManager_APPEND_FORWARD
			})
		}), `listener "inbound_shop/payments-0" chain "in_8080": forward_client_cert_details APPEND_FORWARD, want SANITIZE_SET: the application may see a caller's claimed identity`},
		{"inbound http: the caller's SPIFFE ID not set", xdscheck.InboundHTTP, onBuilt(func(t testing.TB, res *xds.Resources) {
			inboundHCM(t, res, "in_floor", func(h *hcmv3.HttpConnectionManager) { h.SetCurrentClientCertDetails = nil })
		}), `listener "inbound_shop/payments-0" chain "in_floor": set_current_client_cert_details without uri: the application is not told the caller's SPIFFE ID`},
		{"inbound http: the application's outcome header appended to, not overwritten", xdscheck.InboundHTTP, onBuilt(func(t testing.TB, res *xds.Resources) {
			inboundHCM(t, res, "in_8080", func(h *hcmv3.HttpConnectionManager) {
				h.GetRouteConfig().GetResponseHeadersToAdd()[0].AppendAction = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
			})
		}), `listener "inbound_shop/payments-0" chain "in_8080": its routes do not overwrite x-aether-outcome on responses: the application's own value would reach the caller's proxy`},
		{"inbound http: a proxy's reply left with the application's row", xdscheck.InboundHTTP, onBuilt(func(t testing.TB, res *xds.Resources) {
			inboundHCM(t, res, "in_8080", func(h *hcmv3.HttpConnectionManager) {
				h.LocalReplyConfig.Mappers = h.LocalReplyConfig.Mappers[:len(h.LocalReplyConfig.Mappers)-1]
			})
		}), `listener "inbound_shop/payments-0" chain "in_8080": no last local reply mapper overwrites x-aether-outcome on every reply: a reply of the proxy may carry the application's row`},
		{"inbound http: a request's outcome header reaches the application", xdscheck.InboundHTTP, onBuilt(func(t testing.TB, res *xds.Resources) {
			inboundHCM(t, res, "in_8080", func(h *hcmv3.HttpConnectionManager) { h.GetRouteConfig().RequestHeadersToRemove = nil })
		}), `listener "inbound_shop/payments-0" chain "in_8080": its routes do not remove x-aether-outcome from requests`},
		{"subsets: a selector that spills", xdscheck.Subsets, onSubsets(func(t testing.TB, res *xds.Resources) {
			subsetCluster(t, res).GetLbSubsetConfig().GetSubsetSelectors()[3].FallbackPolicy = clusterv3.Cluster_LbSubsetConfig_LbSubsetSelector_ANY_ENDPOINT
		}), `cluster "payments.shop.aether.internal:8080|web/frontend": subset_selectors[3] ["shard"] falls back ANY_ENDPOINT, not NO_FALLBACK: a pin or subset without endpoints would spill onto the rest of the service`},
		{"subsets: the two pins not selected together", xdscheck.Subsets, onSubsets(func(t testing.TB, res *xds.Resources) {
			sc := subsetCluster(t, res).GetLbSubsetConfig()
			sc.SubsetSelectors = append(sc.SubsetSelectors[:2:2], sc.SubsetSelectors[3:]...)
		}), `cluster "payments.shop.aether.internal:8080|web/frontend": no selector holds "ip" and "pod" together: a request with both pins would balance over the whole service`},
		{"subsets: a pin combined", xdscheck.Subsets, onSubsets(func(t testing.TB, res *xds.Resources) {
			s := subsetCluster(t, res).GetLbSubsetConfig().GetSubsetSelectors()[0]
			s.Keys = append(s.Keys, "version")
		}), `cluster "payments.shop.aether.internal:8080|web/frontend": subset_selectors[0] ["ip" "version"] combines the pin "ip" with other keys: a pin combines with the other pin only`},
		{"subsets: a host publishing a reserved key", xdscheck.Subsets, onSubsets(func(t testing.TB, res *xds.Resources) {
			for _, cla := range res.Endpoints {
				if cla.GetClusterName() == "payments.shop.aether.internal:8080" {
					fields := cla.GetEndpoints()[0].GetLbEndpoints()[0].GetMetadata().GetFilterMetadata()["envoy.lb"].GetFields()
					fields["namespace"] = structpb.NewStringValue("shop")
				}
			}
		}), `load assignment "payments.shop.aether.internal:8080": host 10.244.1.10 publishes the reserved key "namespace"`},
		{"subsets: a reserved key's header mapped", xdscheck.Subsets, onSubsets(func(t testing.TB, res *xds.Resources) {
			vh := subsetVirtualHost(t, res)
			repack(t, vh.GetTypedPerFilterConfig()[xds.HeaderToMetadataFilter], func(m proto.Message) {
				m.(*h2mv3.Config).GetRequestRules()[2].Header = "x-aether-subset-cluster"
			})
		}), `header-to-metadata maps "x-aether-subset-cluster": only x-aether-ip, x-aether-pod and x-aether-subset-<key> (a key not reserved) are mapped`},
		{"subsets: a virtual host without its keys", xdscheck.Subsets, onSubsets(func(t testing.TB, res *xds.Resources) {
			subsetVirtualHost(t, res).TypedPerFilterConfig = nil
		}), `route configuration "capture|web/frontend": virtual_hosts[payments.shop.aether.internal:8080] maps the subset keys []; its clusters select on ["shard" "version"]`},
		{"tcp stats: an inbound TCP port counted under its chain's name", xdscheck.TCPStats, onSubsets(func(t testing.TB, res *xds.Resources) {
			inboundTCPProxy(t, res, "inbound_shop/payments-0", "in_tcp_9000", func(p *tcpproxyv3.TcpProxy) { p.StatPrefix = "in_tcp_9000" })
		}), `listener "inbound_shop/payments-0" chain "in_tcp_9000": tcp_proxy stat_prefix "in_tcp_9000", want "tcp_shop/payments_9000": the port's bytes and connections are not counted per service port`},
		{"tcp stats: a dot in the prefix", xdscheck.TCPStats, onSubsets(func(t testing.TB, res *xds.Resources) {
			inboundTCPProxy(t, res, "inbound_shop/payments-0", "in_tcp_9000", func(p *tcpproxyv3.TcpProxy) { p.StatPrefix = "tcp_payments.shop_9000" })
		}), `listener "inbound_shop/payments-0" chain "in_tcp_9000": tcp_proxy stat_prefix "tcp_payments.shop_9000", want "tcp_shop/payments_9000": the port's bytes and connections are not counted per service port`},
		{"names: clusters out of order", xdscheck.Names, func(_ testing.TB, res *xds.Resources) {
			res.Clusters[0], res.Clusters[1] = res.Clusters[1], res.Clusters[0]
		}, `cluster "passthrough" comes after "payments.shop.aether.internal:8080|web/frontend": the list must be sorted by name`},
		{"reuse port: unset", xdscheck.ReusePort, func(_ testing.TB, res *xds.Resources) {
			res.Listeners[0].EnableReusePort = nil
		}, `listener "capture_web/frontend-0": enable_reuse_port is not true (unset, Envoy's default, which a runtime flag turns off): a new node proxy cannot bind 127.0.0.1 beside the old one while it drains, and the pod's connections are refused in between; set enable_reuse_port: true`},
		{"reuse port: false", xdscheck.ReusePort, func(_ testing.TB, res *xds.Resources) {
			res.Listeners[0].EnableReusePort = wrapperspb.Bool(false)
		}, `listener "capture_web/frontend-0": enable_reuse_port is not true (set false): a new node proxy cannot bind 127.0.0.1 beside the old one while it drains, and the pod's connections are refused in between; set enable_reuse_port: true`},
	} {
		tc.run(t)
	}
}

// run breaks a copy of the valid resources as tc says and requires its gate to report tc.want,
// and the valid original to pass still.
func (tc negative) run(t *testing.T) {
	t.Run(tc.name, func(t *testing.T) {
		base := valid(t)
		broken := clone(base)
		tc.breakCopy(t, &broken)
		got := tc.gate(broken)
		for _, v := range got {
			t.Logf("violation: %s", v)
		}
		if !containsLine(got, tc.want) {
			t.Errorf("the gate did not report\n  %s\nit reported:\n  %s", tc.want, strings.Join(got, "\n  "))
		}
		if v := xdscheck.All(base); v != nil {
			t.Fatalf("breaking the copy broke the original:\n%s", strings.Join(v, "\n"))
		}
	})
}

// TestStabilityGate: the stability gate reports a listener or route that changed, was added or
// was removed, naming the first field that differs; it passes for an equal copy (TestValidPasses).
func TestStabilityGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t testing.TB, res *xds.Resources)
		want   string
	}{
		{"a chain's cluster inside its Any", func(t testing.TB, res *xds.Resources) {
			repack(t, terminal(chain(t, *res, xds.CaptureTCPChain(svcKey))).GetTypedConfig(), func(m proto.Message) {
				m.(*tcpproxyv3.TcpProxy).ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: tcp9000}
			})
		}, `listener "capture_web/frontend-0": differs (`},
		{"a route's cluster", func(_ testing.TB, res *xds.Resources) {
			res.Routes[0].GetVirtualHosts()[0].GetRoutes()[1].GetRoute().ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: tcpCluster}
		}, `route configuration "capture|web/frontend": differs`},
		{"a listener added", func(_ testing.TB, res *xds.Resources) {
			extra := proto.Clone(res.Listeners[0]).(*listenerv3.Listener)
			extra.Name = xds.CaptureListener(xds.PodKey("web", "frontend-1"))
			res.Listeners = append(res.Listeners, extra)
		}, `listener "capture_web/frontend-1": only in the second build`},
		{"a route configuration removed", func(_ testing.TB, res *xds.Resources) { res.Routes = nil },
			`route configuration "capture|web/frontend": only in the first build`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := valid(t)
			changed := clone(base)
			tc.change(t, &changed)
			got := xdscheck.ListenersAndRoutesEqual(base, changed)
			for _, v := range got {
				t.Logf("violation: %s", v)
			}
			if !containsLine(got, tc.want) {
				t.Errorf("the gate did not report %q; it reported:\n  %s", tc.want, strings.Join(got, "\n  "))
			}
		})
	}
	// The path names the field inside the Any.
	base := valid(t)
	changed := clone(base)
	repack(t, terminal(chain(t, changed, xds.CaptureTCPChain(svcKey))).GetTypedConfig(), func(m proto.Message) {
		m.(*tcpproxyv3.TcpProxy).StatPrefix = "renamed"
	})
	want := `at filter_chains[cap_tcp_payments.shop].filters[envoy.filters.network.tcp_proxy].typed_config<TcpProxy>.stat_prefix`
	if got := xdscheck.ListenersAndRoutesEqual(base, changed); !containsLine(got, want) {
		t.Errorf("the first difference is not named %q: %v", want, got)
	}
}

// TestStabilityGatePacking: two Anys holding equal messages whose bytes differ (a map's entries
// in another order, as anypb.New's non-deterministic marshal writes them at random) are a
// difference on the wire, which the gate reports and explains.
func TestStabilityGatePacking(t *testing.T) {
	entry := func(key string) []byte {
		b, err := xdscheck.Bytes(&structpb.Struct{Fields: map[string]*structpb.Value{key: structpb.NewBoolValue(true)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	packed := func(value []byte) *listenerv3.ListenerFilter_TypedConfig {
		return &listenerv3.ListenerFilter_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/google.protobuf.Struct", Value: value}}
	}
	base := valid(t)
	changed := clone(base)
	base.Listeners[0].ListenerFilters[1].ConfigType = packed(append(entry("a"), entry("b")...))
	changed.Listeners[0].ListenerFilters[1].ConfigType = packed(append(entry("b"), entry("a")...))
	got := xdscheck.ListenersAndRoutesEqual(base, changed)
	for _, v := range got {
		t.Logf("violation: %s", v)
	}
	want := `at listener_filters[envoy.filters.listener.http_inspector].typed_config (the Any's bytes: equal messages packed differently`
	if !containsLine(got, want) {
		t.Errorf("the gate did not report %q: %v", want, got)
	}
}

// TestStabilityGateScope: a change of endpoints only (a load assignment's address) passes the
// stability gate, which compares listeners and routes, and fails Identical, which compares all.
func TestStabilityGateScope(t *testing.T) {
	base := valid(t)
	changed := clone(base)
	changed.Endpoints[1] = loadAssignment(tcpEDSName, "10.244.2.10")
	if v := xdscheck.ListenersAndRoutesEqual(base, changed); v != nil {
		t.Errorf("an endpoint change fails the stability gate: %v", v)
	}
	want := `load assignment "payments.shop.aether.internal:9000": differs`
	got := xdscheck.Identical(base, changed)
	for _, v := range got {
		t.Logf("violation: %s", v)
	}
	if !containsLine(got, want) {
		t.Errorf("Identical did not report %q: %v", want, got)
	}
	if v := xdscheck.Identical(base, clone(base)); v != nil {
		t.Errorf("a copy is not identical: %v", v)
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}
