// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/go-logr/logr/funcr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aether-mesh/aether-operator/internal/testrun"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// The fixture's names, from internal/xds's one home of them.
var (
	fqdn       = xds.FQDN("payments", "shop", "aether.internal")
	identity   = "spiffe://aether.internal/ns/shop/sa/payments"
	clusterN   = xds.SourceCluster(xds.HTTPCluster(fqdn, 8080), identity)
	assignment = xds.LoadAssignment(fqdn, 8080)
	listenerN  = xds.CaptureListener(xds.PodKey("shop", "payments-0"))
	routesN    = xds.CaptureRoutes(identity)
)

// fixture is a small node configuration whose parts change one type at a time: endpoints change
// only the load assignment, statPrefix only the listener, host only the route configuration.
// With tls, the cluster's TLS context names identity's certificate and the domain's trust bundle
// by SDS (certN, bundleN).
type fixture struct {
	endpoints  []string
	statPrefix string
	host       string
	tls        bool
}

// The secrets the fixture's TLS context names.
var (
	certN   = xds.CertificateSecret(identity)
	bundleN = xds.TrustBundleSecret("aether.internal")
)

func baseFixture() fixture {
	return fixture{endpoints: []string{"127.0.0.11"}, statPrefix: "capture", host: fqdn}
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
}

func socketAddress(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
}

// resources renders f. Every message passes its validator first, as internal/xds's do.
func (f fixture) resources(t testing.TB) xds.Resources {
	t.Helper()
	cluster := &clusterv3.Cluster{Name: clusterN, ConnectTimeout: durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: assignment}}
	if f.tls {
		upstream := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: certN, SdsConfig: adsSource()}},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: bundleN, SdsConfig: adsSource()}},
		}}
		cluster.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pack(t, upstream)}}
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: assignment, Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
	for _, ip := range f.endpoints {
		cla.Endpoints[0].LbEndpoints = append(cla.Endpoints[0].LbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(ip, 18008)}}})
	}
	hcm := &hcmv3.HttpConnectionManager{StatPrefix: f.statPrefix, RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{
		Rds: &hcmv3.Rds{ConfigSource: adsSource(), RouteConfigName: routesN}}}
	listener := &listenerv3.Listener{Name: listenerN, Address: socketAddress("127.0.0.1", 18001),
		FilterChains: []*listenerv3.FilterChain{{Name: xds.CaptureHTTPChain, Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: pack(t, hcm)}}}}}}
	routes := &routev3.RouteConfiguration{Name: routesN, VirtualHosts: []*routev3.VirtualHost{{Name: f.host, Domains: []string{f.host},
		Routes: []*routev3.Route{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: clusterN}}}}}}}}
	for _, m := range []interface{ ValidateAll() error }{cluster, cla, listener, routes} {
		if err := m.ValidateAll(); err != nil {
			t.Fatalf("fixture: %v", err)
		}
	}
	return xds.Resources{Clusters: []*clusterv3.Cluster{cluster}, Endpoints: []*endpointv3.ClusterLoadAssignment{cla},
		Listeners: []*listenerv3.Listener{listener}, Routes: []*routev3.RouteConfiguration{routes}}
}

func pack(t testing.TB, m interface {
	proto.Message
	ValidateAll() error
}) *anypb.Any {
	t.Helper()
	if err := m.ValidateAll(); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// logLines collects a logger's lines for a test to read.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

// with are the lines that contain every one of parts.
func (l *logLines) with(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// startServer serves xDS on a unix socket in a temporary directory until the test ends, its log
// lines at verbosity 1 collected.
func startServer(t *testing.T) (*Server, *logLines) {
	t.Helper()
	return startServerLogging(t, 1)
}

// startServerLogging is startServer collecting the log lines up to verbosity (2: go-control-plane's
// debug lines too).
func startServerLogging(t *testing.T, verbosity int) (*Server, *logLines) {
	t.Helper()
	addr, err := ParseAddress("unix://" + filepath.Join(t.TempDir(), "xds.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	// The test process is the node's Envoy here: a process of the node, in no pod (ProcPods reads
	// its cgroup, as the agent does).
	s := New(Options{Listener: l, NodeEnvoy: NodeEnvoy{Host: true}, Log: funcr.New(logs.write, funcr.Options{Verbosity: verbosity})})
	testrun.UntilCleanup(t, "the server", s.Start)
	return s, logs
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
