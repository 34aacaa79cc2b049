// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// BenchmarkAgentRSS measures a real agent process (cmd/agent, built once into a temporary
// directory) against the benchmarks' mesh (benchmesh_test.go: 1 000 MeshServices × 10
// MeshEndpoints in an API server of their own): it starts the binary, waits until its cluster view
// holds every object the API server lists (the agent's gauge aether_agent_view_objects, read on
// its metrics endpoint), then reads the process's VmRSS (rss-MiB, the resident memory the target
// of issue 12 is about: < 150 MiB) and VmHWM (peak-rss-MiB, the most it was resident, the list's
// decoding included) from /proc/<pid>/status. "view" runs with xDS serving on (--xds-address, which turns the view on: the agent as deployed, building and serving the node's configuration); "no-view" with --xds-address="",
// the agent's baseline with the same objects in the cluster. sync-s is how long the view took to
// hold them all (with no view, how long the agent took to serve metrics).
//
//	go test ./internal/agent/ -run '^$' -bench AgentRSS -benchtime 1x
func BenchmarkAgentRSS(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mesh, err := benchMeshEnv(ctx)
	if err != nil {
		b.Fatal(err)
	}
	agentBin, err := buildAgent()
	if err != nil {
		b.Fatal(err)
	}
	want, err := meshObjects(ctx, mesh)
	if err != nil {
		b.Fatal(err)
	}
	for _, variant := range []struct {
		name string
		view bool
	}{{"no-view", false}, {"view", true}} {
		b.Run(variant.name, func(b *testing.B) {
			var rss, peak, synced float64
			for range b.N {
				m := measureAgent(b, ctx, agentBin, mesh, variant.view, want)
				rss, peak, synced = rss+m.rss, peak+m.peak, synced+m.synced.Seconds()
			}
			n := float64(b.N)
			b.ReportMetric(rss/n, "rss-MiB")
			b.ReportMetric(peak/n, "peak-rss-MiB")
			b.ReportMetric(synced/n, "sync-s")
		})
	}
}

var agentBuild struct {
	once sync.Once
	path string
	err  error
}

// buildAgent builds cmd/agent once per test binary, as make build does, into a temporary
// directory removed at exit (TestMain's os.Exit skips deferred cleanups: it is left in the
// system's temporary directory then, like go test's own).
func buildAgent() (string, error) {
	agentBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "aether-agent-bench-")
		if err != nil {
			agentBuild.err = err
			return
		}
		agentBuild.path = filepath.Join(dir, "agent")
		cmd := exec.Command("go", "build", "-o", agentBuild.path, "./cmd/agent")
		cmd.Dir = testenv.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			agentBuild.err = fmt.Errorf("go build ./cmd/agent: %w\n%s", err, out)
		}
	})
	return agentBuild.path, agentBuild.err
}

// meshObjects is how many objects of each kind the API server holds, cluster-wide, as the
// view's gauge counts them.
func meshObjects(ctx context.Context, mesh *testenv.Env) (map[string]int, error) {
	var services meshv1alpha1.MeshServiceList
	var endpoints meshv1alpha1.MeshEndpointList
	if err := mesh.Client.List(ctx, &services); err != nil {
		return nil, err
	}
	if err := mesh.Client.List(ctx, &endpoints); err != nil {
		return nil, err
	}
	if len(services.Items) < benchServices || len(endpoints.Items) < benchServices*benchEndpointsPerSvc {
		return nil, fmt.Errorf("the benchmarks' API server holds %d MeshServices and %d MeshEndpoints, fewer than the mesh's", len(services.Items), len(endpoints.Items))
	}
	return map[string]int{"MeshService": len(services.Items), "MeshEndpoint": len(endpoints.Items)}, nil
}

type agentMemory struct {
	rss, peak float64 // MiB
	synced    time.Duration
}

// measureAgent runs the agent binary until its view holds want (or, without the view, until it
// serves metrics), reads its memory, and stops it.
func measureAgent(b *testing.B, ctx context.Context, agentBin string, mesh *testenv.Env, view bool, want map[string]int) agentMemory {
	b.Helper()
	metricsAddr, err := freeLoopbackAddr()
	if err != nil {
		b.Fatal(err)
	}
	var logs bytes.Buffer
	args := []string{"--kubeconfig=" + mesh.Kubeconfig, "--node-name=bench-agent-node",
		"--metrics-bind-address=" + metricsAddr, "--metrics-secure=false", "--health-probe-bind-address=127.0.0.1:0"}
	// The view is on with xDS serving (a socket of the benchmark's own); off with no address.
	xdsAddress := ""
	if view {
		xdsAddress = "unix://" + filepath.Join(b.TempDir(), "xds.sock")
	}
	args = append(args, "--xds-address="+xdsAddress)
	cmd := exec.CommandContext(ctx, agentBin, args...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	began := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil && !strings.Contains(err.Error(), "signal: terminated") {
			b.Errorf("the agent exited with %v:\n%s", err, logs.String())
		}
	}()

	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		held, err := viewGauge(ctx, metricsAddr)
		if err == nil && (!view || held["MeshService"] == want["MeshService"] && held["MeshEndpoint"] == want["MeshEndpoint"]) {
			break
		}
		select {
		case err := <-exited:
			b.Fatalf("the agent exited (%v) before its view synced:\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("the agent's view holds %v (%v), want %v:\n%s", held, err, want, logs.String())
		}
	}
	m := agentMemory{synced: time.Since(began)}
	var err1, err2 error
	m.rss, err1 = testenv.MemoryMiB(cmd.Process.Pid, "VmRSS")
	m.peak, err2 = testenv.MemoryMiB(cmd.Process.Pid, "VmHWM")
	if err := errors.Join(err1, err2); err != nil {
		b.Fatal(err)
	}
	b.Logf("view=%v: synced in %s; VmRSS %.1f MiB, VmHWM %.1f MiB", view, m.synced.Round(time.Millisecond), m.rss, m.peak)
	return m
}

// freeLoopbackAddr is a loopback address with a port free a moment ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// viewGauge reads aether_agent_view_objects, by kind, from the agent's metrics endpoint.
func viewGauge(ctx context.Context, addr string) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	held := map[string]int{}
	for line := range strings.Lines(string(body)) {
		for _, kind := range []string{"MeshService", "MeshEndpoint"} {
			if value, ok := strings.CutPrefix(line, `aether_agent_view_objects{kind="`+kind+`"} `); ok {
				n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
				if err != nil {
					return nil, fmt.Errorf("reading %q: %w", line, err)
				}
				held[kind] = int(n)
			}
		}
	}
	return held, nil
}
