// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// grpcScenario is a gRPC mesh: payments (shop) serves gRPC on 9090 (its primary), h2 on 9091 and
// HTTP/1.1 on 8080, one pod per node; payments-canary serves the same ports from one pod; the
// client is frontend (web). A producer GRPCRoute splits payments:9090 80/20 with the canary and
// sends pkg.Ledger/Refund to the canary alone; an HTTPRoute on payments:9091 sends /v2 (a path
// prefix) to the canary's 9091 and the rest half to payments' HTTP/1.1 port 8080, which no gRPC
// client can be served; a consumer GRPCRoute of namespace web sends web's clients of the canary's
// 9090 to payments.
func grpcScenario() xdstest.Scenario {
	const shop, web = "shop", "web"
	pod := func(ns, svc, name, node, address, port, ports string) xdstest.Workload {
		return xdstest.Workload{Namespace: ns, Service: svc, Name: name, Node: node, Address: address, Port: port, Ports: ports,
			Health: meshv1alpha1.HealthHealthy, Created: xdstest.Day}
	}
	const ports = "9090=grpc,9091=h2,8080=h1"
	s := xdstest.Scenario{
		Services: []xdstest.ServiceDecl{{Namespace: shop, Name: "payments", VIP: "10.96.0.10"},
			{Namespace: shop, Name: "payments-canary", VIP: "10.96.0.12"}, {Namespace: web, Name: "frontend", VIP: "10.96.0.20"}},
		Workloads: []xdstest.Workload{
			pod(shop, "payments", "payments-0", xdstest.ThisNode, "10.244.1.10", "9090", ports),
			pod(shop, "payments", "payments-1", xdstest.SameRegion, "10.244.2.10", "9090", ports),
			pod(shop, "payments", "payments-2", xdstest.OtherRegion, "10.244.3.10", "9090", ports),
			pod(shop, "payments-canary", "payments-canary-0", xdstest.SameRegion, "10.244.2.12", "9090", ports),
			pod(web, "frontend", "frontend-0", xdstest.ThisNode, "10.244.1.20", "8080", ""),
		},
	}
	s.Workloads[2].Health = meshv1alpha1.HealthDraining
	backend := func(svc string, port, weight int32) model.Backend {
		return model.Backend{ServiceRef: model.ServiceRef{Namespace: shop, Name: svc, Port: port}, Weight: weight}
	}
	s.Routes = []model.Route{
		{Kind: model.GRPCRoute, Namespace: shop, Name: "split", Parents: []model.ServiceRef{{Namespace: shop, Name: "payments", Port: 9090}},
			Rules: []model.RouteRule{
				{Matches: []model.RouteMatch{{GRPCService: "pkg.Ledger", GRPCMethod: "Refund"}}, Backends: []model.Backend{backend("payments-canary", 9090, 1)}},
				{Backends: []model.Backend{backend("payments", 9090, 80), backend("payments-canary", 9090, 20)}},
			}},
		{Kind: model.HTTPRoute, Namespace: shop, Name: "h2", Parents: []model.ServiceRef{{Namespace: shop, Name: "payments", Port: 9091}},
			Rules: []model.RouteRule{
				{Matches: []model.RouteMatch{{PathType: "PathPrefix", Path: "/v2"}}, Backends: []model.Backend{backend("payments-canary", 9091, 1)}},
				{Backends: []model.Backend{backend("payments", 9091, 1), backend("payments", 8080, 1)}},
			}},
		{Kind: model.GRPCRoute, Namespace: web, Name: "pin", Parents: []model.ServiceRef{{Namespace: shop, Name: "payments-canary", Port: 9090}},
			Rules: []model.RouteRule{{Backends: []model.Backend{backend("payments", 9090, 1)}}}},
	}
	return s
}

// frontendClient is the scenarios' client, web/frontend.
var frontendClient = xdstest.Identity("web", "frontend")

// proxylessCases are the golden cases: the gRPC mesh for a client that sends SNI and one that
// does not, and the routed Envoy scenario for a client that sends SNI.
func proxylessCases() map[string]struct {
	mesh   model.Mesh
	client xds.ProxylessClient
} {
	return map[string]struct {
		mesh   model.Mesh
		client xds.ProxylessClient
	}{
		"grpc-sni":    {grpcScenario().Mesh(), xds.ProxylessClient{Identity: frontendClient, SNI: true}},
		"grpc-no-sni": {grpcScenario().Mesh(), xds.ProxylessClient{Identity: frontendClient}},
		"routes-sni":  {xdstest.Routes(), xds.ProxylessClient{Identity: frontendClient, SNI: true}},
	}
}

func buildProxyless(t testing.TB, m model.Mesh, c xds.ProxylessClient) xds.Resources {
	t.Helper()
	res, err := xds.BuildProxyless(m, c)
	if err != nil {
		t.Fatalf("BuildProxyless: %v", err)
	}
	return res
}

