// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command testserver is the cluster tier's test application: it answers HTTP/1.1, h2c, gRPC
// (the standard health service, SERVING) and raw TCP echo on the ports it is given, on every
// address of its pod. It also plays a meshed pod's capture listener (-original-dst: each
// connection is answered "original-dst <address:port>", the destination it was dialled to, read
// with SO_ORIGINAL_DST), a server that names who calls (-peer: "peer <source IP>") and a client of it (-dial: dials, prints the first line answered or
// "error <why> (after <how long the dial took>)", once or every -dial-every), a gRPC health
// client (-grpc-health) and a WebSocket client (-websocket) that print their answers the same way,
// and an HTTP client
// (-get: the status and the body's first line, the same way; with -load-rate a steady load of
// such requests, each failure logged and a count of all at the end).
//
//	testserver -http 8080 -h2c 9090 -grpc 9091 -tcp 9000 -health-path /healthz
//	testserver -original-dst 127.0.0.1:18001
//	testserver -original-dst 127.0.0.1:18001 -reuse-port -answer-delay 300ms -drain
//	testserver -peer :19099
//	testserver -uds /run/app/app.sock
//	testserver -dial 10.96.0.10:18082 -dial-every 1s
//	testserver -get http://10.96.0.10:8080/hello -get-host web.shop.aether.internal:8080 -dial-every 1s
//	testserver -get http://10.96.0.10:8080/hello -get-host web.shop.aether.internal:8080 -load-rate 100 -load-for 30s
//
// Where no Envoy can run, -grpc-inbound 18008 stands in for the node Envoy's inbound listener:
// gRPC over mTLS with the pod's SVID (-identity-dir). In client mode, -proxyless-client
// xds:///<name>:<port> is a proxyless gRPC client (its bootstrap from GRPC_XDS_BOOTSTRAP_CONFIG,
// which the pod webhook injects) that a test drives over HTTP on -client-port: GET /spread?n=100.
//
// The node proxy's handover, played by two of these in one pod: -reuse-port binds -original-dst
// with SO_REUSEPORT (so a second process binds the same address beside the first, as a new node
// proxy binds beside the old one), -answer-delay holds each connection that long before its answer
// (requests in flight), and -drain makes SIGTERM a drain: stop accepting (close the listener, so
// new connections go to the other process), answer every connection in flight, then exit.
//
// -fetch-svid <socket> asks the SPIRE agent's Workload API at that unix socket path for the pod's
// X.509 SVID, retrying for -fetch-timeout, prints "svid <SPIFFE ID>" (verified against the bundle
// served with it) and exits 0, or exits 1 once the time is up:
//
//	testserver -fetch-svid /run/spire/agent-sockets/spire-agent.sock -fetch-timeout 1m
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
)

type portList []int

func (p *portList) String() string { return fmt.Sprint(*p) }

func (p *portList) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q is not a port", s)
		}
		*p = append(*p, n)
	}
	return nil
}

