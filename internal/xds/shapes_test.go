// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// Traffic shapes a dial-surface row does not spell: WebSocket (HTTP/1.1 Upgrade, or an HTTP/2
// extended CONNECT over h2c), HTTP/1.0, Upgrade: h2c, and HTTP/2 over cleartext to a host that
// is not the mesh's. What each must do is written here from the workload page ("your
// application speaks what it always did, to its own proxy"; "a name that is not a mesh service
// ... a captured dial passes through to the address that was dialled") and from Envoy's
// documented behaviour, not from resolve or the builder: every one reaches the application (or
// the original destination) in the shape the client sent it, or gets a clear HTTP answer; none
// is reset, refused 403 or 426, or downgraded.

// shapesMesh is the mixed payments (HTTP/1.1 8080, h2 9090, TCP 9000; one pod on this node),
// called from frontend-0.
func shapesMesh() (m model.Mesh, client, server model.LocalPod) {
	m = xdstest.MixedHTTPPrimary()
	for _, p := range m.Pods {
		switch p.Namespace + "/" + p.Name {
		case "web/frontend-0":
			client = p
		case "shop/payments-0":
			server = p
		}
	}
	return m, client, server
}

// notTheMesh is an address and a host no mesh service holds (TEST-NET-3).
const (
	notTheMeshIP   = "203.0.113.7"
	notTheMeshHost = "example.com:8080"
)

// shapeFailures walks every shape through res and says, one line each, where one does not do
// what the workload page promises.
func shapeFailures(res xds.Resources, m model.Mesh, client, server model.LocalPod) []string {
	sim := xdssim.New(res)
	capture := xds.CaptureListener(xds.PodKey(client.Namespace, client.Name))
	var vip string
	for _, s := range m.Services {
		if s.Name == "payments" {
			vip = s.VIP
		}
	}
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	for _, port := range []uint32{8080, 9090} {
		host := xds.FQDN("payments", "shop", m.Domain) + ":" + strconv.Itoa(int(port))
		for _, h2c := range []bool{false, true} {
			ws := &xdssim.Request{Host: host, Upgrade: "websocket", HTTP2: h2c}
			what := fmt.Sprintf("WebSocket to %s (h2c %t)", host, h2c)
			out := sim.Dial(xdssim.Conn{Listener: capture, DstIP: vip, DstPort: port, HTTP: ws})
			if out.Verdict != xdssim.Forwarded || len(out.Targets) != 1 || out.Targets[0].Upgrade != "websocket" {
				fail("%s: the capture listener does not forward the upgrade: %s", what, out)
				continue
			}
			if f := arriveUpgraded(sim, out.Targets[0], server, int32(port), host); f != "" {
				fail("%s: %s", what, f)
			}
		}
		http10 := sim.Dial(xdssim.Conn{Listener: capture, DstIP: vip, DstPort: port, HTTP: &xdssim.Request{Host: host, HTTP10: true}})
		if http10.Verdict != xdssim.Forwarded || len(http10.Targets) != 1 || !strings.HasPrefix(http10.Targets[0].Cluster, xds.HTTPCluster(xds.FQDN("payments", "shop", m.Domain), int32(port))+"|") {
			fail("HTTP/1.0 to %s: want it served by the port's cluster: %s", host, http10)
		}
		hostless := sim.Dial(xdssim.Conn{Listener: capture, DstIP: vip, DstPort: port, HTTP: &xdssim.Request{HTTP10: true}})
		if hostless.Verdict != xdssim.Answered || hostless.Response.Status != 400 {
			fail("HTTP/1.0 without a Host to %s:%d: want Envoy's 400 (a clear answer, not a reset): %s", vip, port, hostless)
		}
		h2cUpgrade := sim.Dial(xdssim.Conn{Listener: capture, DstIP: vip, DstPort: port, HTTP: &xdssim.Request{Host: host, Upgrade: "h2c"}})
		if h2cUpgrade.Verdict != xdssim.Forwarded || len(h2cUpgrade.Targets) != 1 || h2cUpgrade.Targets[0].Upgrade != "" {
			fail("Upgrade: h2c to %s: want it served as HTTP/1.1 (Envoy ignores the upgrade): %s", host, h2cUpgrade)
		}
	}
	for _, shape := range []struct {
		req      xdssim.Request
		upstream string
	}{
		{xdssim.Request{Host: notTheMeshHost, HTTP2: true}, "h2"},
		{xdssim.Request{Host: notTheMeshHost}, "http/1.1"},
		{xdssim.Request{Host: notTheMeshHost, HTTP10: true}, "http/1.1"},
		{xdssim.Request{Host: notTheMeshHost, Upgrade: "websocket"}, "http/1.1"},
		{xdssim.Request{Host: notTheMeshHost, Upgrade: "websocket", HTTP2: true}, "h2"},
	} {
		out := sim.Dial(xdssim.Conn{Listener: capture, DstIP: notTheMeshIP, DstPort: 8080, HTTP: &shape.req})
		if out.Verdict != xdssim.Passthrough || len(out.Targets) != 1 || !slices.Equal(out.Targets[0].UpstreamHTTP, []string{shape.upstream}) ||
			out.Targets[0].Upgrade != shape.req.Upgrade {
			fail("%+v to %s:8080, not the mesh's: want it passed through as %s (upgrade %q): %s", shape.req, notTheMeshIP, shape.upstream, shape.req.Upgrade, out)
		}
	}
	return failures
}

