// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// fxChainTarget says where a chain sends a connection: "tcp:<cluster>" for a tcp_proxy, "hcm:<RDS
// name>" for a capture HCM, "hcm-inline:<cluster>" for an inbound HCM.
func fxChainTarget(t testing.TB, ch *listenerv3.FilterChain) string {
	t.Helper()
	filters := ch.GetFilters()
	// A capture chain starts with the filter that makes its upstream leave from the pod, an
	// inbound chain with its connection limit.
	if len(filters) == 2 && (filters[0].GetName() == xds.SetFilterStateFilter || filters[0].GetName() == xds.ConnectionLimitFilter) {
		filters = filters[1:]
	}
	if len(filters) != 1 {
		t.Fatalf("chain %s has filters %v, want one (after set_filter_state or connection_limit)", ch.GetName(), filters)
	}
	f := filters[0]
	switch f.GetName() {
	case wellknown.TCPProxy:
		return "tcp:" + fxUnpack[*tcpproxyv3.TcpProxy](t, f.GetTypedConfig()).GetCluster()
	case wellknown.HTTPConnectionManager:
		hcm := fxUnpack[*hcmv3.HttpConnectionManager](t, f.GetTypedConfig())
		filters := hcm.GetHttpFilters()
		if len(filters) == 0 || filters[len(filters)-1].GetName() != wellknown.Router {
			t.Errorf("chain %s: the HCM's last HTTP filter is not the router: %v", ch.GetName(), filters)
		}
		if hcm.GetStripAnyHostPort() {
			t.Errorf("chain %s strips the Host's port: the port in Host is the port", ch.GetName())
		}
		if rds := hcm.GetRds(); rds != nil {
			if rds.GetConfigSource().GetAds() == nil {
				t.Errorf("chain %s: RDS not over ADS: %v", ch.GetName(), rds.GetConfigSource())
			}
			return "hcm:" + rds.GetRouteConfigName()
		}
		vhosts := hcm.GetRouteConfig().GetVirtualHosts()
		if len(vhosts) != 1 || len(vhosts[0].GetRoutes()) != 1 {
			t.Fatalf("chain %s: inline routes %v, want one virtual host with one route", ch.GetName(), vhosts)
		}
		return "hcm-inline:" + vhosts[0].GetRoutes()[0].GetRoute().GetCluster()
	}
	t.Fatalf("chain %s: unexpected filter %s", ch.GetName(), f.GetName())
	return ""
}