func main() {
	var ports testapp.Ports
	flag.Var((*portList)(&ports.HTTP), "http", "HTTP/1.1 ports, comma-separated")
	flag.Var((*portList)(&ports.H2C), "h2c", "cleartext HTTP/2 ports, comma-separated")
	flag.Var((*portList)(&ports.GRPC), "grpc", "gRPC ports (grpc.health.v1 answers SERVING), comma-separated")
	flag.Var((*portList)(&ports.TCP), "tcp", "TCP echo ports, comma-separated")
	flag.StringVar(&ports.HealthPath, "health-path", "/healthz", "path that answers 200")
	originalDst := flag.String("original-dst", "", "address to accept on, answering each connection \"original-dst <its SO_ORIGINAL_DST>\" (a meshed pod's capture listener is 127.0.0.1:18001)")
	uds := flag.String("uds", "", "path of a unix socket to create (mode 0660) and accept on, answering each connection \"uds <path>\" (an app serving on a Unix socket)")
	peer := flag.String("peer", "", "address to accept on, answering each connection \"peer <its source IP>\" (who the server sees calling)")
	peerName := flag.String("peer-name", "", "with -peer: the server's name, added to each answer: \"peer <its source IP> at <name>\" (which pod a connection reached)")
	dial := flag.String("dial", "", "address to dial; prints the first line answered, or \"error <why>\"")
	dialEvery := flag.Duration("dial-every", 0, "with -dial or -get: dial again at this interval, forever (0: once, then exit)")
	get := flag.String("get", "", "an http:// URL to GET; prints \"<url> <status> [x-aether-error=<value>] <the body's first line>\", or \"error <why>\"")
	getHost := flag.String("get-host", "", "with -get: the request's Host header (empty: the URL's), which a mesh routes by")
	getMethod := flag.String("get-method", http.MethodGet, "with -get: the request's method (a line of another method starts with it)")
	loadRate := flag.Int("load-rate", 0, "with -get: send that many requests a second over keep-alive connections, for -load-for, logging each failure \"load failed <sent at> <answer>\" and at the end \"load done sent=<n> answered=<n> failed=<n>\" (then idle until SIGTERM); 0: no load")
	loadFor := flag.Duration("load-for", 30*time.Second, "with -load-rate: how long to send")
	grpcHealth := flag.String("grpc-health", "", "address to call grpc.health.v1.Health/Check at (cleartext HTTP/2, :authority -get-host); prints \"<address> grpc <status>\" or the error, as -dial")
	websocket := flag.String("websocket", "", "an http:// URL to open a WebSocket to (Host -get-host), send a line over and read it back; prints \"<url> websocket 101 echo <the line>\" or the error, as -dial")
	resetRequests := flag.Bool("reset-requests", false, "reset every HTTP request but the health path's before answering it (a healthy pod whose application resets what it is sent)")
	inbound := flag.Int("grpc-inbound", 0, "port of the stand-in for the node Envoy's inbound listener: gRPC (health) over mTLS with the SVID in -identity-dir; 0: none")
	identityDir := flag.String("identity-dir", proxyless.IdentityDir, "directory of the pod's SVID, key and trust bundle (svid.pem, svid_key.pem, bundle.pem)")
	trustDomain := flag.String("trust-domain", "aether.internal", "the trust domain whose clients -grpc-inbound accepts")
	client := flag.String("proxyless-client", "", "client mode: an xds:/// target to dial as a proxyless gRPC client, driven over HTTP on -client-port")
	clientPort := flag.Int("client-port", 8080, "client mode: the HTTP port of /spread?n=<count> and the health path")
	fetchSVID := flag.String("fetch-svid", "", "path of a SPIRE agent's Workload API socket: print \"svid <SPIFFE ID>\" of the pod's X.509 SVID and exit, or exit 1 after -fetch-timeout")
	fetchTimeout := flag.Duration("fetch-timeout", time.Minute, "with -fetch-svid: how long to keep asking")
	reusePort := flag.Bool("reuse-port", false, "with -original-dst: bind it with SO_REUSEPORT, so that another process can bind the same address beside this one")
	answerDelay := flag.Duration("answer-delay", 0, "with -original-dst or -peer: hold each connection this long before answering it (a request in flight)")
	drain := flag.Bool("drain", false, "with -original-dst: on SIGTERM, stop accepting (close the listener), answer every connection in flight, then exit; without it SIGTERM exits at once")
	flag.Parse()
	ports.ResetRequests = *resetRequests
	if *fetchSVID != "" {
		fetch(*fetchSVID, *fetchTimeout)
		return
	}
	if *dial != "" {
		dialLoop(*dial, *dialEvery, func() string { return testapp.DialOnce(*dial, 3*time.Second) })
		return
	}
	if *grpcHealth != "" {
		dialLoop(*grpcHealth, *dialEvery, func() string { return testapp.GRPCHealthOnce(*grpcHealth, *getHost, 3*time.Second) })
		return
	}
	if *websocket != "" {
		dialLoop(*websocket, *dialEvery, func() string { return testapp.WebSocketOnce(*websocket, *getHost, 3*time.Second) })
		return
	}
	if *get != "" && *loadRate > 0 {
		load(testapp.Load{Method: *getMethod, URL: *get, Host: *getHost, Rate: *loadRate, For: *loadFor, Timeout: 10 * time.Second})
		return
	}
	if *get != "" {
		dialLoop(*get, *dialEvery, func() string { return testapp.RequestOnce(*getMethod, *get, *getHost, 3*time.Second) })
		return
	}
	var draining *testapp.DrainingServer
	if *originalDst != "" {
		listen := func(address string) (net.Listener, error) { return net.Listen("tcp", address) }
		if *reusePort {
			listen = func(address string) (net.Listener, error) {
				return testapp.ListenReusePort(context.Background(), address)
			}
		}
		l, err := listen(*originalDst)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testserver: %v\n", err)
			os.Exit(1)
		}
		if *answerDelay > 0 || *drain {
			draining = testapp.NewDrainingServer(l, *answerDelay)
			draining.Log = os.Stdout // what is in flight, for the handover's fault spec
			go draining.Serve()
		} else {
			go testapp.ServeOriginalDst(l)
		}
		fmt.Printf("testserver: answering SO_ORIGINAL_DST on %s (SO_REUSEPORT %v, answer delay %s, drain on SIGTERM %v)\n", l.Addr(), *reusePort, *answerDelay, *drain)
	}
	if *uds != "" {
		l, err := net.Listen("unix", *uds)
		if err == nil {
			err = os.Chmod(*uds, 0o660)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "testserver: -uds: %v\n", err)
			os.Exit(1)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = fmt.Fprintf(c, "uds %s\n", *uds)
				_ = c.Close()
			}
		}()
		fmt.Printf("testserver: answering on the unix socket %s\n", *uds)
	}
	if *peer != "" {
		l, err := net.Listen("tcp", *peer)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testserver: %v\n", err)
			os.Exit(1)
		}
		go testapp.ServePeerAs(l, *peerName, *answerDelay)
		fmt.Printf("testserver: answering the peer's address on %s\n", l.Addr())
	}
	if _, err := testapp.Serve("", ports); err != nil {
		fmt.Fprintf(os.Stderr, "testserver: %v\n", err)
		os.Exit(1)
	}
	if *inbound != 0 {
		if _, err := testapp.ServeInbound("", *inbound, *identityDir, *trustDomain); err != nil {
			fmt.Fprintf(os.Stderr, "testserver: -grpc-inbound: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("testserver: gRPC over mTLS on %d (the inbound's stand-in)\n", *inbound)
	}
	if *client != "" {
		if _, err := testapp.ServeProxylessClient("", *clientPort, *client, ports.HealthPath); err != nil {
			fmt.Fprintf(os.Stderr, "testserver: -proxyless-client: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("testserver: proxyless gRPC client of %s, driven on :%d/spread\n", *client, *clientPort)
	}
	fmt.Printf("testserver: HTTP %v, h2c %v, gRPC %v, TCP echo %v\n", ports.HTTP, ports.H2C, ports.GRPC, ports.TCP)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
	if *drain && draining != nil {
		fmt.Printf("testserver: draining: no longer accepting, %d connections in flight\n", draining.InFlight())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := draining.Drain(ctx)
		cancel()
		if err != nil {
			fmt.Printf("testserver: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("testserver: drained (%d connections accepted in all)\n", draining.Accepted())
	}
}

// dialLoop prints one line per dial of address (once returns its answer): what answered, or the
// error and how long the dial took ("error ... (after 3s)"). With every zero it
// dials once and exits non-zero on an error.
func dialLoop(address string, every time.Duration, once func() string) {
	for {
		began := time.Now()
		answer := once()
		if strings.HasPrefix(answer, "error") {
			// A failed dial may have waited out its timeout: its duration tells a reader of the
			// log (stamped when the line is written) when it began.
			answer += fmt.Sprintf(" (after %s)", time.Since(began).Round(time.Millisecond))
		}
		fmt.Printf("%s %s\n", address, answer)
		if every == 0 {
			if strings.HasPrefix(answer, "error") {
				os.Exit(1)
			}
			return
		}
		time.Sleep(every)
	}
}

// load runs l once a request is answered 200 (a meshed pod's first requests may go out before the
// node's proxy has its listeners: they measure its start, not a disruption), logging when it
// began, each failure and the summary, then idles until SIGTERM: a container that exited would be
// restarted and load again.
func load(l testapp.Load) {
	for tries := 1; ; tries++ {
		answer := testapp.RequestOnce(l.Method, l.URL, l.Host, 3*time.Second)
		if strings.HasPrefix(strings.TrimPrefix(answer, l.Method+" "), "200 ") {
			fmt.Printf("load answered after %d tries: %s\n", tries, answer)
			break
		}
		if tries%25 == 1 {
			fmt.Printf("load waiting for an answer: %s\n", answer)
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf("load began %s: %d requests/s for %s, %s %s Host %s\n", time.Now().UTC().Format(time.RFC3339Nano), l.Rate, l.For, l.Method, l.URL, l.Host)
	result := l.Run(func(line string) { fmt.Printf("load failed %s\n", line) })
	fmt.Println(result)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
}

// fetch prints the SPIFFE ID of the SVID the Workload API at socket gives this process, or exits
// non-zero when it gave none within timeout (each failed attempt is printed).
func fetch(socket string, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	id, err := testapp.FetchSVID(ctx, socket, time.Second, os.Stdout)
	cancel()
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s\n", testapp.SVIDPrefix, id)
}
