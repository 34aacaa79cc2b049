// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/testrun"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// testPodUID is the pod the test process runs in, as startProxylessServer's server reads it (its
// node ID is testPodID): the tests here dial from the test process itself. How a real process's
// pod is read (peer credentials, /proc/<pid>/cgroup) is TestProxylessCallerFromItsCgroup's.
const (
	testPodUID = "0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
	testPodID  = "shop/client-0"
)

// testPods are the pods of the test's node: the test process's, and another one. The tests dial
// both sockets from the test process: on the proxyless one it is a proxyless client of its pod, on
// the node's it stands for the node's Envoy, whose pods testNodeEnvoy selects by a label its pod
// carries. (How the node's socket tells a tenant from the node's Envoy, with real processes in
// real cgroups, is TestNodeSocketServesOnlyTheNodeEnvoy's.)
var testPods = map[string]Pod{
	testPodUID:                             {Namespace: "shop", Name: "client-0", Labels: map[string]string{testEnvoyLabel: "true"}},
	"1e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b": {Namespace: "shop", Name: "client-1"},
}

// testEnvoyLabel is the label testNodeEnvoy selects.
const testEnvoyLabel = "test.aether.io/node-envoy"

// testNodeEnvoy admits testPods' pod of the test process on the node's socket.
var testNodeEnvoy = NodeEnvoy{Namespace: "shop", Pods: labels.SelectorFromSet(labels.Set{testEnvoyLabel: "true"})}

// thisProcessIs reads the test process as a process of pod uid, and any other process from /proc.
func thisProcessIs(uid string) PodOfProcess {
	self := int32(os.Getpid())
	return func(pid int32) (string, error) {
		if pid == self {
			return uid, nil
		}
		return ProcPods("/proc")(pid)
	}
}

// podsOf reads the pods of a UID → pod map, as the agent reads its node's pods.
func podsOf(pods map[string]Pod) NodePods {
	return func(_ context.Context, uid string) (Pod, bool, error) {
		pod, ok := pods[uid]
		return pod, ok, nil
	}
}

// podsByID are the pods of a UID → node ID map, without labels.
func podsByID(ids map[string]string) map[string]Pod {
	pods := make(map[string]Pod, len(ids))
	for uid, id := range ids {
		namespace, name, _ := proxyless.ParseNodeID(id)
		pods[uid] = Pod{Namespace: namespace, Name: name}
	}
	return pods
}

// startProxylessServer serves xDS on two unix sockets in a temporary directory, the node's Envoy's
// and the proxyless one, until the test ends; changes receives a value on every OnProxylessChange.
// The test process is a process of pod testPodID (testPods are the node's).
func startProxylessServer(t *testing.T) (s *Server, logs *logLines, changes chan struct{}) {
	t.Helper()
	return startProxylessServerFor(t, thisProcessIs(testPodUID), testPods)
}

// startProxylessServerFor is startProxylessServer, podOf reading a caller's pod, pods the node's.
func startProxylessServerFor(t *testing.T, podOf PodOfProcess, pods map[string]Pod) (s *Server, logs *logLines, changes chan struct{}) {
	t.Helper()
	logs = &logLines{}
	changes = make(chan struct{}, 16)
	s = startOnBothSockets(t, Options{PodOfProcess: podOf, NodeEnvoy: testNodeEnvoy, Log: funcr.New(logs.write, funcr.Options{Verbosity: 1})}, pods,
		func(s *Server) { s.OnProxylessChange(func() { changes <- struct{}{} }) })
	return s, logs, changes
}

