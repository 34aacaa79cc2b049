// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	setfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	connectionlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	netsetfilterstatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	filterstateoverridev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/local_address_selectors/filter_state_override/v3"
)

// Where an upstream connection leaves from, as Envoy 1.40 decides it:
//
//   - a listener whose address names a network namespace (network_namespace_filepath) creates
//     its socket there, and sets filter state envoy.network.network_namespace to that path on
//     every connection it accepts (ListenerNetnsKey);
//   - the set_filter_state network filter evaluates each on_new_connection value's format string
//     (modelled: literal text and %FILTER_STATE(key:PLAIN)%, which is empty when the key is
//     unset) and sets the object; shared_with_upstream ONCE or TRANSITIVE hands it to the upstream
//     connection's transport socket options; skip_if_empty skips an empty value;
//   - a cluster's upstream_bind_config picks the source: without one, Envoy's own namespace (the
//     node's); with a source address and the filter_state_override local address selector, the
//     namespace the shared object envoy.network.upstream_bind_override.network_namespace names
//     (UpstreamNetnsKey; an empty value is Envoy's own); without a source address the selector has
//     nothing to override (it acts on the default selector's address). A SOL_SOCKET/SO_MARK
//     socket option sets the socket's mark.
//
// The source address's family: the default selector (DefaultUpstreamLocalAddressSelector, which
// the filter-state selector overrides the namespace of) takes, for each endpoint, the first of
// source_address and extra_source_addresses of the endpoint's family, else source_address; a
// socket bound to an address of the other family cannot connect, so a receiving endpoint (or the
// passthrough's original destination) no source address of its family serves breaks the target
// (ErrSourceFamily).
//
// Anything else on that path (another network filter, another selector, other format operators)
// is ErrUnsupported.
const (
	// ListenerNetnsKey is the filter state object a listener bound in a namespace sets.
	ListenerNetnsKey = "envoy.network.network_namespace"
	// UpstreamNetnsKey is the object the filter-state local address selector reads.
	UpstreamNetnsKey = "envoy.network.upstream_bind_override.network_namespace"
)

// filterState is a connection's filter state: each object's value and whether it is shared with
// the upstream connection.
type filterState map[string]stateObject

type stateObject struct {
	value  string
	shared bool
	// readOnly: Envoy keeps the object and refuses a later write (the listener's own are so).
	readOnly bool
}

// formatOperator matches one command of a substitution format string.
var formatOperator = regexp.MustCompile(`%[A-Z_]+(\([^)]*\))?%`)

// applyNetworkFilters runs the chain's filters before its terminal one on the connection's
// filter state; only set_filter_state and connection_limit (which one walked connection passes)
// are modelled.
func applyNetworkFilters(fc *listenerv3.FilterChain, state filterState) error {
	filters := fc.GetFilters()
	for _, f := range filters[:max(len(filters)-1, 0)] {
		// connection_limit closes a connection beyond its count; one connection walked alone is
		// within it, and it changes nothing of where the connection lands.
		if tc := f.GetTypedConfig(); tc != nil && unpack(tc, &connectionlimitv3.ConnectionLimit{}) {
			continue
		}
		// The RBAC filter decides on the first byte (rbac.go, connectionAllowed); it sets nothing.
		if _, is, err := networkRBAC(f); is {
			if err != nil {
				return err
			}
			continue
		}
		config := &netsetfilterstatev3.Config{}
		if tc := f.GetTypedConfig(); tc == nil || !unpack(tc, config) {
			return fmt.Errorf("%w: chain %q has network filter %q before its terminal filter", ErrUnsupported, fc.GetName(), f.GetName())
		}
		if len(config.GetOnDownstreamTlsHandshake()) > 0 || len(config.GetOnDownstreamData()) > 0 {
			return fmt.Errorf("%w: chain %q: set_filter_state acts after the connection opens", ErrUnsupported, fc.GetName())
		}
		for _, v := range config.GetOnNewConnection() {
			if err := setObject(v, state); err != nil {
				return fmt.Errorf("chain %q: %w", fc.GetName(), err)
			}
		}
	}
	return nil
}