func TestCaptureListener(t *testing.T) {
	client := fxClient(t)
	id := client.Identity
	const vip, otherVIP = "10.96.0.10", "10.96.0.11"
	fqdn := func(svc string) string { return xds.FQDN(svc, "shop", fxDomain) }
	tcp := func(base string) string { return "tcp:" + xds.SourceCluster(base, id) }
	hcm := "hcm:" + xds.CaptureRoutes(id)
	proxy := "hcm:" + xds.ProxyRoutes(id) // the proxy port's routes: 404 for a host not the mesh's
	passthrough := "tcp:" + xds.PassthroughCluster

	type dial struct {
		conn  fxConn
		chain string
		to    string
	}
	tests := map[string]struct {
		services []model.Service
		capture  model.CaptureMode
		chains   []string
		// uninspected are the ports where the inspectors are off (filter_disabled).
		uninspected []int32
		dials       []dial
	}{
		"mixed: HTTP primary, an h2 port, a TCP port": {
			services: []model.Service{fxService(t, "shop", "payments", vip, 8080, "8080/HTTP", "9090/HTTP2", "9000/TCP")},
			chains: []string{xds.CaptureHTTPChain, xds.CaptureHTTPPortChain(18081), xds.CaptureHTTPPortChain(80), xds.CaptureHTTPPortChain(8080),
				xds.CaptureHTTPPortChain(9090), xds.CaptureHTTPServicePortChain("payments.shop", 80), xds.CaptureHTTPServicePortChain("payments.shop", 8080),
				xds.CaptureHTTPServicePortChain("payments.shop", 9090), xds.CaptureTCPChain("payments.shop"), xds.CaptureTCPPortChain("payments.shop", 9000)},
			uninspected: []int32{9000, 18082},
			dials: []dial{
				{fxRaw(vip, 9000), xds.CaptureTCPPortChain("payments.shop", 9000), tcp(xds.TCPCluster(fqdn("payments"), 9000))},
				// The destination port decides on a TCP port, whatever the bytes.
				{fxHTTP(vip, 9000), xds.CaptureTCPPortChain("payments.shop", 9000), tcp(xds.TCPCluster(fqdn("payments"), 9000))},
				{fxTLS(vip, 9000), xds.CaptureTCPPortChain("payments.shop", 9000), tcp(xds.TCPCluster(fqdn("payments"), 9000))},
				{fxRaw(vip, 18082), xds.CaptureTCPChain("payments.shop"), tcp(xds.TCPDefaultCluster(fqdn("payments")))},
				{fxHTTP(vip, 8080), xds.CaptureHTTPServicePortChain("payments.shop", 8080), hcm},
				// A request that came after the inspectors' timeout (nothing detected) is HTTP all
				// the same on an HTTP port; TLS never reaches the HCM.
				{fxRaw(vip, 8080), xds.CaptureHTTPServicePortChain("payments.shop", 8080), hcm},
				{fxTLS(vip, 8080), xds.CapturePassthroughChain, passthrough},
				{fxHTTP(vip, 18081), xds.CaptureHTTPPortChain(18081), proxy},
				{fxRaw(vip, 18081), xds.CaptureHTTPPortChain(18081), proxy},
				{fxHTTP(vip, 80), xds.CaptureHTTPServicePortChain("payments.shop", 80), hcm},
				{fxRaw(vip, 80), xds.CaptureHTTPServicePortChain("payments.shop", 80), hcm},
				{fxTLS(vip, 443), xds.CapturePassthroughChain, passthrough},
				{fxRaw(vip, 7777), xds.CapturePassthroughChain, passthrough},
				// Another address on an HTTP port some VIP claims: the Host rule.
				{fxHTTP(otherVIP, 8080), xds.CaptureHTTPPortChain(8080), hcm},
				// 9000 and 18082 need no inspection (their chains take any bytes), so the inspectors
				// are off there and nothing, HTTP included, is detected: another address on them is
				// the passthrough (kube-proxy refuses a port the Service does not expose).
				{fxRaw(otherVIP, 9000), xds.CapturePassthroughChain, passthrough},
				{fxRaw(otherVIP, 18082), xds.CapturePassthroughChain, passthrough},
			},
		},
		"pure TCP": {
			services: []model.Service{fxService(t, "shop", "db", vip, 5432, "5432/TCP")},
			chains: []string{xds.CaptureHTTPChain, xds.CaptureHTTPPortChain(18081), xds.CaptureHTTPPortChain(80), xds.CaptureHTTPServicePortChain("db.shop", 80),
				xds.CaptureTCPChain("db.shop"), xds.CaptureTCPPortChain("db.shop", 5432)},
			uninspected: []int32{5432, 18082},
			dials: []dial{
				{fxRaw(vip, 18082), xds.CaptureTCPChain("db.shop"), tcp(xds.TCPDefaultCluster(fqdn("db")))},
				{fxRaw(vip, 5432), xds.CaptureTCPPortChain("db.shop", 5432), tcp(xds.TCPCluster(fqdn("db"), 5432))},
				{fxHTTP(vip, 80), xds.CaptureHTTPServicePortChain("db.shop", 80), hcm}, // Host db.shop: 421 no-http-port
				{fxRaw(vip, 80), xds.CaptureHTTPServicePortChain("db.shop", 80), hcm},
				{fxRaw(vip, 9999), xds.CapturePassthroughChain, passthrough},
			},
		},
		"pure HTTP": {
			services: []model.Service{fxService(t, "shop", "api", vip, 8080, "8080/HTTP")},
			chains: []string{xds.CaptureHTTPChain, xds.CaptureHTTPPortChain(18081), xds.CaptureHTTPPortChain(80), xds.CaptureHTTPPortChain(8080),
				xds.CaptureHTTPServicePortChain("api.shop", 80), xds.CaptureHTTPServicePortChain("api.shop", 8080)},
			dials: []dial{
				{fxHTTP(vip, 8080), xds.CaptureHTTPServicePortChain("api.shop", 8080), hcm},
				{fxHTTP(vip, 18082), xds.CaptureHTTPChain, hcm},
				{fxRaw(vip, 18082), xds.CapturePassthroughChain, passthrough}, // kube-proxy refuses it
				// The listener itself, dialled directly: closed, raw or HTTP, never passed through
				// (back to itself).
				{fxRaw("127.0.0.1", 18001), xds.CaptureSelfChain, "tcp:" + xds.BlackholeCluster},
				{fxHTTP("127.0.0.1", 18001), xds.CaptureSelfChain, "tcp:" + xds.BlackholeCluster},
			},
		},
		"scoped": {
			services: []model.Service{fxService(t, "shop", "api", vip, 8080, "8080/HTTP")},
			capture:  model.CaptureScoped,
			chains: []string{xds.CaptureHTTPChain, xds.CaptureHTTPPortChain(18081), xds.CaptureHTTPPortChain(80), xds.CaptureHTTPPortChain(8080),
				xds.CaptureHTTPServicePortChain("api.shop", 80), xds.CaptureHTTPServicePortChain("api.shop", 8080), xds.CaptureBlackholeChain},
			uninspected: []int32{18082},
			dials: []dial{
				// Every byte to a :18082 no service claims is closed, TLS too: nothing is
				// inspected there.
				{fxRaw(vip, 18082), xds.CaptureBlackholeChain, "tcp:" + xds.BlackholeCluster},
				{fxRaw(otherVIP, 18082), xds.CaptureBlackholeChain, "tcp:" + xds.BlackholeCluster},
				{fxTLS(vip, 18082), xds.CaptureBlackholeChain, "tcp:" + xds.BlackholeCluster},
				{fxHTTP(vip, 18081), xds.CaptureHTTPPortChain(18081), proxy},
			},
		},
		"scoped with a TCP service": {
			services: []model.Service{fxService(t, "shop", "db", vip, 5432, "5432/TCP")},
			capture:  model.CaptureScoped,
			chains: []string{xds.CaptureHTTPChain, xds.CaptureHTTPPortChain(18081), xds.CaptureHTTPPortChain(80), xds.CaptureHTTPServicePortChain("db.shop", 80),
				xds.CaptureBlackholeChain, xds.CaptureTCPChain("db.shop"), xds.CaptureTCPPortChain("db.shop", 5432)},
			uninspected: []int32{5432, 18082},
			dials: []dial{
				{fxRaw(vip, 18082), xds.CaptureTCPChain("db.shop"), tcp(xds.TCPDefaultCluster(fqdn("db")))},
				{fxRaw(otherVIP, 18082), xds.CaptureBlackholeChain, "tcp:" + xds.BlackholeCluster},
			},
		},
		"port 80 declared TCP": {
			services: []model.Service{fxService(t, "shop", "web", vip, 8080, "8080/HTTP", "80/TCP")},
			chains: []string{xds.CaptureHTTPChain, xds.CaptureHTTPPortChain(18081), xds.CaptureHTTPPortChain(80), xds.CaptureHTTPPortChain(8080),
				xds.CaptureHTTPServicePortChain("web.shop", 80), xds.CaptureHTTPServicePortChain("web.shop", 8080),
				xds.CaptureTCPChain("web.shop"), xds.CaptureTCPPortChain("web.shop", 80), xds.CaptureTCPPortTLSChain("web.shop", 80)},
			// Port 80 keeps its inspectors: its chains tell HTTP (421) from TCP and TLS.
			uninspected: []int32{18082},
			dials: []dial{
				// http://web.shop/ is resolve's 421 (port 80 is not HTTP): the HCM answers it.
				{fxHTTP(vip, 80), xds.CaptureHTTPServicePortChain("web.shop", 80), hcm},
				{fxRaw(vip, 80), xds.CaptureTCPPortChain("web.shop", 80), tcp(xds.TCPCluster(fqdn("web"), 80))},
				{fxTLS(vip, 80), xds.CaptureTCPPortTLSChain("web.shop", 80), tcp(xds.TCPCluster(fqdn("web"), 80))},
				{fxHTTP(otherVIP, 80), xds.CaptureHTTPPortChain(80), hcm},
			},
		},
		"no VIP: no TCP chains": {
			services: []model.Service{fxService(t, "shop", "db", "", 5432, "5432/TCP")},
			chains:   []string{xds.CaptureHTTPChain, xds.CaptureHTTPPortChain(18081)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := client
			if tc.capture != "" {
				pod.Capture = tc.capture
			}
			res := fxBuild(t, fxMesh([]model.LocalPod{pod}, tc.services...))
			l := fxListener(t, res, xds.CaptureListener(xds.PodKey(pod.Namespace, pod.Name)))
			// Every capture listener has its self chain, on its own port, uninspected.
			chains := slices.Sorted(slices.Values(append(slices.Clip(tc.chains), xds.CaptureSelfChain)))
			if got := fxNames(l.GetFilterChains()); !slices.Equal(got, chains) {
				t.Errorf("chains %v, want %v", got, chains)
			}
			uninspected := slices.Sorted(slices.Values(append(slices.Clip(tc.uninspected), 18001)))
			if got := fxDisabledPorts(t, l); !slices.Equal(got, uninspected) {
				t.Errorf("inspectors off on ports %v, want %v", got, uninspected)
			}
			if l.GetDefaultFilterChain().GetName() != xds.CapturePassthroughChain {
				t.Errorf("default chain %q, want %q", l.GetDefaultFilterChain().GetName(), xds.CapturePassthroughChain)
			}
			if overlaps := fxOverlaps(l); len(overlaps) > 0 {
				t.Errorf("overlapping chains: %v", overlaps)
			}
			fxCheckHCMChainsCleartext(t, l)
			for _, d := range tc.dials {
				ch, err := fxSelectChain(l, d.conn)
				if err != nil {
					t.Fatal(err)
				}
				if ch.GetName() != d.chain {
					t.Errorf("%+v lands on %s, want %s", d.conn, ch.GetName(), d.chain)
					continue
				}
				if got := fxChainTarget(t, ch); got != d.to {
					t.Errorf("%+v: chain %s goes to %s, want %s", d.conn, ch.GetName(), got, d.to)
				}
			}
		})
	}
}