// startOnBothSockets starts a server of opts on two unix sockets of a temporary directory, the
// node's Envoy's and the pods' proxyless one, the node's pods being pods; before runs first (to
// subscribe before anything is served). It is stopped when t ends.
func startOnBothSockets(t *testing.T, opts Options, pods map[string]Pod, before func(*Server)) *Server {
	t.Helper()
	dir := t.TempDir()
	listen := func(name string) net.Listener {
		addr, err := ParseAddress("unix://" + filepath.Join(dir, name, "xds.sock"))
		if err != nil {
			t.Fatal(err)
		}
		l, err := Listen(addr)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	opts.Listener, opts.ProxylessListener = listen("envoy"), listen("proxyless")
	s := New(opts)
	s.ResolvePodsWith(podsOf(pods))
	if before != nil {
		before(s)
	}
	testrun.UntilCleanup(t, "the server", s.Start)
	return s
}

// proxylessNode is a node announcing itself proxyless (and SNI when sni).
func proxylessNode(id string, sni bool) *corev3.Node {
	fields := map[string]*structpb.Value{proxyless.MetadataProxyless: structpb.NewStringValue(proxyless.MetadataTrue)}
	if sni {
		fields[proxyless.MetadataSNI] = structpb.NewStringValue(proxyless.MetadataTrue)
	}
	return &corev3.Node{Id: id, Metadata: &structpb.Struct{Fields: fields}}
}

func dialNode(t *testing.T, address string, node *corev3.Node) *xdstest.Client {
	t.Helper()
	c, err := xdstest.DialNode(testContext(t), address, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestProxylessSocket: the proxyless socket refuses a stream that is not a proxyless client's (no
// announcement, or a node ID that is no pod's, such as the node's Envoy's); a proxyless client is
// registered while its stream is open (the agent is told, the gauge counts it), is served what is
// published for it, and when it goes its snapshot goes with it: publishing for it then publishes
// nothing. The node's Envoy's socket registers no proxyless client.
func TestProxylessSocket(t *testing.T) {
	s, _, changes := startProxylessServer(t)
	for name, node := range map[string]*corev3.Node{
		"no announcement":       {Id: proxyless.NodeID("shop", "client-0")},
		"the node's Envoy's ID": proxylessNode("node-a", false),
		"an announcement of another value": {Id: "shop/client-0", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			proxyless.MetadataProxyless: structpb.NewStringValue("yes")}}},
	} {
		t.Run(name, func(t *testing.T) {
			c := dialNode(t, s.ProxylessAddress(), node)
			err := c.Await(testContext(t), func(xdstest.State) error { return fmt.Errorf("served") })
			if err == nil || !strings.Contains(err.Error(), "serves proxyless gRPC clients only") {
				t.Errorf("the stream: %v, want it refused", err)
			}
		})
	}
	if n := s.ProxylessNodes(); len(n) != 0 {
		t.Fatalf("refused streams registered %v", n)
	}

	id := testPodID
	c := dialNode(t, s.ProxylessAddress(), proxylessNode(id, true))
	<-changes
	if n := s.ProxylessNodes(); !slices.Equal(n, []ProxylessNode{{ID: id, SNI: true}}) {
		t.Errorf("ProxylessNodes() = %v", n)
	}
	if g := testutil.ToFloat64(proxylessClients); g != 1 {
		t.Errorf("aether_agent_xds_proxyless_clients = %v, want 1", g)
	}
	published, err := s.PublishProxyless(id, baseFixture().resources(t))
	if err != nil || !published {
		t.Fatalf("PublishProxyless: %v, %v", published, err)
	}
	accepted(t, c, s.Versions(id), xdstest.Listeners, xdstest.Clusters, xdstest.Endpoints, xdstest.Routes)

	c.Close()
	<-changes
	if n := s.ProxylessNodes(); len(n) != 0 {
		t.Errorf("after its stream closed: %v", n)
	}
	if v := s.Versions(id); v != nil {
		t.Errorf("its snapshot outlived it: %v", v)
	}
	if published, err := s.PublishProxyless(id, baseFixture().resources(t)); published || err != nil {
		t.Errorf("PublishProxyless for a client that went: %v, %v; want nothing published", published, err)
	}

	// The node's Envoy's socket serves what is published for a node ID, and registers nobody.
	envoy := dialNode(t, s.Address(), proxylessNode("shop/client-1", true))
	accepted(t, envoy, publish(t, s, "shop/client-1", baseFixture()), xdstest.Listeners)
	if n := s.ProxylessNodes(); len(n) != 0 {
		t.Errorf("the Envoy socket registered %v", n)
	}
}

// TestProxylessSubsetAnswered: a proxyless client asks for the listeners of the targets it dials,
// a few of the snapshot's, on one stream, and perhaps one that names nothing (a typo, a port not
// served to it). The proxyless cache answers with those of them that exist. The negative control:
// the node's Envoy's cache (ADS mode) answers a request only when it names every resource of the
// snapshot, and holds this one back, saying so.
func TestProxylessSubsetAnswered(t *testing.T) {
	s, logs, changes := startProxylessServer(t)
	res := baseFixture().resources(t)
	other := proto.Clone(res.Listeners[0]).(*listenerv3.Listener)
	other.Name = "payments.shop.aether.internal:9090"
	res.Listeners = append(res.Listeners, other)
	request := &discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Listeners, ResourceNames: []string{listenerN, "payments.shop:9999"}}

	id := testPodID
	stream := rawStream(t, s.ProxylessAddress())
	request.Node = proxylessNode(id, false)
	if err := stream.Send(request); err != nil {
		t.Fatal(err)
	}
	<-changes
	if published, err := s.PublishProxyless(id, res); err != nil || !published {
		t.Fatalf("PublishProxyless: %v, %v", published, err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetResources()) != 1 {
		t.Errorf("the answer holds %d listeners, want %s alone", len(resp.GetResources()), listenerN)
	}

	envoy := rawStream(t, s.Address())
	request.Node = &corev3.Node{Id: "node-a"}
	if err := envoy.Send(request); err != nil {
		t.Fatal(err)
	}
	if published, err := s.Publish("node-a", res); err != nil || !published {
		t.Fatalf("Publish: %v, %v", published, err)
	}
	testenv.Eventually(t, "the ADS cache holding the answer back", func() error {
		if l := logs.with("ADS mode: not responding to request", other.Name); len(l) == 0 {
			return fmt.Errorf("no such log line in %q", logs.with("go-control-plane"))
		}
		return nil
	})
}

// rawStream is an ADS stream to address, until the test ends.
func rawStream(t *testing.T, address string) grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse] {
	t.Helper()
	stream, err := adsClient(t, address).StreamAggregatedResources(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return stream
}