// TestProxylessGolden compares each resource type of each case, and what it left out, with
// testdata/proxyless/<case>/ (regenerate with -update), and runs the proxyless gates over it.
func TestProxylessGolden(t *testing.T) {
	cases := proxylessCases()
	names := slices.Sorted(maps.Keys(cases))
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			res := buildProxyless(t, c.mesh, c.client)
			if v := xdscheck.Proxyless(res); v != nil {
				t.Errorf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
			}
			if v := xdscheck.Identical(res, buildProxyless(t, c.mesh, c.client)); v != nil {
				t.Errorf("two builds differ:\n%s", strings.Join(v, "\n"))
			}
			dir := filepath.Join("testdata", "proxyless", name)
			compareKinds(t, dir, res)
			golden.Compare(t, dir, "skipped", ".txt", []byte(strings.Join(res.Skipped, "\n")+"\n"), *xds.Update)
		})
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "proxyless"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(names, e.Name()) {
			t.Errorf("testdata/proxyless/%s is no case's: delete it", e.Name())
		}
	}
}

// TestProxylessServes: which ports a client is served, and where they lead. Every HTTP2 port of
// every service (never an HTTP/1.1 or TCP port) when the client sends SNI; only HTTP2 primaries
// when it does not. Each served port has an API listener per name, <name>:<p>, routed by RDS;
// its cluster is EDS on the Envoy rendering's load assignment of the port, with the same
// endpoints (health, localities, priorities), byte for byte (every pod agrees on the primary
// here); the cluster sends the port's SNI when the client sends SNI at all, the primary's too.
func TestProxylessServes(t *testing.T) {
	mesh := grpcScenario().Mesh()
	envoy := build(t, mesh)
	for _, sni := range []bool{true, false} {
		res := buildProxyless(t, mesh, xds.ProxylessClient{Identity: frontendClient, SNI: sni})
		want := []string{"payments-canary.shop:9090", "payments-canary.shop.aether.internal:9090", "payments-canary.shop.svc.cluster.local:9090",
			"payments.shop:9090", "payments.shop.aether.internal:9090", "payments.shop.svc.cluster.local:9090"}
		if sni {
			want = append(want, "payments-canary.shop:9091", "payments-canary.shop.aether.internal:9091", "payments-canary.shop.svc.cluster.local:9091",
				"payments.shop:9091", "payments.shop.aether.internal:9091", "payments.shop.svc.cluster.local:9091")
		}
		slices.Sort(want)
		if got := names(res.Listeners, (*listenerv3.Listener).GetName); !slices.Equal(got, want) {
			t.Errorf("SNI %v: listeners\n %q\nwant\n %q", sni, got, want)
		}
		for _, l := range res.Listeners {
			if rds := rdsOf(t, l); !strings.HasPrefix(rds, "proxyless|") || !strings.HasSuffix(l.GetName(), rds[strings.LastIndex(rds, ":"):]) {
				t.Errorf("listener %s routes by %q", l.GetName(), rds)
			}
		}
		for _, c := range res.Clusters {
			if c.GetName() == xds.BlackholeCluster {
				continue
			}
			eds := c.GetEdsClusterConfig().GetServiceName()
			port := eds[strings.LastIndex(eds, ":")+1:]
			wantSNI := ""
			if sni {
				wantSNI = port
			}
			if got := tlsOf(t, c).GetSni(); got != wantSNI {
				t.Errorf("SNI %v: cluster %s sends SNI %q, want %q", sni, c.GetName(), got, wantSNI)
			}
			ours := endpointsNamed(res.Endpoints, eds)
			theirs := endpointsNamed(envoy.Endpoints, eds)
			if ours == nil || !proto.Equal(ours, theirs) {
				t.Errorf("cluster %s: load assignment %s differs from the Envoy rendering's:\n%v\n%v", c.GetName(), eds, ours, theirs)
			}
		}
	}
}

