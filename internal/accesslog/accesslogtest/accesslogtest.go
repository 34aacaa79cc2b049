// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package accesslogtest is test support for the node agent's access-log server: a real gRPC
// client of Envoy's AccessLogService (go-control-plane's), entries shaped as Envoy 1.40 sends them
// for the configuration internal/xds renders, and a reader of the counters (internal/metricstest's,
// a histogram read by its sample count).
package accesslogtest

import (
	"context"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether-operator/internal/metricstest"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Dial connects to the agent's socket (an xdsserver address: unix:///path or tcp://ip:port), as
// the node's Envoy does over its bootstrap's xDS cluster.
func Dial(address string) (*grpc.ClientConn, error) {
	target := address
	if len(address) > len("tcp://") && address[:len("tcp://")] == "tcp://" {
		target = "passthrough:///" + address[len("tcp://"):]
	}
	return grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// Identifier is what Envoy sends first on each stream: its bootstrap's node and the logger's
// log name (xds.AccessLogName).
func Identifier(node string) *accesslogv3.StreamAccessLogsMessage_Identifier {
	return &accesslogv3.StreamAccessLogsMessage_Identifier{
		Node:    &corev3.Node{Id: node, Cluster: xds.DefaultEnvoyCluster},
		LogName: xds.AccessLogName,
	}
}

// HTTPLogs is a message of HTTP entries; the first of a stream carries Identifier.
func HTTPLogs(id *accesslogv3.StreamAccessLogsMessage_Identifier, entries ...*accesslogdatav3.HTTPAccessLogEntry) *accesslogv3.StreamAccessLogsMessage {
	return &accesslogv3.StreamAccessLogsMessage{Identifier: id, LogEntries: &accesslogv3.StreamAccessLogsMessage_HttpLogs{
		HttpLogs: &accesslogv3.StreamAccessLogsMessage_HTTPAccessLogEntries{LogEntry: entries}}}
}

// TCPLogs is a message of TCP entries; the first of a stream carries Identifier.
func TCPLogs(id *accesslogv3.StreamAccessLogsMessage_Identifier, entries ...*accesslogdatav3.TCPAccessLogEntry) *accesslogv3.StreamAccessLogsMessage {
	return &accesslogv3.StreamAccessLogsMessage{Identifier: id, LogEntries: &accesslogv3.StreamAccessLogsMessage_TcpLogs{
		TcpLogs: &accesslogv3.StreamAccessLogsMessage_TCPAccessLogEntries{LogEntry: entries}}}
}

// Stream sends msgs on one stream and closes it, as Envoy's logger does when it goes: the
// server's answer (nil, or the status it refused the stream with).
func Stream(ctx context.Context, conn *grpc.ClientConn, msgs ...*accesslogv3.StreamAccessLogsMessage) error {
	s, err := accesslogv3.NewAccessLogServiceClient(conn).StreamAccessLogs(ctx)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			break // the server ended the stream: CloseAndRecv says why
		}
	}
	_, err = s.CloseAndRecv()
	return err
}

// Hop is one request or connection as an entry says it.
type Hop struct {
	// Cluster is the upstream cluster (named by internal/xds's helpers); empty for a reply of the
	// proxy itself.
	Cluster string
	// PeerURIs are the peer certificate's URI SANs (an inbound hop: mTLS from the caller's
	// proxy); none on the caller's side, whose downstream is the application, in cleartext.
	PeerURIs []string
	// Downstream and Upstream are the addresses the connection came from and went to.
	Downstream, Upstream string
	// Received and Sent are the bytes from and to the downstream.
	Received, Sent uint64
	Duration       time.Duration
}

