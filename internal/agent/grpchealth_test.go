// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// countingListener counts the connections a server accepts and how many are open, so a test
// sees every probe's connection open and close.
type countingListener struct {
	net.Listener
	accepted, open, maxOpen atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	n := l.open.Add(1)
	for m := l.maxOpen.Load(); n > m && !l.maxOpen.CompareAndSwap(m, n); m = l.maxOpen.Load() {
	}
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// countingHealth is grpc-go's own health service, counting the answers that were not SERVING.
type countingHealth struct {
	*health.Server
	notServing atomic.Int64
}

func (h *countingHealth) Check(ctx context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp, err := h.Server.Check(ctx, in)
	if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		h.notServing.Add(1)
	}
	return resp, err
}

// grpcServer is a real grpc-go server on a loopback address standing in for a pod IP.
type grpcServer struct {
	addr   string
	port   int
	health *countingHealth // nil without the health service
	conns  *countingListener
	stop   func()
}

// listenGRPC serves grpc-go on ip at a free port until stop is called, with the standard health
// service (grpc.health.v1, the server SERVING) when withHealth.
func listenGRPC(t *testing.T, ip string, withHealth bool) *grpcServer {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := &grpcServer{addr: l.Addr().String(), port: l.Addr().(*net.TCPAddr).Port, conns: &countingListener{Listener: l}}
	srv := grpc.NewServer()
	if withHealth {
		s.health = &countingHealth{Server: health.NewServer()}
		healthpb.RegisterHealthServer(srv, s.health)
	}
	go func() { _ = srv.Serve(s.conns) }()
	s.stop = srv.Stop
	t.Cleanup(s.stop)
	return s
}

// listenH2C serves 200 on path (404 elsewhere) in cleartext HTTP/2 on ip at a free port.
func listenH2C(t *testing.T, ip, path string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			w.WriteHeader(http.StatusHTTPVersionNotSupported)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// TestGRPCProbe asks real servers on loopback: only a gRPC health service answering SERVING for
// the server as a whole is healthy. The h2c GET an HTTP2 primary gets never passes on a gRPC
// server (415), though it does on an h2c server: a gRPC primary needs the gRPC probe.
func TestGRPCProbe(t *testing.T) {
	ip := newPodIP()
	serving := listenGRPC(t, ip, true)
	notServing := listenGRPC(t, ip, true)
	notServing.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	unknown := listenGRPC(t, ip, true)
	unknown.health.SetServingStatus("", healthpb.HealthCheckResponse_UNKNOWN)
	onlyAService := listenGRPC(t, ip, true)
	onlyAService.health.SetServingStatus("payments", healthpb.HealthCheckResponse_SERVING)
	onlyAService.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	shutDown := listenGRPC(t, ip, true)
	shutDown.health.Shutdown() // every service NOT_SERVING, as a server does while it stops
	noHealth := listenGRPC(t, ip, false)
	stopped := listenGRPC(t, ip, true)
	stopped.stop()
	httpPort, _ := listenHTTP(t, ip, "/")
	silent, err := net.Listen("tcp", net.JoinHostPort(ip, "0")) // connections complete, nothing answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	h2cAddr := net.JoinHostPort(ip, strconv.Itoa(listenH2C(t, ip, "/")))

	cases := map[string]struct {
		addr string
		want bool
	}{
		"SERVING (control)":                     {addr: serving.addr, want: true},
		"NOT_SERVING":                           {addr: notServing.addr},
		"UNKNOWN":                               {addr: unknown.addr},
		"a service SERVING, the server not":     {addr: onlyAService.addr},
		"health service shut down":              {addr: shutDown.addr},
		"no health service (Unimplemented)":     {addr: noHealth.addr},
		"nothing listening":                     {addr: stopped.addr},
		"an HTTP/1.1 server":                    {addr: net.JoinHostPort(ip, strconv.Itoa(httpPort))},
		"a listener that never answers":         {addr: silent.Addr().String()},
		"an h2c server that is not gRPC at all": {addr: h2cAddr},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testHealth.Timeout)
			defer cancel()
			if got := probeGRPC(ctx, tc.addr); got != tc.want {
				t.Errorf("probeGRPC(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}

	t.Run("the h2c GET of an HTTP2 primary", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testHealth.Timeout)
		defer cancel()
		if !probeHTTP(ctx, h2cAddr, "/", true) {
			t.Errorf("control: the h2c GET fails on an h2c server")
		}
		if probeHTTP(ctx, serving.addr, "/", true) {
			t.Errorf("the h2c GET passes on a gRPC server; the gRPC probe would not be needed")
		}
	})
}

// msReady waits for MeshService payments in ns to count want endpoints ready and hold Ready =
// status.
func msReady(t *testing.T, ns string, want meshv1alpha1.EndpointCounts, status metav1.ConditionStatus) *meshv1alpha1.MeshService {
	t.Helper()
	ms := &meshv1alpha1.MeshService{}
	testenv.Eventually(t, fmt.Sprintf("MeshService payments %d/%d ready, Ready=%s", want.Ready, want.Total, status), func() error {
		if err := env.Client.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "payments"}, ms); err != nil {
			return err
		}
		c := conditions.Find(ms.Status.Conditions, meshv1alpha1.ServiceConditionReady)
		if ms.Status.Endpoints != want || c == nil || c.Status != status {
			return fmt.Errorf("endpoints %+v, Ready %+v", ms.Status.Endpoints, c)
		}
		return nil
	})
	return ms
}

