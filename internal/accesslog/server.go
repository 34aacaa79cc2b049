// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package accesslog

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// What one message may hold. Envoy sends a message when its buffer passes
// xds.AccessLogBufferBytes (16 KiB), so a message is that and one entry more, and an entry is at
// most some 64 KiB (Envoy's own limit on request headers bounds the path and authority logged):
// the bounds leave room for any message Envoy sends, and refuse what Envoy never sends.
const (
	// MaxMessageBytes bounds a message's encoded size.
	MaxMessageBytes = 1 << 20
	// MaxEntries bounds a message's entries (16 KiB of the smallest entries Envoy writes is some
	// 500).
	MaxEntries = 1000
)

// Options configure a Server.
type Options struct {
	// NodeID is the node the agent serves: the node ID of its Envoy's bootstrap (the node's
	// name). A stream naming another is refused.
	NodeID string
	// Log receives a line per entry (when Lines) and a line per refused stream.
	Log logr.Logger
	// Lines turns on the line per entry (the agent's --access-log-lines).
	Lines bool
	// Registerer is where the counters are registered; nil: controller-runtime's registry, which
	// the agent's metrics endpoint serves (one set per process, shared by every Server).
	Registerer prometheus.Registerer
}

// Server is the AccessLogService of the node's Envoy.
type Server struct {
	accesslogv3.UnimplementedAccessLogServiceServer
	node    string
	log     logr.Logger
	lines   bool
	metrics *metrics
	// dir is what the view knew at the last SetMesh; nil before the first.
	dir atomic.Pointer[directory]
	// onUpstream is told the upstream cluster of each entry (OnUpstream); nil: nobody.
	onUpstream atomic.Pointer[func(cluster string)]
}

// OnUpstream makes the server call f with the upstream cluster of every final entry (a request
// or connection that ended), on the stream's goroutine: f must not block. The agent learns from
// it that a cluster fetched on demand is still used. A later call replaces f.
func (s *Server) OnUpstream(f func(cluster string)) { s.onUpstream.Store(&f) }

// New is a Server for o.
func New(o Options) *Server {
	m := agentMetrics
	if o.Registerer != nil {
		reg := o.Registerer
		m = func() *metrics { return newMetrics(reg) }
	}
	return &Server{node: o.NodeID, log: o.Log, lines: o.Lines, metrics: m()}
}

// SetMesh makes m what the server knows: the services, ports, pods and identities a label may
// name. Series of services m no longer holds are dropped.
func (s *Server) SetMesh(m model.Mesh) {
	d := newDirectory(m)
	s.dir.Store(d)
	s.metrics.forget(d)
}

// refusal is a refused stream: its reason (the counter's label) and the status the client gets.
type refusal struct {
	reason string
	err    error
}

func refuse(reason string, code codes.Code, format string, args ...any) *refusal {
	return &refusal{reason: reason, err: status.Errorf(code, format, args...)}
}

// StreamAccessLogs takes one stream of entries until the client closes it. A refused stream is
// counted, logged and ended with its status; the other streams go on.
func (s *Server) StreamAccessLogs(stream accesslogv3.AccessLogService_StreamAccessLogsServer) error {
	named := false
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&accesslogv3.StreamAccessLogsResponse{})
		}
		var r *refusal
		switch {
		case err != nil:
			r = s.receiveError(err)
			if r == nil {
				return err // the client went (cancelled, connection closed): nothing to count
			}
		default:
			r = s.check(msg, named)
		}
		if r != nil {
			s.metrics.refused.WithLabelValues(r.reason).Inc()
			s.log.Info("Refused an access-log stream", "reason", r.reason, "error", r.err.Error())
			return r.err
		}
		named = true
		s.take(msg)
	}
}

// receiveError is the refusal of a message gRPC could not receive: over its size limit, or not
// decodable; nil for a stream that ended otherwise. gRPC has answered the client with its own
// status already (ResourceExhausted, Internal); the refusal is counted and logged.
func (s *Server) receiveError(err error) *refusal {
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return refuse(RejectedOversized, codes.ResourceExhausted, "access log: a message is larger than the agent takes (%v): Envoy sends at most about %d bytes", status.Convert(err).Message(), xds.AccessLogBufferBytes)
	case codes.Internal, codes.InvalidArgument:
		return refuse(RejectedMalformed, codes.InvalidArgument, "access log: a message does not decode as envoy.service.accesslog.v3.StreamAccessLogsMessage: %s", status.Convert(err).Message())
	}
	return nil
}

