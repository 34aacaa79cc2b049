// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	ourxds "github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// The proxyless acceptance tests: real grpc-go clients (the xds:/// resolver, xDS credentials)
// against the agent's real ADS server on its proxyless socket, on the real API server, and real
// grpc-go servers standing in for the destination pods' inbound listeners (TLS on <pod IP>:18008
// with SVIDs of a test CA). Never a fixed sleep: every wait polls an observable.

// grpcPort is the services' gRPC port (their primary, =grpc).
const grpcPort = 9090

// grpcAnnotations declare the gRPC primary.
var grpcAnnotations = map[string]string{portspec.AnnotationPort: strconv.Itoa(grpcPort), portspec.AnnotationPorts: strconv.Itoa(grpcPort) + "=grpc"}

// spiffeID is the SPIFFE ID of service account sa in ns.
func spiffeID(ns, sa string) string { return "spiffe://aether.internal/ns/" + ns + "/sa/" + sa }

// backend stands in for a sidecar-fronted gRPC pod: the application's gRPC health service in
// cleartext on <ip>:9090 (what the agent's probe dials) and the inbound listener's stand-in on
// <ip>:18008, TLS with a certificate of the test CA, a client certificate of the trust domain
// required, serving the same health service.
type backend struct {
	ip     string
	health *health.Server
	// cert is what the inbound stand-in presents (SetIdentity changes it for new connections).
	cert atomic.Pointer[tls.Certificate]
	ca   *spiffetest.CA
	// snis are the server names the stand-in's handshakes asked for, in order.
	mu   sync.Mutex
	snis []string
	// fails is the status code the stand-in answers every RPC with while it is not OK (the
	// application, or the destination's proxy, failing the call); calls counts the RPCs that
	// reached it.
	fails atomic.Uint32
	calls atomic.Int64
}

// failing answers every RPC to the inbound stand-in with b.fails while it is not OK.
func (b *backend) failing(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	b.calls.Add(1)
	if code := codes.Code(b.fails.Load()); code != codes.OK {
		return nil, status.Errorf(code, "the stand-in at %s fails the call with %v", b.ip, code)
	}
	return handler(ctx, req)
}

// startBackend serves pod ip as identity until the test ends.
func startBackend(t *testing.T, ca *spiffetest.CA, ip, identity string) *backend {
	t.Helper()
	b := &backend{ip: ip, health: health.NewServer(), ca: ca}
	b.SetIdentity(t, identity)
	app := grpc.NewServer()
	healthpb.RegisterHealthServer(app, b.health)
	serve(t, app, net.JoinHostPort(ip, strconv.Itoa(grpcPort)))
	inbound := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			b.mu.Lock()
			b.snis = append(b.snis, hello.ServerName)
			b.mu.Unlock()
			return nil, nil
		},
		GetCertificate:        func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return b.cert.Load(), nil },
		ClientAuth:            tls.RequireAndVerifyClientCert,
		ClientCAs:             ca.Pool(),
		VerifyPeerCertificate: anyIdentityOfTheDomain,
		NextProtos:            []string{"h2"},
	})), grpc.UnaryInterceptor(b.failing))
	healthpb.RegisterHealthServer(inbound, b.health)
	serve(t, inbound, net.JoinHostPort(ip, strconv.Itoa(int(meshv1alpha1.ProxyInboundPort))))
	return b
}

// anyIdentityOfTheDomain is the inbound listener's check of a client: a URI SAN of the trust
// domain (the chain is verified by ClientAuth).
func anyIdentityOfTheDomain(raw [][]byte, _ [][]*x509.Certificate) error {
	leaf, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return err
	}
	for _, u := range leaf.URIs {
		if strings.HasPrefix(u.String(), "spiffe://aether.internal/") {
			return nil
		}
	}
	return fmt.Errorf("client certificate names no identity of the trust domain: %v", leaf.URIs)
}

// SetIdentity makes the stand-in present an SVID of identity on its next handshakes.
func (b *backend) SetIdentity(t *testing.T, identity string) {
	t.Helper()
	cert, err := b.ca.TLSCertificate(identity)
	if err != nil {
		t.Fatal(err)
	}
	b.cert.Store(&cert)
}

// SNIs are the server names the stand-in was asked for so far.
func (b *backend) SNIs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.snis)
}