// arriveUpgraded follows an upgraded request over the mesh hop to server's inbound listener and
// says what is wrong with its delivery to the application's port, or "".
func arriveUpgraded(sim *xdssim.Sim, t xdssim.Target, server model.LocalPod, port int32, host string) string {
	if t.TLS == nil {
		return fmt.Sprintf("the hop to %s is not mTLS", t.Cluster)
	}
	key := xds.PodKey(server.Namespace, server.Name)
	hop := &xdssim.Request{Host: host, Upgrade: t.Upgrade, HTTP2: slices.Equal(t.UpstreamHTTP, []string{"h2"})}
	in := sim.Arrive(xds.InboundListener(key), t.TLS.SNI, t.TLS.ALPN, hop)
	if in.Verdict != xdssim.Forwarded || len(in.Targets) != 1 || in.Targets[0].Cluster != xds.AppCluster(key, port) || in.Targets[0].Upgrade != "websocket" {
		return fmt.Sprintf("the destination's inbound listener does not deliver the upgrade to the app's port %d: %s", port, in)
	}
	return ""
}

// TestTrafficShapes walks WebSocket, HTTP/1.0, Upgrade: h2c and h2c to the world through the
// build of the mixed scenario.
func TestTrafficShapes(t *testing.T) {
	m, client, server := shapesMesh()
	for _, f := range shapeFailures(build(t, m), m, client, server) {
		t.Error(f)
	}
}

// The negative controls: a build missing each setting the shapes need must fail the walk.
func TestTrafficShapesCatchMissingSettings(t *testing.T) {
	m, client, server := shapesMesh()
	eachHCM := func(res xds.Resources, change func(*hcmv3.HttpConnectionManager)) {
		for _, l := range res.Listeners {
			for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
				for _, f := range fc.GetFilters() {
					hcm := &hcmv3.HttpConnectionManager{}
					if f.GetTypedConfig().MessageIs(hcm) && f.GetTypedConfig().UnmarshalTo(hcm) == nil {
						change(hcm)
						f.GetTypedConfig().Value = mustMarshal(t, hcm).GetValue()
					}
				}
			}
		}
	}
	for name, mutate := range map[string]func(xds.Resources){
		"no upgrade_configs": func(res xds.Resources) {
			eachHCM(res, func(h *hcmv3.HttpConnectionManager) { h.UpgradeConfigs = nil })
		},
		"no allow_connect on the HCMs": func(res xds.Resources) {
			eachHCM(res, func(h *hcmv3.HttpConnectionManager) { h.Http2ProtocolOptions = nil })
		},
		"no accept_http_10": func(res xds.Resources) {
			eachHCM(res, func(h *hcmv3.HttpConnectionManager) { h.HttpProtocolOptions = nil })
		},
		"no protocol options on the passthrough": func(res xds.Resources) {
			for _, c := range res.Clusters {
				if c.GetName() == xds.PassthroughCluster {
					c.TypedExtensionProtocolOptions = nil
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			res := build(t, m)
			mutate(res)
			failures := shapeFailures(res, m, client, server)
			if len(failures) == 0 {
				t.Fatal("the walk passed; it must fail")
			}
			t.Logf("caught (%d failures), e.g. %s", len(failures), failures[0])
		})
	}
}

func mustMarshal(t testing.TB, hcm *hcmv3.HttpConnectionManager) *anypb.Any {
	t.Helper()
	a, err := anypb.New(hcm)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
