//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package e2e is the end-to-end tier: it runs the project's real binaries as a user does. At this
// stage that is `make run` (hack/localenv); the single-node cluster tier joins it later.
package e2e

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestMakeRun starts what `make run` starts, waits for its KUBECONFIG line, checks with the real
// kubectl that the samples are served and that the manager derived their MeshService, checks the
// agent's xDS with a real ADS client (checkXDS), then interrupts it and checks it cleans up.
func TestMakeRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	bin := filepath.Join(t.TempDir(), "localenv")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./hack/localenv")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hack/localenv: %v\n%s", err, out)
	}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	run := exec.CommandContext(ctx, bin, "--kubeconfig-out", kubeconfig)
	run.Stderr = os.Stderr
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill() //nolint:errcheck // only matters when the test already failed

	announced := make(chan string, 1)
	var xdsAddress string // announced before KUBECONFIG=
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if address, ok := strings.CutPrefix(scanner.Text(), "XDS="); ok {
				xdsAddress = address
			}
			if path, ok := strings.CutPrefix(scanner.Text(), "KUBECONFIG="); ok {
				announced <- path
			}
		}
		close(announced)
	}()
	select {
	case path, ok := <-announced:
		if !ok || path != kubeconfig {
			t.Fatalf("localenv announced KUBECONFIG=%q, want %q", path, kubeconfig)
		}
	case <-ctx.Done():
		t.Fatal("localenv did not come up")
	}

	assets, err := testenv.Assets()
	if err != nil {
		t.Fatal(err)
	}

	// The agent registers the sample pods and probes the stand-in app; the manager derives the
	// sample service: ports, defaults, 3 of 3 endpoints ready, a VIP from the generated Service.
	// The HTTP column is empty: payments serves HTTP on 8080 and 9090, not 80, so a portless
	// http:// reaches nothing (421). Its row is NAME, TCP, PORTS, ENDPOINTS, VIP, READY, AGE: 7
	// fields, 8 if an HTTP port were shown.
	deadline := time.Now().Add(time.Minute)
	var table string
	for {
		out, err := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "--kubeconfig", kubeconfig,
			"get", "meshservice", "payments", "-n", "shop", "--no-headers").CombinedOutput()
		table = string(out)
		fields := strings.Fields(table)
		if err == nil && len(fields) == 7 && strings.Join(fields[1:4], " ") == "9000 8080/HTTP,9000/TCP,9090/HTTP2 3/3" && net.ParseIP(fields[4]) != nil && fields[5] == "True" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl get meshservice payments never showed the derived service; last output:\n%s", table)
		}
		time.Sleep(250 * time.Millisecond)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "--kubeconfig", kubeconfig,
		"get", "meshendpoints", "-n", "shop", "-o", "custom-columns=NAME:.metadata.name,PORTS:.spec.portsSummary,HEALTH:.status.health,NODE:.spec.nodeName", "--no-headers").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get meshendpoints: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "8080/HTTP,9000/TCP,9090/HTTP2   Healthy   node-a"); got != 3 {
		t.Errorf("want the 3 sample pods' endpoints healthy on node-a, kubectl printed:\n%s", out)
	}

	// kubectl describe reads as DESIGN section 5's table (proposal 043): the names once, each
	// spelling once, and the 421 rows with the x-aether-error that says why.
	describe, err := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "--kubeconfig", kubeconfig,
		"describe", "meshservice", "payments", "-n", "shop").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl describe meshservice payments: %v\n%s", err, describe)
	}
	for _, want := range []string{
		"payments.shop.aether.internal", "payments.shop.svc.cluster.local",
		"Address:   http://<name>/", "Error:     port-not-declared",
		"Address:   <name>:18081", "Outcome:   HostDecides",
		"Address:   Host: <name>:9000", "Error:     port-not-http",
		"Address:   <name>:18082",
	} {
		if !strings.Contains(string(describe), want) {
			t.Errorf("kubectl describe meshservice payments lacks %q:\n%s", want, describe)
		}
	}
	if n := strings.Count(string(describe), "Address:"); n != 2*3+10 {
		t.Errorf("kubectl describe shows %d dial rows, want 2×3 ports + 10 = 16 (each spelling once)", n)
	}

	// The manager's pod webhook denies a pod declaring a reserved port, at kubectl apply.
	bad := filepath.Join(testenv.RepoRoot(), "config", "samples", "bad", "reserved-port-pod.yaml")
	applyOut, err := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "--kubeconfig", kubeconfig, "apply", "-f", bad).CombinedOutput()
	want := `admission webhook "vpod.mesh.aether.io" denied the request: endpoint.aether.io/ports: "8080,18082=tcp": port 18082 is reserved: it is the mesh's TCP port`
	if err == nil || !strings.Contains(string(applyOut), want) {
		t.Errorf("kubectl apply -f %s: %v\n%s\nwant the denial %q", bad, err, applyOut, want)
	}

	// The manager's route controller tells a GitOps user, in the route's status, that an
	// HTTPRoute cannot reach the raw-TCP port 9000.
	route := filepath.Join(testenv.RepoRoot(), "config", "samples", "bad", "httproute-to-tcp-port.yaml")
	if out, err := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "--kubeconfig", kubeconfig, "apply", "-f", route).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", route, err, out)
	}
	var status string
	for deadline := time.Now().Add(time.Minute); ; {
		out, _ := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "--kubeconfig", kubeconfig, "get", "httproute", "payments-ledger", "-n", "shop",
			"-o", `jsonpath={.status.parents[?(@.controllerName=="mesh.aether.io/controller")].conditions[?(@.type=="ResolvedRefs")].reason}`).CombinedOutput()
		if status = string(out); status == "UnsupportedProtocol" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sample HTTPRoute's ResolvedRefs reason is %q, want UnsupportedProtocol", status)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// The agent's xDS serving, through a real ADS client (issue 12's acceptance).
	t.Run("xDS", func(t *testing.T) {
		if !strings.HasPrefix(xdsAddress, "tcp://127.0.0.1:") {
			t.Fatalf("localenv announced XDS=%q, want tcp://127.0.0.1:<port>", xdsAddress)
		}
		checkXDS(t, ctx, xdsAddress, kubectlFor(ctx, assets, kubeconfig), filepath.Join(filepath.Dir(kubeconfig), "agent.log"))
	})

	if err := run.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := run.Wait(); err != nil {
		t.Errorf("localenv exited with %v after Ctrl-C, want a clean exit", err)
	}
	if _, err := os.Stat(kubeconfig); !os.IsNotExist(err) {
		t.Errorf("localenv left its kubeconfig behind (%v)", err)
	}
}