// fxCheckHCMChainsCleartext fails when an HCM chain could take TLS: tls_inspector reports a TLS
// client's ALPN (often http/1.1) as its application protocols.
func fxCheckHCMChainsCleartext(t testing.TB, l *listenerv3.Listener) {
	t.Helper()
	for _, ch := range l.GetFilterChains() {
		if ch.GetFilters()[0].GetName() == wellknown.HTTPConnectionManager && ch.GetFilterChainMatch().GetTransportProtocol() != "raw_buffer" {
			t.Errorf("HCM chain %s matches transport %q: TLS with ALPN http/1.1 would reach it", ch.GetName(),
				ch.GetFilterChainMatch().GetTransportProtocol())
		}
	}
}

// The no-backtracking case: payments declares 9000 TCP, ledger 9000 HTTP. HTTP to another address
// on 9000 (one no service declares 9000 on) matches destination port 9000 first (payments'
// chain), misses payments' and ledger's /32, and Envoy does not fall back to the port-less
// cap_http: without cap_http_9000 it would take the passthrough. The negative control removes
// cap_http_9000 and shows exactly that. Ledger's own VIP has its own HCM chain.
func TestCaptureNoBacktracking(t *testing.T) {
	client := fxClient(t)
	const paymentsVIP, ledgerVIP, elsewhere = "10.96.0.10", "10.96.0.11", "10.96.0.99"
	res := fxBuild(t, fxMesh([]model.LocalPod{client},
		fxService(t, "shop", "payments", paymentsVIP, 8080, "8080/HTTP", "9000/TCP"),
		fxService(t, "shop", "ledger", ledgerVIP, 9000, "9000/HTTP")))
	l := fxListener(t, res, xds.CaptureListener(xds.PodKey(client.Namespace, client.Name)))
	want := []string{xds.CaptureHTTPChain, xds.CaptureHTTPPortChain(18081), xds.CaptureHTTPPortChain(80), xds.CaptureHTTPPortChain(8080),
		xds.CaptureHTTPPortChain(9000), xds.CaptureHTTPServicePortChain("ledger.shop", 80), xds.CaptureHTTPServicePortChain("ledger.shop", 9000),
		xds.CaptureHTTPServicePortChain("payments.shop", 80), xds.CaptureHTTPServicePortChain("payments.shop", 8080),
		xds.CaptureSelfChain, xds.CaptureTCPChain("payments.shop"), xds.CaptureTCPPortChain("payments.shop", 9000)}
	if got := fxNames(l.GetFilterChains()); !slices.Equal(got, want) {
		t.Fatalf("chains %v, want %v", got, want)
	}
	port9000 := l.GetFilterChains()[slices.Index(want, xds.CaptureHTTPPortChain(9000))].GetFilterChainMatch()
	if port9000.GetDestinationPort().GetValue() != 9000 || len(port9000.GetPrefixRanges()) != 0 ||
		port9000.GetTransportProtocol() != "raw_buffer" || !slices.Equal(port9000.GetApplicationProtocols(), []string{"http/1.0", "http/1.1", "h2c"}) {
		t.Errorf("cap_http_9000 matches %v, want port 9000, any IP, raw_buffer, http/1.0, http/1.1 or h2c", port9000)
	}
	land := func(l *listenerv3.Listener, c fxConn) string {
		ch, err := fxSelectChain(l, c)
		if err != nil {
			t.Fatal(err)
		}
		return ch.GetName()
	}
	if got := land(l, fxHTTP(ledgerVIP, 9000)); got != xds.CaptureHTTPServicePortChain("ledger.shop", 9000) {
		t.Errorf("HTTP to ledger:9000 lands on %s, want cap_http_ledger.shop_9000 (the HCM)", got)
	}
	if got := land(l, fxHTTP(elsewhere, 9000)); got != xds.CaptureHTTPPortChain(9000) {
		t.Errorf("HTTP to %s:9000 lands on %s, want cap_http_9000 (the HCM)", elsewhere, got)
	}
	if got := land(l, fxRaw(paymentsVIP, 9000)); got != xds.CaptureTCPPortChain("payments.shop", 9000) {
		t.Errorf("TCP to payments:9000 lands on %s, want cap_tcp_payments.shop_9000", got)
	}

	// Negative control: the same listener without cap_http_9000.
	broken := proto.Clone(l).(*listenerv3.Listener)
	broken.FilterChains = slices.DeleteFunc(broken.FilterChains, func(ch *listenerv3.FilterChain) bool {
		return ch.GetName() == xds.CaptureHTTPPortChain(9000)
	})
	if got := land(broken, fxHTTP(elsewhere, 9000)); got != xds.CapturePassthroughChain {
		t.Errorf("negative control: without cap_http_9000, HTTP to %s:9000 lands on %s; want the passthrough", elsewhere, got)
	} else {
		t.Logf("negative control: without cap_http_9000, HTTP to %s:9000 lands on %s", elsewhere, got)
	}
}

