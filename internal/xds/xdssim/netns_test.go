// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim_test

import (
	"errors"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	setfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	netsetfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	filterstateoverridev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/local_address_selectors/filter_state_override/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

// setState is a set_filter_state filter setting key to format, shared with the upstream or not.
func setState(key, format string, shared setfilterstatev3.FilterStateValue_SharedWithUpstream) *listenerv3.Filter {
	return &listenerv3.Filter{Name: "envoy.filters.network.set_filter_state", ConfigType: &listenerv3.Filter_TypedConfig{
		TypedConfig: pack(&netsetfilterstatev3.Config{OnNewConnection: []*setfilterstatev3.FilterStateValue{{
			Key:        &setfilterstatev3.FilterStateValue_ObjectKey{ObjectKey: key},
			FactoryKey: "envoy.hashable_string",
			Value: &setfilterstatev3.FilterStateValue_FormatString{FormatString: &corev3.SubstitutionFormatString{
				Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
					Specifier: &corev3.DataSource_InlineString{InlineString: format}}}}},
			SharedWithUpstream: shared,
		}}})}}
}

// TestWhereTheUpstreamLeavesFrom: a capture listener bound in a namespace, a chain that names it
// as the upstream's, a passthrough cluster that binds through the filter-state selector with a
// mark: the upstream leaves from that namespace, marked. Each part taken away, the upstream
// leaves from Envoy's own namespace; what the simulator cannot read is Unmodelled, never passed.
func TestWhereTheUpstreamLeavesFrom(t *testing.T) {
	const netns = "/var/run/netns/cni-a"
	fromListener := "%FILTER_STATE(" + xdssim.ListenerNetnsKey + ":PLAIN)%"
	bind := func() *corev3.BindConfig {
		return &corev3.BindConfig{
			SourceAddress: &corev3.SocketAddress{Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{}},
			SocketOptions: []*corev3.SocketOption{{Level: 1, Name: 36, Value: &corev3.SocketOption_IntValue{IntValue: 0xae7}}},
			LocalAddressSelector: &corev3.TypedExtensionConfig{Name: xds.PodBindSelector,
				TypedConfig: pack(&filterstateoverridev3.Config{})},
		}
	}
	for name, tc := range map[string]struct {
		listenerNetns string
		filter        *listenerv3.Filter
		bind          *corev3.BindConfig
		netns         string
		mark          uint32
		unmodelled    bool
	}{
		"from the pod": {listenerNetns: netns, filter: setState(xdssim.UpstreamNetnsKey, fromListener, setfilterstatev3.FilterStateValue_ONCE),
			bind: bind(), netns: netns, mark: 0xae7},
		"a literal namespace": {filter: setState(xdssim.UpstreamNetnsKey, "/var/run/netns/other", setfilterstatev3.FilterStateValue_ONCE),
			bind: bind(), netns: "/var/run/netns/other", mark: 0xae7},
		"not shared with the upstream": {listenerNetns: netns, filter: setState(xdssim.UpstreamNetnsKey, fromListener, setfilterstatev3.FilterStateValue_NONE),
			bind: bind(), mark: 0xae7},
		"no filter": {listenerNetns: netns, bind: bind(), mark: 0xae7},
		"another key": {listenerNetns: netns, filter: setState("my.key", fromListener, setfilterstatev3.FilterStateValue_ONCE),
			bind: bind(), mark: 0xae7},
		"no bind config": {listenerNetns: netns, filter: setState(xdssim.UpstreamNetnsKey, fromListener, setfilterstatev3.FilterStateValue_ONCE)},
		"no source address for the selector to override": {listenerNetns: netns,
			filter: setState(xdssim.UpstreamNetnsKey, fromListener, setfilterstatev3.FilterStateValue_ONCE),
			bind:   &corev3.BindConfig{LocalAddressSelector: bind().LocalAddressSelector}},
		"a format operator the simulator does not read": {listenerNetns: netns,
			filter: setState(xdssim.UpstreamNetnsKey, "%DOWNSTREAM_REMOTE_ADDRESS%", setfilterstatev3.FilterStateValue_ONCE), bind: bind(), unmodelled: true},
	} {
		t.Run(name, func(t *testing.T) {
			fc := chain("cap", tcpProxy("passthrough"), dport(9000))
			if tc.filter != nil {
				fc.Filters = append([]*listenerv3.Filter{tc.filter}, fc.Filters...)
			}
			l := capture(chains(fc))
			l.Address.GetSocketAddress().NetworkNamespaceFilepath = tc.listenerNetns
			cl := originalDstCluster("passthrough")
			cl.UpstreamBindConfig = tc.bind
			out := xdssim.New(xds.Resources{Listeners: []*listenerv3.Listener{l}, Clusters: []*clusterv3.Cluster{cl}}).
				Dial(xdssim.Conn{Listener: "capture", DstIP: "10.0.0.1", DstPort: 9000})
			if tc.unmodelled {
				if out.Verdict != xdssim.Unmodelled || !errors.Is(out.Err, xdssim.ErrUnsupported) {
					t.Fatalf("%s; want Unmodelled", out)
				}
				return
			}
			if out.Verdict != xdssim.Passthrough || len(out.Targets) != 1 {
				t.Fatalf("%s; want a passthrough", out)
			}
			if got := out.Targets[0]; got.Netns != tc.netns || got.Mark != tc.mark {
				t.Errorf("the upstream leaves from %q with mark %#x; want %q, %#x", got.Netns, got.Mark, tc.netns, tc.mark)
			}
		})
	}
}

// TestTransportSocketMatchesForProbes: a cluster's transport socket match with criteria (the
// mesh's probe socket, chosen by a health check's criteria) leaves traffic on the cluster's own
// socket, and the simulator forwards; a match without criteria (every connection) and an endpoint
// that picks a socket by its metadata are Unmodelled, never passed.
func TestTransportSocketMatchesForProbes(t *testing.T) {
	criteria := &structpb.Struct{Fields: map[string]*structpb.Value{"aether.io/health-check": structpb.NewStringValue("primary")}}
	picking := ep("10.1.0.1", 18008, corev3.HealthStatus_HEALTHY)
	picking.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.transport_socket_match": criteria}}
	for name, tc := range map[string]struct {
		match      *structpb.Struct
		endpoint   *endpointv3.LbEndpoint
		unmodelled bool
	}{
		"criteria, for probes":          {match: criteria},
		"no criteria: every connection": {match: &structpb.Struct{}, unmodelled: true},
		"an endpoint that picks it":     {match: criteria, endpoint: picking, unmodelled: true},
	} {
		t.Run(name, func(t *testing.T) {
			res := base()
			res.Clusters[0].TransportSocketMatches = []*clusterv3.Cluster_TransportSocketMatch{{Name: "probe", Match: tc.match}}
			if tc.endpoint != nil {
				res.Endpoints[0] = cla("a.svc:80", locality("z", 0, 1, tc.endpoint))
			}
			res.Listeners = []*listenerv3.Listener{capture(chains(chain("cap", tcpProxy("a"), dport(80))))}
			out := xdssim.New(res).Dial(tcpTo(vipA, 80))
			if tc.unmodelled {
				if out.Verdict != xdssim.Unmodelled || !errors.Is(out.Err, xdssim.ErrUnsupported) {
					t.Fatalf("%s; want Unmodelled", out)
				}
				return
			}
			if out.Verdict != xdssim.Forwarded || len(out.Targets) != 1 || out.Targets[0].Cluster != "a" {
				t.Fatalf("%s; want forwarded to cluster a", out)
			}
		})
	}
}
