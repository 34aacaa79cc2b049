// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// withIssuer is m with its identity issuer set to issuer.
func withIssuer(m model.Mesh, issuer workloadidentity.Issuer) model.Mesh {
	m.Issuer = issuer
	return m
}

// rawTCPDials are the connections a client makes for the raw-TCP spellings of a service at vip
// whose TCP ports are ports: <vip>:18082 and <vip>:<p> for each, in cleartext and as TLS (an
// application's own TLS, one with an HTTP ALPN too: https:// is TLS to 443). Each reaches the
// capture listener in capture mode all (in scoped mode, those of 18082).
func rawTCPDials(vip string, ports []int32) []xdssim.Conn {
	var out []xdssim.Conn
	for _, p := range append([]int32{meshv1alpha1.MeshTCPPort}, ports...) {
		out = append(out,
			xdssim.Conn{DstIP: vip, DstPort: uint32(p)},
			xdssim.Conn{DstIP: vip, DstPort: uint32(p), TLS: true, SNI: "db.example.com", ALPN: []string{"postgresql"}},
			xdssim.Conn{DstIP: vip, DstPort: uint32(p), TLS: true, SNI: "payments.example.com", ALPN: []string{"h2", "http/1.1"}})
	}
	return out
}

// tcpPortsOf are a service's TCP ports, ascending.
func tcpPortsOf(s model.Service) []int32 {
	var out []int32
	for _, p := range s.PortSet().Ports {
		if p.Protocol == meshv1alpha1.ProtocolTCP {
			out = append(out, p.Port)
		}
	}
	return out
}

// rawTCPLeaks says how the build res of a mesh without an identity issuer lets raw TCP out, one
// line each (nil: it does not): a raw-TCP cluster (tcp:...), a TLSRoute chain, and, for every
// local pod and every raw-TCP dial of every service with a VIP and a TCP port (rawTCPDials), a
// connection that its capture listener does not close through the blackhole cluster: forwarded
// to a cluster, or passed through to the original destination (plaintext to a mesh VIP), or
// closed for a broken configuration.
func rawTCPLeaks(m model.Mesh, res xds.Resources) []string {
	var out []string
	for _, c := range res.Clusters {
		if strings.HasPrefix(c.GetName(), "tcp:") {
			out = append(out, "raw-TCP cluster "+c.GetName())
		}
	}
	for _, l := range res.Listeners {
		for _, fc := range l.GetFilterChains() {
			if strings.Contains(fc.GetName(), "_tlsroute_") {
				out = append(out, fmt.Sprintf("listener %s: TLSRoute chain %s", l.GetName(), fc.GetName()))
			}
		}
	}
	sim := xdssim.New(res)
	for _, pod := range m.Pods {
		for _, svc := range m.Services {
			ports := tcpPortsOf(svc)
			if svc.VIP == "" || len(ports) == 0 {
				continue
			}
			for _, conn := range rawTCPDials(svc.VIP, ports) {
				conn.Listener = xds.CaptureListener(xds.PodKey(pod.Namespace, pod.Name))
				got := sim.Dial(conn)
				if got.Verdict != xdssim.Closed || !errors.Is(got.Err, xdssim.ErrNoHealthyUpstream) || got.DefaultChain ||
					len(got.Targets) != 1 || got.Targets[0].Cluster != xds.BlackholeCluster {
					out = append(out, fmt.Sprintf("%s dials %s:%d (TLS %v, SNI %q): %s, want closed by cluster %s", pod.Name, conn.DstIP,
						conn.DstPort, conn.TLS, conn.SNI, got, xds.BlackholeCluster))
				}
			}
		}
	}
	return out
}

