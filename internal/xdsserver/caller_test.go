// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/aether-mesh/aether-operator/internal/cgrouptest"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// A child process of the test (the test binary again, TestMain) is a proxyless client: it opens one
// ADS stream to the socket in childSocket, announcing the node ID in childNode, and prints what
// it got: "served <listeners>" or "refused <code> <message>". With childSecrets (names, comma
// separated) it asks for those secrets instead, as the node's Envoy does (childSecretsClient).
const (
	childSocket  = "AETHER_TEST_PROXYLESS_SOCKET"
	childNode    = "AETHER_TEST_PROXYLESS_NODE"
	childSecrets = "AETHER_TEST_CHILD_SECRETS"
)

func TestMain(m *testing.M) {
	if address := os.Getenv(childSocket); address != "" {
		if names := os.Getenv(childSecrets); names != "" {
			fmt.Println(childSecretsClient(address, os.Getenv(childNode), strings.Split(names, ",")))
		} else {
			fmt.Println(childClient(address, os.Getenv(childNode)))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childClient asks the server at address for the listeners of node id, and says what it got.
func childClient(address, id string) string {
	return childAsk(address, &discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Listeners, Node: proxylessNode(id, true)},
		func(resp *discoveryv3.DiscoveryResponse) string {
			return fmt.Sprintf("served %d", len(resp.GetResources()))
		})
}

// childSecretsClient asks the server at address for the secrets names as node id, in one request
// (as Envoy asks over ADS), and says what it got: "served <n> secrets, <k> private keys".
func childSecretsClient(address, id string, names []string) string {
	return childAsk(address, &discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Secrets, Node: &corev3.Node{Id: id}, ResourceNames: names},
		func(resp *discoveryv3.DiscoveryResponse) string {
			keys := 0
			for _, r := range resp.GetResources() {
				var secret tlsv3.Secret
				if err := r.UnmarshalTo(&secret); err == nil && len(keyOf(&secret)) > 0 {
					keys++
				}
			}
			return fmt.Sprintf("served %d secrets, %d private keys", len(resp.GetResources()), keys)
		})
}

// childAsk sends req on an ADS stream to the server at address and says what came back: served
// tells the first response, a refusal is "refused <code> <message>".
func childAsk(address string, req *discoveryv3.DiscoveryRequest, served func(*discoveryv3.DiscoveryResponse) string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(xdstest.Target(address), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "error " + err.Error()
	}
	defer func() { _ = conn.Close() }()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err == nil {
		err = stream.Send(req)
	}
	if err != nil && !errors.Is(err, io.EOF) { // EOF: the server ended the stream, Recv says how
		return "error " + err.Error()
	}
	resp, err := stream.Recv()
	if err != nil {
		return fmt.Sprintf("refused %s %s", status.Code(err), status.Convert(err).Message())
	}
	return served(resp)
}

// startChild starts the test binary as a proxyless client announcing node id to address, in the
// cgroup cgroupFD, with the environment variables env more (childSecrets); wait waits for it and
// returns the line it printed.
func startChild(t *testing.T, cgroupFD int, address, id string, env ...string) (wait func() string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childSocket+"="+address, childNode+"="+id), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgroupFD}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	// A test that fails before it waits ends the child, so its cgroup can go.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if err := <-waited; err != nil {
			t.Logf("the child client ended: %v", err)
		}
	})
	return func() string {
		err := <-waited
		waited <- err
		if err != nil {
			t.Fatalf("the child client: %v: %s", err, out.String())
		}
		return strings.TrimSpace(out.String())
	}
}