// TestGRPCHealth: a pod whose primary is declared =grpc, served by a real grpc-go server with the
// standard health service, becomes Healthy and its MeshService Ready; NOT_SERVING makes it
// Unhealthy (after the failure threshold) and the service not Ready; SERVING again, Healthy; a
// stopped server, Unhealthy. The port stays HTTP2 in the service's status.
func TestGRPCHealth(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	ip := newPodIP()
	srv := listenGRPC(t, ip, true)
	p := strconv.Itoa(srv.port)
	createPod(t, ctx, ns, "grpc", testNode, ip, true, map[string]string{
		portspec.AnnotationPort: p, portspec.AnnotationPorts: p + "=grpc",
	})

	healthIs(t, ns, "grpc", meshv1alpha1.HealthHealthy)
	ep, err := getEndpoint(ctx, ns, "grpc")
	if err != nil {
		t.Fatal(err)
	}
	if want := []meshv1alpha1.PortProtocol{{Port: int32(srv.port), Protocol: meshv1alpha1.ProtocolHTTP2, AppProtocol: meshv1alpha1.AppProtocolGRPC}}; fmt.Sprint(ep.Spec.Ports) != fmt.Sprint(want) {
		t.Errorf("ports %+v, want %+v", ep.Spec.Ports, want)
	}
	ms := msReady(t, ns, meshv1alpha1.EndpointCounts{Ready: 1, Total: 1}, metav1.ConditionTrue)
	if len(ms.Status.Ports) != 1 || ms.Status.Ports[0].Protocol != meshv1alpha1.ProtocolHTTP2 {
		t.Errorf("service ports %+v, want one HTTP2 port", ms.Status.Ports)
	}

	srv.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthIs(t, ns, "grpc", meshv1alpha1.HealthUnhealthy)
	if n := srv.health.notServing.Load(); n < 1 {
		t.Errorf("Unhealthy, but the server never answered NOT_SERVING (%d answers): not the health answer's doing", n)
	}
	msReady(t, ns, meshv1alpha1.EndpointCounts{Ready: 0, Total: 1}, metav1.ConditionFalse)

	srv.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthIs(t, ns, "grpc", meshv1alpha1.HealthHealthy)
	msReady(t, ns, meshv1alpha1.EndpointCounts{Ready: 1, Total: 1}, metav1.ConditionTrue)

	srv.stop()
	healthIs(t, ns, "grpc", meshv1alpha1.HealthUnhealthy)
}

