// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/routes"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestUDPService: a service whose primary is UDP 5353, beside HTTP 8080 and TCP 9000, gets, from
// the real API server, a status listing 5353/UDP, the dial rows <name>:18082/udp and
// <name>:5353/udp reaching it, and a generated Service with 5353/UDP and 18082/UDP beside its TCP
// ports. A UDPRoute reaches 5353 (Accepted and ResolvedRefs), and is refused (UnsupportedProtocol)
// on the TCP and HTTP ports; every other kind is refused on 5353.
func TestUDPService(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "resolver")
	endpoint(t, ctx, ns, "resolver-0", "resolver", healthy, 5353, 5353, "UDP", 8080, "HTTP", 9000, "TCP")
	ms := serviceReady(t, ctx, ns, "resolver", 1)

	if got := meshv1alpha1.FormatPorts(portsOf(ms.Status.Ports)); got != "5353/UDP,8080/HTTP,9000/TCP" {
		t.Errorf("status.ports %s, want 5353/UDP,8080/HTTP,9000/TCP", got)
	}
	rows := map[string]meshv1alpha1.Dial{}
	for _, d := range ms.Status.DialSurface {
		rows[d.Address] = d
	}
	for _, address := range []string{"<name>:18082/udp", "<name>:5353/udp"} {
		d, ok := rows[address]
		if !ok || d.Outcome != meshv1alpha1.DialReaches || d.Port == nil || *d.Port != 5353 || d.Protocol != meshv1alpha1.ProtocolUDP {
			t.Errorf("row %s: %+v; want Reaches 5353 as UDP", address, d)
		}
	}
	if _, ok := rows["<name>:5353"]; ok {
		t.Error("a TCP row <name>:5353 for a UDP port: a TCP dial never reaches it")
	}

	var svc corev1.Service
	testenv.Eventually(t, "the generated Service carries the UDP ports", func() error {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "resolver"}, &svc); err != nil {
			return err
		}
		var got []string
		for _, p := range svc.Spec.Ports {
			got = append(got, fmt.Sprintf("%s=%d/%s", p.Name, p.Port, p.Protocol))
		}
		for _, want := range []string{"udp-5353=5353/UDP", "mesh-udp=18082/UDP", "mesh-tcp=18082/TCP", "tcp-9000=9000/TCP", "http-8080=8080/TCP"} {
			if !slices.Contains(got, want) {
				return fmt.Errorf("ports %v lack %s", got, want)
			}
		}
		return nil
	})

	const onUDP = "rule 0: backendRef resolver:5353 is a UDP port (declared 5353=udp); "
	checkRouteCases(t, ctx, ns, "resolver", []routeCase{
		{routes.UDPRoute, 5353, "ResolvedRefs", ""},
		{routes.UDPRoute, 9000, "UnsupportedProtocol", "rule 0: backendRef resolver:9000 is a raw-TCP port (declared 9000=tcp); " +
			"a UDPRoute can only reach UDP ports of resolver (5353/UDP). Point it at one of those, or use a TCPRoute."},
		{routes.UDPRoute, 8080, "UnsupportedProtocol", "rule 0: backendRef resolver:8080 is an HTTP/1.1 port (declared 8080=h1); " +
			"a UDPRoute can only reach UDP ports of resolver (5353/UDP). Point it at one of those, or use an HTTPRoute."},
		{routes.TCPRoute, 5353, "UnsupportedProtocol", onUDP + "a TCPRoute can only reach TCP ports of resolver (9000/TCP). Point it at one of those, or use a UDPRoute."},
		{routes.TLSRoute, 5353, "UnsupportedProtocol", onUDP + "a TLSRoute can only reach TCP ports of resolver (9000/TCP). Point it at one of those, or use a UDPRoute."},
		{routes.HTTPRoute, 5353, "UnsupportedProtocol", onUDP + "an HTTPRoute can only reach HTTP ports of resolver (8080/HTTP). Point it at one of those, or use a UDPRoute."},
		{routes.GRPCRoute, 5353, "UnsupportedProtocol", onUDP + "a GRPCRoute can only reach HTTP/2 ports, and resolver has none: use a UDPRoute."},
	})
	t.Run("UDPRoute parented to the UDP port is Accepted", func(t *testing.T) {
		r := newRoute(routes.UDPRoute, ns, "on-5353", serviceParent("resolver", 5353), backend("resolver", 5353))
		if err := env.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		ourCondition(t, ctx, r, "Accepted", metav1.ConditionTrue, "Accepted")
		tcp := newRoute(routes.TCPRoute, ns, "tcp-on-5353", serviceParent("resolver", 5353), backend("resolver", 9000))
		if err := env.Client.Create(ctx, tcp); err != nil {
			t.Fatal(err)
		}
		if c := ourCondition(t, ctx, tcp, "Accepted", metav1.ConditionFalse, "NoMatchingParent"); !strings.Contains(c.Message, "is a UDP port") {
			t.Errorf("Accepted message %q does not say the parent port is UDP", c.Message)
		}
	})
}

// portsOf is a status's ports as PortProtocols, for FormatPorts.
func portsOf(ports []meshv1alpha1.ServicePort) []meshv1alpha1.PortProtocol {
	out := make([]meshv1alpha1.PortProtocol, len(ports))
	for i, p := range ports {
		out[i] = meshv1alpha1.PortProtocol{Port: p.Port, Protocol: p.Protocol}
	}
	return out
}
