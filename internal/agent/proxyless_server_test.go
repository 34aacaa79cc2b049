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
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/anypb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	ourxds "github.com/aether-mesh/aether-operator/internal/xds"
)

// TestProxylessServerEnforcesAccessPolicy: an AccessPolicy admits ServiceAccount client to
// payments' gRPC port. payments-0 is a proxyless pod whose gRPC server is grpc-go's
// xds.NewGRPCServer with xDS credentials, its bootstrap the injected one's (the agent's proxyless
// socket, its SVID files, the server listener template). The agent serves it its server listener;
// once it serves, a client presenting client's SVID is answered, one presenting intruder's (an
// SVID of the same trust domain) fails PERMISSION_DENIED, and a cleartext call from the pod's own
// address (where the node proxy's inbound delivers the calls it authorized) is answered. No
// response is rejected.
func TestProxylessServerEnforcesAccessPolicy(t *testing.T) {
	s := startProxylessServer(t, serverSetup{})
	if _, err := s.call(t, s.client("client")); err != nil {
		t.Errorf("the admitted client's call: %v", err)
	}
	_, err := s.call(t, s.client("intruder"))
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("intruder's call: %v, want PERMISSION_DENIED", err)
	}
	t.Logf("intruder: %v", err)
	if _, err := s.call(t, s.local()); err != nil {
		t.Errorf("a cleartext call from the pod's own address: %v", err)
	}
	s.pt.noNACK(t)
}

// TestProxylessServerWithoutRBACAdmitsAnyone is the negative control of
// TestProxylessServerEnforcesAccessPolicy: the same, the RBAC filter taken out of the server
// listeners the agent publishes, and intruder's call is answered, so the test above can fail.
func TestProxylessServerWithoutRBACAdmitsAnyone(t *testing.T) {
	s := startProxylessServer(t, serverSetup{strip: true})
	if _, err := s.call(t, s.client("intruder")); err != nil {
		t.Errorf("intruder's call without the RBAC filter: %v, want it answered", err)
	}
	s.pt.noNACK(t)
}

// TestProxylessServerAnswersTheNodesProbe: the agent's node reports, among its addresses, the
// one its dials to the pod come from (here the host's, which the test stands for the node with).
// The agent's own prober (a gRPC health check in cleartext, from the node) makes payments-0
// Healthy against its xDS-enabled server, which would refuse a cleartext connection from any
// address but the pod's own. The exemption is the probe alone: another RPC of the server's
// (Health/List, answered from the pod's own address) fails PERMISSION_DENIED from the node's
// address, and a cleartext call from an address neither the pod's nor
// the node's is refused. No response is rejected.
func TestProxylessServerAnswersTheNodesProbe(t *testing.T) {
	s := startProxylessServer(t, serverSetup{nodeReportsProbeSource: true})
	healthIs(t, s.pt.ns, "payments-0", meshv1alpha1.HealthHealthy)
	// Health/List: a method the server has (an unknown one fails UNIMPLEMENTED before any filter).
	if _, err := healthpb.NewHealthClient(s.conn(t, s.local())).List(s.pt.ctx, &healthpb.HealthListRequest{}); err != nil {
		t.Errorf("Health/List from the pod's own address: %v", err)
	}
	_, err := healthpb.NewHealthClient(s.conn(t, s.from(s.node))).List(s.pt.ctx, &healthpb.HealthListRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("Health/List from the node's address %s: %v, want PERMISSION_DENIED", s.node, err)
	}
	t.Logf("Health/List from the node: %v", err)
	other := newPodIP()
	if _, err := s.call(t, s.from(other)); err == nil {
		t.Errorf("a cleartext call from %s (neither the pod's nor the node's) was answered", other)
	}
	s.pt.noNACK(t)
}