func TestCaptureListenerShape(t *testing.T) {
	client := fxClient(t)
	res := fxBuild(t, fxMesh([]model.LocalPod{client}, fxService(t, "shop", "db", "10.96.0.10", 5432, "5432/TCP")))
	l := fxListener(t, res, xds.CaptureListener(xds.PodKey(client.Namespace, client.Name)))
	sa := l.GetAddress().GetSocketAddress()
	if sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != uint32(meshv1alpha1.ProxyCapturePort) || sa.GetNetworkNamespaceFilepath() != client.NetNS {
		t.Errorf("address %v, want 127.0.0.1:%d in %s", sa, meshv1alpha1.ProxyCapturePort, client.NetNS)
	}
	if got, want := fxNames(l.GetListenerFilters()), []string{wellknown.OriginalDestination, wellknown.TLSInspector, wellknown.HTTPInspector}; !slices.Equal(got, want) {
		t.Errorf("listener filters %v, want %v", got, want)
	}
	if l.GetListenerFiltersTimeout().AsDuration() != time.Second || !l.GetContinueOnListenerFiltersTimeout() {
		t.Errorf("listener filters timeout %v (continue %v), want 1s and continue", l.GetListenerFiltersTimeout().AsDuration(),
			l.GetContinueOnListenerFiltersTimeout())
	}
	if l.GetUseOriginalDst().GetValue() {
		t.Error("use_original_dst is set: a connection could be handed off to another pod's listener")
	}
	if l.GetTrafficDirection() != corev3.TrafficDirection_OUTBOUND {
		t.Errorf("traffic direction %v, want OUTBOUND", l.GetTrafficDirection())
	}
}

