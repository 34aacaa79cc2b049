// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"fortio.org/fortio/fgrpc"
	"fortio.org/fortio/fhttp"
	"fortio.org/fortio/fnet"
	"fortio.org/fortio/periodic"
	"fortio.org/fortio/tcprunner"
	"fortio.org/log"
	"google.golang.org/grpc/metadata"

	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
)

// Load through the mesh, for the data-plane benchmark: fortio's load generator, as a library, in
// a process of its own started in the client pod's network namespace (so that every connection it
// opens is the pod's, and capture takes it), and fortio's servers as the server pod's application
// (appSpec.Fortio). The process is this test binary again, with loadEnv set: it runs one load,
// prints its result as JSON and exits.

// loadEnv carries the load a process runs (loadSpec, JSON).
const loadEnv = "AETHER_LIVE_LOAD"

// loadSpec is one run of fortio's load generator.
type loadSpec struct {
	// Kind is http (HTTP/1.1 POSTs to the echo server), grpc (unary pings, HTTP/2) or tcp
	// (echoes of the payload on a connection).
	Kind string
	// Target is the address dialled, <IP>:<port>; Authority, when set, is the Host (HTTP) or
	// :authority (gRPC) sent: the mesh name, which the mesh routes by.
	Target, Authority string
	// QPS is the rate asked for (0: as fast as it goes), for Duration, over Connections
	// connections (fortio's threads: one connection each).
	QPS         float64
	Duration    time.Duration
	Connections int
	// Payload is the size of each request's body, echoed back.
	Payload int
	// NoKeepAlive makes every HTTP request a connection of its own.
	NoKeepAlive bool
}

// loadResult is what a run measured: latencies in milliseconds.
type loadResult struct {
	Requests  int64
	Errors    int64
	ActualQPS float64
	P50       float64
	P90       float64
	P99       float64
	P999      float64
	// Sockets is how many connections the client opened.
	Sockets int64
}

// runLoad runs spec in ns and returns its result.
func runLoad(t testing.TB, ns *nstest.NS, spec loadSpec) loadResult {
	t.Helper()
	cmd, encoded := selfIn(t, ns, spec)
	cmd.Env = append(os.Environ(), loadEnv+"="+string(encoded))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("load %+v: %v: %s", spec, err, stderr.String())
	}
	var r loadResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("load %+v: reading its result %q: %v (%s)", spec, out, err, stderr.String())
	}
	return r
}

// runLoadProcess runs the load spec names (the process's side of runLoad).
func runLoadProcess(spec string) int {
	var s loadSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", loadEnv, err)
		return 2
	}
	log.SetLogLevelQuiet(log.Error)
	r, err := load(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "load %+v: %v\n", s, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

// load runs s with fortio's runners.
func load(s loadSpec) (loadResult, error) {
	ro := periodic.RunnerOptions{
		QPS: s.QPS, Duration: s.Duration, NumThreads: s.Connections,
		Percentiles: []float64{50, 90, 99, 99.9},
		// 10 µs buckets: fortio's default (1 ms) cannot tell the mesh's added latency.
		Resolution: 0.00001,
		Out:        os.Stderr,
	}
	payload := strings.Repeat("a", s.Payload)
	var res *periodic.RunnerResults
	var errors, sockets int64
	switch s.Kind {
	case "http":
		o := fhttp.HTTPRunnerOptions{RunnerOptions: ro}
		o.URL = "http://" + s.Target + "/"
		o.Payload = []byte(payload)
		o.DisableKeepAlive = s.NoKeepAlive
		o.HTTPReqTimeOut = 5 * time.Second
		if s.Authority != "" {
			if err := o.AddAndValidateExtraHeader("Host: " + s.Authority); err != nil {
				return loadResult{}, err
			}
		}
		r, err := fhttp.RunHTTPTest(&o)
		if err != nil {
			return loadResult{}, err
		}
		res = &r.RunnerResults
		errors = r.DurationHistogram.Count - r.RetCodes[200]
		for _, n := range r.Sockets {
			sockets += n
		}
	case "grpc":
		o := fgrpc.GRPCRunnerOptions{RunnerOptions: ro, Destination: s.Target, UsePing: true, Payload: payload, Streams: 1}
		if s.Authority != "" {
			o.Metadata = metadata.Pairs("host", s.Authority)
		}
		r, err := fgrpc.RunGRPCTest(&o)
		if err != nil {
			return loadResult{}, err
		}
		res = &r.RunnerResults
		errors = r.DurationHistogram.Count - r.RetCodes["SERVING"]
	case "tcp":
		o := tcprunner.RunnerOptions{RunnerOptions: ro}
		o.Destination = "tcp://" + s.Target
		o.Payload = []byte(payload)
		o.ReqTimeout = 5 * time.Second
		r, err := tcprunner.RunTCPTest(&o)
		if err != nil {
			return loadResult{}, err
		}
		res = &r.RunnerResults
		errors = r.DurationHistogram.Count - r.RetCodes[tcprunner.TCPStatusOK]
		sockets = int64(r.SocketCount)
	default:
		return loadResult{}, fmt.Errorf("kind %q: want http, grpc or tcp", s.Kind)
	}
	out := loadResult{Requests: res.DurationHistogram.Count, Errors: errors, ActualQPS: res.ActualQPS, Sockets: sockets}
	for _, p := range res.DurationHistogram.Percentiles {
		ms := p.Value * 1000
		switch p.Percentile {
		case 50:
			out.P50 = ms
		case 90:
			out.P90 = ms
		case 99:
			out.P99 = ms
		case 99.9:
			out.P999 = ms
		}
	}
	return out, nil
}

// serveFortio serves fortio's servers for s (appSpec.Fortio) until standard input closes.
func serveFortio(s appSpec) int {
	log.SetLogLevelQuiet(log.Error)
	at := func(port int) string { return net.JoinHostPort(s.Host, strconv.Itoa(port)) }
	for _, p := range s.HTTP {
		if _, addr := fhttp.ServeTCP(at(p), ""); addr == nil {
			fmt.Fprintf(os.Stderr, "fortio's echo server on %s did not start\n", at(p))
			return 1
		}
	}
	for _, p := range s.H2C {
		if addr := fgrpc.PingServer(at(p), "", 0, &fhttp.TLSOptions{}); addr == nil {
			fmt.Fprintf(os.Stderr, "fortio's gRPC ping server on %s did not start\n", at(p))
			return 1
		}
	}
	for _, p := range s.Hello {
		if addr := fnet.TCPEchoServer("echo", at(p)); addr == nil {
			fmt.Fprintf(os.Stderr, "fortio's TCP echo server on %s did not start\n", at(p))
			return 1
		}
	}
	fmt.Println(appReady)
	var buf [1]byte
	_, _ = os.Stdin.Read(buf[:])
	return 0
}
