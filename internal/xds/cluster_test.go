// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// The helpers of the cluster and endpoint tests start with "cl": the package's other test files
// are written alongside, and the prefix keeps the names apart.

// clDomain is the mesh domain of every test mesh.
const clDomain = "aether.internal"

// clCreated is when every test endpoint was created (the votes read it; these tests do not).
var clCreated = metav1.NewTime(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))

// clIdentity is the SPIFFE ID of ServiceAccount sa in namespace shop.
func clIdentity(sa string) string { return "spiffe://" + clDomain + "/ns/shop/sa/" + sa }

// clPorts reads "8080/HTTP" spellings.
func clPorts(t testing.TB, ports []string) []meshv1alpha1.PortProtocol {
	t.Helper()
	out := make([]meshv1alpha1.PortProtocol, 0, len(ports))
	for _, p := range ports {
		number, protocol, ok := strings.Cut(p, "/")
		n, err := strconv.ParseInt(number, 10, 32)
		if !ok || err != nil {
			t.Fatalf("port %q: want <port>/<protocol>", p)
		}
		out = append(out, meshv1alpha1.PortProtocol{Port: int32(n), Protocol: meshv1alpha1.Protocol(protocol)})
	}
	return out
}

// clEndpoint is the MeshEndpoint of pod name of service svc in namespace shop: at address,
// Healthy, weight 1024, no locality, serving ports ("8080/HTTP" spellings, sorted) with primary.
func clEndpoint(t testing.TB, svc, name, address string, primary int32, ports ...string) meshv1alpha1.MeshEndpoint {
	t.Helper()
	ep := meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, CreationTimestamp: clCreated}}
	ep.Spec = meshv1alpha1.MeshEndpointSpec{ServiceName: svc, PodName: name, PodUID: "uid-" + name, NodeName: "node-a",
		Address: address, PrimaryPort: primary, Ports: clPorts(t, ports), Weight: 1024}
	ep.Status.Health = meshv1alpha1.HealthHealthy
	return ep
}

// clService is service name of namespace shop (identity clIdentity(name)) built from endpoints.
func clService(t testing.TB, name string, endpoints ...meshv1alpha1.MeshEndpoint) model.Service {
	t.Helper()
	svc := model.BuildService(model.Input{Namespace: "shop", Name: name, Identity: clIdentity(name), VIP: "10.96.0.10", Endpoints: endpoints})
	if err := svc.Validate(); err != nil {
		t.Fatalf("BuildService gave an invalid service: %v", err)
	}
	return svc
}

// clPod is local pod name of ServiceAccount sa in namespace shop, at address, serving ports (the
// first is its primary).
func clPod(t testing.TB, name, sa, address string, ports ...string) model.LocalPod {
	t.Helper()
	pp := clPorts(t, ports)
	return model.LocalPod{Namespace: "shop", Name: name, UID: "uid-" + name, Service: sa, Address: address,
		Primary: pp[0].Port, Ports: pp, NetNS: "/var/run/netns/" + name, Identity: clIdentity(sa), Capture: model.CaptureSurface}
}

// clMesh is a mesh on node-a, in zone r1a of region r1.
func clMesh(services []model.Service, pods ...model.LocalPod) model.Mesh {
	return model.Mesh{Domain: clDomain, Node: model.Node{Name: "node-a", Locality: meshv1alpha1.Locality{Region: "r1", Zone: "r1a"}},
		Services: services, Pods: pods}
}

// clBuild builds m, fails on an error, and checks every message of the result, packed ones
// included (clValidateDeep).
func clBuild(t testing.TB, m model.Mesh) Resources {
	t.Helper()
	res, err := Build(m)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	for _, c := range res.Clusters {
		if err := clValidateDeep(c); err != nil {
			t.Errorf("cluster %s: %v", c.Name, err)
		}
	}
	for _, cla := range res.Endpoints {
		if err := clValidateDeep(cla); err != nil {
			t.Errorf("load assignment %s: %v", cla.ClusterName, err)
		}
	}
	return res
}

