// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	httpinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	originaldstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	"google.golang.org/protobuf/proto"
)

// The transport protocols the listener filters detect (Envoy's TransportProtocolNames).
const (
	transportTLS = "tls"
	transportRaw = "raw_buffer"
)

// defaultListenerFiltersTimeout is Envoy's listener_filters_timeout when unset.
const defaultListenerFiltersTimeout = 15 * time.Second

// noPeerIP stands for a peer without an IP: Envoy's FilterChain::fakeAddress(), which only
// catch-all ranges hold.
var noPeerIP = netip.MustParseAddr("255.255.255.255")

// detected is what the listener filters found on a connection.
type detected struct {
	transport string
	sni       string
	alpn      []string
}

// accept runs a connection through listener l: its listener filters, then its filter chains.
func (s *Sim) accept(out *Outcome, l *listenerv3.Listener, c Conn, local, remote netip.AddrPort) {
	out.Destination = local
	out.state = filterState{}
	if netns := listenerNetns(l); netns != "" {
		out.state[ListenerNetnsKey] = stateObject{value: netns, readOnly: true} // Envoy sets it read only
	}
	if err := Check(l); err != nil {
		*out = out.fail(Closed, fmt.Errorf("%w: %v", ErrRejected, err))
		return
	}
	if other := s.handoffTarget(l, local); other != "" {
		*out = out.fail(Unmodelled, fmt.Errorf("%w: listener %q", ErrHandoff, other))
		return
	}
	own := local.Port()
	if a, err := listenerAddress(l); err == nil {
		own = a.Port()
	}
	d, waited, verdict, err := inspect(l, c, own, local.Port())
	out.FiltersWaited = waited
	if err != nil {
		*out = out.fail(verdict, err)
		return
	}
	out.Transport, out.ServerName, out.AppProtocols = d.transport, d.sni, d.alpn
	if l.GetFilterChainMatcher() != nil {
		*out = out.fail(Unmodelled, fmt.Errorf("%w: listener %q selects chains with filter_chain_matcher", ErrUnsupported, l.GetName()))
		return
	}
	fc := findFilterChain(l.GetFilterChains(), key{local: local, remote: remote, detected: d})
	if fc == nil {
		fc = l.GetDefaultFilterChain()
		out.DefaultChain = true
	}
	if fc == nil {
		*out = out.fail(Closed, fmt.Errorf("%w (listener %q, destination %s, transport %s, sni %q, alpn %v)",
			ErrNoChain, l.GetName(), local, d.transport, d.sni, d.alpn))
		return
	}
	out.Chain = fc.GetName()
	s.serve(out, fc, c, local)
}

// restoresDestination says the listener reads the original destination of a redirected
// connection: use_original_dst adds the original_dst listener filter (ListenerImpl), or the
// filter is there itself.
func restoresDestination(l *listenerv3.Listener) bool {
	if l.GetUseOriginalDst().GetValue() {
		return true
	}
	for _, f := range l.GetListenerFilters() {
		if listenerFilterIs(f, &originaldstv3.OriginalDst{}, "envoy.filters.listener.original_dst") {
			return true
		}
	}
	return false
}

// localAddress is the destination the listener matches chains on, for a connection the client
// dialled to dst: dst when the listener restores it or when one of the listener's sockets (its
// address or an additional address) is bound to dst or to the wildcard that takes it; otherwise
// the connection was redirected to the listener, and its local address is the listener's socket
// of dst's family (a redirect keeps the family), else its address.
func localAddress(l *listenerv3.Listener, dst netip.AddrPort) netip.AddrPort {
	if restoresDestination(l) {
		return dst
	}
	own, err := listenerAddress(l)
	if err != nil {
		return dst
	}
	sockets := boundAddresses(l)
	for _, b := range sockets {
		if b.receives(dst) > 0 {
			return dst
		}
	}
	for _, b := range sockets {
		if b.addr.Addr().Is6() == dst.Addr().Is6() {
			return b.addr
		}
	}
	return own
}

