// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command testserver is the cluster tier's test application: it answers HTTP/1.1, h2c, gRPC
// (the standard health service, SERVING) and raw TCP echo on the ports it is given, on every
// address of its pod.
//
//	testserver -http 8080 -h2c 9090 -grpc 9091 -tcp 9000 -health-path /healthz
//
// Where no Envoy can run, -grpc-inbound 18008 stands in for the node Envoy's inbound listener:
// gRPC over mTLS with the pod's SVID (-identity-dir). In client mode, -proxyless-client
// xds:///<name>:<port> is a proxyless gRPC client (its bootstrap from GRPC_XDS_BOOTSTRAP_CONFIG,
// which the pod webhook injects) that a test drives over HTTP on -client-port: GET /spread?n=100.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

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
	inbound := flag.Int("grpc-inbound", 0, "port of the stand-in for the node Envoy's inbound listener: gRPC (health) over mTLS with the SVID in -identity-dir; 0: none")
	identityDir := flag.String("identity-dir", proxyless.IdentityDir, "directory of the pod's SVID, key and trust bundle (svid.pem, svid_key.pem, bundle.pem)")
	trustDomain := flag.String("trust-domain", "aether.internal", "the trust domain whose clients -grpc-inbound accepts")
	client := flag.String("proxyless-client", "", "client mode: an xds:/// target to dial as a proxyless gRPC client, driven over HTTP on -client-port")
	clientPort := flag.Int("client-port", 8080, "client mode: the HTTP port of /spread?n=<count> and the health path")
	flag.Parse()
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
}