// check refuses msg if it is not what Envoy sends: first names this node (named: an earlier
// message did), within the bounds, with entries.
func (s *Server) check(msg *accesslogv3.StreamAccessLogsMessage, named bool) *refusal {
	if size := proto.Size(msg); size > MaxMessageBytes {
		return refuse(RejectedOversized, codes.ResourceExhausted, "access log: a message of %d bytes; the agent takes at most %d (Envoy sends about %d)", size, MaxMessageBytes, xds.AccessLogBufferBytes)
	}
	id := msg.GetIdentifier()
	switch node := id.GetNode().GetId(); {
	case !named && node == "":
		return refuse(RejectedNoIdentifier, codes.InvalidArgument, "access log: the stream's first message has no identifier.node.id: name the node whose Envoy logs (Envoy sends its bootstrap's node, here %q)", s.node)
	case id != nil && node != s.node:
		return refuse(RejectedWrongNode, codes.PermissionDenied, "access log: identifier.node.id %q is not the node this agent serves (%q): connect to that node's agent", node, s.node)
	}
	var n int
	switch entries := msg.GetLogEntries().(type) {
	case *accesslogv3.StreamAccessLogsMessage_HttpLogs:
		n = len(entries.HttpLogs.GetLogEntry())
	case *accesslogv3.StreamAccessLogsMessage_TcpLogs:
		n = len(entries.TcpLogs.GetLogEntry())
	default:
		return refuse(RejectedMalformed, codes.InvalidArgument, "access log: a message with neither http_logs nor tcp_logs")
	}
	if n > MaxEntries {
		return refuse(RejectedTooManyEntries, codes.ResourceExhausted, "access log: a message of %d entries; the agent takes at most %d", n, MaxEntries)
	}
	return nil
}

// take counts and logs msg's entries.
func (s *Server) take(msg *accesslogv3.StreamAccessLogsMessage) {
	d := s.dir.Load()
	for _, e := range msg.GetHttpLogs().GetLogEntry() {
		s.http(d, e)
	}
	for _, e := range msg.GetTcpLogs().GetLogEntry() {
		s.tcp(d, e)
	}
}

// about is what an entry's common properties say: its target, caller, and duration.
func (s *Server) about(d *directory, c *accesslogdatav3.AccessLogCommon) (target, string, time.Duration) {
	if f := s.onUpstream.Load(); f != nil && c.GetUpstreamCluster() != "" {
		(*f)(c.GetUpstreamCluster())
	}
	t := d.target(c.GetUpstreamCluster())
	if c.GetUpstreamCluster() == "" && c.GetTlsProperties().GetPeerCertificateProperties() != nil {
		// A mesh peer's request answered before it was routed (an AccessPolicy's denial): no
		// cluster names it, the inbound listener's address and the SNI do.
		if at, ok := d.inboundAt(c.GetDownstreamLocalAddress(), c.GetTlsProperties().GetTlsSniHostname()); ok {
			t = at
		}
	}
	caller := t.caller
	if t.direction == Inbound && d != nil {
		caller = peerIdentity(d.domain, c.GetTlsProperties().GetPeerCertificateProperties())
	}
	elapsed := c.GetDuration().AsDuration()
	if c.GetDuration() == nil {
		elapsed = c.GetTimeToLastDownstreamTxByte().AsDuration()
	}
	return t, caller, elapsed
}

// peerIdentity is the mesh identity among the certificate's URI SANs (Envoy verified the
// certificate against the trust bundle before the connection was served), or none.
func peerIdentity(domain string, cert *accesslogdatav3.TLSProperties_CertificateProperties) string {
	for _, san := range cert.GetSubjectAltName() {
		if uri := san.GetUri(); xds.MeshIdentity(domain, uri) {
			return uri
		}
	}
	return ""
}

func (s *Server) http(d *directory, e *accesslogdatav3.HTTPAccessLogEntry) {
	c := e.GetCommonProperties()
	if !final(c.GetAccessLogType()) {
		return // counted when the request ends
	}
	t, caller, elapsed := s.about(d, c)
	code := e.GetResponse().GetResponseCode().GetValue()
	received := e.GetRequest().GetRequestHeadersBytes() + e.GetRequest().GetRequestBodyBytes()
	sent := e.GetResponse().GetResponseHeadersBytes() + e.GetResponse().GetResponseBodyBytes()
	outcome := e.GetResponse().GetResponseHeaders()[xds.OutcomeHeader]
	m := s.metrics
	m.seen(t.service)
	m.requests.WithLabelValues(t.direction, t.service, t.port, m.requestCallers.label(caller), codeClass(code)).Inc()
	m.duration.WithLabelValues(t.direction, t.service, t.port).Observe(elapsed.Seconds())
	m.received.WithLabelValues(t.direction, t.service, t.port).Add(float64(received))
	m.sent.WithLabelValues(t.direction, t.service, t.port).Add(float64(sent))
	if t.direction == Inbound && outcome != "" {
		m.outcomes.WithLabelValues(t.service, t.port, outcomeClass(outcome)).Inc()
	}
	if t.direction == Inbound && denied(e.GetResponse().GetResponseCodeDetails()) {
		m.denied.WithLabelValues(t.service, t.port, m.requestCallers.label(caller), "http").Inc()
	}
	if s.lines {
		s.log.Info("HTTP request", "direction", t.direction, "service", t.service, "port", t.port, "caller", orUnknown(caller),
			"method", e.GetRequest().GetRequestMethod().String(), "authority", e.GetRequest().GetAuthority(), "path", e.GetRequest().GetPath(),
			"code", code, "details", e.GetResponse().GetResponseCodeDetails(), "flags", flags(c.GetResponseFlags()), "outcome", outcome, "duration", elapsed.String(),
			"receivedBytes", received, "sentBytes", sent, "upstreamCluster", c.GetUpstreamCluster(), "upstreamHost", address(c.GetUpstreamRemoteAddress()))
	}
}

