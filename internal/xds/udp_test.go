// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// udpMentions are the resources of res, by kind and name, whose configuration names port 5353:
// a listener (its chains match on the port or its SNI), a cluster or a load assignment. The
// routes are left out: the mesh's HTTP answer to Host: <name>:5353 (421 port-not-http) names it.
func udpMentions(t *testing.T, res xds.Resources) []string {
	t.Helper()
	var out []string
	check := func(kind, name string, m proto.Message) {
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "5353") {
			out = append(out, kind+" "+name)
		}
	}
	for _, l := range res.Listeners {
		check("listener", l.GetName(), l)
	}
	for _, c := range res.Clusters {
		check("cluster", c.GetName(), c)
	}
	for _, e := range res.Endpoints {
		check("load assignment", e.GetClusterName(), e)
	}
	return out
}

// TestUDPPortRendersNothing: a service whose primary is UDP 5353, beside HTTP 8080 and TCP 9000,
// gets no listener chain, cluster or load assignment for 5353 (the node proxy does not carry UDP
// yet: a TCP chain for it would take TCP connections the dial surface refuses), while its HTTP
// and TCP ports are built as ever, and its pod's inbound listener has no floor chain (no TCP
// port is its primary). The negative control: the same ports with 5353 declared tcp name it.
func TestUDPPortRendersNothing(t *testing.T) {
	m := xdstest.UDPPorts()
	res, err := xds.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := udpMentions(t, res); len(got) > 0 {
		t.Errorf("UDP port 5353 is rendered as TCP or HTTP in: %q", got)
	}
	clusters := map[string]bool{}
	for _, c := range res.Clusters {
		clusters[c.GetName()] = true
	}
	for _, want := range []string{xds.AppCluster("shop/payments-0", 8080), xds.AppCluster("shop/payments-0", 9000)} {
		if !clusters[want] {
			t.Errorf("no cluster %s: the service's HTTP and TCP ports must be built as ever", want)
		}
	}
	for _, l := range res.Listeners {
		if l.GetName() != xds.InboundListener("shop/payments-0") {
			continue
		}
		if l.GetDefaultFilterChain() != nil {
			t.Errorf("inbound listener %s has a floor chain %s: its primary is UDP, so no TCP connection without SNI has a port",
				l.GetName(), l.GetDefaultFilterChain().GetName())
		}
		var chains []string
		for _, fc := range l.GetFilterChains() {
			chains = append(chains, fc.GetName())
		}
		if want := []string{xds.InboundHTTPChain(8080), xds.InboundTCPChain(9000)}; strings.Join(chains, ",") != strings.Join(want, ",") {
			t.Errorf("inbound chains %q, want %q", chains, want)
		}
	}

	t.Run("negative control: 5353 declared tcp is rendered", func(t *testing.T) {
		tcp := xdstest.UDPPortsDeclared("5353=tcp,8080,9000=tcp")
		res, err := xds.Build(tcp)
		if err != nil {
			t.Fatal(err)
		}
		if got := udpMentions(t, res); len(got) == 0 {
			t.Error("5353 declared tcp is named by no listener, cluster or load assignment: the check cannot fail")
		}
	})
}

// TestUDPPortWithoutUDPIsTheSame: the model's view without UDP ports leaves a service or pod
// without any as it is (no copy), so meshes without UDP build exactly as before.
func TestUDPPortWithoutUDPIsTheSame(t *testing.T) {
	m := xdstest.MixedHTTPPrimary()
	for _, s := range m.Services {
		if got := s.WithoutUDP(); len(got.Ports) != len(s.Ports) || len(s.Ports) > 0 && &got.Ports[0] != &s.Ports[0] {
			t.Errorf("service %s/%s without UDP ports is a copy or lost ports", s.Namespace, s.Name)
		}
	}
	udp := xdstest.UDPPorts()
	for _, p := range udp.Pods {
		if p.Service != "payments" {
			continue
		}
		got := p.WithoutUDP()
		if len(got.Ports) != 2 || got.Primary != 5353 || len(p.Ports) != 3 {
			t.Errorf("pod %s/%s without UDP: ports %v primary %d (the original keeps %v)", p.Namespace, p.Name, got.Ports, got.Primary, p.Ports)
		}
	}
}