// TestProxylessCallerFromItsCgroup: the proxyless socket learns its caller from the connection.
// Child processes of the test, started in cgroups named as the kubelet names a pod's (both cgroup
// drivers), connect over the real unix socket; the server reads their peer credentials and
// /proc/<pid>/cgroup (ProcPods, the agent's default). A child of pod shop/client-0 announcing
// shop/client-0 is served; announcing shop/victim, another pod of the node, it is refused with
// PermissionDenied naming the claimed ID and its real pod, a log line names both, and the victim is
// never registered. The test process itself is no pod of the node: refused too.
func TestProxylessCallerFromItsCgroup(t *testing.T) {
	const client, victim = "5f0b9c2e-1d3a-4e6f-8a7b-9c0d1e2f3a4b", "6f0b9c2e-1d3a-4e6f-8a7b-9c0d1e2f3a4b"
	pods := map[string]string{client: "shop/client-0", victim: "shop/victim"}
	s, logs, changes := startProxylessServerFor(t, ProcPods("/proc"), podsByID(pods))

	for _, systemd := range []bool{true, false} {
		t.Run(fmt.Sprintf("systemd=%v", systemd), func(t *testing.T) {
			cgroup := cgrouptest.Pod(t, client, systemd)

			wait := startChild(t, cgroup, s.ProxylessAddress(), "shop/client-0")
			<-changes
			if n := s.ProxylessNodes(); !slices.Equal(n, []ProxylessNode{{ID: "shop/client-0", SNI: true}}) {
				t.Fatalf("ProxylessNodes() = %v, want the child's pod", n)
			}
			if published, err := s.PublishProxyless("shop/client-0", baseFixture().resources(t)); err != nil || !published {
				t.Fatalf("PublishProxyless: %v, %v", published, err)
			}
			if got := wait(); got != "served 1" {
				t.Errorf("the child announcing its own pod's ID: %q, want served 1", got)
			}
			<-changes // its stream closed

			got := startChild(t, cgroup, s.ProxylessAddress(), "shop/victim")()
			want := fmt.Sprintf(`refused %s node ID "shop/victim" is not the caller's: the connection comes from pod shop/client-0 (UID %s`, codes.PermissionDenied, client)
			if !strings.HasPrefix(got, want) {
				t.Errorf("the child claiming another pod's ID: %q, want it to begin %q", got, want)
			}
			if l := logs.with("claims another pod's node ID", `"claimed"="shop/victim"`, `"pod"="shop/client-0"`); len(l) == 0 {
				t.Errorf("no log line names the claimed ID and the caller's pod: %q", logs.with("Refusing"))
			}
			if n := s.ProxylessNodes(); len(n) != 0 {
				t.Errorf("ProxylessNodes() = %v after the refusal, want none", n)
			}
		})
	}

	stream := rawStream(t, s.ProxylessAddress())
	if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Listeners, Node: proxylessNode("shop/client-0", true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "shop/client-0") {
		t.Errorf("the test process (no pod of the node) announcing shop/client-0: %v, want PermissionDenied naming it", err)
	}
	if keys := s.proxylessCache.GetStatusKeys(); len(keys) != 0 {
		t.Errorf("go-control-plane keeps status for %q after every stream closed", keys)
	}
}

// TestProxylessOneNodePerStream: a stream that announces its pod's node ID, then another one, is
// closed with InvalidArgument naming both, and go-control-plane is never asked for the second: no
// status entry of it remains once the stream is gone (the cache keeps one per node ID it sees).
func TestProxylessOneNodePerStream(t *testing.T) {
	s, logs, changes := startProxylessServer(t)
	stream := rawStream(t, s.ProxylessAddress())
	if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Listeners, Node: proxylessNode(testPodID, false)}); err != nil {
		t.Fatal(err)
	}
	<-changes
	if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Clusters, Node: proxylessNode("shop/client-1", false)}); err != nil {
		t.Fatal(err)
	}
	_, err := stream.Recv()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `serves node "`+testPodID+`", and announced "shop/client-1"`) {
		t.Fatalf("the stream after a second node ID: %v, want InvalidArgument naming both", err)
	}
	<-changes // the client went with its stream
	if l := logs.with("announced a second node ID"); len(l) != 1 {
		t.Errorf("log lines of the change: %q, want one", l)
	}
	testenv.Eventually(t, "go-control-plane's status to hold no node", func() error {
		if keys := s.proxylessCache.GetStatusKeys(); len(keys) != 0 {
			return fmt.Errorf("status entries of %q", keys)
		}
		return nil
	})
}

