// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Clients of the two protocols whose exchange is more than a request and its answer, each
// returning one line as GetOnce does, so a dial loop logs them alike.

// GRPCHealthOnce calls grpc.health.v1.Health/Check (the server as a whole) at address, in
// cleartext HTTP/2 with :authority authority (the address when empty; a mesh routes by it), and
// returns "grpc <the status served>" or "error <why>".
func GRPCHealthOnce(address, authority string, timeout time.Duration) string {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if authority != "" {
		opts = append(opts, grpc.WithAuthority(authority))
	}
	conn, err := grpc.NewClient("passthrough:///"+address, opts...)
	if err != nil {
		return "error " + err.Error()
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return "error " + err.Error()
	}
	return "grpc " + resp.GetStatus().String()
}

// WebSocketOnce opens a WebSocket (an HTTP/1.1 Upgrade) to rawURL with the Host header host (the
// URL's own when empty), sends a line on the upgraded stream and reads it back (the servers here
// echo it unframed), and returns "websocket <status> echo <the line>", or "error <why>".
func WebSocketOnce(rawURL, host string, timeout time.Duration) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "error " + err.Error()
	}
	c, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return "error " + err.Error()
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if host == "" {
		host = u.Host
	}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n",
		u.RequestURI(), host, base64.StdEncoding.EncodeToString(key)); err != nil {
		return "error " + err.Error()
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return "error reading the upgrade's answer: " + err.Error()
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Sprintf("error the upgrade was answered %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	const line = "over the upgraded stream\n"
	if _, err := io.WriteString(c, line); err != nil {
		return "error " + err.Error()
	}
	echo, err := r.ReadString('\n')
	if err != nil {
		return fmt.Sprintf("error reading the echo after %q: %v", echo, err)
	}
	return fmt.Sprintf("websocket %d echo %s", resp.StatusCode, strings.TrimSpace(echo))
}
