// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package capture_test

import (
	"net/netip"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestInboundPortLeftAloneOverUDP: the HTTP/3 hop (xds.InboundQUICListener) rides UDP 18008 as
// the HTTP/2 hop rides TCP 18008, and the pod's table leaves both alone in every mode: TCP 18008
// is excluded (excluded_ports), and no rule but DNS's redirects UDP. The table has only the
// output hook, so what arrives at the pod's UDP 18008 passes too (no input chain to drop it). The
// negative control: the same datagram to port 53 is redirected to the mesh DNS, so the evaluator
// does redirect UDP where a rule says so.
func TestInboundPortLeftAloneOverUDP(t *testing.T) {
	m := xdstest.HTTP3Hop()
	for _, mode := range []model.CaptureMode{model.CaptureScoped, model.CaptureSurface, model.CaptureAll} {
		for _, p := range m.Pods {
			p.Capture, p.MeshDNS = mode, true
			r := capture.Build(m, p, capture.Options{})
			for _, peer := range []string{"10.244.1.10", "10.244.2.10", "10.96.0.10"} {
				for _, proto := range []string{capture.ProtoTCP, capture.ProtoUDP} {
					c := capture.Connection{Proto: proto, Dst: netip.AddrPortFrom(netip.MustParseAddr(peer), uint16(meshv1alpha1.ProxyInboundPort))}
					if d := r.Evaluate(c); d.Redirected() {
						t.Errorf("%s, %s/%s: %s to %s redirected by %v", mode, p.Namespace, p.Name, proto, c.Dst, d.Rule)
					}
				}
				dns := capture.Connection{Proto: capture.ProtoUDP, Dst: netip.AddrPortFrom(netip.MustParseAddr(peer), 53)}
				if d := r.Evaluate(dns); !d.Redirected() {
					t.Errorf("%s, %s/%s: negative control: a DNS query to %s is not redirected", mode, p.Namespace, p.Name, dns.Dst)
				}
			}
			if n := len(r.Chains); n != 1 || r.Chains[0].Hook != "output" {
				t.Errorf("%s, %s/%s: chains %v, want the output chain alone (nothing filters what arrives)", mode, p.Namespace, p.Name, r.Chains)
			}
		}
	}
}