func (s *Server) tcp(d *directory, e *accesslogdatav3.TCPAccessLogEntry) {
	c := e.GetCommonProperties()
	if !final(c.GetAccessLogType()) {
		return // counted when the connection closes
	}
	t, caller, elapsed := s.about(d, c)
	received, sent := e.GetConnectionProperties().GetReceivedBytes(), e.GetConnectionProperties().GetSentBytes()
	m := s.metrics
	m.seen(t.service)
	m.connections.WithLabelValues(t.direction, t.service, t.port, m.tcpCallers.label(caller)).Inc()
	if t.direction == Inbound && (denied(c.GetConnectionTerminationDetails()) || refused(c.GetDownstreamTransportFailureReason())) {
		m.denied.WithLabelValues(t.service, t.port, m.tcpCallers.label(caller), "tcp").Inc()
	}
	m.received.WithLabelValues(t.direction, t.service, t.port).Add(float64(received))
	m.sent.WithLabelValues(t.direction, t.service, t.port).Add(float64(sent))
	if s.lines {
		s.log.Info("TCP connection", "direction", t.direction, "service", t.service, "port", t.port, "caller", orUnknown(caller),
			"flags", flags(c.GetResponseFlags()), "duration", elapsed.String(), "receivedBytes", received, "sentBytes", sent,
			"upstreamCluster", c.GetUpstreamCluster(), "upstreamHost", address(c.GetUpstreamRemoteAddress()),
			"termination", c.GetConnectionTerminationDetails())
	}
}

// final reports whether an entry of type t is the last of its request or connection: what the
// rendered loggers send (DownstreamEnd, TcpConnectionEnd), or an older Envoy's entry without a
// type. A start, periodic or upstream-ready entry (Envoy's flush options, which the mesh does not
// set) is not counted, so nothing is counted twice.
func final(t accesslogdatav3.AccessLogType) bool {
	switch t {
	case accesslogdatav3.AccessLogType_TcpUpstreamConnected, accesslogdatav3.AccessLogType_TcpPeriodic,
		accesslogdatav3.AccessLogType_TcpConnectionStart, accesslogdatav3.AccessLogType_DownstreamStart,
		accesslogdatav3.AccessLogType_DownstreamPeriodic, accesslogdatav3.AccessLogType_UpstreamPoolReady,
		accesslogdatav3.AccessLogType_UpstreamPeriodic, accesslogdatav3.AccessLogType_DownstreamTunnelSuccessfullyEstablished,
		accesslogdatav3.AccessLogType_UdpTunnelUpstreamConnected, accesslogdatav3.AccessLogType_UdpPeriodic:
		return false
	}
	return true
}

// denied reports whether details (an HTTP response's code details, a TCP connection's
// termination details) are the RBAC filter's denial: no rule of the port's AccessPolicies admits
// the call (xds.RBACDeniedDetail, "rbac_access_denied_matched_policy[none]").
func denied(details string) bool { return strings.HasPrefix(details, xds.RBACDeniedDetail) }

// refused reports whether a connection's downstream TLS failure is its handshake refusing the
// caller's certificate by its SANs: how a governed TCP port denies a caller (xds.PeerRefusedDetail).
func refused(reason string) bool { return strings.Contains(reason, xds.PeerRefusedDetail) }

// outcomeClass is the label value of an x-aether-outcome value: the retry table's rows by their
// own names, any other status of the application "app", anything else "other".
func outcomeClass(v string) string {
	switch v {
	case xds.OutcomeUnreachable, xds.OutcomeApp503, xds.OutcomeAppReset, xds.OutcomeRefusedStream, xds.OutcomeProxy:
		return v
	}
	if strings.HasPrefix(v, "app-") {
		return "app"
	}
	return Other
}

func orUnknown(caller string) string {
	if caller == "" {
		return Unknown
	}
	return caller
}

// flags are the response flags set, by their field names (upstream_connection_failure, ...).
func flags(f *accesslogdatav3.ResponseFlags) []string {
	var out []string
	if f == nil {
		return out
	}
	f.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.BoolKind && v.Bool() {
			out = append(out, string(fd.Name()))
		} else if fd.Kind() == protoreflect.MessageKind {
			out = append(out, string(fd.Name()))
		}
		return true
	})
	return out
}

// address is a socket address as ip:port, or empty.
func address(a *corev3.Address) string {
	sa := a.GetSocketAddress()
	if sa == nil {
		return ""
	}
	return net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
}