// clValidateDeep runs ValidateAll on m and on every message inside it, unpacking each Any (the
// generated validators stop at an Any).
func clValidateDeep(m proto.Message) error {
	var errs []error
	var walk func(path string, m protoreflect.Message)
	walk = func(path string, m protoreflect.Message) {
		if v, ok := m.Interface().(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
			}
		}
		if a, ok := m.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
				return
			}
			walk(path+"<"+a.TypeUrl+">", inner.ProtoReflect())
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			name := path + "." + string(fd.Name())
			switch {
			case fd.IsMap():
				if fd.MapValue().Message() != nil {
					v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
						walk(name+"["+k.String()+"]", mv.Message())
						return true
					})
				}
			case fd.IsList():
				if fd.Message() != nil {
					for i := range v.List().Len() {
						walk(name+"["+strconv.Itoa(i)+"]", v.List().Get(i).Message())
					}
				}
			case fd.Message() != nil:
				walk(name, v.Message())
			}
			return true
		})
	}
	walk(string(m.ProtoReflect().Descriptor().Name()), m.ProtoReflect())
	return errors.Join(errs...)
}

// clCluster is the cluster named name.
func clCluster(t testing.TB, res Resources, name string) *clusterv3.Cluster {
	t.Helper()
	i := slices.IndexFunc(res.Clusters, func(c *clusterv3.Cluster) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no cluster %q among %v", name, clClusterNames(res))
	}
	return res.Clusters[i]
}

func clClusterNames(res Resources) []string {
	out := make([]string, len(res.Clusters))
	for i, c := range res.Clusters {
		out[i] = c.Name
	}
	return out
}

// clUpstreamTLS is c's upstream TLS context, unpacked.
func clUpstreamTLS(t testing.TB, c *clusterv3.Cluster) *tlsv3.UpstreamTlsContext {
	t.Helper()
	ctx := &tlsv3.UpstreamTlsContext{}
	if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatalf("cluster %s: transport socket %v is no upstream TLS context: %v", c.Name, c.GetTransportSocket(), err)
	}
	return ctx
}

// clHTTPVersion is which HTTP version c's explicit protocol options speak: "h1", "h2", or ""
// when c has none.
func clHTTPVersion(t testing.TB, c *clusterv3.Cluster) string {
	t.Helper()
	if len(c.TypedExtensionProtocolOptions) == 0 {
		return ""
	}
	packed, ok := c.TypedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if !ok || len(c.TypedExtensionProtocolOptions) != 1 {
		t.Fatalf("cluster %s: protocol options %v, want only envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
			c.Name, c.TypedExtensionProtocolOptions)
	}
	opts := &httpv3.HttpProtocolOptions{}
	if err := packed.UnmarshalTo(opts); err != nil {
		t.Fatalf("cluster %s: %v", c.Name, err)
	}
	explicit := opts.GetExplicitHttpConfig()
	switch {
	case explicit.GetHttp2ProtocolOptions() != nil:
		return "h2"
	case explicit.GetHttpProtocolOptions() != nil:
		return "h1"
	}
	t.Errorf("cluster %s: protocol options without an explicit HTTP version: %v", c.Name, opts)
	return ""
}

// clMixedMesh is a mixed service (payments: HTTP primary 8080, h2 9090, tcp 9000), a pure-TCP
// service (ledger: 5432 primary, 6432) and one local pod of identity web.
func clMixedMesh(t testing.TB) model.Mesh {
	payments := clService(t, "payments",
		clEndpoint(t, "payments", "payments-a", "10.244.1.11", 8080, "8080/HTTP", "9000/TCP", "9090/HTTP2"),
		clEndpoint(t, "payments", "payments-b", "10.244.2.12", 8080, "8080/HTTP", "9000/TCP", "9090/HTTP2"))
	ledger := clService(t, "ledger", clEndpoint(t, "ledger", "ledger-a", "10.244.1.21", 5432, "5432/TCP", "6432/TCP"))
	return clMesh([]model.Service{ledger, payments}, clPod(t, "web-1", "web", "10.244.1.7", "8080/HTTP"))
}

