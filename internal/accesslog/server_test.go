// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package accesslog_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"

	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/accesslog/accesslogtest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/testlog"
	"github.com/aether-mesh/aether-operator/internal/testrun"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xdsserver"
)

// The mesh of every test: mixed-http-primary, whose node is node-a. payments (shop) serves HTTP
// 8080, h2 9090 and TCP 9000 (its default TCP port), with pod payments-0 on this node; frontend
// (web) serves HTTP 8080, with pod frontend-0 on this node, and calls payments.
const (
	node     = xdstest.ThisNode
	domain   = "aether.internal"
	frontend = "spiffe://aether.internal/ns/web/sa/frontend"
	batch    = "spiffe://aether.internal/ns/ops/sa/batch"
	payments = "shop/payments"
)

// serving is an agent's xDS server with the access-log server on it, on a unix socket, as the
// agent runs them: counters on a registry of the test's own, lines to lines.
type serving struct {
	server  *accesslog.Server
	reg     *prometheus.Registry
	lines   *testlog.Lines
	conn    *grpc.ClientConn
	mesh    model.Mesh
	built   xds.Resources
	address string
}

func serve(t *testing.T) *serving {
	t.Helper()
	reg, lines := prometheus.NewRegistry(), &testlog.Lines{}
	server := accesslog.New(accesslog.Options{NodeID: node, Log: lines.Logger(0), Lines: true, Registerer: reg})
	mesh := xdstest.MixedHTTPPrimary()
	server.SetMesh(mesh)
	built, err := xds.Build(mesh)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := xdsserver.ParseAddress("unix://" + filepath.Join(t.TempDir(), "xds.sock"))
	if err != nil {
		t.Fatal(err)
	}
	listener, err := xdsserver.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	// The test process streams as the node's Envoy: a process of the node, in no pod.
	xdsServer := xdsserver.New(xdsserver.Options{Listener: listener, NodeEnvoy: xdsserver.NodeEnvoy{Host: true}, Log: lines.Logger(0).WithName("xds"), AccessLog: server})
	testrun.UntilCleanup(t, "the xDS server", xdsServer.Start)
	conn, err := accesslogtest.Dial(xdsServer.Address())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &serving{server: server, reg: reg, lines: lines, conn: conn, mesh: mesh, built: built, address: xdsServer.Address()}
}

// cluster is name, checked to be a cluster of the node's build: what Envoy reports as the
// entry's upstream cluster.
func (s *serving) cluster(t *testing.T, name string) string {
	t.Helper()
	if !slices.ContainsFunc(s.built.Clusters, func(c *clusterv3.Cluster) bool { return c.GetName() == name }) {
		t.Fatalf("the node's build has no cluster %q", name)
	}
	return name
}

func (s *serving) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, err := accesslogtest.Value(s.reg, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// valueReaching reads the metric until it is at least want (or 10 s pass) and returns what it
// read last, so a caller that asserts equality still sees an overshoot.
func (s *serving) valueReaching(t *testing.T, name string, labels map[string]string, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := s.value(t, name, labels)
		if got >= want || time.Now().After(deadline) {
			return got
		}
		runtime.Gosched()
	}
}

func (s *serving) stream(t *testing.T, msgs ...*accesslogv3.StreamAccessLogsMessage) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return accesslogtest.Stream(ctx, s.conn, msgs...)
}

