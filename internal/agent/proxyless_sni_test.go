// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	ourxds "github.com/aether-mesh/aether-operator/internal/xds"
)

// grpc-go reads GRPC_EXPERIMENTAL_XDS_SNI once, when the process starts: a client that sends SNI
// runs in a process of its own, this test binary started again with the variable set, in client
// mode (TestMain runs proxylessClientProcess before anything else).

// proxylessClientEnv carries a clientOrder to the test binary in client mode.
const proxylessClientEnv = "AETHER_TEST_PROXYLESS_CLIENT"

// clientOrder is what the client process does: dial Target with Bootstrap, wait (at most 30 s)
// for a first answer, then make RPCs more.
type clientOrder struct {
	Bootstrap []byte
	Target    string
	RPCs      int
}

// clientReport is what it did: the RPCs by the backend that answered, or the error that ended it.
type clientReport struct {
	Answered map[string]int
	Err      string
}

// proxylessClientProcess runs the client process's order, if this process is one, and reports on
// standard output; ok is false in an ordinary test process.
func proxylessClientProcess() (code int, ok bool) {
	raw := os.Getenv(proxylessClientEnv)
	if raw == "" {
		return 0, false
	}
	var order clientOrder
	report := clientReport{}
	if err := json.Unmarshal([]byte(raw), &order); err != nil {
		report.Err = err.Error()
	} else {
		report.Answered, report.Err = runOrder(order)
	}
	if err := json.NewEncoder(os.Stdout).Encode(report); err != nil {
		return 1, true
	}
	return 0, true
}

func runOrder(order clientOrder) (map[string]int, string) {
	conn, err := newProxylessConn(order.Bootstrap, order.Target)
	if err != nil {
		return nil, err.Error()
	}
	defer func() { _ = conn.Close() }()
	c := &proxylessClient{conn: conn}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) { // a poll
		_, err := c.call(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, "no answer within 30s: " + err.Error()
		}
	}
	answered, err := c.spread(ctx, order.RPCs)
	if err != nil {
		return answered, err.Error()
	}
	return answered, ""
}

// runClientProcess runs order in a client process whose environment adds env.
func runClientProcess(t *testing.T, ctx context.Context, order clientOrder, env ...string) clientReport {
	t.Helper()
	raw, err := json.Marshal(order)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(slices.Clone(os.Environ()), append(env, proxylessClientEnv+"="+string(raw))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the client process: %v\n%s", err, stderr.String())
	}
	var report clientReport
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("the client process's report %q: %v", out, err)
	}
	return report
}

// TestProxylessSNI: what grpc-go v1.85 does with the SNI a cluster names. payments serves gRPC on
// 9090 (its primary) and 9091. A client that announces no SNI support (and runs without
// GRPC_EXPERIMENTAL_XDS_SNI) is served the primary only: 9091 has no listener for it, so its RPCs
// fail rather than land on the destination's primary. A client that announces it and runs with
// GRPC_EXPERIMENTAL_XDS_SNI=true is served 9091 too, and its handshakes send SNI "9091", which
// selects port 9091's chain on the destination's inbound; to the primary they send "9090" (every
// hop names its port, the primary too).
func TestProxylessSNI(t *testing.T) {
	pt := startProxylessTest(t)
	ctx, ns, a, ca := pt.ctx, pt.ns, pt.a, pt.ca
	b := pt.backend(t, "payments")
	createPod(t, ctx, ns, "payments-0", a.node, b.ip, true, map[string]string{
		portspec.AnnotationPort: strconv.Itoa(grpcPort), portspec.AnnotationPorts: "9090=grpc,9091=grpc"})
	healthIs(t, ns, "payments-0", meshv1alpha1.HealthHealthy)
	fqdn := ourxds.FQDN("payments", ns, "aether.internal")

	// Without SNI: the primary answers, 9091 is not served.
	primary := dialProxyless(t, ctx, a, ca, ns, "client", "client", "xds:///"+ourxds.ProxylessListener(fqdn, grpcPort))
	secondary := dialProxyless(t, ctx, a, ca, ns, "client-b", "client", "xds:///"+ourxds.ProxylessListener(fqdn, 9091))
	testenv.Eventually(t, "the primary answering a client without SNI", func() error { _, err := primary.call(ctx); return err })
	var refused error
	testenv.Eventually(t, "9091 refused to a client without SNI", func() error {
		_, refused = secondary.call(ctx)
		if status.Code(refused) != codes.Unavailable {
			return fmt.Errorf("the RPC to 9091: %v, want UNAVAILABLE", refused)
		}
		return nil
	})
	t.Logf("without SNI, to 9091: %v", refused)
	if snis := b.SNIs(); slices.ContainsFunc(snis, func(s string) bool { return s != "" }) {
		t.Errorf("a client without GRPC_EXPERIMENTAL_XDS_SNI sent SNI %q", snis)
	}

	// With SNI, in a process of its own.
	files, err := ca.WriteFiles(t.TempDir(), spiffeID(ns, "client"))
	if err != nil {
		t.Fatal(err)
	}
	a.actAs(createPodAs(t, ctx, ns, "sni-client", "client", a.node, newPodIP(), true, map[string]string{portspec.AnnotationProxyless: portspec.ProxylessGRPC}))
	bootstrap, err := proxyless.Bootstrap{NodeID: proxyless.NodeID(ns, "sni-client"), ServerURI: a.proxylessAddress,
		CertificateFile: files.Certificate, KeyFile: files.Key, BundleFile: files.Bundle, SNI: true}.JSON()
	if err != nil {
		t.Fatal(err)
	}
	seen := len(b.SNIs())
	for port, wantSNI := range map[int32]string{9091: "9091", grpcPort: strconv.Itoa(grpcPort)} {
		report := runClientProcess(t, ctx, clientOrder{Bootstrap: bootstrap, Target: "xds:///" + ourxds.ProxylessListener(fqdn, port), RPCs: 20},
			proxyless.EnvSNI+"=true")
		if report.Err != "" || report.Answered[b.ip] != 20 {
			t.Fatalf("the SNI client to %d: %+v", port, report)
		}
		snis := b.SNIs()[seen:]
		seen += len(snis)
		if len(snis) == 0 || slices.ContainsFunc(snis, func(s string) bool { return s != wantSNI }) {
			t.Errorf("the SNI client's handshakes to %d sent SNI %q, want %q", port, snis, wantSNI)
		}
		t.Logf("with %s=true, to %d: SNI %q", proxyless.EnvSNI, port, strings.Join(snis, ","))
	}
	pt.noNACK(t)
}