// TestUpstreamClusters: a mixed and a pure-TCP service give exactly the clusters of the naming
// scheme, each of the right kind: EDS on its port's load assignment, mTLS with the source's
// certificate, SAN-pinned to the destination, SNI the port (the primary's too),
// ALPN h2 and HTTP/2 options on HTTP clusters only, panic mode off.
func TestUpstreamClusters(t *testing.T) {
	res := clBuild(t, clMixedMesh(t))
	source := clIdentity("web")
	pay, led := FQDN("payments", "shop", clDomain), FQDN("ledger", "shop", clDomain)

	want := []string{BlackholeCluster, PassthroughCluster, AppCluster(PodKey("shop", "web-1"), 8080),
		SourceCluster(HTTPCluster(pay, 8080), source), SourceCluster(HTTPCluster(pay, 9090), source),
		SourceCluster(TCPCluster(pay, 9000), source), SourceCluster(TCPDefaultCluster(pay), source),
		SourceCluster(TCPCluster(led, 5432), source), SourceCluster(TCPCluster(led, 6432), source),
		SourceCluster(TCPDefaultCluster(led), source)}
	slices.Sort(want)
	if got := clClusterNames(res); !slices.Equal(got, want) {
		t.Fatalf("clusters\n got %q\nwant %q", got, want)
	}
	// The scheme as the issue spells it, once, literally.
	clCluster(t, res, "payments.shop.aether.internal:8080|shop/web")
	clCluster(t, res, "tcp:ledger.shop.aether.internal|shop/web")

	for _, tc := range []struct {
		base, loadAssignment, sni string
		service                   string
		http                      bool
	}{
		{HTTPCluster(pay, 8080), LoadAssignment(pay, 8080), "8080", "payments", true}, // the primary
		{HTTPCluster(pay, 9090), LoadAssignment(pay, 9090), "9090", "payments", true},
		{TCPCluster(pay, 9000), LoadAssignment(pay, 9000), "9000", "payments", false},
		// The default TCP port of a service with an HTTP primary is not the primary: SNI 9000.
		{TCPDefaultCluster(pay), LoadAssignment(pay, 9000), "9000", "payments", false},
		{TCPCluster(led, 5432), LoadAssignment(led, 5432), "5432", "ledger", false}, // the primary
		{TCPCluster(led, 6432), LoadAssignment(led, 6432), "6432", "ledger", false},
		{TCPDefaultCluster(led), LoadAssignment(led, 5432), "5432", "ledger", false},
	} {
		t.Run(tc.base, func(t *testing.T) {
			c := clCluster(t, res, SourceCluster(tc.base, source))
			if c.GetType() != clusterv3.Cluster_EDS || c.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN ||
				c.GetConnectTimeout().AsDuration() != time.Second {
				t.Errorf("type %s, lb %s, connect timeout %s; want EDS, ROUND_ROBIN, 1s",
					c.GetType(), c.GetLbPolicy(), c.GetConnectTimeout().AsDuration())
			}
			if eds := c.GetEdsClusterConfig(); eds.GetServiceName() != tc.loadAssignment || eds.GetEdsConfig().GetAds() == nil {
				t.Errorf("eds config %v, want service name %q over ADS", eds, tc.loadAssignment)
			}
			if th := c.GetCommonLbConfig().GetHealthyPanicThreshold(); th == nil || th.GetValue() != 0 {
				t.Errorf("healthy panic threshold %v, want 0%% (panic mode off)", th)
			}
			clCheckUpstreamTLS(t, c, source, clIdentity(tc.service), tc.sni, tc.http)
			wantVersion := map[bool]string{true: "h2", false: ""}[tc.http]
			if got := clHTTPVersion(t, c); got != wantVersion {
				t.Errorf("HTTP protocol options %q, want %q", got, wantVersion)
			}
		})
	}
}

