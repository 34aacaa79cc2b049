// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// serve runs the matched chain: its transport socket, then its terminal network filter.
func (s *Sim) serve(out *Outcome, fc *listenerv3.FilterChain, c Conn, local netip.AddrPort) {
	ctx, err := downstreamTLS(fc.GetTransportSocket())
	if err != nil {
		*out = out.fail(Unmodelled, fmt.Errorf("chain %q: %w", fc.GetName(), err))
		return
	}
	out.ChainTLS = ctx
	terminates := ctx != nil
	if terminates && !c.TLS {
		*out = out.fail(Closed, fmt.Errorf("%w (chain %q)", ErrHandshake, fc.GetName()))
		return
	}
	if terminates && c.ClientCertURI != "" && !peerAdmitted(ctx.SANs, c.ClientCertURI) {
		*out = out.fail(Closed, fmt.Errorf("%w: chain %q, peer %q", ErrPeerRefused, fc.GetName(), c.ClientCertURI))
		return
	}
	terminal, err := terminalFilter(fc)
	if err == nil {
		err = applyNetworkFilters(fc, out.state)
	}
	if err != nil {
		*out = out.fail(verdictFor(err, Closed), err)
		return
	}
	switch t := terminal.(type) {
	case *tcpproxyv3.TcpProxy:
		out.Protocol = TCP
		if err := connectionAllowed(fc, c); err != nil {
			*out = out.fail(verdictFor(err, Closed), err)
			return
		}
		s.tcpProxy(out, t, local)
	case *hcmv3.HttpConnectionManager:
		out.Protocol = HTTP
		// The HCM reads HTTP when the bytes it gets are HTTP: cleartext HTTP on a plaintext
		// chain, or HTTP inside TLS the chain terminates. TLS bytes on a plaintext chain are not.
		if c.ServerFirst {
			// The codec reads nothing, so nothing is answered: the client waits for a greeting
			// and the HCM for a request, until its idle timeout closes the connection.
			*out = out.fail(Stalled, fmt.Errorf("%w (chain %q)", ErrAwaitsRequest, fc.GetName()))
			return
		}
		var req *Request
		if c.HTTP != nil && c.TLS == terminates {
			req = c.HTTP
		}
		s.serveHTTP(out, t, req, local, terminates)
	}
}

// terminalFilter is the chain's last network filter, unpacked: tcp_proxy or the HTTP connection
// manager. The filters before it are applyNetworkFilters'.
func terminalFilter(fc *listenerv3.FilterChain) (any, error) {
	filters := fc.GetFilters()
	if len(filters) == 0 {
		return nil, fmt.Errorf("%w (chain %q)", ErrNoFilter, fc.GetName())
	}
	last := filters[len(filters)-1]
	tc := last.GetTypedConfig()
	tp := &tcpproxyv3.TcpProxy{}
	hcm := &hcmv3.HttpConnectionManager{}
	switch {
	case tc == nil:
		return nil, fmt.Errorf("%w: chain %q: network filter %q has no typed_config", ErrUnsupported, fc.GetName(), last.GetName())
	case unpack(tc, tp):
		return tp, nil
	case unpack(tc, hcm):
		return hcm, nil
	}
	return nil, fmt.Errorf("%w: chain %q has network filter %q (%s)", ErrUnsupported, fc.GetName(), last.GetName(), tc.GetTypeUrl())
}

// unpack fills m from a when a holds an m.
func unpack(a *anypb.Any, m proto.Message) bool {
	if a.MessageName() != m.ProtoReflect().Descriptor().FullName() {
		return false
	}
	return a.UnmarshalTo(m) == nil
}

// tcpProxy forwards the connection to its cluster, or to one of its weighted clusters; a single
// cluster it does not have is discovered on demand first when on_demand is set (ondemand.go).
func (s *Sim) tcpProxy(out *Outcome, tp *tcpproxyv3.TcpProxy, local netip.AddrPort) {
	if tp.GetTunnelingConfig() != nil || tp.GetOnDemand() != nil && tp.GetWeightedClusters() != nil {
		*out = out.fail(Unmodelled, fmt.Errorf("%w: tcp_proxy %q tunnels, or discovers a weighted cluster on demand", ErrUnsupported, tp.GetStatPrefix()))
		return
	}
	switch spec := tp.GetClusterSpecifier().(type) {
	case *tcpproxyv3.TcpProxy_Cluster:
		od := tp.GetOnDemand()
		if err := s.discover(out, spec.Cluster, newODCDS(od.GetOdcdsConfig(), od.GetTimeout())); err != nil {
			*out = out.fail(Unmodelled, err)
			return
		}
		out.Targets = []Target{s.target(spec.Cluster, 1, upstream{local: local, state: out.state})}
	case *tcpproxyv3.TcpProxy_WeightedClusters:
		for _, cw := range spec.WeightedClusters.GetClusters() {
			out.Targets = append(out.Targets, s.target(cw.GetName(), cw.GetWeight(), upstream{local: local, state: out.state}))
		}
	default:
		*out = out.fail(Unmodelled, fmt.Errorf("%w: tcp_proxy %q names no cluster", ErrUnsupported, tp.GetStatPrefix()))
		return
	}
	out.settle(nil)
}