// TestCountsEntriesAsEnvoySendsThem: an HTTP and a TCP stream, each entry as Envoy 1.40 sends it
// for the rendered configuration, are counted per direction, service, port and caller, with the
// response's class, the destination's retry row, bytes and duration; the caller is the verified
// peer's URI SAN inbound and the cluster's source identity outbound; what names no service port
// of the view counts as unknown; and each entry is one line of the log.
func TestCountsEntriesAsEnvoySendsThem(t *testing.T) {
	s := serve(t)
	inbound8080 := s.cluster(t, xds.AppCluster(xds.PodKey("shop", "payments-0"), 8080))
	outbound8080 := s.cluster(t, xds.SourceCluster(xds.HTTPCluster(xds.FQDN("payments", "shop", domain), 8080), frontend))
	inbound9000 := s.cluster(t, xds.AppCluster(xds.PodKey("shop", "payments-0"), 9000))
	outboundTCP := s.cluster(t, xds.SourceCluster(xds.TCPDefaultCluster(xds.FQDN("payments", "shop", domain)), frontend))
	passthrough := s.cluster(t, xds.PassthroughCluster)
	fromFrontend := []string{frontend}
	uf := &accesslogdatav3.ResponseFlags{UpstreamConnectionFailure: true}

	periodic := accesslogtest.HTTP(accesslogtest.Hop{Cluster: inbound8080, PeerURIs: fromFrontend, Downstream: "10.244.1.20", Received: 7, Sent: 7},
		"payments.shop.aether.internal:8080", "/stream", 200, "app-200", nil)
	periodic.CommonProperties.AccessLogType = accesslogdatav3.AccessLogType_DownstreamPeriodic // counted at its end only
	err := s.stream(t,
		accesslogtest.HTTPLogs(accesslogtest.Identifier(node), periodic,
			accesslogtest.HTTP(accesslogtest.Hop{Cluster: inbound8080, PeerURIs: fromFrontend, Downstream: "10.244.1.20", Upstream: "10.244.1.10", Received: 200, Sent: 100, Duration: 20 * time.Millisecond},
				"payments.shop.aether.internal:8080", "/pay", 200, "app-200", nil),
			accesslogtest.HTTP(accesslogtest.Hop{Cluster: inbound8080, PeerURIs: fromFrontend, Downstream: "10.244.1.20", Received: 200, Sent: 50, Duration: time.Second},
				"payments.shop.aether.internal:8080", "/pay", 503, xds.OutcomeUnreachable, uf),
			// A peer of another trust domain (Envoy would not have served it; the label never names it).
			accesslogtest.HTTP(accesslogtest.Hop{Cluster: inbound8080, PeerURIs: []string{"spiffe://elsewhere.example/ns/web/sa/frontend"}, Downstream: "10.244.1.20", Received: 10, Sent: 10},
				"payments.shop.aether.internal:8080", "/pay", 200, "app-200", nil),
		),
		accesslogtest.HTTPLogs(nil,
			accesslogtest.HTTP(accesslogtest.Hop{Cluster: outbound8080, Downstream: "10.244.1.20", Upstream: "10.244.1.10", Received: 300, Sent: 120, Duration: 30 * time.Millisecond},
				"payments.shop.aether.internal:8080", "/pay", 200, "", nil),
			// The 421 of a port payments does not declare: a reply of the proxy, no cluster.
			accesslogtest.HTTP(accesslogtest.Hop{Downstream: "10.244.1.20", Received: 80, Sent: 200},
				"payments.shop.aether.internal:7000", "/", 421, "", nil),
			// A cluster of a service the view does not hold.
			accesslogtest.HTTP(accesslogtest.Hop{Cluster: xds.SourceCluster(xds.HTTPCluster(xds.FQDN("ghost", "shop", domain), 8080), frontend), Downstream: "10.244.1.20", Received: 1, Sent: 1},
				"ghost.shop.aether.internal:8080", "/", 503, "", uf),
		),
	)
	if err != nil {
		t.Fatalf("the HTTP stream: %v", err)
	}
	err = s.stream(t, accesslogtest.TCPLogs(accesslogtest.Identifier(node),
		accesslogtest.TCP(accesslogtest.Hop{Cluster: inbound9000, PeerURIs: fromFrontend, Downstream: "10.244.1.20", Upstream: "10.244.1.10", Received: 4000, Sent: 9000, Duration: time.Minute}),
		accesslogtest.TCP(accesslogtest.Hop{Cluster: outboundTCP, Downstream: "10.244.1.20", Upstream: "10.244.1.10", Received: 700, Sent: 800}),
		accesslogtest.TCP(accesslogtest.Hop{Cluster: passthrough, Downstream: "10.244.1.20", Upstream: "192.0.2.7", Received: 5, Sent: 6}),
	))
	if err != nil {
		t.Fatalf("the TCP stream: %v", err)
	}

	type L = map[string]string
	for _, c := range []struct {
		name   string
		labels L
		want   float64
	}{
		{"aether_agent_requests_total", L{"direction": "inbound", "service": payments, "port": "8080", "caller": frontend, "code_class": "2xx"}, 1},
		{"aether_agent_requests_total", L{"direction": "inbound", "service": payments, "port": "8080", "caller": frontend, "code_class": "5xx"}, 1},
		{"aether_agent_requests_total", L{"direction": "inbound", "service": payments, "port": "8080", "caller": "unknown", "code_class": "2xx"}, 1},
		{"aether_agent_requests_total", L{"direction": "outbound", "service": payments, "port": "8080", "caller": frontend, "code_class": "2xx"}, 1},
		{"aether_agent_requests_total", L{"direction": "outbound", "service": "unknown", "port": "unknown", "caller": "unknown", "code_class": "4xx"}, 1},
		{"aether_agent_requests_total", L{"direction": "outbound", "service": "unknown", "port": "unknown", "caller": frontend, "code_class": "5xx"}, 1},
		{"aether_agent_requests_total", L{}, 6},
		{"aether_agent_request_outcomes_total", L{"service": payments, "port": "8080", "outcome": "app"}, 2},
		{"aether_agent_request_outcomes_total", L{"service": payments, "port": "8080", "outcome": xds.OutcomeUnreachable}, 1},
		{"aether_agent_request_duration_seconds", L{"direction": "inbound", "service": payments, "port": "8080"}, 3},
		{"aether_agent_received_bytes_total", L{"direction": "inbound", "service": payments, "port": "8080"}, 410},
		{"aether_agent_sent_bytes_total", L{"direction": "outbound", "service": payments, "port": "8080"}, 120},
		{"aether_agent_tcp_connections_total", L{"direction": "inbound", "service": payments, "port": "9000", "caller": frontend}, 1},
		{"aether_agent_tcp_connections_total", L{"direction": "outbound", "service": payments, "port": "9000", "caller": frontend}, 1},
		{"aether_agent_tcp_connections_total", L{"direction": "outbound", "service": "unknown", "port": "unknown", "caller": "unknown"}, 1},
		{"aether_agent_received_bytes_total", L{"direction": "inbound", "service": payments, "port": "9000"}, 4000},
		{"aether_agent_sent_bytes_total", L{"direction": "inbound", "service": payments, "port": "9000"}, 9000},
		{"aether_agent_sent_bytes_total", L{"direction": "outbound", "service": payments, "port": "9000"}, 800},
		{"aether_agent_access_log_rejected_total", L{}, 0},
	} {
		if got := s.value(t, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The duration histogram puts the one-second request above the 20 ms one.
	families, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "aether_agent_request_duration_seconds" {
			for _, m := range f.GetMetric() {
				if h := m.GetHistogram(); h.GetSampleCount() == 3 && (h.GetSampleSum() < 1.02 || h.GetSampleSum() > 1.021) {
					t.Errorf("the inbound durations sum to %v s, want 1.02", h.GetSampleSum())
				}
			}
		}
	}
	// Every reason is exported before the first refusal.
	n, err := accesslogtest.Series(s.reg, "aether_agent_access_log_rejected_total", nil)
	if err != nil || n != 5 {
		t.Errorf("%d series of aether_agent_access_log_rejected_total (%v), want one per reason, 5", n, err)
	}
	// One line per entry, saying what was counted.
	for _, want := range [][]string{
		{`"HTTP request"`, `"direction"="inbound"`, `"service"="shop/payments"`, `"port"="8080"`, `"caller"="` + frontend + `"`, `"code"=503`, `"outcome"="unreachable"`, `"upstream_connection_failure"`},
		{`"HTTP request"`, `"direction"="outbound"`, `"service"="unknown"`, `"code"=421`, `"authority"="payments.shop.aether.internal:7000"`},
		{`"TCP connection"`, `"direction"="inbound"`, `"service"="shop/payments"`, `"port"="9000"`, `"receivedBytes"=4000`, `"sentBytes"=9000`},
	} {
		if got := s.lines.With(want...); len(got) != 1 {
			t.Errorf("%d log lines with %q, want 1; the log:\n%s", len(got), want, strings.Join(s.lines.With(), "\n"))
		}
	}
	if n := len(s.lines.With(`"HTTP request"`)) + len(s.lines.With(`"TCP connection"`)); n != 9 {
		t.Errorf("%d entry lines, want 9 (one per entry)", n)
	}
}

// rawCodec sends bytes as they are, under the proto codec's name: a message that does not
// decode, as a broken client would send it.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *v.(*[]byte) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

var _ encoding.Codec = rawCodec{}

// sendRaw opens a stream and sends b as its one message: the server's answer.
func (s *serving) sendRaw(t *testing.T, b []byte) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := s.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true},
		"/envoy.service.accesslog.v3.AccessLogService/StreamAccessLogs", grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	_ = stream.SendMsg(&b)
	if err := stream.CloseSend(); err != nil {
		return err
	}
	var reply []byte
	return stream.RecvMsg(&reply)
}

