// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpcaccesslogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The access log. Every HTTP connection manager and every tcp_proxy the node's Envoy runs (the
// inbound chains, the capture chains, the proxy port's, the passthrough and the blackhole) sends
// an entry per request or connection to the node agent over gRPC (the AccessLogService), on the
// agent's xDS socket: the bootstrap's XDSCluster, so no second socket, cluster or permission.
// The agent counts them per service port and caller (internal/accesslog).
//
// Every logger of a kind has the same configuration, to the byte: Envoy keeps one stream per
// distinct configuration and worker thread, so a log name, tag or flag that varied per pod or
// per port would open a stream per pod or port. Everything an entry is about, the agent reads
// from what Envoy reports: the upstream cluster's name (ParseCluster: the service, the port and,
// on the caller's side, the local identity that dialled, which is the proxy's own choice of
// client certificate, never the client's word), and on the destination's side the caller's
// verified certificate (its URI SAN, in the entry's TLS properties).
const (
	// AccessLogName is the log name of every access logger (the stream's identifier).
	AccessLogName = "aether"
	// HTTPGRPCAccessLogger and TCPGRPCAccessLogger are Envoy's gRPC access loggers.
	HTTPGRPCAccessLogger = "envoy.access_loggers.http_grpc"
	TCPGRPCAccessLogger  = "envoy.access_loggers.tcp_grpc"
	// AccessLogBufferBytes is how many bytes of entries Envoy buffers before it sends them
	// (Envoy's default, spelled out: the agent's bound on a message, accesslog.MaxMessageBytes,
	// is written against it); AccessLogFlushInterval how long it buffers at most (the default).
	AccessLogBufferBytes   = 16 << 10
	AccessLogFlushInterval = time.Second
)

// AccessLogHeaders are the response headers every HTTP entry carries: the destination proxy's
// row of the retry table (outcome.go).
var AccessLogHeaders = []string{OutcomeHeader}

// accessLogConfig is every logger's common configuration: the agent, over the bootstrap's xDS
// cluster, API v3.
func accessLogConfig() *grpcaccesslogv3.CommonGrpcAccessLogConfig {
	return &grpcaccesslogv3.CommonGrpcAccessLogConfig{
		LogName: AccessLogName,
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: XDSCluster},
		}},
		TransportApiVersion: corev3.ApiVersion_V3,
		BufferSizeBytes:     wrapperspb.UInt32(AccessLogBufferBytes),
		BufferFlushInterval: durationpb.New(AccessLogFlushInterval),
	}
}

// httpAccessLog is every HCM's access log (made and packed once per build: the same bytes for
// every HCM, and never modified).
func (b *builder) httpAccessLog() []*accesslogv3.AccessLog {
	if b.shared.httpAccessLog == nil {
		b.shared.httpAccessLog = []*accesslogv3.AccessLog{{
			Name: HTTPGRPCAccessLogger,
			ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: b.pack("the HTTP access log", &grpcaccesslogv3.HttpGrpcAccessLogConfig{
				CommonConfig:                   accessLogConfig(),
				AdditionalResponseHeadersToLog: AccessLogHeaders,
			})},
		}}
	}
	return b.shared.httpAccessLog
}

// tcpAccessLog is every tcp_proxy's access log (made once per build, as httpAccessLog). A
// connection is logged when it closes.
func (b *builder) tcpAccessLog() []*accesslogv3.AccessLog {
	if b.shared.tcpAccessLog == nil {
		b.shared.tcpAccessLog = []*accesslogv3.AccessLog{{
			Name: TCPGRPCAccessLogger,
			ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: b.pack("the TCP access log", &grpcaccesslogv3.TcpGrpcAccessLogConfig{
				CommonConfig: accessLogConfig(),
			})},
		}}
	}
	return b.shared.tcpAccessLog
}
