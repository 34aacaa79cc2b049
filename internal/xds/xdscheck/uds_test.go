// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck_test

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

const udsPath = "/run/aether/uds/uid-payments-0/app.sock"

func pipe(path string) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: path}}}
}

// appHost is the one host address of cluster name of res.
func appHost(t testing.TB, res xds.Resources, name string) **corev3.Address {
	t.Helper()
	for _, c := range res.Clusters {
		if c.GetName() == name {
			return &c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().Address
		}
	}
	t.Fatalf("no cluster %q", name)
	return nil
}

// TestUDSDeliveryGate: the built uds scenario (payments-0 serves on a socket) passes; copies
// broken in one place each are reported: a port left on the pod's address, two pods on one
// socket, a path too long for a Unix socket address, a pipe outside a pod's inbound.
func TestUDSDeliveryGate(t *testing.T) {
	base, err := xds.Build(xdstest.UDS())
	if err != nil {
		t.Fatal(err)
	}
	if v := xdscheck.All(base); v != nil {
		t.Fatalf("the uds scenario fails:\n%s", strings.Join(v, "\n"))
	}
	pod0, frontend := xds.PodKey("shop", "payments-0"), xds.PodKey("web", "frontend-0")
	for _, tc := range []struct {
		name      string
		breakCopy func(t testing.TB, res *xds.Resources)
		want      string
	}{
		{"a port left on the pod's address", func(t testing.TB, res *xds.Resources) {
			*appHost(t, *res, xds.AppCluster(pod0, 9000)) = &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.244.1.10", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 9000}}}}
		}, `cluster "app|shop/payments-0:9000": delivers to 10.244.1.10:9000, but pod shop/payments-0 serves on pipe:` + udsPath +
			`: every declared port of a pod that serves on a Unix socket is delivered to it`},
		{"two pods on one socket", func(t testing.TB, res *xds.Resources) {
			*appHost(t, *res, xds.AppCluster(frontend, 8080)) = pipe(udsPath)
		}, `pods shop/payments-0 and web/frontend-0 both deliver to ` + udsPath + `: each pod's socket is its own`},
		{"a path too long", func(t testing.TB, res *xds.Resources) {
			long := "/run/aether/uds/uid-payments-0/" + strings.Repeat("s", 80)
			for _, port := range []int32{8080, 9000, 9090} {
				*appHost(t, *res, xds.AppCluster(pod0, port)) = pipe(long)
			}
		}, `pod shop/payments-0: its socket /run/aether/uds/uid-payments-0/` + strings.Repeat("s", 80) +
			` is 111 bytes long, over the 107 bytes of a Unix socket address: Envoy rejects the cluster`},
		{"a peer's endpoint on a pipe", func(t testing.TB, res *xds.Resources) {
			res.Endpoints[0].GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().Address = pipe(udsPath)
		}, `holds pipe ` + udsPath + `: only a pod's inbound delivers to a Unix socket`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken, err := xds.Build(xdstest.UDS())
			if err != nil {
				t.Fatal(err)
			}
			tc.breakCopy(t, &broken)
			got := xdscheck.UDSDelivery(broken)
			for _, v := range got {
				t.Logf("violation: %s", v)
			}
			found := false
			for _, v := range got {
				found = found || strings.Contains(v, tc.want)
			}
			if !found {
				t.Errorf("the gate did not report\n  %s\nit reported:\n  %s", tc.want, strings.Join(got, "\n  "))
			}
		})
	}
}