// clCheckUpstreamTLS checks c's TLS context: SNI, ALPN (h2 iff http), source's certificate and
// the pin to destination, both by SDS over ADS, the trust bundle of the mesh domain.
func clCheckUpstreamTLS(t testing.TB, c *clusterv3.Cluster, source, destination, sni string, http bool) {
	t.Helper()
	if name := c.GetTransportSocket().GetName(); name != "envoy.transport_sockets.tls" {
		t.Errorf("cluster %s: transport socket %q, want envoy.transport_sockets.tls", c.Name, name)
	}
	ctx := clUpstreamTLS(t, c)
	if ctx.GetSni() != sni {
		t.Errorf("cluster %s: SNI %q, want %q", c.Name, ctx.GetSni(), sni)
	}
	common := ctx.GetCommonTlsContext()
	if wantALPN := map[bool][]string{true: {"h2"}}[http]; !slices.Equal(common.GetAlpnProtocols(), wantALPN) {
		t.Errorf("cluster %s: ALPN %q, want %q", c.Name, common.GetAlpnProtocols(), wantALPN)
	}
	certs := common.GetTlsCertificateSdsSecretConfigs()
	if len(certs) != 1 || certs[0].GetName() != CertificateSecret(source) || certs[0].GetSdsConfig().GetAds() == nil {
		t.Errorf("cluster %s: certificates %v, want the source's %q by SDS over ADS", c.Name, certs, source)
	}
	combined := common.GetCombinedValidationContext()
	if sds := combined.GetValidationContextSdsSecretConfig(); sds.GetName() != TrustBundleSecret(clDomain) || sds.GetSdsConfig().GetAds() == nil {
		t.Errorf("cluster %s: trust bundle %v, want %q by SDS over ADS", c.Name, sds, TrustBundleSecret(clDomain))
	}
	sans := combined.GetDefaultValidationContext().GetMatchTypedSubjectAltNames()
	if len(sans) != 1 || sans[0].GetSanType() != tlsv3.SubjectAltNameMatcher_URI || sans[0].GetMatcher().GetExact() != destination {
		t.Errorf("cluster %s: SAN pin %v, want exactly URI %q", c.Name, sans, destination)
	}
}

// TestEachSourceHasItsOwnClusters: two local identities give two copies of each upstream cluster,
// each presenting its own identity's certificate and pinned to the same destination; a second pod
// of an identity adds no copy.
func TestEachSourceHasItsOwnClusters(t *testing.T) {
	payments := clService(t, "payments", clEndpoint(t, "payments", "payments-a", "10.244.1.11", 8080, "8080/HTTP"))
	m := clMesh([]model.Service{payments},
		clPod(t, "batch-1", "batch", "10.244.1.6", "7000/TCP"),
		clPod(t, "web-1", "web", "10.244.1.7", "8080/HTTP"),
		clPod(t, "web-2", "web", "10.244.1.8", "8080/HTTP"))
	res := clBuild(t, m)

	pay := FQDN("payments", "shop", clDomain)
	var upstream []string
	for _, c := range res.Clusters {
		if c.GetTransportSocket() != nil {
			upstream = append(upstream, c.Name)
		}
	}
	want := []string{SourceCluster(HTTPCluster(pay, 8080), clIdentity("batch")), SourceCluster(HTTPCluster(pay, 8080), clIdentity("web"))}
	if !slices.Equal(upstream, want) {
		t.Fatalf("TLS clusters %q, want %q", upstream, want)
	}
	for _, sa := range []string{"batch", "web"} {
		c := clCluster(t, res, SourceCluster(HTTPCluster(pay, 8080), clIdentity(sa)))
		clCheckUpstreamTLS(t, c, clIdentity(sa), clIdentity("payments"), "8080", true)
	}
	// Both copies read the one load assignment.
	if len(res.Endpoints) != 1 || res.Endpoints[0].ClusterName != LoadAssignment(pay, 8080) {
		t.Errorf("load assignments %v, want the one %q", res.Endpoints, LoadAssignment(pay, 8080))
	}
}

