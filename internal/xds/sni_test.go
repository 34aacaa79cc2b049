// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestEveryHopNamesItsPort: during a rollout that moves payments' primary from HTTP 8080 to TCP
// 9000 (xdstest.PrimaryRollout), a client of this node dials each port and the connection must
// reach that port, in its protocol, on every pod, the pod of this node included, whose own
// primary (9000) is not the service's (the vote's, 8080). The expectations are the workload
// page's ("<name>:<port> reaches that port") and DESIGN section 8's ("SNI on every hop, the
// primary too"), written here, not read from resolve or the builder.
func TestEveryHopNamesItsPort(t *testing.T) {
	m := xdstest.PrimaryRollout()
	sim := xdssim.New(build(t, m))
	if err := sim.Check(); err != nil {
		t.Fatalf("Envoy would reject the configuration: %v", err)
	}
	const (
		vip     = "10.96.0.10"
		podIP   = "10.244.1.10" // payments-0, on this node
		podKey  = "shop/payments-0"
		primary = "payments.shop.aether.internal"
	)
	client := xds.CaptureListener(xds.PodKey("web", "frontend-0"))
	for _, tc := range []struct {
		name     string
		conn     xdssim.Conn
		port     int32
		protocol xdssim.Protocol
	}{
		{"HTTP to 8080, the service's primary", xdssim.Conn{DstIP: vip, DstPort: 8080,
			HTTP: &xdssim.Request{Host: primary + ":8080"}}, 8080, xdssim.HTTP},
		{"HTTP through the proxy port to 8080", xdssim.Conn{DstIP: vip, DstPort: 18081,
			HTTP: &xdssim.Request{Host: primary + ":8080"}}, 8080, xdssim.HTTP},
		{"TCP to 9000, this pod's own primary", xdssim.Conn{DstIP: vip, DstPort: 9000}, 9000, xdssim.TCP},
		{"TCP to 18082, the default TCP port (the lowest TCP port: the primary is HTTP)",
			xdssim.Conn{DstIP: vip, DstPort: 18082}, 9000, xdssim.TCP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.conn.Listener = client
			hopsInto(t, sim, tc.conn, podIP, podKey, tc.port, func(target xdssim.Target, in xdssim.Outcome) {
				if sni := strconv.Itoa(int(tc.port)); target.TLS.SNI != sni {
					t.Errorf("the hop to %s for port %d sends SNI %q; want %q (every hop names its port)", podKey, tc.port, target.TLS.SNI, sni)
				}
				want := xds.AppCluster(podKey, tc.port)
				if in.Verdict != xdssim.Forwarded || len(in.Targets) != 1 || in.Targets[0].Cluster != want || in.Protocol != tc.protocol {
					t.Errorf("port %d arrives at %s as %s; want %s, %s", tc.port, podKey, in, want, tc.protocol)
				}
			})
		})
	}
}

// hopsInto dials conn in sim and follows every hop that reaches podIP into podKey's inbound
// listener as Envoy would send it: over the hop's TLS (SNI and ALPN), the request in HTTP/2 when
// the hop's upstream speaks h2. arrived gets each such hop and what the inbound makes of it. The
// test fails when the dial is not forwarded, a hop to the pod for port is not TLS, or no hop
// reaches podIP (the test would prove nothing).
func hopsInto(t *testing.T, sim *xdssim.Sim, conn xdssim.Conn, podIP, podKey string, port int32, arrived func(target xdssim.Target, in xdssim.Outcome)) {
	t.Helper()
	out := sim.Dial(conn)
	if out.Verdict != xdssim.Forwarded {
		t.Fatalf("the dial is not forwarded: %s", out)
	}
	hops := 0
	for _, target := range out.Targets {
		for _, ep := range target.Receiving() {
			if ep.Address != podIP {
				continue
			}
			hops++
			if target.TLS == nil {
				t.Errorf("the hop to %s for port %d is not TLS: %s", podKey, port, out)
				continue
			}
			req := conn.HTTP
			if req != nil {
				hop := *req
				hop.HTTP2 = slices.Equal(target.UpstreamHTTP, []string{"h2"})
				req = &hop
			}
			arrived(target, sim.Arrive(xds.InboundListener(podKey), target.TLS.SNI, target.TLS.ALPN, req))
		}
	}
	if hops == 0 {
		t.Fatalf("no hop reaches %s over the network (%s): the test proves nothing", podKey, out)
	}
}

// primaryOf is the primary port the service's vote chose.
func primaryOf(m model.Mesh, namespace, name string) int32 {
	for _, s := range m.Services {
		if s.Namespace == namespace && s.Name == name {
			return s.Primary
		}
	}
	return 0
}

// TestPrimaryRolloutScenario: the scenario is what it says, or the test above proves nothing:
// the vote keeps 8080 while the pod of this node declares 9000 primary.
func TestPrimaryRolloutScenario(t *testing.T) {
	m := xdstest.PrimaryRollout()
	if got := primaryOf(m, "shop", "payments"); got != 8080 {
		t.Errorf("the service's primary is %d, want 8080 (the two older pods' vote)", got)
	}
	i := slices.IndexFunc(m.Pods, func(p model.LocalPod) bool { return p.Name == "payments-0" })
	if i < 0 || m.Pods[i].Primary != 9000 {
		t.Errorf("payments-0 on this node: %+v, want primary 9000", m.Pods)
	}
}