// handoffTarget is the listener Envoy hands a restored connection to (use_original_dst), as
// ConnectionHandlerImpl::getBalancedHandlerByAddress finds it: a socket bound to the original
// destination exactly, else the wildcard of its family on its port, where a :: socket without
// IPV6_V6ONLY (ipv4_compat) is also IPv4's wildcard. Every socket of every listener counts, the
// additional addresses too; Envoy's map is keyed by address and port alone, whatever namespace
// a socket is bound in. "" when there is none.
func (s *Sim) handoffTarget(l *listenerv3.Listener, local netip.AddrPort) string {
	if !l.GetUseOriginalDst().GetValue() {
		return ""
	}
	best, rank := "", 0
	for _, name := range sortedKeys(s.listeners) {
		other := s.listeners[name]
		if other == l {
			continue
		}
		for _, b := range boundAddresses(other) {
			if r := b.receives(local); r > rank {
				best, rank = name, r
			}
		}
	}
	return best
}

// listenerAddress is the socket address the listener binds.
func listenerAddress(l *listenerv3.Listener) (netip.AddrPort, error) {
	sa := l.GetAddress().GetSocketAddress()
	if sa == nil {
		return netip.AddrPort{}, fmt.Errorf("listener %q has no socket address", l.GetName())
	}
	return addrPort(sa.GetAddress(), sa.GetPortValue())
}

func addrPort(ip string, port uint32) (netip.AddrPort, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not an IP address", ip)
	}
	if port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("port %d is outside 0..65535", port)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), nil
}

func remoteAddr(ip string, port uint32) (netip.AddrPort, error) {
	if ip == "" {
		return netip.AddrPortFrom(noPeerIP, uint16(port)), nil
	}
	return addrPort(ip, port)
}

// inspect runs the listener filters (tls_inspector, http_inspector, original_dst) on c, in
// Envoy's order: the configured ones, then the original_dst use_original_dst adds
// (ListenerImpl::buildOriginalDstListenerFilter appends it). A filter's filter_disabled sees the
// destination port as it is when the filter's turn comes (GenericListenerFilter::onAccept): the
// listener's own port until original_dst has restored the dialled one.
//
// One timer, listener_filters_timeout, bounds them all (ActiveTcpSocket::startTimer). A client
// whose first bytes come in time is inspected; one that sends them later, or a server-first client
// that sends nothing, meets the timer: the connection closes, or continues with nothing detected
// (continue_on_listener_filters_timeout: ActiveTcpSocket::onTimeout, then newConnection sets
// raw_buffer), or, with a timeout of 0, waits for the first bytes, forever for a server-first
// client. waited is how long the filters held the connection.
func inspect(l *listenerv3.Listener, c Conn, own, restored uint16) (d detected, waited time.Duration, v Verdict, err error) {
	port := own
	waits := false
	for _, f := range listenerFilters(l) {
		disabled, err := filterDisabled(f.GetFilterDisabled(), port)
		if err != nil {
			return d, 0, Unmodelled, err
		}
		if disabled {
			continue
		}
		switch {
		case listenerFilterIs(f, &tlsinspectorv3.TlsInspector{}, "envoy.filters.listener.tls_inspector"):
			waits = true
			if c.TLS {
				d.transport, d.sni, d.alpn = transportTLS, strings.ToLower(c.SNI), c.ALPN
			}
		case listenerFilterIs(f, &httpinspectorv3.HttpInspector{}, "envoy.filters.listener.http_inspector"):
			// http_inspector leaves a connection another filter found to be TLS alone, and finds
			// nothing in TLS bytes either.
			waits = true
			if !c.TLS && c.HTTP != nil && (d.transport == "" || d.transport == transportRaw) {
				d.alpn = []string{c.HTTP.inspected()}
			}
		case listenerFilterIs(f, &originaldstv3.OriginalDst{}, "envoy.filters.listener.original_dst"):
			port = restored
		default:
			return d, 0, Unmodelled, fmt.Errorf("%w: listener %q has listener filter %q", ErrUnsupported, l.GetName(), f.GetName())
		}
	}
	if waits {
		waited = c.FirstBytesAfter
		if c.ServerFirst || late(l, c) {
			// The timer fires before the first byte: nothing was detected.
			d = detected{}
			waited, v, err = filtersTimeout(l)
			if err != nil {
				return d, waited, v, err
			}
		}
	}
	if d.transport == "" {
		// ActiveTcpSocket::newConnection: the default when no listener filter set one.
		d.transport = transportRaw
	}
	return d, waited, "", nil
}