// TestProxylessRoutes: the route configurations carry the GRPCRoutes' matches and weights; an
// HTTPRoute's path prefix becomes a regular expression grpc-go reads; a backend no gRPC client can
// reach (an HTTP/1.1 port) keeps its share on the blackhole, an EDS cluster without endpoints; a
// consumer route applies to clients of its namespace only.
func TestProxylessRoutes(t *testing.T) {
	mesh := grpcScenario().Mesh()
	res := buildProxyless(t, mesh, xds.ProxylessClient{Identity: frontendClient, SNI: true})
	fqdn := xds.FQDN("payments", "shop", "aether.internal")
	canary := xds.FQDN("payments-canary", "shop", "aether.internal")
	cluster := func(f string, port int32) string { return xds.SourceCluster(xds.HTTPCluster(f, port), frontendClient) }

	split := routesNamed(res.Routes, xds.ProxylessRoutes(fqdn, 9090))
	if len(split) != 2 || split[0].GetMatch().GetPath() != "/pkg.Ledger/Refund" || split[0].GetRoute().GetCluster() != cluster(canary, 9090) {
		t.Fatalf("payments:9090 routes: %v", split)
	}
	weights := map[string]uint32{}
	for _, w := range split[1].GetRoute().GetWeightedClusters().GetClusters() {
		weights[w.GetName()] = w.GetWeight().GetValue()
	}
	if want := map[string]uint32{cluster(fqdn, 9090): 80, cluster(canary, 9090): 20}; !maps.Equal(weights, want) {
		t.Errorf("the split's weights %v, want %v", weights, want)
	}

	h2 := routesNamed(res.Routes, xds.ProxylessRoutes(fqdn, 9091))
	if len(h2) != 2 || h2[0].GetMatch().GetSafeRegex().GetRegex() != `/v2(/.*)?` {
		t.Fatalf("payments:9091 routes: %v", h2)
	}
	last := h2[1].GetRoute().GetWeightedClusters().GetClusters()
	if len(last) != 2 || last[1].GetName() != xds.BlackholeCluster || last[1].GetWeight().GetValue() != 1 {
		t.Errorf("the HTTP/1.1 backend's share: %v, want it on %s", last, xds.BlackholeCluster)
	}
	blackhole := clusterNamed(res.Clusters, xds.BlackholeCluster)
	if blackhole.GetType() != clusterv3.Cluster_EDS || len(endpointsNamed(res.Endpoints, xds.BlackholeCluster).GetEndpoints()) != 0 {
		t.Errorf("the blackhole is %v with endpoints %v, want EDS without endpoints", blackhole, endpointsNamed(res.Endpoints, xds.BlackholeCluster))
	}

	// The consumer route of web applies to web's clients, not to shop's.
	if r := routesNamed(res.Routes, xds.ProxylessRoutes(canary, 9090)); len(r) != 1 || r[0].GetRoute().GetCluster() != cluster(fqdn, 9090) {
		t.Errorf("web's client of payments-canary:9090: %v, want the consumer route to payments", r)
	}
	shopClient := xdstest.Identity("shop", "payments")
	other := buildProxyless(t, mesh, xds.ProxylessClient{Identity: shopClient, SNI: true})
	own := xds.SourceCluster(xds.HTTPCluster(canary, 9090), shopClient)
	if r := routesNamed(other.Routes, xds.ProxylessRoutes(canary, 9090)); len(r) != 1 || r[0].GetRoute().GetCluster() != own {
		t.Errorf("shop's client of payments-canary:9090: %v, want its own cluster %s", r, own)
	}
}

// TestProxylessRefuses: a client identity not of the mesh's shape, or an empty mesh domain, is an
// error that names it.
func TestProxylessRefuses(t *testing.T) {
	mesh := grpcScenario().Mesh()
	for identity, want := range map[string]string{
		"":                                     `proxyless client identity "" is not of the mesh's shape spiffe://aether.internal/ns/<namespace>/sa/<serviceaccount>`,
		"spiffe://other.domain/ns/web/sa/x":    `identity "spiffe://other.domain/ns/web/sa/x"`,
		"spiffe://aether.internal/web/x":       `identity "spiffe://aether.internal/web/x"`,
		"spiffe://aether.internal/ns/web/sa/":  `identity "spiffe://aether.internal/ns/web/sa/"`,
		"spiffe://aether.internal/ns/w/sa/a/b": `identity "spiffe://aether.internal/ns/w/sa/a/b"`,
	} {
		if _, err := xds.BuildProxyless(mesh, xds.ProxylessClient{Identity: identity}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("identity %q: %v, want an error saying %s", identity, err, want)
		}
	}
	mesh.Domain = ""
	if _, err := xds.BuildProxyless(mesh, xds.ProxylessClient{Identity: frontendClient}); err == nil || !strings.Contains(err.Error(), "mesh domain is empty") {
		t.Errorf("no domain: %v", err)
	}
}