// TestProxylessServerRefusesTheProbeWithoutTheNodesAddress is the negative control of
// TestProxylessServerAnswersTheNodesProbe: the same, the node reporting no address, and the
// agent's probe of payments-0 (probeEndpoint, as the prober makes it) fails against its serving
// xDS-enabled server, so the test above can fail.
func TestProxylessServerRefusesTheProbeWithoutTheNodesAddress(t *testing.T) {
	s := startProxylessServer(t, serverSetup{})
	ep, err := getEndpoint(s.pt.ctx, s.pt.ns, "payments-0")
	if err != nil {
		t.Fatal(err)
	}
	if probeEndpoint(s.pt.ctx, ep, 5*time.Second, "") {
		t.Error("the probe from the node passed without the node's address in the rendering")
	}
	if ep, err = getEndpoint(s.pt.ctx, s.pt.ns, "payments-0"); err != nil || ep.Status.Health == meshv1alpha1.HealthHealthy {
		t.Errorf("payments-0: health %q (%v), want it never Healthy", ep.Status.Health, err)
	}
}

// proxylessServer is a running xDS-enabled gRPC server of pod payments-0; node is the source
// address of a dial from the node to it.
type proxylessServer struct {
	pt   *proxylessTest
	ip   string
	node string
}

// serverSetup is how startProxylessServer sets the server up: strip takes the RBAC filter out of
// its listeners; nodeReportsProbeSource makes the Node report, as its InternalIP, the address the
// node's dials to the pod come from (the agent's probes').
type serverSetup struct {
	strip, nodeReportsProbeSource bool
}

// startProxylessServer starts the agent, the AccessPolicy (seen by the agent's cache before the
// server's pod exists, so every rendering of the pod is governed), the pod payments-0 and its
// xDS-enabled gRPC server, and returns once the agent published the server's listeners (with
// strip, without their RBAC filters) and the server serves: grpc-go serves only once it holds the
// listener of its own address.
func startProxylessServer(t *testing.T, setup serverSetup) *proxylessServer {
	t.Helper()
	ctx := testContext(t)
	ns := namespace(t, ctx)
	before := nacks(t)
	// governed: a rendering of the server listener of the pod's port was governed (the hook sees
	// every rendering of the server's listeners before it is published).
	var governed atomic.Bool
	a := startXDSAgentServing(t, ns, true, func(o *XDSOptions) {
		o.serverHook = func(res *ourxds.Resources) {
			for _, ports := range res.Access {
				if ports[0].Port == grpcPort && ports[0].Governed {
					governed.Store(true)
				}
			}
			if setup.strip {
				stripRBAC(t, res.Listeners)
			}
		}
	})
	ca, err := spiffetest.NewCA("aether.internal")
	if err != nil {
		t.Fatal(err)
	}
	pt := &proxylessTest{ctx: ctx, ns: ns, a: a, ca: ca, nacks: before}

	policy := &configv1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments-grpc"}, Spec: configv1.AccessPolicySpec{
		TargetRef: &configv1.TargetRef{Kind: "Service", Name: "payments"}, Ports: []int32{grpcPort},
		Rules: []configv1.AccessRule{{From: []configv1.AccessSource{{ServiceAccount: &configv1.ServiceAccountRef{Name: "client"}}}}},
	}}
	if err := env.Client.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the agent's cache holding the policy", func() error {
		return a.mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(policy), &configv1.AccessPolicy{})
	})

	ip := newPodIP()
	annotations := map[string]string{portspec.AnnotationPort: strconv.Itoa(grpcPort), portspec.AnnotationPorts: strconv.Itoa(grpcPort) + "=grpc",
		portspec.AnnotationProxyless: portspec.ProxylessGRPC}
	pod := createPodAs(t, ctx, ns, "payments-0", "payments", a.node, ip, true, annotations)
	a.actAs(pod)
	files, err := ca.WriteFiles(t.TempDir(), spiffeID(ns, "payments"))
	if err != nil {
		t.Fatal(err)
	}
	node := proxyless.NodeID(ns, pod.Name)
	bootstrap, err := proxyless.Bootstrap{NodeID: node, ServerURI: a.proxylessAddress,
		CertificateFile: files.Certificate, KeyFile: files.Key, BundleFile: files.Bundle}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	var serving atomic.Bool
	srv, err := xds.NewGRPCServer(grpc.Creds(creds), xds.BootstrapContentsForTesting(bootstrap),
		xds.ServingModeCallback(func(_ net.Addr, args xds.ServingModeChangeArgs) {
			serving.Store(args.Mode == connectivity.ServingModeServing)
			if args.Err != nil {
				t.Logf("the server does not serve: %v", args.Err)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(srv, health.NewServer())
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(grpcPort)))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	source := probeSource(t, l.Addr().String())
	if setup.nodeReportsProbeSource {
		reportNodeAddress(t, ctx, a.node, source)
	}

	testenv.Eventually(t, "the agent publishing the server's listeners, governed, and the server serving", func() error {
		switch {
		case a.options.XDS.Server.Versions(node) == nil:
			return fmt.Errorf("nothing is published to %s", node)
		case !governed.Load():
			return errors.New("no rendering of the server's listeners was governed (else the test proves nothing)")
		case !serving.Load():
			return errors.New("the server does not serve yet")
		}
		return nil
	})
	return &proxylessServer{pt: pt, ip: ip, node: source}
}

// probeSource is the source address the kernel gives a dial from the node (this test's host
// namespace, where the agent's prober runs) to addr: a TCP connection, opened and closed.
func probeSource(t *testing.T, addr string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	return conn.LocalAddr().(*net.TCPAddr).IP.String()
}

// reportNodeAddress sets node's status addresses to addr as its InternalIP, as the kubelet would.
func reportNodeAddress(t *testing.T, ctx context.Context, name, addr string) {
	t.Helper()
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}
	if err := env.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
}