// listenerFilters are l's listener filters in the order Envoy runs them: the configured ones,
// then the original_dst filter use_original_dst adds.
func listenerFilters(l *listenerv3.Listener) []*listenerv3.ListenerFilter {
	filters := l.GetListenerFilters()
	if l.GetUseOriginalDst().GetValue() {
		filters = append(slices.Clip(filters), &listenerv3.ListenerFilter{Name: "envoy.filters.listener.original_dst"})
	}
	return filters
}

// late says c's first bytes come after l's listener_filters_timeout (never, when it is 0).
func late(l *listenerv3.Listener, c Conn) bool {
	timeout := listenerFiltersTimeout(l)
	return timeout > 0 && c.FirstBytesAfter >= timeout
}

// listenerFiltersTimeout is l's listener_filters_timeout (0: none).
func listenerFiltersTimeout(l *listenerv3.Listener) time.Duration {
	if t := l.GetListenerFiltersTimeout(); t != nil {
		return t.AsDuration()
	}
	return defaultListenerFiltersTimeout
}

// inspected is the application protocol http_inspector reports for the request's preface: h2c
// for the HTTP/2 preface, http/1.1 for an HTTP/1.1 request line, http/1.0 for any other version
// (Filter::parseHttpHeader, Filter::done).
func (r *Request) inspected() string {
	switch {
	case r.HTTP2:
		return "h2c"
	case r.HTTP10:
		return "http/1.0"
	}
	return "http/1.1"
}

// filtersTimeout is what happens when the inspectors wait for a server-first or late client, and
// how long they held it.
func filtersTimeout(l *listenerv3.Listener) (time.Duration, Verdict, error) {
	timeout := listenerFiltersTimeout(l)
	switch {
	case timeout == 0:
		return 0, Stalled, fmt.Errorf("%w: listener_filters_timeout is 0, so the inspectors wait forever", ErrListenerFilters)
	case !l.GetContinueOnListenerFiltersTimeout():
		return timeout, Closed, fmt.Errorf("%w: after %s the connection is closed (continue_on_listener_filters_timeout is false)", ErrListenerFilters, timeout)
	}
	return timeout, "", nil
}

// filterDisabled evaluates a ListenerFilterChainMatchPredicate on the destination port.
func filterDisabled(p *listenerv3.ListenerFilterChainMatchPredicate, port uint16) (bool, error) {
	if p == nil {
		return false, nil
	}
	switch r := p.GetRule().(type) {
	case *listenerv3.ListenerFilterChainMatchPredicate_AnyMatch:
		return r.AnyMatch, nil
	case *listenerv3.ListenerFilterChainMatchPredicate_NotMatch:
		v, err := filterDisabled(r.NotMatch, port)
		return !v, err
	case *listenerv3.ListenerFilterChainMatchPredicate_DestinationPortRange:
		return int32(port) >= r.DestinationPortRange.GetStart() && int32(port) < r.DestinationPortRange.GetEnd(), nil
	case *listenerv3.ListenerFilterChainMatchPredicate_OrMatch:
		for _, q := range r.OrMatch.GetRules() {
			if v, err := filterDisabled(q, port); err != nil || v {
				return v, err
			}
		}
		return false, nil
	case *listenerv3.ListenerFilterChainMatchPredicate_AndMatch:
		for _, q := range r.AndMatch.GetRules() {
			if v, err := filterDisabled(q, port); err != nil || !v {
				return v, err
			}
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: filter_disabled rule %T", ErrUnsupported, p.GetRule())
}

// listenerFilterIs says f is the listener filter whose typed config is m (or, with no typed
// config, whose name is name: Envoy's lookup by name).
func listenerFilterIs(f *listenerv3.ListenerFilter, m proto.Message, name string) bool {
	if tc := f.GetTypedConfig(); tc != nil {
		return tc.MessageName() == m.ProtoReflect().Descriptor().FullName()
	}
	return f.GetName() == name
}

// matchesDestinationIP says a chain of l names destination prefix ranges.
func matchesDestinationIP(l *listenerv3.Listener) bool {
	return slices.ContainsFunc(l.GetFilterChains(), func(fc *listenerv3.FilterChain) bool {
		return len(fc.GetFilterChainMatch().GetPrefixRanges()) > 0
	})
}