// serve runs g on address until the test ends.
func serve(t *testing.T, g *grpc.Server, address string) {
	t.Helper()
	l, err := net.Listen("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
}

// proxylessClient is a proxyless gRPC client of pod ns/name (identity's SVID in its files).
type proxylessClient struct {
	conn *grpc.ClientConn
	node string
}

// dialProxyless creates the pod ns/name (service account sa, annotated aether.io/proxyless:
// "grpc", on the agent's node) and dials target from it as grpc-go would with the bootstrap the
// pod webhook injects, the agent's proxyless socket and the SVID files in place of the pod's. It
// returns once the agent registered the client (its connection came from that pod).
func dialProxyless(t *testing.T, ctx context.Context, a *xdsAgent, ca *spiffetest.CA, ns, name, sa, target string) *proxylessClient {
	t.Helper()
	pod := createPodAs(t, ctx, ns, name, sa, a.node, newPodIP(), true, map[string]string{portspec.AnnotationProxyless: portspec.ProxylessGRPC})
	a.actAs(pod)
	files, err := ca.WriteFiles(t.TempDir(), spiffeID(ns, sa))
	if err != nil {
		t.Fatal(err)
	}
	node := proxyless.NodeID(ns, name)
	bootstrap, err := proxyless.Bootstrap{NodeID: node, ServerURI: a.proxylessAddress,
		CertificateFile: files.Certificate, KeyFile: files.Key, BundleFile: files.Bundle}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := newProxylessConn(bootstrap, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	conn.Connect()
	awaitRegistered(t, a, node)
	return &proxylessClient{conn: conn, node: node}
}

// awaitRegistered waits until the agent's server holds a proxyless client of node ID id.
func awaitRegistered(t *testing.T, a *xdsAgent, id string) {
	t.Helper()
	testenv.Eventually(t, "the agent knowing "+id, func() error {
		if !slices.ContainsFunc(a.options.XDS.Server.ProxylessNodes(), func(n xdsserver.ProxylessNode) bool { return n.ID == id }) {
			return errors.New("not connected")
		}
		return nil
	})
}

// newProxylessConn is a channel to target as a proxyless pod's gRPC client makes it: the xds:///
// resolver with bootstrap, and xDS credentials. The fallback (cleartext) is used only if a cluster
// carried no TLS context: the stand-ins speak TLS only, so it would fail every RPC.
func newProxylessConn(bootstrap []byte, target string) (*grpc.ClientConn, error) {
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		return nil, err
	}
	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(target, grpc.WithResolvers(resolver), grpc.WithTransportCredentials(creds))
}

// call makes one RPC and returns the address of the backend that answered it.
func (c *proxylessClient) call(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var p peer.Peer
	resp, err := healthpb.NewHealthClient(c.conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
	if err != nil {
		return "", err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return "", fmt.Errorf("answered %v", resp.GetStatus())
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	return host, err
}

// spread makes n RPCs and counts them by the backend address that answered; the first error
// ends it.
func (c *proxylessClient) spread(ctx context.Context, n int) (map[string]int, error) {
	out := map[string]int{}
	for range n {
		ip, err := c.call(ctx)
		if err != nil {
			return out, err
		}
		out[ip]++
	}
	return out, nil
}

// observe opens a real ADS stream to the agent's proxyless socket as node (a second stream of the
// same client): it receives what the client receives, response by response.
func observe(t *testing.T, ctx context.Context, a *xdsAgent, node string) *xdstest.Client {
	t.Helper()
	c, err := xdstest.DialNode(ctx, a.proxylessAddress, &corev3.Node{Id: node, Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		proxyless.MetadataProxyless: structpb.NewStringValue(proxyless.MetadataTrue)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// nacks is how many responses xDS clients rejected so far (every type).
func nacks(t *testing.T) float64 {
	t.Helper()
	var total float64
	for _, typ := range []string{"cluster", "endpoint", "listener", "route", "secret", "other"} {
		n, err := testenv.Counter("aether_agent_xds_nacks_total", "type", typ)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// noNACK fails the test if a client rejected a response since before.
func noNACK(t *testing.T, before float64) {
	t.Helper()
	if n := nacks(t); n != before {
		t.Errorf("%v xDS responses were rejected (NACK) during the test: see the log line \"xDS client rejected a response\"", n-before)
	}
}

// healthOf is the health status of the endpoint at ip in cla; UNKNOWN when it is not listed.
func healthOf(cla *endpointv3.ClusterLoadAssignment, ip string) corev3.HealthStatus {
	if lb := xdstest.LbEndpoint(cla, ip); lb != nil {
		return lb.GetHealthStatus()
	}
	return corev3.HealthStatus_UNKNOWN
}

// proxylessTest is where a proxyless test starts: a namespace of its own, an agent serving xDS
// to proxyless clients there, a CA issuing the workloads' SVIDs, and the NACK count before.
type proxylessTest struct {
	ctx   context.Context
	ns    string
	a     *xdsAgent
	ca    *spiffetest.CA
	nacks float64
}

func startProxylessTest(t *testing.T) *proxylessTest {
	t.Helper()
	ctx := testContext(t)
	ns := namespace(t, ctx)
	before := nacks(t)
	a := startXDSAgentServing(t, ns, true)
	ca, err := spiffetest.NewCA("aether.internal")
	if err != nil {
		t.Fatal(err)
	}
	return &proxylessTest{ctx: ctx, ns: ns, a: a, ca: ca, nacks: before}
}

// backend starts a backend serving as ServiceAccount sa's SPIFFE ID, at a new pod IP.
func (p *proxylessTest) backend(t *testing.T, sa string) *backend {
	t.Helper()
	return startBackend(t, p.ca, newPodIP(), spiffeID(p.ns, sa))
}

// payments starts n backends of payments, creates pod payments-<i> of each by create, and waits
// until every one is Healthy.
func (p *proxylessTest) payments(t *testing.T, n int, create func(name, ip string)) []*backend {
	t.Helper()
	var backends []*backend
	for i := range n {
		b := p.backend(t, "payments")
		backends = append(backends, b)
		create("payments-"+strconv.Itoa(i), b.ip)
	}
	for i := range backends {
		healthIs(t, p.ns, "payments-"+strconv.Itoa(i), meshv1alpha1.HealthHealthy)
	}
	return backends
}

// grpcPod creates a managed pod of payments serving the =grpc port at ip.
func (p *proxylessTest) grpcPod(t *testing.T) func(name, ip string) {
	return func(name, ip string) { createPod(t, p.ctx, p.ns, name, p.a.node, ip, true, grpcAnnotations) }
}

// noNACK fails the test if a client rejected a response since the test started.
func (p *proxylessTest) noNACK(t *testing.T) {
	t.Helper()
	noNACK(t, p.nacks)
}

// firstChange is, among the EDS responses after the first skip ones, the first whose assignment
// name differs from before: how the change reached the client.
func firstChange(s xdstest.State, skip int, name string, before *endpointv3.ClusterLoadAssignment) *endpointv3.ClusterLoadAssignment {
	for _, r := range s.Received(xdstest.Endpoints)[skip:] {
		cla, _ := r.Resources[name].(*endpointv3.ClusterLoadAssignment)
		if cla != nil && !proto.Equal(cla, before) {
			return cla
		}
	}
	return nil
}

// TestProxylessSpreadsAndFollowsHealth: a proxyless gRPC client dialling
// xds:///payments.<ns>.aether.internal:9090 spreads its RPCs over the three pods of the service's
// =grpc port, reaching each at its inbound (<pod IP>:18008) over mTLS. When one is marked
// Unhealthy (its gRPC health answers NOT_SERVING, the agent's probe says so), the first EDS update
// of the port's load assignment after it already marks it unhealthy (one rebuild), and the client
// stops sending to it; when another is deleted and Draining, likewise, and when that one reaches
// drain phase 2 (Unhealthy, 1 s before its SIGTERM) the update says UNHEALTHY and RPCs still go
// only to the healthy pod. No response is rejected.
func TestProxylessSpreadsAndFollowsHealth(t *testing.T) {
	pt := startProxylessTest(t)
	ctx, ns, a, ca := pt.ctx, pt.ns, pt.a, pt.ca
	backends := pt.payments(t, 3, func(name, ip string) {
		// payments-2 sleeps 10 s in preStop: deleted, it is Draining for 9 s, then Unhealthy.
		preStop := int64(0)
		if name == "payments-2" {
			preStop = 10
		}
		createTerminablePodAnnotated(t, ctx, ns, name, a.node, ip, grpcAnnotations, preStop, 30, "test.aether.io/hold")
	})
	t.Cleanup(func() { releasePods(t, ns, "payments-0", "payments-1", "payments-2") })

	fqdn := ourxds.FQDN("payments", ns, "aether.internal")
	caller := dialProxyless(t, ctx, a, ca, ns, "client", "client", "xds:///"+ourxds.ProxylessListener(fqdn, grpcPort))
	all := []string{backends[0].ip, backends[1].ip, backends[2].ip}
	awaitSpread(t, ctx, caller, all, nil)

	watch := observe(t, ctx, a, caller.node)
	assignment := ourxds.LoadAssignment(fqdn, grpcPort)
	var request time.Time // payments-2's deletion request
	for _, step := range []struct {
		what   string
		pod    int
		change func()
		from   corev3.HealthStatus
		health meshv1alpha1.Health
		want   corev3.HealthStatus
	}{
		{"payments-1 Unhealthy", 1, func() { backends[1].health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING) },
			corev3.HealthStatus_HEALTHY, meshv1alpha1.HealthUnhealthy, corev3.HealthStatus_UNHEALTHY},
		{"payments-2 Draining", 2, func() {
			a.clock.SetTime(time.Now())
			request = deleteAndRequestTime(t, ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments-2"}}, nil)
		}, corev3.HealthStatus_HEALTHY, meshv1alpha1.HealthDraining, corev3.HealthStatus_DRAINING},
		// Drain phase 2, 1 s before SIGTERM (10 s preStop sleep): Unhealthy, and still no RPC.
		{"payments-2 Unhealthy (drain phase 2)", 2, func() { a.clock.SetTime(request.Add(9 * time.Second)) },
			corev3.HealthStatus_DRAINING, meshv1alpha1.HealthUnhealthy, corev3.HealthStatus_UNHEALTHY},
	} {
		gone := backends[step.pod].ip
		var was *endpointv3.ClusterLoadAssignment
		var skip int
		if err := watch.Await(ctx, func(s xdstest.State) error {
			was, skip = s.LoadAssignment(assignment), len(s.Received(xdstest.Endpoints))
			if healthOf(was, gone) != step.from {
				return fmt.Errorf("%s is %v in %v", gone, healthOf(was, gone), was)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		step.change()
		healthIs(t, ns, "payments-"+strconv.Itoa(step.pod), step.health)
		if err := watch.Await(ctx, func(s xdstest.State) error {
			changed := firstChange(s, skip, assignment, was)
			if changed == nil {
				return fmt.Errorf("no EDS update of %s yet", assignment)
			}
			if got := healthOf(changed, gone); got != step.want {
				t.Fatalf("%s: the first EDS update of %s after it lists %s as %v, want %v: %v", step.what, assignment, gone, got, step.want, changed)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		all = slices.DeleteFunc(all, func(ip string) bool { return ip == gone })
		awaitSpread(t, ctx, caller, all, []string{gone})
	}
	pt.noNACK(t)
}

// awaitSpread polls until batches of RPCs reach every backend of want and none of gone, then
// checks one more batch reaches none of gone.
func awaitSpread(t *testing.T, ctx context.Context, c *proxylessClient, want, gone []string) {
	t.Helper()
	check := func() error {
		counts, err := c.spread(ctx, 10*len(want))
		if err != nil {
			return err
		}
		for _, ip := range gone {
			if counts[ip] > 0 {
				return fmt.Errorf("%d of %v went to %s", counts[ip], counts, ip)
			}
		}
		for _, ip := range want {
			if counts[ip] == 0 {
				return fmt.Errorf("none of %v went to %s", counts, ip)
			}
		}
		return nil
	}
	testenv.Eventually(t, fmt.Sprintf("RPCs spread over %v and none to %v", want, gone), check)
	// Once more for gone alone: a backend seen once stays wanted, but a small sample of a weighted
	// split can miss a light one by chance (20 RPCs at 80/20 miss the 20 % about once in 90), and
	// a second full check failed so on a loaded run.
	counts, err := c.spread(ctx, 10*len(want))
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range gone {
		if counts[ip] > 0 {
			t.Fatalf("%d of %v went to %s after the spread settled", counts[ip], counts, ip)
		}
	}
}

// releasePods removes the test's finalizer from pods ns/names.
func releasePods(t *testing.T, ns string, names ...string) {
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pod := &corev1.Pod{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
				return client.IgnoreNotFound(err)
			}
			pod.Finalizers = nil
			return env.Client.Update(context.Background(), pod)
		})
		if err != nil {
			t.Errorf("releasing pod %s/%s: %v", ns, name, err)
		}
	}
}

// meshGRPCRoute is a GRPCRoute in ns parented to Service parent:9090, one rule sending every RPC
// to the weighted backends (service name → port and weight).
func meshGRPCRoute(ns, name, parent string, backends ...gwapiv1.GRPCBackendRef) *gwapiv1.GRPCRoute {
	ref := gwapiv1.ParentReference{Group: new(gwapiv1.Group("")), Kind: new(gwapiv1.Kind("Service")), Name: gwapiv1.ObjectName(parent),
		Port: new(gwapiv1.PortNumber(grpcPort))}
	return &gwapiv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwapiv1.GRPCRouteSpec{CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{ref}},
			Rules: []gwapiv1.GRPCRouteRule{{BackendRefs: backends}}}}
}

func grpcBackend(service string, port, weight int32) gwapiv1.GRPCBackendRef {
	be := gwapiv1.GRPCBackendRef{BackendRef: gwapiv1.BackendRef{Weight: new(weight)}}
	be.Name, be.Port = gwapiv1.ObjectName(service), new(port)
	return be
}

// grpcResolvedRefs is our controller's ResolvedRefs condition of GRPCRoute ns/name for its current
// generation, or nil.
func grpcResolvedRefs(ctx context.Context, ns, name string) (*metav1.Condition, error) {
	r := &gwapiv1.GRPCRoute{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
		return nil, err
	}
	return resolvedRefsOf(r.Status.Parents, r.Generation), nil
}

// TestProxylessGRPCRouteSplit: a GRPCRoute the controller accepted splits payments:9090 80/20
// between payments and canary, and 2 000 RPCs of a proxyless client follow it within ±5 %. A
// second GRPCRoute on the same port, to canary's HTTP/1.1 port, is refused by the controller
// (ResolvedRefs=False, UnsupportedProtocol) and changes nothing: after a rebuild that saw its
// status, every resource type the client is served is at the same version.
func TestProxylessGRPCRouteSplit(t *testing.T) {
	pt := startProxylessTest(t)
	ctx, ns, a, ca := pt.ctx, pt.ns, pt.a, pt.ca
	stable := pt.backend(t, "payments")
	createPod(t, ctx, ns, "payments-0", a.node, stable.ip, true, grpcAnnotations)
	canary := pt.backend(t, "canary")
	canaryAnnotations := map[string]string{portspec.AnnotationPort: strconv.Itoa(grpcPort), portspec.AnnotationPorts: strconv.Itoa(grpcPort) + "=grpc,8080=h1"}
	createPodAs(t, ctx, ns, "canary-0", "canary", a.node, canary.ip, true, canaryAnnotations)
	healthIs(t, ns, "payments-0", meshv1alpha1.HealthHealthy)
	healthIs(t, ns, "canary-0", meshv1alpha1.HealthHealthy)

	if err := env.Client.Create(ctx, meshGRPCRoute(ns, "split", "payments", grpcBackend("payments", grpcPort, 80), grpcBackend("canary", grpcPort, 20))); err != nil {
		t.Fatal(err)
	}
	fqdn := ourxds.FQDN("payments", ns, "aether.internal")
	caller := dialProxyless(t, ctx, a, ca, ns, "client", "client", "xds:///"+ourxds.ProxylessListener(fqdn, grpcPort))
	awaitSpread(t, ctx, caller, []string{stable.ip, canary.ip}, nil)

	const rpcs = 2000
	counts, err := caller.spread(ctx, rpcs)
	if err != nil {
		t.Fatal(err)
	}
	share := float64(counts[canary.ip]) / rpcs
	t.Logf("%d RPCs: %d to payments, %d to canary (%.1f %%)", rpcs, counts[stable.ip], counts[canary.ip], 100*share)
	if counts[stable.ip]+counts[canary.ip] != rpcs || share < 0.15 || share > 0.25 {
		t.Errorf("%d RPCs went %v; want 20 %% ± 5 %% to canary (%s), the rest to payments (%s)", rpcs, counts, canary.ip, stable.ip)
	}

	served := a.options.XDS.Server.Versions(caller.node)
	builds := buildsTotal(t)
	if err := env.Client.Create(ctx, meshGRPCRoute(ns, "widen", "payments", grpcBackend("canary", 8080, 1))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "GRPCRoute widen refused with UnsupportedProtocol", func() error {
		c, err := grpcResolvedRefs(ctx, ns, "widen")
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(gwapiv1.RouteReasonUnsupportedProtocol) {
			return fmt.Errorf("ResolvedRefs = %+v, want False UnsupportedProtocol (else the test proves nothing)", c)
		}
		return nil
	})
	// A rebuild that read the refusal: the view's cache holds the route's status, then a change of
	// the client pod (a label) asks for one more rebuild.
	awaitViewHolds(t, ctx, a, ns, "widen")
	builds = buildsTotal(t)
	touchPod(t, ctx, ns, "client")
	testenv.Eventually(t, "a rebuild after the refusal", func() error {
		if n := buildsTotal(t); n <= builds {
			return fmt.Errorf("aether_agent_xds_builds_total{result=built} still %v", n)
		}
		return nil
	})
	if now := a.options.XDS.Server.Versions(caller.node); !equalVersions(now, served) {
		t.Errorf("the refused route changed what the client is served: versions %v, were %v", now, served)
	}
	pt.noNACK(t)
}

// equalVersions reports whether two Versions maps are the same, and not empty.
func equalVersions(a, b map[string]string) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// awaitViewHolds waits until the agent's view of the mesh holds GRPCRoute ns/name with our
// controller's verdict on its current generation.
func awaitViewHolds(t *testing.T, ctx context.Context, a *xdsAgent, ns, name string) {
	t.Helper()
	testenv.Eventually(t, "the agent's view holding GRPCRoute "+name+"'s status", func() error {
		r := &gwapiv1.GRPCRoute{}
		if err := a.options.View.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			if c := apimeta.FindStatusCondition(p.Conditions, string(gwapiv1.RouteConditionResolvedRefs)); c != nil && c.ObservedGeneration == r.Generation {
				return nil
			}
		}
		return fmt.Errorf("no verdict on generation %d in the view: %+v", r.Generation, r.Status.Parents)
	})
}

// touchPod sets a label on pod ns/name (a change the agent rebuilds on).
func touchPod(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		pod.Labels["test.aether.io/touched"] = strconv.FormatInt(time.Now().UnixNano(), 10)
		return env.Client.Update(ctx, pod)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestProxylessMTLSPinsTheDestination: the client's cluster pins the destination's SPIFFE ID, and
// grpc-go enforces it in a real TLS handshake: while payments' pod presents another identity of
// the trust domain (an SVID of the same CA, for billing), every RPC fails with grpc-go's SAN
// error; once it presents payments' own, RPCs succeed.
func TestProxylessMTLSPinsTheDestination(t *testing.T) {
	pt := startProxylessTest(t)
	ctx, ns, a, ca := pt.ctx, pt.ns, pt.a, pt.ca
	b := pt.backend(t, "billing")
	createPod(t, ctx, ns, "payments-0", a.node, b.ip, true, grpcAnnotations)
	healthIs(t, ns, "payments-0", meshv1alpha1.HealthHealthy)
	fqdn := ourxds.FQDN("payments", ns, "aether.internal")
	caller := dialProxyless(t, ctx, a, ca, ns, "client", "client", "xds:///"+ourxds.ProxylessListener(fqdn, grpcPort))

	const sanError = "do not match any of the accepted SANs"
	var last error
	testenv.Eventually(t, "RPCs refused for the SAN", func() error {
		_, last = caller.call(ctx)
		if last == nil || !strings.Contains(last.Error(), sanError) {
			return fmt.Errorf("the RPC: %v, want an error saying %q", last, sanError)
		}
		return nil
	})
	t.Logf("with billing's SVID: %v", last)
	if len(b.SNIs()) == 0 {
		t.Error("the server saw no handshake")
	}

	b.SetIdentity(t, spiffeID(ns, "payments"))
	testenv.Eventually(t, "RPCs answered once payments presents its own SVID", func() error {
		ip, err := caller.call(ctx)
		if err == nil && ip != b.ip {
			err = fmt.Errorf("answered by %s, want %s", ip, b.ip)
		}
		return err
	})
	if snis := b.SNIs(); slices.ContainsFunc(snis, func(s string) bool { return s != "" }) {
		t.Errorf("the client sent SNI %q to the primary port; want none", snis)
	}
	pt.noNACK(t)
}

// TestProxylessServesOnlyMeshedPods: a client of a pod not annotated proxyless, announcing its own
// pod's node ID, is registered but served nothing, even after a rebuild that knew it was connected
// (the agent logs why: "Serving nothing to a proxyless gRPC client").
func TestProxylessServesOnlyMeshedPods(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a := startXDSAgentServing(t, ns, true)
	a.actAs(createPodAs(t, ctx, ns, "plain", "client", a.node, newPodIP(), true, nil))
	id := proxyless.NodeID(ns, "plain")
	watch := observe(t, ctx, a, id)
	awaitRegistered(t, a, id)
	builds := buildsTotal(t)
	touchPod(t, ctx, ns, "plain")
	testenv.Eventually(t, "a rebuild", func() error {
		if n := buildsTotal(t); n <= builds {
			return fmt.Errorf("aether_agent_xds_builds_total{result=built} still %v", n)
		}
		return nil
	})
	if v := a.options.XDS.Server.Versions(id); v != nil {
		t.Errorf("%s is served %v, want nothing", id, v)
	}
	if h := watch.State().History; len(h) != 0 {
		t.Errorf("%s received %v", id, h)
	}
}

// TestProxylessRefusesAnotherPodsNodeID: a pod of the node (impostor, annotated proxyless like its
// victim) whose gRPC client announces the node ID of another pod (client, a meshed proxyless pod
// of the same node that would be served payments) gets nothing: its stream is refused with
// PermissionDenied naming the claimed ID and its real pod, the agent logs a line naming both, the
// victim's ID is never registered nor served, and the real grpc-go client's RPCs fail. A node ID of
// a pod that does not exist (nobody) is refused the same way. The victim itself is then served.
func TestProxylessRefusesAnotherPodsNodeID(t *testing.T) {
	pt := startProxylessTest(t)
	ctx, ns, a, ca := pt.ctx, pt.ns, pt.a, pt.ca
	pt.payments(t, 1, pt.grpcPod(t))
	annotated := map[string]string{portspec.AnnotationProxyless: portspec.ProxylessGRPC}
	victim := createPodAs(t, ctx, ns, "client", "client", a.node, newPodIP(), true, annotated)
	impostor := createPodAs(t, ctx, ns, "impostor", "client", a.node, newPodIP(), true, annotated)
	victimID, impostorID := proxyless.NodeID(ns, victim.Name), proxyless.NodeID(ns, impostor.Name)
	a.actAs(impostor)

	// The impostor's real grpc-go client, with a bootstrap naming the victim.
	files, err := ca.WriteFiles(t.TempDir(), spiffeID(ns, "client"))
	if err != nil {
		t.Fatal(err)
	}
	bootstrap, err := proxyless.Bootstrap{NodeID: victimID, ServerURI: a.proxylessAddress,
		CertificateFile: files.Certificate, KeyFile: files.Key, BundleFile: files.Bundle}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	fqdn := ourxds.FQDN("payments", ns, "aether.internal")
	conn, err := newProxylessConn(bootstrap, "xds:///"+ourxds.ProxylessListener(fqdn, grpcPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	impostorClient := &proxylessClient{conn: conn, node: victimID}
	testenv.Eventually(t, "the refusal logged, naming the claimed ID and the impostor's pod", func() error {
		if l := a.serverLogs.With("claims another pod's node ID", `"claimed"="`+victimID+`"`, `"pod"="`+impostorID+`"`); len(l) == 0 {
			_, _ = impostorClient.call(ctx) // the channel connects on its first RPC
			return fmt.Errorf("no such line in %q", a.serverLogs.With("Refusing"))
		}
		return nil
	})

	// A raw stream of the impostor reads the refusal itself.
	for _, claimed := range []string{victimID, proxyless.NodeID(ns, "nobody")} {
		watch := observe(t, ctx, a, claimed)
		err := watch.Await(ctx, func(xdstest.State) error { return errors.New("served") })
		want := fmt.Sprintf("node ID %q is not the caller's: the connection comes from pod %s (UID %s", claimed, impostorID, impostor.UID)
		if err == nil || !strings.Contains(err.Error(), "code = "+codes.PermissionDenied.String()) || !strings.Contains(err.Error(), want) {
			t.Errorf("the impostor's stream as %s: %v; want PermissionDenied saying %q", claimed, err, want)
		}
	}
	// A rebuild after all this serves the victim's ID nothing: it was never registered.
	builds := buildsTotal(t)
	touchPod(t, ctx, ns, victim.Name)
	testenv.Eventually(t, "a rebuild", func() error {
		if n := buildsTotal(t); n <= builds {
			return fmt.Errorf("aether_agent_xds_builds_total{result=built} still %v", n)
		}
		return nil
	})
	if n := a.options.XDS.Server.ProxylessNodes(); len(n) != 0 {
		t.Errorf("registered %v, want no client", n)
	}
	if v := a.options.XDS.Server.Versions(victimID); v != nil {
		t.Errorf("the victim's ID is served %v", v)
	}
	if ip, err := impostorClient.call(ctx); err == nil {
		t.Errorf("the impostor's RPC was answered by %s", ip)
	}

	// The victim's own client is served.
	a.actAs(victim)
	watch := observe(t, ctx, a, victimID)
	if err := watch.Await(ctx, func(s xdstest.State) error {
		if len(s.History) == 0 {
			return errors.New("nothing received yet")
		}
		return nil
	}); err != nil {
		t.Errorf("the victim's own stream: %v", err)
	}
}

// TestProxylessRetriesUnavailable: the proxyless routes' retry policy, as a real grpc-go client
// applies it. While one of the two pods of payments' =grpc port answers UNAVAILABLE (what the
// destination's proxy answers a gRPC caller for a call it could not deliver), every call still
// succeeds: grpc-go retries it on the other pod. While that pod answers INTERNAL instead (a status
// the application returned after running the call), the calls it gets fail, each after one
// attempt: not retried. grpc-go reads only the status: it retries an UNAVAILABLE the application
// returned itself just the same, which the workload page says the mesh does not (docs/user-guide/proxyless-grpc.md
// says so).
func TestProxylessRetriesUnavailable(t *testing.T) {
	pt := startProxylessTest(t)
	ctx, ns, a, ca := pt.ctx, pt.ns, pt.a, pt.ca
	backends := pt.payments(t, 2, pt.grpcPod(t))
	fqdn := ourxds.FQDN("payments", ns, "aether.internal")
	caller := dialProxyless(t, ctx, a, ca, ns, "client", "client", "xds:///"+ourxds.ProxylessListener(fqdn, grpcPort))
	awaitSpread(t, ctx, caller, []string{backends[0].ip, backends[1].ip}, nil)

	const calls = 20
	failing, other := backends[0], backends[1]
	failing.fails.Store(uint32(codes.Unavailable))
	reached := failing.calls.Load()
	counts, err := caller.spread(ctx, calls)
	if err != nil {
		t.Fatalf("a call failed while one pod answers UNAVAILABLE (grpc-go did not retry it on the other): %v (answered so far: %v)", err, counts)
	}
	if counts[other.ip] != calls || failing.calls.Load() == reached {
		t.Fatalf("answered by %v, and %d attempts reached the failing pod: want every call answered by %s after some attempts failed at %s",
			counts, failing.calls.Load()-reached, other.ip, failing.ip)
	}
	t.Logf("UNAVAILABLE: %d calls answered by the other pod; %d attempts failed at %s and were retried", calls, failing.calls.Load()-reached, failing.ip)

	failing.fails.Store(uint32(codes.Internal))
	reached, answered := failing.calls.Load(), other.calls.Load()
	var failed int64
	for range calls {
		if _, err := caller.call(ctx); err != nil {
			if status.Code(err) != codes.Internal {
				t.Fatalf("a call failed with %v, want INTERNAL from %s", err, failing.ip)
			}
			failed++
		}
	}
	attempts, succeeded := failing.calls.Load()-reached, other.calls.Load()-answered
	if failed == 0 || attempts != failed || succeeded != calls-failed {
		t.Fatalf("INTERNAL: %d calls failed, %d attempts reached %s, %d calls answered by %s: want each failed call one attempt, never retried",
			failed, attempts, failing.ip, succeeded, other.ip)
	}
	t.Logf("INTERNAL: %d calls failed after one attempt each, none retried", failed)
	pt.noNACK(t)
}
