// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck_test

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdscheck"
)

// additional is the address ip:18001 in netns, as an additional address.
func additional(ip, netns string) *listenerv3.AdditionalAddress {
	a := proto.Clone(listenerAddr).(*corev3.Address)
	a.GetSocketAddress().Address, a.GetSocketAddress().NetworkNamespaceFilepath = ip, netns
	return &listenerv3.AdditionalAddress{Address: a}
}

// TestFamiliesGate: a capture listener whose chain matches an IPv6 VIP, bound on 127.0.0.1
// alone, is reported (its IPv6 connections are redirected to [::1] and refused); so is an
// additional address bound outside the listener's namespace. With [::1] beside 127.0.0.1 in the
// pod's namespace the gate passes.
func TestFamiliesGate(t *testing.T) {
	ipv6VIP := func(t testing.TB, res *xds.Resources) {
		chain(t, *res, xds.CaptureTCPChain(svcKey)).GetFilterChainMatch().GetPrefixRanges()[0].AddressPrefix = "fd00:10:96::10"
		chain(t, *res, xds.CaptureTCPChain(svcKey)).GetFilterChainMatch().GetPrefixRanges()[0].PrefixLen.Value = 128
	}
	netns := listenerAddr.GetSocketAddress().GetNetworkNamespaceFilepath()
	for _, tc := range []negative{
		{"an IPv6 chain on an IPv4 socket", xdscheck.Families, ipv6VIP,
			`listener "capture_web/frontend-0": chain "cap_tcp_payments.shop" matches IPv6 destinations (fd00:10:96::10/128), but the listener has no IPv6 socket (it binds 127.0.0.1): a redirect keeps the family, so those connections are refused; bind [::1] too (additional_addresses)`},
		{"an additional address in the node's namespace", xdscheck.Families, func(t testing.TB, res *xds.Resources) {
			ipv6VIP(t, res)
			res.Listeners[0].AdditionalAddresses = []*listenerv3.AdditionalAddress{additional("::1", "")}
		}, `listener "capture_web/frontend-0": additional_addresses[0] (::1) is bound in network namespace "", the listener's address (127.0.0.1) in "/var/run/netns/cni-web-frontend-0": bind every address in the listener's namespace`},
	} {
		tc.run(t)
	}
	fixed := clone(valid(t))
	ipv6VIP(t, &fixed)
	fixed.Listeners[0].AdditionalAddresses = []*listenerv3.AdditionalAddress{additional("::1", netns)}
	if v := xdscheck.Families(fixed); v != nil {
		t.Errorf("[::1] beside 127.0.0.1 in the pod's namespace: %s", strings.Join(v, "\n"))
	}
}