// TestGRPCHealthNeedsTheGRPCProbe is the negative control: the same kind of gRPC server declared
// =h2 gets the h2c GET and never becomes Healthy; declared =grpc, it does; and an h2c HTTP server
// declared =h2 still gets, and passes, the h2c GET of its health path.
func TestGRPCHealthNeedsTheGRPCProbe(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	asH2IP, asGRPCIP, h2cIP := newPodIP(), newPodIP(), newPodIP()
	asH2, asGRPC := listenGRPC(t, asH2IP, true), listenGRPC(t, asGRPCIP, true)
	h2cPort := strconv.Itoa(listenH2C(t, h2cIP, "/healthz"))
	for _, pod := range []struct{ name, ip, port, suffix string }{
		{"grpc-declared-h2", asH2IP, strconv.Itoa(asH2.port), "h2"},
		{"grpc-declared-grpc", asGRPCIP, strconv.Itoa(asGRPC.port), "grpc"},
		{"h2c", h2cIP, h2cPort, "h2"},
	} {
		createPod(t, ctx, ns, pod.name, testNode, pod.ip, true, map[string]string{
			portspec.AnnotationPort: pod.port, portspec.AnnotationPorts: pod.port + "=" + pod.suffix,
			portspec.AnnotationHealthPath: "/healthz",
		})
	}
	healthIs(t, ns, "grpc-declared-grpc", meshv1alpha1.HealthHealthy)
	healthIs(t, ns, "h2c", meshv1alpha1.HealthHealthy)
	healthIs(t, ns, "grpc-declared-h2", meshv1alpha1.HealthUnhealthy)
	if asH2.conns.accepted.Load() == 0 {
		t.Errorf("the =h2 gRPC server was never probed")
	}
	msReady(t, ns, meshv1alpha1.EndpointCounts{Ready: 2, Total: 3}, metav1.ConditionTrue)
}

// TestGRPCProbeConnections: every gRPC probe opens its own connection and closes it before the
// next (connections accepted grow one per probe; never more than one open but for a close in
// flight), and once an endpoint is gone its server sees no connection at all, while the agent
// keeps probing the node's other endpoints (the witness).
func TestGRPCProbeConnections(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	goneIP, witnessIP := newPodIP(), newPodIP()
	gone, witness := listenGRPC(t, goneIP, true), listenGRPC(t, witnessIP, true)
	var pods []client.Object
	for _, s := range []struct {
		name, ip string
		port     int
	}{{"gone", goneIP, gone.port}, {"witness", witnessIP, witness.port}} {
		p := strconv.Itoa(s.port)
		pods = append(pods, createPod(t, ctx, ns, s.name, testNode, s.ip, true, map[string]string{
			portspec.AnnotationPort: p, portspec.AnnotationPorts: p + "=grpc",
		}))
	}
	healthIs(t, ns, "gone", meshv1alpha1.HealthHealthy)
	healthIs(t, ns, "witness", meshv1alpha1.HealthHealthy)

	// probesOf waits until srv has accepted n more connections (n more probes).
	probesOf := func(name string, srv *grpcServer, n int64) {
		t.Helper()
		target := srv.conns.accepted.Load() + n
		testenv.Eventually(t, fmt.Sprintf("%d more probes of %s", n, name), func() error {
			if got := srv.conns.accepted.Load(); got < target {
				return fmt.Errorf("%d connections accepted, want %d", got, target)
			}
			return nil
		})
	}
	probesOf("gone", gone, 5)
	if m := gone.conns.maxOpen.Load(); m > 2 {
		t.Errorf("%d connections open at once after %d probes: probes leave connections open", m, gone.conns.accepted.Load())
	}

	if err := env.Client.Delete(ctx, pods[0], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "MeshEndpoint gone removed with its pod", func() error {
		if _, err := getEndpoint(ctx, ns, "gone"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	probesOf("witness", witness, 2) // the agent's cache has seen the deletion by now
	after := gone.conns.accepted.Load()
	probesOf("witness", witness, 3)
	if got := gone.conns.accepted.Load(); got != after {
		t.Errorf("the server of a removed endpoint accepted %d more connections", got-after)
	}
	testenv.Eventually(t, "no connection open to the removed endpoint's server", func() error {
		if n := gone.conns.open.Load(); n != 0 {
			return fmt.Errorf("%d open", n)
		}
		return nil
	})
}