// TestUnpinnableServiceIsLeftOut: a service without an identity gets no cluster and no load
// assignment, and Skipped names it; the rest of the node builds. A pod without an identity dials
// nothing. The control: the same service with an identity is built.
func TestUnpinnableServiceIsLeftOut(t *testing.T) {
	ghostEndpoint := clEndpoint(t, "ghost", "ghost-a", "10.244.1.31", 8080, "8080/HTTP", "9000/TCP")
	ghost := clService(t, "ghost", ghostEndpoint)
	ghost.Identity = ""
	payments := clService(t, "payments", clEndpoint(t, "payments", "payments-a", "10.244.1.11", 8080, "8080/HTTP"))
	anonymous := clPod(t, "anon-1", "anon", "10.244.1.9", "8080/HTTP")
	anonymous.Identity = ""
	m := clMesh([]model.Service{ghost, payments}, anonymous, clPod(t, "web-1", "web", "10.244.1.7", "8080/HTTP"))
	res := clBuild(t, m)

	ghostFQDN := FQDN("ghost", "shop", clDomain)
	for _, c := range res.Clusters {
		if strings.Contains(c.Name, ghostFQDN) || strings.HasSuffix(c.Name, "|"+SourceKey("")) {
			t.Errorf("cluster %s was built", c.Name)
		}
	}
	for _, cla := range res.Endpoints {
		if strings.Contains(cla.ClusterName, ghostFQDN) {
			t.Errorf("load assignment %s was built", cla.ClusterName)
		}
	}
	clCluster(t, res, SourceCluster(HTTPCluster(FQDN("payments", "shop", clDomain), 8080), clIdentity("web")))
	if len(res.Skipped) != 2 || !strings.Contains(res.Skipped[1], "local pod shop/anon-1: identity is empty") ||
		!strings.Contains(res.Skipped[0], "service shop/ghost: identity is empty") {
		t.Errorf("skipped %q, want the pod shop/anon-1 and the service shop/ghost named", res.Skipped)
	}

	// Control: with its identity, the service is built and nothing is skipped for it.
	m.Services[0] = clService(t, "ghost", ghostEndpoint)
	res = clBuild(t, m)
	clCluster(t, res, SourceCluster(HTTPCluster(ghostFQDN, 8080), clIdentity("web")))
	clCluster(t, res, SourceCluster(TCPDefaultCluster(ghostFQDN), clIdentity("web")))
	if slices.ContainsFunc(res.Skipped, func(note string) bool { return strings.Contains(note, "shop/ghost: identity") }) {
		t.Errorf("skipped %q, want the service built", res.Skipped)
	}
}

// TestAppClusters: each port a local pod declares is a static cluster to the pod's IP and that
// port, speaking the port's protocol: HTTP/1.1, HTTP/2 or bytes; no TLS.
func TestAppClusters(t *testing.T) {
	res := clBuild(t, clMesh(nil, clPod(t, "web-1", "web", "10.244.1.7", "8080/HTTP", "9000/TCP", "9090/HTTP2")))
	key := PodKey("shop", "web-1")
	for _, tc := range []struct {
		port    int32
		version string
	}{{8080, "h1"}, {9000, ""}, {9090, "h2"}} {
		c := clCluster(t, res, AppCluster(key, tc.port))
		if c.GetType() != clusterv3.Cluster_STATIC || c.GetTransportSocket() != nil || c.GetConnectTimeout().AsDuration() != time.Second {
			t.Errorf("%s: type %s, transport socket %v, timeout %s; want STATIC, none, 1s", c.Name, c.GetType(), c.GetTransportSocket(),
				c.GetConnectTimeout().AsDuration())
		}
		la := c.GetLoadAssignment()
		if la.GetClusterName() != c.Name || len(la.GetEndpoints()) != 1 || len(la.GetEndpoints()[0].GetLbEndpoints()) != 1 {
			t.Fatalf("%s: load assignment %v, want one host", c.Name, la)
		}
		addr := la.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		if addr.GetAddress() != "10.244.1.7" || addr.GetPortValue() != uint32(tc.port) {
			t.Errorf("%s: host %s:%d, want 10.244.1.7:%d", c.Name, addr.GetAddress(), addr.GetPortValue(), tc.port)
		}
		if got := clHTTPVersion(t, c); got != tc.version {
			t.Errorf("%s: HTTP protocol options %q, want %q", c.Name, got, tc.version)
		}
	}
}

