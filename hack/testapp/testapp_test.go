// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServe talks to each server on loopback: HTTP/1.1 health path, h2c (prior knowledge), gRPC
// health, TCP echo.
func TestServe(t *testing.T) {
	httpPort, h2cPort, grpcPort, tcpPort := freePort(t), freePort(t), freePort(t), freePort(t)
	closers, err := Serve("127.0.0.1", Ports{HTTP: []int{httpPort}, H2C: []int{h2cPort}, GRPC: []int{grpcPort}, TCP: []int{tcpPort}, HealthPath: "/healthz"})
	t.Cleanup(func() {
		for _, c := range closers {
			_ = c.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(httpPort) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok\n" || resp.Proto != "HTTP/1.1" {
		t.Errorf("HTTP health: %d %q %s", resp.StatusCode, body, resp.Proto)
	}

	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	resp, err = (&http.Client{Transport: h2}).Get("http://127.0.0.1:" + strconv.Itoa(h2cPort) + "/who")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.Proto != "HTTP/2.0" || !strings.Contains(string(body), "HTTP/2.0 /who") {
		t.Errorf("h2c: %s %q", resp.Proto, body)
	}

	conn, err := grpc.NewClient("passthrough:///127.0.0.1:"+strconv.Itoa(grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	check, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || check.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health: %v %v", check.GetStatus(), err)
	}

	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(tcpPort), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Errorf("echo: %q %v", line, err)
	}
}

// TestHelloAndWebSocket: a Hello server greets with its address before it echoes; an HTTP server
// names its address and the request's protocol, and takes a WebSocket upgrade (101 with RFC
// 6455's accept key) whose stream then echoes.
func TestHelloAndWebSocket(t *testing.T) {
	httpPort, helloPort := freePort(t), freePort(t)
	closers, err := Serve("127.0.0.1", Ports{HTTP: []int{httpPort}, Hello: []int{helloPort}, HealthPath: "/healthz"})
	t.Cleanup(func() {
		for _, c := range closers {
			_ = c.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}

	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(helloPort), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || line != HelloPrefix+" "+c.RemoteAddr().String()+"\n" {
		t.Errorf("greeting: %q %v", line, err)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Errorf("echo after the greeting: %q %v", line, err)
	}

	ws, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(httpPort), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	_ = ws.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(ws, "GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	wr := bufio.NewReader(ws)
	resp, err := http.ReadResponse(wr, nil)
	if err != nil {
		t.Fatal(err)
	}
	// RFC 6455 section 1.3's example: this key's accept value.
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" ||
		resp.Header.Get(AtHeader) != ws.RemoteAddr().String() || resp.Header.Get(ProtoHeader) != "HTTP/1.1" {
		t.Errorf("upgrade: %d %v", resp.StatusCode, resp.Header)
	}
	if _, err := io.WriteString(ws, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := wr.ReadString('\n'); err != nil || line != "ping\n" {
		t.Errorf("echo on the upgraded stream: %q %v", line, err)
	}
}

// TestSlowStreams: SlowPath writes its lines one by one, flushed, the given time apart, then
// SlowDone; a bad count or duration is a 400.
func TestSlowStreams(t *testing.T) {
	port := freePort(t)
	closers, err := Serve("127.0.0.1", Ports{HTTP: []int{port}, HealthPath: "/healthz"})
	t.Cleanup(func() {
		for _, c := range closers {
			_ = c.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port) + SlowPath
	const every = 200 * time.Millisecond
	resp, err := http.Get(base + "?lines=3&every=" + every.String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	if err != nil || first != "line 1\n" {
		t.Fatalf("first line %q, %v", first, err)
	}
	firstAt := time.Now()
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "line 2\nline 3\n"+SlowDone+"\n" {
		t.Fatalf("the rest: %q, %v", rest, err)
	}
	if took := time.Since(firstAt); took < 2*every {
		t.Errorf("the rest came %s after the first line, want at least %s: not streamed", took, 2*every)
	}
	for _, query := range []string{"?lines=x", "?every=soon", "?lines=-1"} {
		resp, err := http.Get(base + query)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", query, resp.StatusCode)
		}
	}
}
