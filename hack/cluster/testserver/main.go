// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command testserver is the cluster tier's test application: it answers HTTP/1.1, h2c, gRPC
// (the standard health service, SERVING) and raw TCP echo on the ports it is given, on every
// address of its pod.
//
//	testserver -http 8080 -h2c 9090 -grpc 9091 -tcp 9000 -health-path /healthz
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
	flag.Parse()
	if _, err := testapp.Serve("", ports); err != nil {
		fmt.Fprintf(os.Stderr, "testserver: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("testserver: HTTP %v, h2c %v, gRPC %v, TCP echo %v\n", ports.HTTP, ports.H2C, ports.GRPC, ports.TCP)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
}