// TestProxylessGateControls: the gates reject what grpc-go would NACK or not enforce, each from a
// good rendering broken once (the gate's negative controls).
func TestProxylessGateControls(t *testing.T) {
	good := func() xds.Resources {
		return buildProxyless(t, grpcScenario().Mesh(), xds.ProxylessClient{Identity: frontendClient, SNI: true})
	}
	if v := xdscheck.Proxyless(good()); v != nil {
		t.Fatalf("the good rendering fails: %v", v)
	}
	// meshCluster is the first cluster with endpoints (the blackhole has none, nor TLS).
	meshCluster := func(res xds.Resources) *clusterv3.Cluster {
		return res.Clusters[slices.IndexFunc(res.Clusters, func(c *clusterv3.Cluster) bool { return c.GetTransportSocket() != nil })]
	}
	mutateTLS := func(res xds.Resources, f func(*tlsv3.UpstreamTlsContext)) {
		c := meshCluster(res)
		ctx := &tlsv3.UpstreamTlsContext{}
		if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
			panic(err)
		}
		f(ctx)
		packed, err := anypb.New(ctx)
		if err != nil {
			panic(err)
		}
		c.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: packed}
	}
	for name, tt := range map[string]struct {
		mutate func(res xds.Resources)
		want   string
	}{
		"the api_listeners' HCMs without their filter chains: Consistent() cannot see the RDS names": {
			mutate: func(res xds.Resources) {
				for _, l := range res.Listeners {
					l.FilterChains = nil
				}
			},
			want: "consistency: snapshot.Consistent()",
		},
		"a STATIC cluster": {
			mutate: func(res xds.Resources) {
				meshCluster(res).ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
			},
			want: "grpc-go takes EDS, LOGICAL_DNS or aggregate clusters only",
		},
		"an SDS certificate": {
			mutate: func(res xds.Resources) {
				mutateTLS(res, func(ctx *tlsv3.UpstreamTlsContext) {
					ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: frontendClient}}
				})
			},
			want: "grpc-go NACKs both",
		},
		"a typed SAN matcher only": {
			mutate: func(res xds.Resources) {
				mutateTLS(res, func(ctx *tlsv3.UpstreamTlsContext) {
					v := ctx.GetCommonTlsContext().GetValidationContext()
					v.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{{SanType: tlsv3.SubjectAltNameMatcher_URI,
						Matcher: v.GetMatchSubjectAltNames()[0]}} //nolint:staticcheck // the field grpc-go reads
					v.MatchSubjectAltNames = nil //nolint:staticcheck // the field grpc-go reads
				})
			},
			want: "is not SAN-pinned as grpc-go reads it",
		},
		"no TLS on a cluster with endpoints": {
			mutate: func(res xds.Resources) { meshCluster(res).TransportSocket = nil },
			want:   "carries no TLS context, and its load assignment lists endpoints",
		},
		"a path_separated_prefix": {
			mutate: func(res xds.Resources) {
				r := res.Routes[0].VirtualHosts[0].Routes[0]
				r.Match = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/v2"}}
			},
			want: "matches path_separated_prefix, which grpc-go NACKs",
		},
		"a route that retries INTERNAL (a status the application returned after running the call)": {
			mutate: func(res xds.Resources) {
				p := proto.Clone(res.Routes[0].VirtualHosts[0].Routes[0].GetRoute().GetRetryPolicy()).(*routev3.RetryPolicy)
				p.RetryOn = "unavailable,internal"
				res.Routes[0].VirtualHosts[0].Routes[0].GetRoute().RetryPolicy = p
			},
			want: `route 0: retry_on "unavailable,internal", want "unavailable" alone`,
		},
		"a route without a retry policy": {
			mutate: func(res xds.Resources) { res.Routes[0].VirtualHosts[0].Routes[0].GetRoute().RetryPolicy = nil },
			want:   "route 0: no retry policy: a call the destination's proxy could not deliver (UNAVAILABLE) is not retried",
		},
	} {
		t.Run(name, func(t *testing.T) {
			res := good()
			tt.mutate(res)
			v := xdscheck.Proxyless(res)
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, tt.want) }) {
				t.Errorf("violations %q, want one saying %q", v, tt.want)
			}
			t.Logf("control: %s", strings.Join(v, "; "))
		})
	}
}

func names[T any](list []T, name func(T) string) []string {
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = name(x)
	}
	return out
}

func rdsOf(t *testing.T, l *listenerv3.Listener) string {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{}
	if err := l.GetApiListener().GetApiListener().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	return hcm.GetRds().GetRouteConfigName()
}

func tlsOf(t *testing.T, c *clusterv3.Cluster) *tlsv3.UpstreamTlsContext {
	t.Helper()
	ctx := &tlsv3.UpstreamTlsContext{}
	if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatalf("cluster %s: %v", c.GetName(), err)
	}
	return ctx
}

func endpointsNamed(list []*endpointv3.ClusterLoadAssignment, name string) *endpointv3.ClusterLoadAssignment {
	for _, e := range list {
		if e.GetClusterName() == name {
			return e
		}
	}
	return nil
}

func clusterNamed(list []*clusterv3.Cluster, name string) *clusterv3.Cluster {
	for _, c := range list {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

func routesNamed(list []*routev3.RouteConfiguration, name string) []*routev3.Route {
	for _, rc := range list {
		if rc.GetName() == name {
			return rc.GetVirtualHosts()[0].GetRoutes()
		}
	}
	return nil
}