// stripRBAC takes the RBAC filter out of every chain of listeners.
func stripRBAC(t *testing.T, listeners []*listenerv3.Listener) {
	for _, l := range listeners {
		for _, fc := range l.GetFilterChains() {
			hcm := &hcmv3.HttpConnectionManager{}
			if err := fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
				t.Error(err)
				return
			}
			var kept []*hcmv3.HttpFilter
			for _, f := range hcm.GetHttpFilters() {
				if f.GetName() != ourxds.HTTPRBACFilter {
					kept = append(kept, f)
				}
			}
			hcm.HttpFilters = kept
			packed, err := anypb.New(hcm)
			if err != nil {
				t.Error(err)
				return
			}
			fc.Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: packed}
		}
	}
}

// client is a mesh client of the server presenting ServiceAccount sa's SVID, verifying that the
// server presents payments'.
func (s *proxylessServer) client(sa string) []grpc.DialOption {
	cert, err := s.pt.ca.TLSCertificate(spiffeID(s.pt.ns, sa))
	if err != nil {
		panic(err)
	}
	want := spiffeID(s.pt.ns, "payments")
	roots := s.pt.ca.Pool()
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		// An SVID names no host: the chain and the SPIFFE ID are checked below instead.
		InsecureSkipVerify: true, //nolint:gosec // verified by VerifyPeerCertificate
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			leaf, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots}); err != nil {
				return err
			}
			if len(leaf.URIs) != 1 || leaf.URIs[0].String() != want {
				return fmt.Errorf("the server presents %v, want %s", leaf.URIs, want)
			}
			return nil
		},
	}))}
}

// local is a cleartext client connecting from the pod's own address.
func (s *proxylessServer) local() []grpc.DialOption { return s.from(s.ip) }

// from is a cleartext client connecting from address source.
func (s *proxylessServer) from(source string) []grpc.DialOption {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", addr) })}
}

// call makes one health check to the server, dialled with opts.
func (s *proxylessServer) call(t *testing.T, opts []grpc.DialOption) (*healthpb.HealthCheckResponse, error) {
	t.Helper()
	conn := s.conn(t, opts)
	ctx, cancel := context.WithTimeout(s.pt.ctx, 5*time.Second)
	defer cancel()
	return healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
}

// conn is a client of the server, dialled with opts, closed when the test ends.
func (s *proxylessServer) conn(t *testing.T, opts []grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(net.JoinHostPort(s.ip, strconv.Itoa(grpcPort)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