// setObject sets one set_filter_state value.
func setObject(v *setfilterstatev3.FilterStateValue, state filterState) error {
	key := v.GetObjectKey()
	format := v.GetFormatString()
	text := format.GetTextFormatSource().GetInlineString()
	if key == "" || format.GetTextFormatSource().GetInlineString() == "" || len(format.GetFormatters()) > 0 {
		return fmt.Errorf("%w: set_filter_state value of key %q is not an object key with an inline text format", ErrUnsupported, key)
	}
	var unsupported error
	value := formatOperator.ReplaceAllStringFunc(text, func(op string) string {
		inner, ok := strings.CutPrefix(op, "%FILTER_STATE(")
		if inner, ok2 := strings.CutSuffix(inner, ":PLAIN)%"); ok && ok2 {
			return state[inner].value
		}
		unsupported = fmt.Errorf("%w: format operator %s", ErrUnsupported, op)
		return ""
	})
	if unsupported != nil {
		return unsupported
	}
	if value == "" && v.GetSkipIfEmpty() {
		return nil
	}
	if old, set := state[key]; set && old.readOnly {
		return nil // Envoy refuses to overwrite a read-only object (logged), keeping the old one
	}
	state[key] = stateObject{value: value, shared: v.GetSharedWithUpstream() != setfilterstatev3.FilterStateValue_NONE}
	return nil
}

// upstreamSource is where cluster cl's upstream socket is created, given the downstream
// connection's filter state: the namespace's path, or "" for Envoy's own; and the socket's mark.
func upstreamSource(cl *clusterv3.Cluster, state filterState) (netns string, mark uint32, err error) {
	bind := cl.GetUpstreamBindConfig()
	if bind == nil {
		return "", 0, nil
	}
	for _, o := range bind.GetSocketOptions() {
		if o.GetLevel() == 1 && o.GetName() == 36 { // SOL_SOCKET, SO_MARK
			mark = uint32(o.GetIntValue())
		}
	}
	netns = bind.GetSourceAddress().GetNetworkNamespaceFilepath()
	selector := bind.GetLocalAddressSelector()
	if selector == nil {
		return netns, mark, nil
	}
	if tc := selector.GetTypedConfig(); tc == nil || !unpack(tc, &filterstateoverridev3.Config{}) {
		return "", 0, fmt.Errorf("%w: cluster %q: local address selector %q", ErrUnsupported, cl.GetName(), selector.GetName())
	}
	if bind.GetSourceAddress() == nil {
		return netns, mark, nil // nothing for the selector to override
	}
	if o, ok := state[UpstreamNetnsKey]; ok && o.shared {
		netns = o.value
	}
	return netns, mark, nil
}

// ErrSourceFamily is an upstream an upstream_bind_config has no source address of its family for.
var ErrSourceFamily = errors.New("the upstream socket would be bound to a source address of the other family: the connection fails")

// sourceFamilies checks that cl's upstream_bind_config has a source address of the family of
// each of addrs (IP addresses; others are not read). Without a source address the kernel picks
// one of the right family.
func sourceFamilies(cl *clusterv3.Cluster, addrs []string) error {
	bind := cl.GetUpstreamBindConfig()
	if bind.GetSourceAddress() == nil {
		return nil
	}
	has := map[bool]bool{} // by IPv6
	sources := []string{bind.GetSourceAddress().GetAddress()}
	for _, extra := range bind.GetExtraSourceAddresses() {
		sources = append(sources, extra.GetAddress().GetAddress())
	}
	// Envoy 1.40 still binds by the deprecated field too: read it, or a config using it would
	// look unable to reach the other family.
	for _, extra := range bind.GetAdditionalSourceAddresses() { //nolint:staticcheck // see above
		sources = append(sources, extra.GetAddress())
	}
	for _, src := range sources {
		if a, err := netip.ParseAddr(src); err == nil {
			has[a.Unmap().Is6()] = true
		}
	}
	var missing []string
	for _, addr := range addrs {
		if a, err := netip.ParseAddr(addr); err == nil && !has[a.Unmap().Is6()] && !slices.Contains(missing, addr) {
			missing = append(missing, addr)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: cluster %q binds its upstream sockets to %s (upstream_bind_config) and connects to %s: add a source address of that family to extra_source_addresses",
		ErrSourceFamily, cl.GetName(), strings.Join(sources, ", "), strings.Join(missing, ", "))
}

// listenerNetns is the namespace a listener's socket is bound in ("" for Envoy's own).
func listenerNetns(l *listenerv3.Listener) string {
	return l.GetAddress().GetSocketAddress().GetNetworkNamespaceFilepath()
}