// grpcPrimaryRollout is a gRPC mesh moving payments' primary from 9090 to 9091 (both gRPC): the
// two older pods (other nodes) declare 9090 primary, the newer pod on this node 9091. The vote
// keeps 9090. The client is frontend (web).
func grpcPrimaryRollout() model.Mesh {
	pod := func(name, node, address, primary string, hour int) xdstest.Workload {
		return xdstest.Workload{Namespace: "shop", Service: "payments", Name: name, Node: node, Address: address, Port: primary,
			Ports: "9090=grpc,9091=grpc", Health: meshv1alpha1.HealthHealthy, Created: xdstest.Day.Add(time.Duration(hour) * time.Hour)}
	}
	return xdstest.Scenario{
		Services: []xdstest.ServiceDecl{{Namespace: "shop", Name: "payments", VIP: "10.96.0.10"},
			{Namespace: "web", Name: "frontend", VIP: "10.96.0.20"}},
		Workloads: []xdstest.Workload{
			pod("payments-0", xdstest.ThisNode, "10.244.1.10", "9091", 11),
			pod("payments-1", xdstest.SameRegion, "10.244.2.10", "9090", 9),
			pod("payments-2", xdstest.OtherRegion, "10.244.3.10", "9090", 9),
			{Namespace: "web", Service: "frontend", Name: "frontend-0", Node: xdstest.ThisNode, Address: "10.244.1.20", Port: "8080",
				Health: meshv1alpha1.HealthHealthy, Created: xdstest.Day},
		},
	}.Mesh()
}

// TestProxylessHopsNameTheirPort: a proxyless gRPC client's connection, made as grpc-go makes it
// (the cluster's SNI when the client sends SNI, none otherwise; ALPN h2), arrives at the
// destination pod's inbound (the node's Envoy rendering) on the port its cluster is for, during a
// rollout where this node's pod's own primary (9091) is not the vote's (9090). A client that sends
// no SNI lands on each pod's own primary (the inbound's default chain), so it must be given only
// the pods whose own primary is the port it dials.
func TestProxylessHopsNameTheirPort(t *testing.T) {
	m := grpcPrimaryRollout()
	if got := primaryOf(m, "shop", "payments"); got != 9090 {
		t.Fatalf("the service's primary is %d, want 9090 (the two older pods' vote)", got)
	}
	envoy := xdssim.New(build(t, m))
	const podIP, podKey = "10.244.1.10", "shop/payments-0"
	for _, sni := range []bool{true, false} {
		res := buildProxyless(t, m, xds.ProxylessClient{Identity: frontendClient, SNI: sni})
		arrived, served := 0, 0
		for _, c := range res.Clusters {
			if c.GetTransportSocket() == nil {
				continue
			}
			eds := c.GetEdsClusterConfig().GetServiceName()
			port, err := strconv.Atoi(eds[strings.LastIndex(eds, ":")+1:])
			if err != nil {
				t.Fatalf("cluster %s reads load assignment %q, which names no port", c.GetName(), eds)
			}
			for _, l := range endpointsNamed(res.Endpoints, eds).GetEndpoints() {
				for _, e := range l.GetLbEndpoints() {
					served++
					if e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress() != podIP {
						continue
					}
					arrived++
					hello := tlsOf(t, c).GetSni()
					if !sni && hello != "" {
						t.Errorf("SNI false: cluster %s sends SNI %q, which a client without SNI does not send", c.GetName(), hello)
					}
					in := envoy.Arrive(xds.InboundListener(podKey), hello, []string{"h2"}, &xdssim.Request{Host: eds, HTTP2: true})
					if want := xds.AppCluster(podKey, int32(port)); len(in.Targets) != 1 || in.Targets[0].Cluster != want {
						t.Errorf("SNI %v: cluster %s (SNI %q) arrives at %s as %s; want %s", sni, c.GetName(), hello, podKey, in, want)
					}
				}
			}
		}
		switch {
		case served == 0:
			t.Errorf("SNI %v: no endpoint is served: the test proves nothing", sni)
		case sni && arrived == 0:
			t.Errorf("SNI %v: no cluster reaches %s: the test proves nothing", sni, podKey)
		}
		if !sni && !slices.ContainsFunc(res.Skipped, func(s string) bool { return strings.Contains(s, podKey) }) {
			t.Errorf("SNI false: Skipped does not say why %s is not served: %q", podKey, res.Skipped)
		}
	}
}

// TestWalkCatchesThePrimaryWithoutSNI is the negative control of the surface walk for the SNI
// rule: the builder's clusters with the old rule put back (no SNI for the service's primary) must
// fail the walk of the primary-rollout scenario, where this node's pod's own primary differs.
func TestWalkCatchesThePrimaryWithoutSNI(t *testing.T) {
	m := xdstest.PrimaryRollout()
	oldRule := func(m model.Mesh) (xds.Resources, error) {
		res, err := xds.Build(m)
		primary := strconv.Itoa(int(primaryOf(m, "shop", "payments")))
		for _, c := range res.Clusters {
			if c.GetTransportSocket() == nil || !strings.Contains(c.GetName(), "payments.shop") {
				continue
			}
			ctx := tlsOf(t, c)
			if ctx.GetSni() != primary {
				continue
			}
			ctx.Sni = ""
			packed, perr := anypb.New(ctx)
			if perr != nil {
				t.Fatal(perr)
			}
			c.TransportSocket = &corev3.TransportSocket{Name: c.GetTransportSocket().GetName(),
				ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: packed}}
		}
		return res, err
	}
	fake := &recorder{TB: t}
	fake.walk(m, oldRule)
	if len(fake.failures) == 0 {
		t.Fatal("the walk passed with no SNI for the primary; it must fail")
	}
	t.Logf("caught (%d failures), e.g. %s", len(fake.failures), fake.failures[0])
}