// TestNodeWideClusters: every node has the passthrough (original destination) and the blackhole
// (static, no host) cluster, even with nothing meshed; with no pod, no load assignment is read.
func TestNodeWideClusters(t *testing.T) {
	payments := clService(t, "payments", clEndpoint(t, "payments", "payments-a", "10.244.1.11", 8080, "8080/HTTP"))
	res := clBuild(t, clMesh([]model.Service{payments}))
	if got := clClusterNames(res); !slices.Equal(got, []string{BlackholeCluster, PassthroughCluster}) {
		t.Fatalf("clusters %q, want only blackhole and passthrough (no pod dials)", got)
	}
	if len(res.Endpoints) != 0 {
		t.Errorf("load assignments %d, want none: no cluster reads them", len(res.Endpoints))
	}
	pass := clCluster(t, res, PassthroughCluster)
	if pass.GetType() != clusterv3.Cluster_ORIGINAL_DST || pass.GetLbPolicy() != clusterv3.Cluster_CLUSTER_PROVIDED {
		t.Errorf("passthrough: type %s, lb %s; want ORIGINAL_DST, CLUSTER_PROVIDED", pass.GetType(), pass.GetLbPolicy())
	}
	hole := clCluster(t, res, BlackholeCluster)
	if hole.GetType() != clusterv3.Cluster_STATIC || len(hole.GetLoadAssignment().GetEndpoints()) != 0 {
		t.Errorf("blackhole: type %s, hosts %v; want STATIC without hosts", hole.GetType(), hole.GetLoadAssignment())
	}
}

// TestPodListingAPortTwiceIsLeftOut: a name has one owner; a pod listing a port twice would give
// two app clusters (and two inbound chains) of one name, so the pod is left out and named, and
// nothing of it is built.
func TestPodListingAPortTwiceIsLeftOut(t *testing.T) {
	pod := clPod(t, "web-1", "web", "10.244.1.7", "8080/HTTP", "8080/HTTP2")
	res := clBuild(t, clMesh(nil, pod))
	if got := clClusterNames(res); !slices.Equal(got, []string{BlackholeCluster, PassthroughCluster}) {
		t.Errorf("clusters %q, want only the node-wide ones", got)
	}
	want := "local pod shop/web-1: ports[1]: port 8080 is listed twice"
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], want) {
		t.Errorf("skipped %q, want %q", res.Skipped, want)
	}
}

// TestBuildRefusesAnInvalidCluster: check is on the path of every cluster; a pod without an
// address gives a host the validator refuses, and Build names the cluster.
func TestBuildRefusesAnInvalidCluster(t *testing.T) {
	pod := clPod(t, "web-1", "web", "", "8080/HTTP")
	_, err := Build(clMesh(nil, pod))
	want := "xds: cluster app|shop/web-1:8080 is invalid"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Build: %v; want an error containing %q", err, want)
	}
}

// TestEveryMessageValidates: every cluster and load assignment of a mixed mesh, and every
// message packed inside them, passes ValidateAll. The control: a cluster with a packed TLS
// context the validator refuses (an SNI over 255 bytes) is reported, which shows the walk
// reaches inside an Any.
func TestEveryMessageValidates(t *testing.T) {
	res := clBuild(t, clMixedMesh(t)) // clBuild fails the test on any invalid message
	if len(res.Clusters) == 0 || len(res.Endpoints) == 0 {
		t.Fatalf("%d clusters, %d load assignments: nothing was checked", len(res.Clusters), len(res.Endpoints))
	}

	broken := proto.Clone(res.Clusters[len(res.Clusters)-1]).(*clusterv3.Cluster)
	bad, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: strings.Repeat("p", 256)})
	if err != nil {
		t.Fatal(err)
	}
	broken.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: bad}}
	if err := broken.ValidateAll(); err != nil {
		t.Fatalf("the outer cluster should pass its own validator (it does not descend into the Any): %v", err)
	}
	err = clValidateDeep(broken)
	if err == nil || !strings.Contains(err.Error(), "invalid UpstreamTlsContext.Sni") {
		t.Fatalf("deep validation of a cluster with a 256-byte SNI: %v; want the SNI refused", err)
	}
	t.Logf("negative control: %v", err)
}