// common is the entry's common properties, as Envoy's gRPC access-log utilities fill them.
func (h Hop) common(logType accesslogdatav3.AccessLogType) *accesslogdatav3.AccessLogCommon {
	start := time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC)
	c := &accesslogdatav3.AccessLogCommon{
		SampleRate:                  1,
		DownstreamRemoteAddress:     socket(h.Downstream, 43512),
		DownstreamLocalAddress:      socket("10.244.1.10", 18008),
		StartTime:                   timestamppb.New(start),
		TimeToLastRxByte:            durationpb.New(h.Duration / 4),
		TimeToLastDownstreamTxByte:  durationpb.New(h.Duration),
		Duration:                    durationpb.New(h.Duration),
		UpstreamCluster:             h.Cluster,
		ResponseFlags:               &accesslogdatav3.ResponseFlags{},
		AccessLogType:               logType,
		DownstreamWireBytesReceived: h.Received,
		DownstreamWireBytesSent:     h.Sent,
		StreamId:                    "5f1c3b9e-8d8f-4c1a-9a56-3f0b3f2b8a11",
	}
	if h.Upstream != "" {
		c.UpstreamRemoteAddress = socket(h.Upstream, 8080)
		c.UpstreamLocalAddress = socket("10.244.1.10", 51234)
	}
	if len(h.PeerURIs) > 0 {
		peer := &accesslogdatav3.TLSProperties_CertificateProperties{Subject: ""}
		for _, uri := range h.PeerURIs {
			peer.SubjectAltName = append(peer.SubjectAltName, &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName{
				San: &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName_Uri{Uri: uri}})
		}
		c.TlsProperties = &accesslogdatav3.TLSProperties{
			TlsVersion:                accesslogdatav3.TLSProperties_TLSv1_3,
			TlsCipherSuite:            wrapperspb.UInt32(0x1301),
			TlsSniHostname:            "8080",
			PeerCertificateProperties: peer,
			LocalCertificateProperties: &accesslogdatav3.TLSProperties_CertificateProperties{SubjectAltName: []*accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName{{
				San: &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName_Uri{Uri: "spiffe://aether.internal/ns/shop/sa/payments"}}}},
		}
	}
	return c
}

func socket(ip string, port uint32) *corev3.Address {
	if ip == "" {
		return nil
	}
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
}

// HTTP is the entry of one HTTP request through an HCM of the rendered configuration: method
// and path to authority, answered code, the response's x-aether-outcome (logged by
// additional_response_headers_to_log; empty when it had none), flags set.
func HTTP(h Hop, authority, path string, code uint32, outcome string, flags *accesslogdatav3.ResponseFlags) *accesslogdatav3.HTTPAccessLogEntry {
	c := h.common(accesslogdatav3.AccessLogType_DownstreamEnd)
	if flags != nil {
		c.ResponseFlags = flags
	}
	e := &accesslogdatav3.HTTPAccessLogEntry{
		CommonProperties: c,
		ProtocolVersion:  accesslogdatav3.HTTPAccessLogEntry_HTTP2,
		Request: &accesslogdatav3.HTTPRequestProperties{
			RequestMethod: corev3.RequestMethod_GET, Scheme: "http", Authority: authority, Path: path,
			UserAgent: "curl/8.5.0", RequestId: "0b6a1f8e-3f1d-4a6c-9c52-6f7c2c1d4e10",
			RequestHeadersBytes: h.Received, RequestBodyBytes: 0,
		},
		Response: &accesslogdatav3.HTTPResponseProperties{
			ResponseHeadersBytes: h.Sent / 2, ResponseBodyBytes: h.Sent - h.Sent/2,
			ResponseCodeDetails: "via_upstream",
		},
	}
	if code != 0 {
		e.Response.ResponseCode = wrapperspb.UInt32(code)
	}
	if outcome != "" {
		e.Response.ResponseHeaders = map[string]string{xds.OutcomeHeader: outcome}
	}
	return e
}

// TCP is the entry of one TCP connection through a tcp_proxy of the rendered configuration,
// logged when it closed.
func TCP(h Hop) *accesslogdatav3.TCPAccessLogEntry {
	return &accesslogdatav3.TCPAccessLogEntry{
		CommonProperties:     h.common(accesslogdatav3.AccessLogType_TcpConnectionEnd),
		ConnectionProperties: &accesslogdatav3.ConnectionProperties{ReceivedBytes: h.Received, SentBytes: h.Sent},
	}
}

// Value is the sum over g's metrics of family name whose labels include want: a counter's
// value, a histogram's sample count.
func Value(g prometheus.Gatherer, name string, want map[string]string) (float64, error) {
	return metricstest.Sum(g, name, want, func(m *dto.Metric) float64 {
		return m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
	})
}

// Series is how many series of family name g holds whose labels include want.
func Series(g prometheus.Gatherer, name string, want map[string]string) (int, error) {
	return metricstest.Series(g, name, want)
}