// settle sets the verdict from the targets: forwarded (or passed through) when a chosen target
// reaches an endpoint; otherwise closed (TCP) or Envoy's 503 (HTTP, when answer is given). Err
// names every chosen target that reaches nothing.
func (o *Outcome) settle(answer *Response) {
	var errs []error
	live, passthrough := false, true
	for _, t := range o.Targets {
		if t.Weight == 0 {
			continue
		}
		if t.Err != nil {
			errs = append(errs, t.Err)
			continue
		}
		live = true
		passthrough = passthrough && t.Passthrough != ""
	}
	o.Err = errors.Join(errs...)
	switch {
	case live && passthrough:
		o.Verdict = Passthrough
	case live:
		o.Verdict = Forwarded
	case answer != nil:
		o.Verdict, o.Response = Answered, answer
	default:
		o.Verdict = Closed
	}
	if o.Err == nil && !live {
		o.Err = fmt.Errorf("%w: no cluster is chosen (every weight is 0)", ErrNoHealthyUpstream)
	}
	if errors.Is(o.Err, ErrUnsupported) && !live {
		o.Verdict = Unmodelled
	}
}

// downstreamTLS reads a chain's transport socket: nil for plaintext (none, or raw_buffer), the
// TLS context for tls.
func downstreamTLS(ts *corev3.TransportSocket) (*TLS, error) {
	if ts == nil || isRawBuffer(ts) {
		return nil, nil
	}
	ctx := &tlsv3.DownstreamTlsContext{}
	if tc := ts.GetTypedConfig(); tc == nil || !unpack(tc, ctx) {
		return nil, fmt.Errorf("%w: downstream transport socket %q", ErrUnsupported, ts.GetName())
	}
	t := commonTLS(ctx.GetCommonTlsContext())
	t.RequireClientCertificate = ctx.GetRequireClientCertificate().GetValue()
	return t, nil
}

// verdictFor is v, or Unmodelled when err is the simulator's own limit.
func verdictFor(err error, v Verdict) Verdict {
	if errors.Is(err, ErrUnsupported) {
		return Unmodelled
	}
	return v
}

// connectionAllowed runs the chain's network RBAC filters over the connection's peer: ErrDenied
// when one denies it (Envoy closes it on the caller's first byte, before passing it on).
func connectionAllowed(fc *listenerv3.FilterChain, c Conn) error {
	for _, f := range fc.GetFilters() {
		rules, is, err := networkRBAC(f)
		if !is {
			continue
		}
		if err != nil {
			return err
		}
		allowed, err := rbacAllows(rules, rbacCall{peer: c.ClientCertURI})
		if err != nil {
			return err
		}
		if !allowed {
			return fmt.Errorf("%w: chain %q closes the connection of %q", ErrDenied, fc.GetName(), c.ClientCertURI)
		}
	}
	return nil
}

// peerAdmitted says whether a client certificate whose URI SAN is uri passes a chain's SAN
// matchers (Envoy: at least one matches; none, none asked). A matcher of another SAN type never
// matches a URI; a regular expression matches the whole SAN, as Envoy's safe_regex does.
func peerAdmitted(sans []SAN, uri string) bool {
	if len(sans) == 0 {
		return true
	}
	for _, m := range sans {
		if m.Type != tlsv3.SubjectAltNameMatcher_URI.String() && m.Type != "" {
			continue
		}
		switch m.Match {
		case "exact":
			if uri == m.Value {
				return true
			}
		case "prefix":
			if strings.HasPrefix(uri, m.Value) {
				return true
			}
		case "suffix":
			if strings.HasSuffix(uri, m.Value) {
				return true
			}
		case "contains":
			if strings.Contains(uri, m.Value) {
				return true
			}
		case "regex":
			if re, err := regexp.Compile(`^(?:` + m.Value + `)$`); err == nil && re.MatchString(uri) {
				return true
			}
		}
	}
	return false
}