// TestRefusesWhatEnvoyNeverSends: a stream that names no node or another node, a message over
// the size bound, with too many entries, without entries, or that does not decode, is refused
// with a status that says why, and counted by reason; a stream open across them, and a stream
// after them, are still served and counted.
func TestRefusesWhatEnvoyNeverSends(t *testing.T) {
	s := serve(t)
	inbound := s.cluster(t, xds.AppCluster(xds.PodKey("shop", "payments-0"), 8080))
	entry := func() *accesslogdatav3.HTTPAccessLogEntry {
		return accesslogtest.HTTP(accesslogtest.Hop{Cluster: inbound, PeerURIs: []string{frontend}, Downstream: "10.244.1.20", Received: 1, Sent: 1},
			"payments.shop.aether.internal:8080", "/", 200, "app-200", nil)
	}
	counted := func() float64 {
		return s.value(t, "aether_agent_requests_total", map[string]string{"direction": "inbound", "service": payments, "port": "8080", "caller": frontend})
	}

	// A stream open across the refusals, as one of Envoy's workers holds one.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open, err := accesslogv3.NewAccessLogServiceClient(s.conn).StreamAccessLogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Send(accesslogtest.HTTPLogs(accesslogtest.Identifier(node), entry())); err != nil {
		t.Fatal(err)
	}
	// The server counts it on its own goroutine: wait until it has, so that no case below sees it
	// land in the middle of its own before and after.
	for deadline := time.Now().Add(10 * time.Second); counted() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("the open stream's first entry was not counted: %v", counted())
		}
		runtime.Gosched()
	}

	many := make([]*accesslogdatav3.HTTPAccessLogEntry, accesslog.MaxEntries+1)
	for i := range many {
		many[i] = entry()
	}
	huge := entry()
	huge.Request.Path = "/" + strings.Repeat("x", accesslog.MaxMessageBytes)
	for _, tc := range []struct {
		name   string
		send   func() error
		code   codes.Code
		reason string
		says   string
	}{
		{"no identifier", func() error { return s.stream(t, accesslogtest.HTTPLogs(nil, entry())) },
			codes.InvalidArgument, accesslog.RejectedNoIdentifier, "first message has no identifier.node.id"},
		{"an identifier without a node", func() error {
			id := accesslogtest.Identifier(node)
			id.Node = nil
			return s.stream(t, accesslogtest.HTTPLogs(id, entry()))
		}, codes.InvalidArgument, accesslog.RejectedNoIdentifier, "first message has no identifier.node.id"},
		{"another node", func() error { return s.stream(t, accesslogtest.HTTPLogs(accesslogtest.Identifier("node-b"), entry())) },
			codes.PermissionDenied, accesslog.RejectedWrongNode, `identifier.node.id "node-b" is not the node this agent serves ("node-a")`},
		{"another node later on", func() error {
			return s.stream(t, accesslogtest.HTTPLogs(accesslogtest.Identifier(node), entry()), accesslogtest.HTTPLogs(accesslogtest.Identifier("node-b"), entry()))
		}, codes.PermissionDenied, accesslog.RejectedWrongNode, `"node-b"`},
		{"too many entries", func() error { return s.stream(t, accesslogtest.HTTPLogs(accesslogtest.Identifier(node), many...)) },
			codes.ResourceExhausted, accesslog.RejectedTooManyEntries, fmt.Sprintf("a message of %d entries; the agent takes at most %d", accesslog.MaxEntries+1, accesslog.MaxEntries)},
		{"an oversized message", func() error { return s.stream(t, accesslogtest.HTTPLogs(accesslogtest.Identifier(node), huge)) },
			codes.ResourceExhausted, accesslog.RejectedOversized, fmt.Sprintf("the agent takes at most %d", accesslog.MaxMessageBytes)},
		{"a message over gRPC's own limit", func() error {
			huge := entry()
			huge.Request.Path = "/" + strings.Repeat("x", 5<<20)
			return s.stream(t, accesslogtest.HTTPLogs(accesslogtest.Identifier(node), huge))
		}, codes.ResourceExhausted, accesslog.RejectedOversized, "received message larger than max"}, // gRPC's own answer
		{"no entries", func() error {
			return s.stream(t, &accesslogv3.StreamAccessLogsMessage{Identifier: accesslogtest.Identifier(node)})
		}, codes.InvalidArgument, accesslog.RejectedMalformed, "neither http_logs nor tcp_logs"},
		{"bytes that do not decode", func() error { return s.sendRaw(t, []byte{0xff, 0xff, 0xff, 0xff}) },
			codes.Internal, accesslog.RejectedMalformed, "failed to unmarshal"}, // gRPC's own answer
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.value(t, "aether_agent_access_log_rejected_total", map[string]string{"reason": tc.reason})
			beforeCounted := counted()
			err := tc.send()
			if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.says) {
				t.Errorf("refused with %v, want %v saying %q", err, tc.code, tc.says)
			}
			// gRPC answers a message that does not decode itself, so the client can hear the
			// refusal before the handler has counted it: wait for the count to move.
			if got := s.valueReaching(t, "aether_agent_access_log_rejected_total", map[string]string{"reason": tc.reason}, before+1); got != before+1 {
				t.Errorf("aether_agent_access_log_rejected_total{reason=%q} = %v, want %v", tc.reason, got, before+1)
			}
			if got := counted(); got != beforeCounted && tc.reason != accesslog.RejectedWrongNode {
				t.Errorf("a refused stream's entries were counted: %v, was %v", got, beforeCounted)
			}
			// The next stream is served.
			if err := s.stream(t, accesslogtest.HTTPLogs(accesslogtest.Identifier(node), entry())); err != nil {
				t.Fatalf("a good stream after the refusal: %v", err)
			}
			if got, want := counted(), beforeCounted+1+boolf(tc.name == "another node later on"); got != want {
				t.Errorf("after the refusal a good stream's entry counted to %v, want %v", got, want)
			}
		})
	}
	before := counted()
	if err := open.Send(accesslogtest.HTTPLogs(nil, entry(), entry())); err != nil {
		t.Fatalf("the stream open across the refusals: %v", err)
	}
	if _, err := open.CloseAndRecv(); err != nil {
		t.Fatalf("the stream open across the refusals: %v", err)
	}
	if got := counted(); got != before+2 {
		t.Errorf("the stream open across the refusals counted %v more entries, want 2", got-before)
	}
	// The handler logs a refusal after it counts it, and the client may have the status first
	// (gRPC answers a message that does not decode itself): wait for the ninth line.
	var lines []string
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		if lines = s.lines.With(`"Refused an access-log stream"`); len(lines) >= 9 || time.Now().After(deadline) {
			break
		}
	}
	if len(lines) != 9 {
		t.Errorf("%d lines say a stream was refused, want 9 (one per refusal):\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestCallersAreBounded: a family names at most MaxCallers callers, each keeping its label
// value; the callers after count as other, and a mesh that no longer holds a service drops its
// series.
func TestCallersAreBounded(t *testing.T) {
	s := serve(t)
	inbound := s.cluster(t, xds.AppCluster(xds.PodKey("shop", "payments-0"), 9000))
	var entries []*accesslogdatav3.TCPAccessLogEntry
	for i := range accesslog.MaxCallers + 5 {
		caller := fmt.Sprintf("spiffe://aether.internal/ns/callers/sa/caller-%03d", i)
		entries = append(entries, accesslogtest.TCP(accesslogtest.Hop{Cluster: inbound, PeerURIs: []string{caller}, Downstream: "10.244.1.20", Received: 1, Sent: 1}))
	}
	// The first caller again, after the cap is full: still itself.
	entries = append(entries, entries[0])
	if err := s.stream(t, accesslogtest.TCPLogs(accesslogtest.Identifier(node), entries...)); err != nil {
		t.Fatal(err)
	}
	n, err := accesslogtest.Series(s.reg, "aether_agent_tcp_connections_total", map[string]string{"service": payments})
	if err != nil {
		t.Fatal(err)
	}
	if n != accesslog.MaxCallers+1 {
		t.Errorf("%d series, want %d callers and other", n, accesslog.MaxCallers+1)
	}
	if got := s.value(t, "aether_agent_tcp_connections_total", map[string]string{"caller": accesslog.Other}); got != 5 {
		t.Errorf("other counts %v connections, want 5", got)
	}
	if got := s.value(t, "aether_agent_tcp_connections_total", map[string]string{"caller": "spiffe://aether.internal/ns/callers/sa/caller-000"}); got != 2 {
		t.Errorf("the first caller counts %v connections, want 2", got)
	}

	without := s.mesh
	without.Services = slices.DeleteFunc(slices.Clone(without.Services), func(svc model.Service) bool { return svc.Name == "payments" })
	without.Pods = slices.DeleteFunc(slices.Clone(without.Pods), func(p model.LocalPod) bool { return p.Service == "payments" })
	s.server.SetMesh(without)
	if n, err := accesslogtest.Series(s.reg, "aether_agent_tcp_connections_total", map[string]string{"service": payments}); err != nil || n != 0 {
		t.Errorf("%d series of a service the mesh no longer holds (%v), want 0", n, err)
	}
	if err := s.stream(t, accesslogtest.TCPLogs(accesslogtest.Identifier(node), entries[0])); err != nil {
		t.Fatal(err)
	}
	if got := s.value(t, "aether_agent_tcp_connections_total", map[string]string{"service": accesslog.Unknown, "port": accesslog.Unknown}); got != 1 {
		t.Errorf("an entry of a pod the mesh no longer holds counts %v under unknown, want 1", got)
	}
}

// TestCountsDenials: an inbound request the RBAC filter answered (its response code details
// rbac_access_denied_matched_policy[none], no upstream cluster: the pod is the listener's
// address, the port the SNI), an inbound connection it closed (the same termination details)
// and one the handshake refused (xds.PeerRefusedDetail) count as denied, by service, port, caller and protocol; a 403 of the
// application itself, and a connection closed otherwise, do not.
func TestCountsDenials(t *testing.T) {
	s := serve(t)
	inbound8080 := s.cluster(t, xds.AppCluster(xds.PodKey("shop", "payments-0"), 8080))
	inbound9000 := s.cluster(t, xds.AppCluster(xds.PodKey("shop", "payments-0"), 9000))
	fromFrontend := []string{frontend}
	const details = "rbac_access_denied_matched_policy[none]"
	// Answered before routing, Envoy names no cluster: the listener's address and the SNI say
	// which pod and port.
	denied := accesslogtest.HTTP(accesslogtest.Hop{PeerURIs: fromFrontend, Downstream: "10.244.1.20", Received: 10, Sent: 10},
		"payments.shop.aether.internal:8080", "/admin", 403, xds.OutcomeProxy, nil)
	denied.Response.ResponseCodeDetails = details
	appOwn := accesslogtest.HTTP(accesslogtest.Hop{Cluster: inbound8080, PeerURIs: fromFrontend, Downstream: "10.244.1.20", Received: 10, Sent: 10},
		"payments.shop.aether.internal:8080", "/admin", 403, "app-403", nil)
	appOwn.Response.ResponseCodeDetails = "via_upstream"
	if err := s.stream(t, accesslogtest.HTTPLogs(accesslogtest.Identifier(node), denied, appOwn)); err != nil {
		t.Fatalf("the HTTP stream: %v", err)
	}
	closed := accesslogtest.TCP(accesslogtest.Hop{Cluster: inbound9000, PeerURIs: fromFrontend, Downstream: "10.244.1.20", Received: 18})
	closed.CommonProperties.ConnectionTerminationDetails = details
	served := accesslogtest.TCP(accesslogtest.Hop{Cluster: inbound9000, PeerURIs: fromFrontend, Downstream: "10.244.1.20", Received: 18, Sent: 18})
	// A governed TCP port refuses the caller in its handshake: Envoy names no cluster and says
	// why in the transport failure reason, with the refused certificate's SANs.
	refused := accesslogtest.TCP(accesslogtest.Hop{PeerURIs: []string{batch}, Downstream: "10.244.1.21"})
	refused.CommonProperties.TlsProperties.TlsSniHostname = "9000"
	refused.CommonProperties.DownstreamTransportFailureReason = "TLS_error:|268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:" +
		xds.PeerRefusedDetail + ", certificate SANs are [" + batch + "]:TLS_error_end"
	if err := s.stream(t, accesslogtest.TCPLogs(accesslogtest.Identifier(node), closed, served, refused)); err != nil {
		t.Fatalf("the TCP stream: %v", err)
	}
	type L = map[string]string
	for _, c := range []struct {
		labels L
		want   float64
	}{
		{L{"service": payments, "port": "8080", "caller": frontend, "protocol": "http"}, 1},
		{L{"service": payments, "port": "9000", "caller": frontend, "protocol": "tcp"}, 1},
		{L{"service": payments, "port": "9000", "caller": batch, "protocol": "tcp"}, 1},
		{L{}, 3},
	} {
		if got := s.value(t, "aether_agent_access_denied_total", c.labels); got != c.want {
			t.Errorf("aether_agent_access_denied_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
}