// TestProxylessBounds: what one pod can make the agent hold is bounded. A message over
// maxProxylessMessage fails its stream with ResourceExhausted; a node ID longer than
// proxyless.MaxNodeIDLength is refused (InvalidArgument) and logged cut short; a pod holds at most
// maxPerPod streams (the next is ResourceExhausted, one more fits once one closes) and maxPerPod
// connections (the next is closed at its handshake).
func TestProxylessBounds(t *testing.T) {
	s, logs, changes := startProxylessServer(t)
	ctx := testContext(t)

	t.Run("message size", func(t *testing.T) {
		stream := rawStream(t, s.ProxylessAddress())
		names := make([]string, 0, 2*maxProxylessMessage/64)
		for i := range cap(names) {
			names = append(names, fmt.Sprintf("payments-%d.shop.aether.internal:%054d", i, 9090))
		}
		err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Listeners, Node: proxylessNode(testPodID, false), ResourceNames: names})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a request of %d names: %v, want ResourceExhausted", len(names), err)
		}
	})

	t.Run("node ID length", func(t *testing.T) {
		long := "shop/" + strings.Repeat("x", 4*proxyless.MaxNodeIDLength)
		stream := rawStream(t, s.ProxylessAddress())
		if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Listeners, Node: proxylessNode(long, false)}); err != nil {
			t.Fatal(err)
		}
		_, err := stream.Recv()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "at most "+strconv.Itoa(proxyless.MaxNodeIDLength)+" bytes") {
			t.Errorf("a node ID of %d bytes: %v, want InvalidArgument saying the bound", len(long), err)
		}
		for _, l := range logs.with("not a proxyless gRPC client") {
			if strings.Contains(l, long) {
				t.Errorf("a log line holds the whole ID: %.200s...", l)
			}
		}
	})

	t.Run("streams and connections per pod", func(t *testing.T) {
		open := func(conn *grpc.ClientConn) error {
			stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
			if err == nil {
				err = stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Listeners, Node: proxylessNode(testPodID, false)})
			}
			return err
		}
		first, second := newConn(t, s.ProxylessAddress()), newConn(t, s.ProxylessAddress())
		for range maxPerPod {
			if err := open(first); err != nil {
				t.Fatal(err)
			}
		}
		testenv.Eventually(t, "the pod's streams all open", func() error {
			if n := s.proxylessStreams.open(testPodUID); n != maxPerPod {
				return fmt.Errorf("%d open", n)
			}
			return nil
		})
		<-changes
		stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(second).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "the most one pod may") {
			t.Errorf("stream %d of the pod: %v, want ResourceExhausted", maxPerPod+1, err)
		}

		conns := []*grpc.ClientConn{first, second}
		for len(conns) < maxPerPod {
			conns = append(conns, newConn(t, s.ProxylessAddress()))
		}
		for _, c := range conns[2:] {
			c.Connect()
		}
		testenv.Eventually(t, "the pod's connections all open", func() error {
			if n := s.proxylessConns(testPodUID); n != maxPerPod {
				return fmt.Errorf("%d open", n)
			}
			return nil
		})
		extra := newConn(t, s.ProxylessAddress())
		reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = discoveryv3.NewAggregatedDiscoveryServiceClient(extra).StreamAggregatedResources(reqCtx, grpc.WaitForReady(false))
		if status.Code(err) != codes.Unavailable {
			t.Errorf("connection %d of the pod: %v, want it closed at its handshake (Unavailable)", maxPerPod+1, err)
		}
		if got := s.proxylessConns(testPodUID); got != maxPerPod {
			t.Errorf("%d connections of the pod open, want %d", got, maxPerPod)
		}
	})
}

// newConn is a gRPC connection to address, until the test ends.
func newConn(t *testing.T, address string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(xdstest.Target(address), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