// TestWithoutIssuerTCPIsClosed builds every scenario as a node agent with --identity-issuer=none
// does, and checks that raw TCP is refused loudly and never sent in plaintext:
//   - every structural gate of xdscheck passes (references, chains, pinning, consistency,
//     validation, domains, names) and Envoy would accept every listener (xdssim.Check);
//   - no raw-TCP cluster (tcp:...) and no TLSRoute chain is built, and every raw-TCP dial of a
//     mesh VIP, cleartext or TLS, from every local pod, is closed by the blackhole cluster through
//     its service's cap_tcp chain: not forwarded, not passed through (rawTCPLeaks);
//   - the status and the data plane agree row by row (walkSurfaces over the surface without an
//     issuer: its refused TCP rows are refused by the data plane);
//   - Skipped names each service with a TCP port, its ports and why;
//   - HTTP is built as ever: every other cluster, every load assignment of an HTTP-class port and
//     every route configuration is the one the build with an issuer has, byte for byte.
//
// The negative controls: the build with an issuer of the same mesh (TCP emitted where there is
// no identity) and a build whose cap_tcp chains were dropped (the passthrough takes the dial to
// the mesh VIP in plaintext) are both caught.
func TestWithoutIssuerTCPIsClosed(t *testing.T) {
	scenarios := xdstest.All()
	tcpServices := 0
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		t.Run(name, func(t *testing.T) {
			m := withIssuer(scenarios[name], workloadidentity.NoIssuer)
			res := build(t, m)
			if v := xdscheck.All(res); v != nil {
				t.Errorf("%d gate violations:\n%s", len(v), strings.Join(v, "\n"))
			}
			if err := xdssim.New(res).Check(); err != nil {
				t.Errorf("Envoy would reject the configuration: %v", err)
			}
			if leaks := rawTCPLeaks(m, res); leaks != nil {
				t.Errorf("raw TCP gets out without an identity:\n%s", strings.Join(leaks, "\n"))
			}
			if walked := walkSurfaces(t, m, xds.Build); walked == 0 {
				t.Error("no surface row was walked")
			}
			for _, s := range m.Services {
				if ports := tcpPortsOf(s); len(ports) > 0 {
					tcpServices++
					want := fmt.Sprintf("xds: no raw-TCP clusters for service %s/%s (TCP ports %s;", s.Namespace, s.Name,
						strings.Trim(strings.ReplaceAll(fmt.Sprint(ports), " ", ", "), "[]"))
					if !slices.ContainsFunc(res.Skipped, func(n string) bool {
						return strings.HasPrefix(n, want) && strings.Contains(n, "--identity-issuer=spire")
					}) {
						t.Errorf("Skipped does not name service %s/%s as %q...: %q", s.Namespace, s.Name, want, res.Skipped)
					}
				}
			}
			httpAsEver(t, res, build(t, withIssuer(m, workloadidentity.SPIRE)))
		})
	}
	if tcpServices == 0 {
		t.Fatal("no scenario has a service with a TCP port: the test proves nothing")
	}

	m := withIssuer(scenarios["no-issuer"], workloadidentity.NoIssuer)
	t.Run("negative control: TCP emitted without an identity", func(t *testing.T) {
		leaks := rawTCPLeaks(m, build(t, withIssuer(m, workloadidentity.SPIRE)))
		if len(leaks) == 0 {
			t.Fatal("a build that emits raw-TCP clusters and forwards raw TCP passes")
		}
		t.Logf("caught (%d leaks), e.g. %s; %s", len(leaks), leaks[0], leaks[len(leaks)-1])
	})
	t.Run("negative control: the cap_tcp chains dropped (the passthrough takes the dial)", func(t *testing.T) {
		res := build(t, m)
		for _, l := range res.Listeners {
			l.FilterChains = slices.DeleteFunc(slices.Clone(l.GetFilterChains()), func(fc *listenerv3.FilterChain) bool {
				return strings.HasPrefix(fc.GetName(), "cap_tcp_") && fc.GetName() != xds.CaptureBlackholeChain
			})
		}
		leaks := rawTCPLeaks(m, res)
		if !slices.ContainsFunc(leaks, func(l string) bool { return strings.Contains(l, string(xdssim.Passthrough)) }) {
			t.Fatalf("a build whose TCP dials of a mesh VIP pass through in plaintext passes: %q", leaks)
		}
		t.Logf("caught (%d leaks), e.g. %s", len(leaks), leaks[0])
	})
}

// httpAsEver checks that without an issuer (res) HTTP is built as with one (with): every cluster
// of res is with's, byte for byte, and with's others are exactly its raw-TCP clusters; likewise
// every load assignment (with's others: those of TCP ports), and the route configurations are the
// same.
func httpAsEver(t *testing.T, res, with xds.Resources) {
	t.Helper()
	clusters := map[string]proto.Message{}
	for _, c := range with.Clusters {
		clusters[c.GetName()] = c
	}
	for _, c := range res.Clusters {
		if !proto.Equal(c, clusters[c.GetName()]) {
			t.Errorf("cluster %s differs from the build with an issuer", c.GetName())
		}
		delete(clusters, c.GetName())
	}
	for name := range clusters {
		if !strings.HasPrefix(name, "tcp:") {
			t.Errorf("cluster %s of the build with an issuer is missing, and it is not a raw-TCP cluster", name)
		}
	}
	assignments := map[string]proto.Message{}
	for _, e := range with.Endpoints {
		assignments[e.GetClusterName()] = e
	}
	for _, e := range res.Endpoints {
		if !proto.Equal(e, assignments[e.GetClusterName()]) {
			t.Errorf("load assignment %s differs from the build with an issuer", e.GetClusterName())
		}
		delete(assignments, e.GetClusterName())
	}
	if len(assignments) > 0 && len(res.Endpoints) == 0 && len(with.Endpoints) > 0 {
		t.Errorf("no load assignment at all without an issuer")
	}
	if len(res.Routes) != len(with.Routes) {
		t.Fatalf("%d route configurations without an issuer, %d with one", len(res.Routes), len(with.Routes))
	}
	for i := range res.Routes {
		if !proto.Equal(res.Routes[i], with.Routes[i]) {
			t.Errorf("route configuration %s differs from the build with an issuer", res.Routes[i].GetName())
		}
	}
}

// TestWithoutIssuerSurfaceRowsAreRefused: the rows walkSurfaces checks under none include the
// refused raw-TCP rows (so the agreement above covers them), for the no-issuer scenario.
func TestWithoutIssuerSurfaceRowsAreRefused(t *testing.T) {
	m := xdstest.NoIssuer()
	for _, s := range m.Services {
		if s.Name != "payments" {
			continue
		}
		refused := 0
		for _, d := range resolve.DialSurface(s.PortSet(), m.Issuer) {
			if d.Protocol == meshv1alpha1.ProtocolTCP && d.Outcome == resolve.Refused && strings.HasPrefix(d.Reason, "no workload identity") {
				refused++
			}
		}
		// https:// (443=tcp), :18082 (the default TCP port, 443), :443 and :9000.
		if refused != 4 {
			t.Errorf("payments has %d raw-TCP rows refused for want of an identity, want 4", refused)
		}
	}
}
