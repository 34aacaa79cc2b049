// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// maxHealthResponse caps what a gRPC health answer may hold, in bytes: a HealthCheckResponse is
// a few bytes, and the pod answering it is not trusted to keep it so.
const maxHealthResponse = 1 << 10

// probeGRPC reports whether the gRPC server at addr is SERVING, by the standard health protocol:
// grpc.health.v1.Health/Check with the empty service name (the server as a whole), in cleartext
// HTTP/2 to the pod's address, without a proxy, within ctx. NOT_SERVING, UNKNOWN, an error (no
// health service, nothing listening, a timeout) are all unhealthy. A gRPC server cannot pass the
// h2c GET other HTTP2 primaries get: it answers a request that is not gRPC with 415.
//
// The connection is opened for this probe and closed before it returns, as the HTTP probe's is
// and as the kubelet's gRPC probe does: every probe proves that the server still accepts new
// connections (a cached one would keep answering from a server that stopped listening), no
// reconnect backoff carries over from one probe to the next, and there is nothing to close when
// an endpoint goes away.
func probeGRPC(ctx context.Context, addr string) bool {
	return probeGRPCVia(ctx, addr, dialFor(""))
}

// probeGRPCVia is probeGRPC with its connection opened by dial.
func probeGRPCVia(ctx context.Context, addr string, dial dialFunc) bool {
	// passthrough: addr is an IP and a port, with nothing to resolve.
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return dial(ctx, "tcp", a) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithNoProxy(),
		grpc.WithUserAgent(probeUserAgent),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxHealthResponse)),
	)
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close() }()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}