func TestInboundListener(t *testing.T) {
	tests := map[string]struct {
		pod    model.LocalPod
		chains map[string]string // chain → its server name
		floor  string            // the floor's target
	}{
		"mixed, HTTP primary": {
			pod:    fxPod(t, "shop", "payments-0", "payments", model.CaptureSurface, 8080, "8080/HTTP", "9000/TCP", "9090/HTTP2"),
			chains: map[string]string{xds.InboundHTTPChain(8080): "8080", xds.InboundHTTPChain(9090): "9090", xds.InboundTCPChain(9000): "9000"},
			floor:  "hcm-inline:" + xds.AppCluster("shop/payments-0", 8080),
		},
		"pure TCP": {
			pod:    fxPod(t, "shop", "db-0", "db", model.CaptureSurface, 5432, "5432/TCP"),
			chains: map[string]string{xds.InboundTCPChain(5432): "5432"},
			floor:  "tcp:" + xds.AppCluster("shop/db-0", 5432),
		},
		"TCP primary, HTTP secondary": {
			pod:    fxPod(t, "shop", "mq-0", "mq", model.CaptureSurface, 1883, "1883/TCP", "8080/HTTP"),
			chains: map[string]string{xds.InboundTCPChain(1883): "1883", xds.InboundHTTPChain(8080): "8080"},
			floor:  "tcp:" + xds.AppCluster("shop/mq-0", 1883),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := fxBuild(t, fxMesh([]model.LocalPod{tc.pod}))
			key := xds.PodKey(tc.pod.Namespace, tc.pod.Name)
			l := fxListener(t, res, xds.InboundListener(key))
			sa := l.GetAddress().GetSocketAddress()
			if sa.GetAddress() != "0.0.0.0" || sa.GetPortValue() != uint32(meshv1alpha1.ProxyInboundPort) || sa.GetNetworkNamespaceFilepath() != tc.pod.NetNS {
				t.Errorf("address %v, want 0.0.0.0:%d in %s", sa, meshv1alpha1.ProxyInboundPort, tc.pod.NetNS)
			}
			if got := fxNames(l.GetListenerFilters()); !slices.Equal(got, []string{wellknown.TLSInspector}) {
				t.Errorf("listener filters %v, want tls_inspector", got)
			}
			if dup := fxDuplicateServerNames(l); len(dup) > 0 {
				t.Errorf("server names with two chains: %v", dup)
			}
			got := map[string]string{}
			for _, ch := range l.GetFilterChains() {
				got[ch.GetName()] = strings.Join(ch.GetFilterChainMatch().GetServerNames(), ",")
			}
			if !mapsEqual(got, tc.chains) {
				t.Errorf("chains %v, want %v", got, tc.chains)
			}
			for _, pp := range tc.pod.Ports {
				ch, err := fxSelectChain(l, fxConn{ip: tc.pod.Address, port: 18008, sni: xds.ServerName(pp.Port), transport: "tls"})
				if err != nil {
					t.Fatal(err)
				}
				want := "tcp:" + xds.AppCluster(key, pp.Port)
				if pp.Protocol.IsHTTP() {
					want = "hcm-inline:" + xds.AppCluster(key, pp.Port)
				}
				if got := fxChainTarget(t, ch); got != want {
					t.Errorf("SNI %d reaches %s, want %s", pp.Port, got, want)
				}
				fxCheckDownstreamTLS(t, ch, tc.pod.Identity, pp.Protocol.IsHTTP())
			}
			for _, sni := range []string{"", "4242"} { // no SNI, or a port the pod does not serve
				ch, err := fxSelectChain(l, fxConn{ip: tc.pod.Address, port: 18008, sni: sni, transport: "tls"})
				if err != nil {
					t.Fatal(err)
				}
				if ch.GetName() != xds.InboundFloorChain || fxChainTarget(t, ch) != tc.floor {
					t.Errorf("SNI %q reaches %s (%s), want the floor to %s", sni, ch.GetName(), fxChainTarget(t, ch), tc.floor)
				}
			}
			primaryHTTP := strings.HasPrefix(tc.floor, "hcm")
			fxCheckDownstreamTLS(t, l.GetDefaultFilterChain(), tc.pod.Identity, primaryHTTP)
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// fxDuplicateServerNames are the server names more than one chain of l matches.
func fxDuplicateServerNames(l *listenerv3.Listener) []string {
	owner := map[string]string{}
	var dup []string
	for _, ch := range l.GetFilterChains() {
		for _, sni := range ch.GetFilterChainMatch().GetServerNames() {
			if first, taken := owner[sni]; taken {
				dup = append(dup, sni+" ("+first+", "+ch.GetName()+")")
			}
			owner[sni] = ch.GetName()
		}
	}
	return dup
}

// An IPv6 pod's inbound listener listens on [::]:18008, IPv4 included.
func TestInboundListenerIPv6(t *testing.T) {
	pod := fxPod(t, "shop", "db-0", "db", model.CaptureSurface, 5432, "5432/TCP")
	pod.Address = "fd00:10:244::7"
	sa := fxListener(t, fxBuild(t, fxMesh([]model.LocalPod{pod})), xds.InboundListener("shop/db-0")).GetAddress().GetSocketAddress()
	if sa.GetAddress() != "::" || !sa.GetIpv4Compat() || sa.GetPortValue() != uint32(meshv1alpha1.ProxyInboundPort) {
		t.Errorf("address %v, want [::]:%d with IPv4 compatibility", sa, meshv1alpha1.ProxyInboundPort)
	}
}

// The listeners listen on IPv6 exactly when the mesh uses it (a VIP or a local pod's address is
// IPv6): the capture listener on [::1]:18001 beside 127.0.0.1:18001 (where the capture rules
// redirect IPv6), an IPv4 pod's inbound listener on [::]:18008 (IPv6 only) beside 0.0.0.0:18008,
// every address in the pod's netns. In a mesh of IPv4 alone they bind IPv4 alone: binding IPv6 in
// a namespace without it would fail the whole listener.
func TestListenersListenOnIPv6WhenTheMeshUsesIt(t *testing.T) {
	pod := fxClient(t)
	extra := func(m model.Mesh, name string) []string {
		var out []string
		for _, a := range fxListener(t, fxBuild(t, m), name).GetAdditionalAddresses() {
			sa := a.GetAddress().GetSocketAddress()
			out = append(out, fmt.Sprintf("%s:%d %s compat=%t", sa.GetAddress(), sa.GetPortValue(), sa.GetNetworkNamespaceFilepath(), sa.GetIpv4Compat()))
		}
		return out
	}
	capture, inbound := xds.CaptureListener("shop/web-0"), xds.InboundListener("shop/web-0")
	ipv4 := fxMesh([]model.LocalPod{pod}, fxService(t, "shop", "payments", "10.96.0.10", 8080, "8080/HTTP"))
	dual := fxMesh([]model.LocalPod{pod}, fxService(t, "shop", "payments", "fd00:10:96::10", 8080, "8080/HTTP"))
	ipv6Pod := pod
	ipv6Pod.Address = "fd00:10:244::20"
	for _, tc := range []struct {
		name, listener string
		mesh           model.Mesh
		want           []string
	}{
		{"IPv4 mesh, capture", capture, ipv4, nil},
		{"IPv4 mesh, inbound", inbound, ipv4, nil},
		{"an IPv6 VIP, capture", capture, dual, []string{"::1:18001 /var/run/netns/cni-web-0 compat=false"}},
		{"an IPv6 VIP, the IPv4 pod's inbound", inbound, dual, []string{":::18008 /var/run/netns/cni-web-0 compat=false"}},
		{"an IPv6 pod, capture", capture, fxMesh([]model.LocalPod{ipv6Pod}, ipv4.Services...), []string{"::1:18001 /var/run/netns/cni-web-0 compat=false"}},
		{"an IPv6 pod, its inbound ([::] with IPv4 compatibility takes both)", inbound, fxMesh([]model.LocalPod{ipv6Pod}, ipv4.Services...), nil},
	} {
		if got := extra(tc.mesh, tc.listener); !slices.Equal(got, tc.want) {
			t.Errorf("%s: additional addresses %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The inbound gate: one chain per server name. Negative control: a second chain for the TCP
// port's server name (the HCM twin proposal 037's risk 3 describes) is caught.
func TestInboundOneChainPerServerName(t *testing.T) {
	pod := fxPod(t, "shop", "payments-0", "payments", model.CaptureSurface, 8080, "8080/HTTP", "9000/TCP")
	l := fxListener(t, fxBuild(t, fxMesh([]model.LocalPod{pod})), xds.InboundListener("shop/payments-0"))
	if dup := fxDuplicateServerNames(l); len(dup) > 0 {
		t.Fatalf("server names with two chains: %v", dup)
	}
	broken := proto.Clone(l).(*listenerv3.Listener)
	twin := proto.Clone(broken.FilterChains[0]).(*listenerv3.FilterChain) // in_8080, an HCM
	twin.Name = xds.InboundHTTPChain(9000)
	twin.FilterChainMatch.ServerNames = []string{"9000"}
	broken.FilterChains = append(broken.FilterChains, twin)
	dup := fxDuplicateServerNames(broken)
	if len(dup) == 0 {
		t.Fatal("negative control: an HCM twin of in_tcp_9000 was not caught")
	}
	t.Logf("negative control: %v", dup)
	if overlaps := fxOverlaps(broken); len(overlaps) == 0 {
		t.Error("negative control: the overlap gate missed the twin")
	}
}

// fxCheckDownstreamTLS checks ch terminates the mesh's mTLS as identity: client certificate
// required, the pod's certificate and the trust bundle by SDS over ADS, any identity of the trust
// domain accepted, ALPN h2 exactly on HTTP chains.
func fxCheckDownstreamTLS(t testing.TB, ch *listenerv3.FilterChain, identity string, http bool) {
	t.Helper()
	ts := ch.GetTransportSocket()
	if ts.GetName() != wellknown.TransportSocketTLS {
		t.Fatalf("chain %s: transport socket %q, want TLS", ch.GetName(), ts.GetName())
	}
	ctx := fxUnpack[*tlsv3.DownstreamTlsContext](t, ts.GetTypedConfig())
	common := ctx.GetCommonTlsContext()
	certs := common.GetTlsCertificateSdsSecretConfigs()
	combined := common.GetCombinedValidationContext()
	sans := combined.GetDefaultValidationContext().GetMatchTypedSubjectAltNames()
	switch {
	case !ctx.GetRequireClientCertificate().GetValue():
		t.Errorf("chain %s does not require a client certificate", ch.GetName())
	case len(certs) != 1 || certs[0].GetName() != xds.CertificateSecret(identity) || certs[0].GetSdsConfig().GetAds() == nil:
		t.Errorf("chain %s: certificates %v, want %s by SDS over ADS", ch.GetName(), certs, xds.CertificateSecret(identity))
	case combined.GetValidationContextSdsSecretConfig().GetName() != xds.TrustBundleSecret(fxDomain) ||
		combined.GetValidationContextSdsSecretConfig().GetSdsConfig().GetAds() == nil:
		t.Errorf("chain %s: validation context %v, want %s by SDS over ADS", ch.GetName(), combined, xds.TrustBundleSecret(fxDomain))
	case len(sans) != 1 || sans[0].GetSanType() != tlsv3.SubjectAltNameMatcher_URI || sans[0].GetMatcher().GetPrefix() != "spiffe://"+fxDomain+"/":
		t.Errorf("chain %s: SAN matchers %v, want a URI prefix spiffe://%s/", ch.GetName(), sans, fxDomain)
	}
	wantALPN := []string(nil)
	if http {
		wantALPN = []string{"h2"}
	}
	if got := common.GetAlpnProtocols(); !slices.Equal(got, wantALPN) {
		t.Errorf("chain %s: ALPN %v, want %v", ch.GetName(), got, wantALPN)
	}
}

// Every listener of a mesh with many shapes: no two chains share a match. Negative control: a
// second HCM chain naming h2c on the port-less match is an overlap Envoy refuses.
func TestNoOverlappingChains(t *testing.T) {
	res := fxBuild(t, fxMixedMesh(t))
	for _, l := range res.Listeners {
		if overlaps := fxOverlaps(l); len(overlaps) > 0 {
			t.Errorf("%s: %v", l.GetName(), overlaps)
		}
	}
	l := fxListener(t, res, xds.CaptureListener("shop/web-0"))
	broken := proto.Clone(l).(*listenerv3.Listener)
	twin := proto.Clone(broken.FilterChains[0]).(*listenerv3.FilterChain) // cap_http
	twin.Name = "cap_http_h2c"
	twin.FilterChainMatch.ApplicationProtocols = []string{"h2c"}
	broken.FilterChains = append(broken.FilterChains, twin)
	overlaps := fxOverlaps(broken)
	if len(overlaps) == 0 {
		t.Fatal("negative control: the overlap of cap_http and cap_http_h2c was not caught")
	}
	t.Logf("negative control: %v", overlaps)
}

// fxMixedMesh is every shape at once: three local pods (two of one identity, one scoped) and
// services mixed, pure TCP, pure HTTP, 80 and 443 declared, without a VIP.
func fxMixedMesh(t testing.TB) model.Mesh {
	web := fxClient(t)
	web1 := fxPod(t, "shop", "web-1", "web", model.CaptureAll, 8080, "8080/HTTP")
	payments := fxPod(t, "shop", "payments-0", "payments", model.CaptureScoped, 8080, "8080/HTTP", "9000/TCP", "9090/HTTP2")
	return fxMesh([]model.LocalPod{payments, web1, web},
		fxService(t, "shop", "payments", "10.96.0.10", 8080, "8080/HTTP", "9090/HTTP2", "9000/TCP"),
		fxService(t, "shop", "db", "10.96.0.11", 5432, "5432/TCP", "9000/TCP"),
		fxService(t, "shop", "web", "10.96.0.12", 8080, "8080/HTTP"),
		fxService(t, "shop", "site", "10.96.0.13", 80, "80/HTTP", "443/TCP"),
		fxService(t, "shop", "legacy", "10.96.0.14", 80, "80/TCP"),
		fxService(t, "ops", "metrics", "", 9100, "9100/HTTP"),
		fxServiceWith(t, "ops", "empty", "10.96.0.15", 0, nil), // no endpoints, no ports
	)
}

// An endpoint-only change (a health flip, an endpoint with a new address) leaves every listener
// and route configuration proto.Equal: an LDS update would drain the pods' connections. Negative
// control: a port change does change the listeners.
func TestEndpointChangeKeepsListenersAndRoutesWithItsControl(t *testing.T) {
	client := fxClient(t)
	ports := []string{"8080/HTTP", "9000/TCP"}
	healthy := meshv1alpha1.HealthHealthy
	before := fxMesh([]model.LocalPod{client},
		fxServiceWith(t, "shop", "payments", "10.96.0.10", 8080, ports,
			fxEndpoint{"payments-0", "10.244.0.10", healthy}, fxEndpoint{"payments-1", "10.244.0.11", healthy}))
	after := fxMesh([]model.LocalPod{client},
		fxServiceWith(t, "shop", "payments", "10.96.0.10", 8080, ports,
			fxEndpoint{"payments-0", "10.244.0.10", meshv1alpha1.HealthUnhealthy}, fxEndpoint{"payments-1", "10.244.0.11", healthy},
			fxEndpoint{"payments-2", "10.244.0.12", meshv1alpha1.HealthPending}))
	retyped := fxMesh([]model.LocalPod{client},
		fxServiceWith(t, "shop", "payments", "10.96.0.10", 8080, []string{"8080/HTTP", "9000/TCP", "9001/TCP"},
			fxEndpoint{"payments-0", "10.244.0.10", healthy}))
	a, b, c := fxBuild(t, before), fxBuild(t, after), fxBuild(t, retyped)
	if !fxSameResources(a, b) {
		t.Error("an endpoint-only change changed a listener or a route configuration")
	}
	if fxSameResources(a, c) {
		t.Error("negative control: declaring a TCP port left every listener unchanged")
	}
}

func fxSameResources(a, b xds.Resources) bool {
	return slices.EqualFunc(a.Listeners, b.Listeners, func(x, y *listenerv3.Listener) bool { return proto.Equal(x, y) }) &&
		len(a.Routes) == len(b.Routes) &&
		slices.EqualFunc(a.Routes, b.Routes, func(x, y *routev3.RouteConfiguration) bool { return proto.Equal(x, y) })
}

// Build is deterministic: the same mesh in another order gives the same bytes.
func TestListenersAndRoutesDeterministic(t *testing.T) {
	m := fxMixedMesh(t)
	shuffled := m
	shuffled.Services = slices.Clone(m.Services)
	shuffled.Pods = slices.Clone(m.Pods)
	slices.Reverse(shuffled.Services)
	slices.Reverse(shuffled.Pods)
	a, b := fxBuild(t, m), fxBuild(t, shuffled)
	marshal := proto.MarshalOptions{Deterministic: true}
	for i := range a.Listeners {
		x, _ := marshal.Marshal(a.Listeners[i])
		y, _ := marshal.Marshal(b.Listeners[i])
		if string(x) != string(y) {
			t.Errorf("listener %s differs between two orders of the same mesh", a.Listeners[i].GetName())
		}
	}
	for i := range a.Routes {
		x, _ := marshal.Marshal(a.Routes[i])
		y, _ := marshal.Marshal(b.Routes[i])
		if string(x) != string(y) {
			t.Errorf("route configuration %s differs between two orders of the same mesh", a.Routes[i].GetName())
		}
	}
	if len(a.Listeners) != 9 || len(a.Routes) != 4 {
		t.Errorf("%d listeners and %d route configurations, want 9 (three pods: capture, proxy, inbound) and 4 (two identities, capture and proxy each): %v %v",
			len(a.Listeners), len(a.Routes), fxNames(a.Listeners), fxNames(a.Routes))
	}
	if !slices.IsSortedFunc(a.Listeners, func(x, y *listenerv3.Listener) int { return strings.Compare(x.GetName(), y.GetName()) }) {
		t.Errorf("listeners are not sorted by name: %v", fxNames(a.Listeners))
	}
}

// What Build leaves out, and Skipped says so.
func TestSkipped(t *testing.T) {
	good := fxClient(t)
	relative := fxPod(t, "shop", "a-0", "web", model.CaptureSurface, 8080, "8080/HTTP")
	relative.NetNS = "netns/a-0"
	foreign := fxPod(t, "shop", "b-0", "web", model.CaptureSurface, 8080, "8080/HTTP")
	foreign.Identity = "spiffe://elsewhere.example/ns/shop/sa/web"
	sharing := fxPod(t, "shop", "c-0", "web", model.CaptureSurface, 8080, "8080/HTTP")
	sharing.NetNS = good.NetNS
	noPrimary := fxPod(t, "shop", "d-0", "web", model.CaptureSurface, 8081, "8080/HTTP")
	twice := fxPod(t, "shop", "e-0", "web", model.CaptureSurface, 8080, "8080/HTTP", "8080/TCP")
	misshapen := fxPod(t, "shop", "f-0", "web", model.CaptureSurface, 8080, "8080/HTTP")
	misshapen.Identity = "spiffe://" + fxDomain + "/shop/web"

	m := fxMesh([]model.LocalPod{good, relative, foreign, sharing, noPrimary, twice, misshapen},
		fxService(t, "shop", "db", "10.96.0.10", 5432, "5432/TCP"),
		fxService(t, "shop", "db", "10.96.0.30", 5432, "5432/TCP"),
		fxService(t, "shop", "dbcopy", "10.96.0.10", 5432, "5432/TCP"),
		fxService(t, "shop", "odd", "not-an-ip", 5432, "5432/TCP"),
		fxService(t, "shop", "reserved", "10.96.0.20", 8080, "8080/HTTP", "18082/TCP"))
	res := fxBuild(t, m)
	// shop/c-0 shares shop/web-0's netns and sorts first: it keeps it. Every other pod is invalid.
	if got, want := fxNames(res.Listeners), []string{xds.CaptureListener("shop/c-0"), xds.InboundListener("shop/c-0"), xds.ProxyListener("shop/c-0")}; !slices.Equal(got, want) {
		t.Fatalf("listeners %v, want %v", got, want)
	}
	l := res.Listeners[0]
	if got := fxNames(l.GetFilterChains()); !slices.Contains(got, xds.CaptureTCPChain("db.shop")) || slices.Contains(got, xds.CaptureTCPChain("dbcopy.shop")) ||
		slices.Contains(got, xds.CaptureTCPChain("odd.shop")) {
		t.Errorf("chains %v: want db's TCP chains, none for dbcopy (db holds the VIP) or odd (no IP)", got)
	}
	skipped := res.Skipped
	for _, want := range []string{
		`local pod shop/a-0: netNS "netns/a-0" is not an absolute path`,
		`identity "spiffe://elsewhere.example/ns/shop/sa/web" is not of the mesh's shape spiffe://aether.internal/ns/<namespace>/sa/<serviceaccount>`,
		`local pod shop/d-0: primary 8081 is not among its ports`,
		`local pod shop/e-0: ports[1]: port 8080 is listed twice`,
		`local pod shop/f-0: identity "spiffe://aether.internal/shop/web" is not of the mesh's shape`,
		`local pod shop/web-0: netNS "/var/run/netns/cni-web-0" is also pod shop/c-0's`,
		`service shop/dbcopy: VIP 10.96.0.10 is also service shop/db's, which keeps it`,
		`service shop/odd: VIP "not-an-ip" is not an IP address`,
		`service shop/reserved: ports[1] is 18082, a port of the mesh's own`,
		`service shop/db is listed twice; only its first listing counts`,
	} {
		if !slices.ContainsFunc(skipped, func(note string) bool { return strings.Contains(note, want) }) {
			t.Errorf("Skipped does not say %q; it says %v", want, skipped)
		}
	}
	if len(skipped) != 10 {
		t.Errorf("Skipped says %d things, want 10: %v", len(skipped), skipped)
	}

	empty := m
	empty.Domain = ""
	if _, err := xds.Build(empty); err == nil || !strings.Contains(err.Error(), "the mesh domain is empty") {
		t.Errorf("Build with no mesh domain: %v, want the mesh domain is empty", err)
	}
}

// BenchmarkListenersAndRoutes builds the listeners and routes of a node with 3 local pods (2
// identities) in a mesh of n services × 3 ports (8080 HTTP, 9090 HTTP2, 9000 TCP), and reports
// the bytes of one capture listener and one route configuration.
func BenchmarkListenersAndRoutes(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			m := fxMixedMesh(b)
			m.Services = nil
			for i := range n {
				m.Services = append(m.Services, fxService(b, "ns"+strconv.Itoa(i%10), "svc"+strconv.Itoa(i),
					fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), 8080, "8080/HTTP", "9090/HTTP2", "9000/TCP"))
			}
			var res xds.Resources
			b.ResetTimer()
			for b.Loop() {
				var err error
				if res, err = xds.Build(m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(proto.Size(res.Listeners[0])), "capture-listener-bytes")
			b.ReportMetric(float64(proto.Size(res.Routes[0])), "route-config-bytes")
		})
	}
}

// The gates hold on meshes drawn at random (a fixed seed): VIPs shared or malformed, ports of
// every protocol (80 and 443 often), names that collide, pods of every capture mode. Every
// message validates, no listener has overlapping chains or two chains for a server name, no
// route configuration a domain twice or a :18082 domain, and every HTTP dial of a declared HTTP
// port lands on an HCM chain.
func TestGatesOnRandomMeshes(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 43))
	protocols := []string{"HTTP", "HTTP2", "TCP"}
	portPool := []int32{80, 443, 5432, 8080, 9000, 9090}
	for round := range 200 {
		var services []model.Service
		for i := range 1 + rng.IntN(6) {
			var ports []string
			for _, p := range portPool {
				if rng.IntN(3) == 0 {
					ports = append(ports, fmt.Sprintf("%d/%s", p, protocols[rng.IntN(3)]))
				}
			}
			vip := fmt.Sprintf("10.96.0.%d", 1+rng.IntN(4)) // collisions on purpose
			switch rng.IntN(8) {
			case 0:
				vip = ""
			case 1:
				vip = "fd00::" + strconv.Itoa(1+rng.IntN(3))
			}
			name, ns := fmt.Sprintf("s%d", i), []string{"a", "b", "local"}[rng.IntN(3)]
			if rng.IntN(6) == 0 {
				name = "s0.a.svc.cluster" // its short name in namespace local is s0.a's Kubernetes name
			}
			if len(ports) == 0 {
				services = append(services, fxServiceWith(t, ns, name, vip, 0, nil))
				continue
			}
			primary, _, _ := strings.Cut(ports[rng.IntN(len(ports))], "/")
			n, _ := strconv.Atoi(primary)
			services = append(services, fxService(t, ns, name, vip, int32(n), ports...))
		}
		var pods []model.LocalPod
		for i := range 1 + rng.IntN(3) {
			mode := []model.CaptureMode{model.CaptureScoped, model.CaptureSurface, model.CaptureAll}[rng.IntN(3)]
			pods = append(pods, fxPod(t, "a", fmt.Sprintf("p%d", i), fmt.Sprintf("s%d", rng.IntN(2)), mode, 8080, "8080/HTTP", "9000/TCP"))
		}
		m := fxMesh(pods, services...)
		res := fxBuild(t, m)
		for _, l := range res.Listeners {
			if overlaps := fxOverlaps(l); len(overlaps) > 0 {
				t.Fatalf("round %d: %s: %v", round, l.GetName(), overlaps)
			}
			if dup := fxDuplicateServerNames(l); len(dup) > 0 {
				t.Fatalf("round %d: %s: %v", round, l.GetName(), dup)
			}
			if !slices.ContainsFunc(m.Pods, func(p model.LocalPod) bool {
				return l.GetName() == xds.CaptureListener(xds.PodKey(p.Namespace, p.Name))
			}) {
				continue
			}
			fxCheckHCMChainsCleartext(t, l)
			for _, s := range fxHeldVIPs(m) {
				for _, p := range s.Ports {
					if !p.Protocol.IsHTTP() {
						continue
					}
					ch, err := fxSelectChain(l, fxHTTP(s.VIP, p.Number))
					if err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
					if target := fxChainTarget(t, ch); !strings.HasPrefix(target, "hcm:") {
						t.Fatalf("round %d: %s: HTTP to %s:%d (HTTP-class) lands on %s (%s)", round, l.GetName(), s.VIP, p.Number,
							ch.GetName(), target)
					}
				}
			}
		}
		for _, rc := range res.Routes {
			if problems := fxDomainProblems(rc); len(problems) > 0 {
				t.Fatalf("round %d: %s: %v", round, rc.GetName(), problems)
			}
		}
	}
}

// fxHeldVIPs are the services of m whose VIP is a valid address no earlier service holds (the
// ones the capture chains are built for), in namespace-and-name order.
func fxHeldVIPs(m model.Mesh) []model.Service {
	sorted := slices.Clone(m.Services)
	slices.SortStableFunc(sorted, func(a, b model.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	held, listed := map[string]bool{}, map[string]bool{}
	var out []model.Service
	for _, s := range sorted {
		key := s.Namespace + "/" + s.Name
		if s.VIP == "" || held[s.VIP] || listed[key] {
			listed[key] = true
			continue
		}
		held[s.VIP], listed[key] = true, true
		out = append(out, s)
	}
	return out
}

// fxDisabledPorts are the destination ports the capture listener's inspectors are off on: the
// filter_disabled of tls_inspector, which http_inspector must share.
func fxDisabledPorts(t testing.TB, l *listenerv3.Listener) []int32 {
	t.Helper()
	var ports []int32
	var pred *listenerv3.ListenerFilterChainMatchPredicate
	for i, f := range l.GetListenerFilters() {
		switch {
		case f.GetName() == wellknown.TLSInspector:
			pred = f.GetFilterDisabled()
		case f.GetName() == wellknown.HTTPInspector && !proto.Equal(f.GetFilterDisabled(), pred):
			t.Errorf("listener filter %d (%s) is disabled on %v, tls_inspector on %v: they must agree", i, f.GetName(), f.GetFilterDisabled(), pred)
		}
	}
	rules := []*listenerv3.ListenerFilterChainMatchPredicate{pred}
	if or := pred.GetOrMatch(); or != nil {
		rules = or.GetRules()
	}
	for _, r := range rules {
		if r == nil {
			continue
		}
		pr := r.GetDestinationPortRange()
		if pr == nil {
			t.Fatalf("filter_disabled rule %v is not a destination port range", r)
		}
		for p := pr.GetStart(); p < pr.GetEnd(); p++ {
			ports = append(ports, p)
		}
	}
	return ports
}
