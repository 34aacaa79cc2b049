// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/accesslog/accesslogtest"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// TestAccessLogCountedByTheAgent: the agent serves the access log on its xDS socket, where its
// node's Envoy connects; once a meshed pod of its node is in the configuration it serves, an
// entry of that pod's inbound HTTP port and one of its TCP port (the app clusters of the
// configuration the agent served), and one of the pod dialling its own service (a cluster the
// agent served, qualified by the pod's identity), are counted on the agent's registry under the
// pod's service, port and caller, and written to its log; a stream naming another node is
// refused and counted.
func TestAccessLogCountedByTheAgent(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a := startXDSAgent(t, ns)
	createPod(t, ctx, ns, "a", a.node, newPodIP(), true, map[string]string{
		portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9000=tcp"})
	service := ns + "/payments"
	identity := "spiffe://aether.internal/ns/" + ns + "/sa/payments"
	inboundHTTP := xds.AppCluster(xds.PodKey(ns, "a"), 8080)
	inboundTCP := xds.AppCluster(xds.PodKey(ns, "a"), 9000)
	outbound := xds.SourceCluster(xds.HTTPCluster(xds.FQDN("payments", ns, "aether.internal"), 8080), identity)
	c := a.dial(t, ctx)
	if err := c.Await(ctx, func(s xdstest.State) error {
		for _, name := range []string{inboundHTTP, inboundTCP, outbound} {
			if s.Resources[xdstest.Clusters][name] == nil {
				return fmt.Errorf("no cluster %s served yet", name)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("the agent served no configuration with pod a: %v", err)
	}

	caller := "spiffe://aether.internal/ns/" + ns + "/sa/frontend"
	conn, err := accesslogtest.Dial(a.address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	labels := func(direction, port, caller string) map[string]string {
		return map[string]string{"direction": direction, "service": service, "port": port, "caller": caller}
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, err := accesslogtest.Value(ctrlmetrics.Registry, name, labels)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	refusedBefore := value("aether_agent_access_log_rejected_total", map[string]string{"reason": accesslog.RejectedWrongNode})

	if err := accesslogtest.Stream(ctx, conn, accesslogtest.HTTPLogs(accesslogtest.Identifier(a.node),
		accesslogtest.HTTP(accesslogtest.Hop{Cluster: inboundHTTP, PeerURIs: []string{caller}, Downstream: "10.244.9.9", Received: 100, Sent: 200, Duration: 5 * time.Millisecond},
			"payments."+ns+".aether.internal:8080", "/", 200, "app-200", nil),
		accesslogtest.HTTP(accesslogtest.Hop{Cluster: outbound, Downstream: "10.244.9.10", Received: 10, Sent: 20},
			"payments."+ns+".aether.internal:8080", "/", 503, "", nil),
	)); err != nil {
		t.Fatalf("the HTTP stream: %v", err)
	}
	if err := accesslogtest.Stream(ctx, conn, accesslogtest.TCPLogs(accesslogtest.Identifier(a.node),
		accesslogtest.TCP(accesslogtest.Hop{Cluster: inboundTCP, PeerURIs: []string{caller}, Downstream: "10.244.9.9", Received: 1000, Sent: 3000}),
	)); err != nil {
		t.Fatalf("the TCP stream: %v", err)
	}
	err = accesslogtest.Stream(ctx, conn, accesslogtest.TCPLogs(accesslogtest.Identifier("node-elsewhere"),
		accesslogtest.TCP(accesslogtest.Hop{Cluster: inboundTCP, PeerURIs: []string{caller}, Downstream: "10.244.9.9"})))
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a stream naming another node: %v, want PermissionDenied", err)
	}

	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"aether_agent_requests_total", with(labels("inbound", "8080", caller), "code_class", "2xx"), 1},
		{"aether_agent_requests_total", with(labels("outbound", "8080", identity), "code_class", "5xx"), 1},
		{"aether_agent_tcp_connections_total", labels("inbound", "9000", caller), 1},
		{"aether_agent_received_bytes_total", map[string]string{"direction": "inbound", "service": service, "port": "9000"}, 1000},
		{"aether_agent_sent_bytes_total", map[string]string{"direction": "inbound", "service": service, "port": "8080"}, 200},
		{"aether_agent_request_outcomes_total", map[string]string{"service": service, "port": "8080", "outcome": "app"}, 1},
		{"aether_agent_access_log_rejected_total", map[string]string{"reason": accesslog.RejectedWrongNode}, refusedBefore + 1},
	} {
		if got := value(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if lines := a.serverLogs.With(`"TCP connection"`, `"service"="`+service+`"`, `"port"="9000"`, `"caller"="`+caller+`"`, `"receivedBytes"=1000`); len(lines) != 1 {
		t.Errorf("%d log lines of the TCP connection, want 1", len(lines))
	}
	if lines := a.serverLogs.With(`"Refused an access-log stream"`, `"reason"="wrong_node"`, a.node); len(lines) != 1 {
		t.Errorf("%d log lines of the refused stream, want 1", len(lines))
	}
}

// with is labels plus name=value.
func with(labels map[string]string, name, value string) map[string]string {
	labels[name] = value
	return labels
}
