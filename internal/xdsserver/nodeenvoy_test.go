// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/accesslog/accesslogtest"
	"github.com/aether-mesh/aether-operator/internal/cgrouptest"
	"github.com/aether-mesh/aether-operator/internal/testrun"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// The node Envoy's DaemonSet's pods, as config/envoy makes them.
const (
	envoyNamespace = "aether-operator-system"
	envoyLabel     = "app.kubernetes.io/name"
	envoyLabelIs   = "aether-envoy"
)

// TestNodeSocketServesOnlyTheNodeEnvoy: the node's xDS socket, which serves every local pod's
// private key by SDS, learns each connection's caller from the kernel, as the proxyless socket
// does, and serves the node's Envoy only: a process of a pod of the node Envoy's DaemonSet (its
// namespace, its label). Child processes of the test, in cgroups named as the kubelet names a
// pod's, ask the socket for the node's secrets as the node's Envoy does:
//   - a tenant pod's, as uid 0, through a symbolic link to the socket, its pod labelled as Envoy's
//     are (labels alone choose nothing: the namespace is the admin's), is refused with
//     PermissionDenied naming its pod, and gets no secret; counted, and logged once, however often
//     it asks;
//   - a process of a pod the agent does not know is refused too (unknown_pod);
//   - a process of the node Envoy's pod is served both secrets, its private key with them;
//   - the test process itself, a process of the node in no pod, is refused (node_process) every
//     method of the socket: ADS, delta ADS and the access log.
func TestNodeSocketServesOnlyTheNodeEnvoy(t *testing.T) {
	const tenant, envoy, unknown = "7a0b9c2e-1d3a-4e6f-8a7b-9c0d1e2f3a4b", "8a0b9c2e-1d3a-4e6f-8a7b-9c0d1e2f3a4b", "9a0b9c2e-1d3a-4e6f-8a7b-9c0d1e2f3a4b"
	pods := map[string]Pod{
		tenant: {Namespace: "shop", Name: "web-0", Labels: map[string]string{"app": "web", envoyLabel: envoyLabelIs}},
		envoy:  {Namespace: envoyNamespace, Name: "aether-operator-envoy-x7k2p", Labels: map[string]string{envoyLabel: envoyLabelIs}},
	}
	logs := &logLines{}
	who := NodeEnvoy{Namespace: envoyNamespace, Pods: labels.SelectorFromSet(labels.Set{envoyLabel: envoyLabelIs})}
	accessLog := accesslog.New(accesslog.Options{NodeID: "node-a", Log: logr.Discard(), Registerer: prometheus.NewRegistry()})
	s := startOnBothSockets(t, Options{PodOfProcess: ProcPods("/proc"), NodeEnvoy: who, AccessLog: accessLog,
		Log: funcr.New(logs.write, funcr.Options{Verbosity: 1})}, pods, nil)
	ca, f := tlsFixture(t)
	if _, err := s.PublishSecrets("node-a", testSecrets(t, ca, identity)); err != nil {
		t.Fatal(err)
	}
	publish(t, s, "node-a", f)
	askSecrets := childSecrets + "=" + bundleN + "," + certN

	// The tenant reaches the socket through a symbolic link, as a socket file of its own
	// standing for the node's would be.
	link := filepath.Join(t.TempDir(), "tenant.sock")
	if err := os.Symlink(strings.TrimPrefix(s.Address(), "unix://"), link); err != nil {
		t.Fatal(err)
	}
	refused := func(reason string) float64 { return testutil.ToFloat64(nodeRefused.WithLabelValues(reason)) }
	before := refused(refusedNotEnvoy)
	tenantCgroup := cgrouptest.Pod(t, tenant, true)
	for range 2 {
		got := startChild(t, tenantCgroup, "unix://"+link, "node-a", askSecrets)()
		want := fmt.Sprintf("refused %s this socket serves the node's Envoy only (the pods of namespace %s labelled %s=%s): the caller, process ",
			codes.PermissionDenied, envoyNamespace, envoyLabel, envoyLabelIs)
		if !strings.HasPrefix(got, want) || !strings.Contains(got, "runs in pod shop/web-0 (UID "+tenant+"), which is not the node's Envoy") {
			t.Fatalf("a tenant pod's process asking the node's socket for its secrets: %q, want it to begin %q and name its pod", got, want)
		}
	}
	if n := refused(refusedNotEnvoy) - before; n != 2 {
		t.Errorf("aether_agent_xds_node_refused_total{reason=%q} went up by %v, want 2", refusedNotEnvoy, n)
	}
	if l := logs.with("Refusing a caller of the node's xDS socket", `"level"=0`, tenant, `"reason"="not_envoy"`); len(l) != 1 {
		t.Errorf("log lines of the tenant's refusal at level 0: %q, want one (the second at V(1))", l)
	}

	before = refused(refusedUnknownPod)
	got := startChild(t, cgrouptest.Pod(t, unknown, false), s.Address(), "node-a", askSecrets)()
	if !strings.HasPrefix(got, "refused "+codes.PermissionDenied.String()) || !strings.Contains(got, "runs in no pod of this node the agent knows") {
		t.Errorf("a process of a pod the agent does not know: %q, want PermissionDenied saying so", got)
	}
	if n := refused(refusedUnknownPod) - before; n != 1 {
		t.Errorf("aether_agent_xds_node_refused_total{reason=%q} went up by %v, want 1", refusedUnknownPod, n)
	}

	if got := startChild(t, cgrouptest.Pod(t, envoy, false), s.Address(), "node-a", askSecrets)(); got != "served 2 secrets, 1 private keys" {
		t.Errorf("the node Envoy's pod asking for its secrets: %q, want both served", got)
	}

	before = refused(refusedNodeProcess)
	stream, err := adsClient(t, s.Address()).StreamAggregatedResources(testContext(t))
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "is a process of the node, and the node's own processes are not served") {
		t.Errorf("the test process (a node process) on ADS: %v, want PermissionDenied saying it is a process of the node", err)
	}
	delta, err := adsClient(t, s.Address()).DeltaAggregatedResources(testContext(t))
	if err == nil {
		_, err = delta.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("the test process on delta ADS: %v, want PermissionDenied", err)
	}
	conn, err := accesslogtest.Dial(s.Address())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	err = accesslogtest.Stream(testContext(t), conn, accesslogtest.TCPLogs(accesslogtest.Identifier("node-a"), accesslogtest.TCP(accesslogtest.Hop{})))
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("the test process on the access log: %v, want PermissionDenied", err)
	}
	if n := refused(refusedNodeProcess) - before; n != 3 {
		t.Errorf("aether_agent_xds_node_refused_total{reason=%q} went up by %v, want 3", refusedNodeProcess, n)
	}
}

// TestNodeSocketOverTCP: a loopback TCP port (make run's --xds-address) carries no peer
// credentials, so no caller can be known: it serves nobody, unless told to serve the node's own
// processes (NodeEnvoy.Host), and then it serves whoever reaches it.
func TestNodeSocketOverTCP(t *testing.T) {
	for _, host := range []bool{false, true} {
		t.Run(fmt.Sprintf("host=%v", host), func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s := New(Options{Listener: l, NodeEnvoy: NodeEnvoy{Host: host}, Log: logr.Discard()})
			testrun.UntilCleanup(t, "the server", s.Start)
			publish(t, s, "node-a", baseFixture())
			stream, err := adsClient(t, s.Address()).StreamAggregatedResources(testContext(t))
			if err == nil {
				err = stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Listeners, Node: &corev3.Node{Id: "node-a"}})
			}
			if err == nil || errors.Is(err, io.EOF) { // EOF: the server ended the stream, Recv says how
				_, err = stream.Recv()
			}
			switch {
			case host && err != nil:
				t.Errorf("with Host: %v, want served", err)
			case !host && (status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "carry no peer credentials")):
				t.Errorf("without Host: %v, want PermissionDenied saying a TCP port carries no peer credentials", err)
			}
		})
	}
}
