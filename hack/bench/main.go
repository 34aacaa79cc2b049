// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command bench measures how the manager converges a mesh against the API server's own write
// floor (`make bench-convergence`; `make bench` runs it after the Go benchmarks). For each size
// of BENCH_SIZES (default "100x10,1000x10": services × endpoints per service) it starts a fresh
// kube-apiserver and etcd from the hack cache (internal/testenv, the Service CIDR widened to a
// /16 and the audit log on), and the manager as its binary (go build ./cmd/manager, as it runs in
// production), speaking as its own user under config/rbac's manager-role. Then:
//
//   - floor: with no controller running, the rate the API server sustains for each kind of
//     write the change needs: the agents' MeshEndpoint create and status patch at the agents'
//     concurrency (BENCH_WRITERS agents, default 16, each speaking as the node agent of its node
//     under config/admission's node-authority policy), the manager's Verified status patch,
//     MeshService create, Service create and MeshService status update with the manager's client
//     settings at its worker count; measured before the manager starts and, when the size ran
//     longer than two minutes (the machine's load drifts), again after it stops, the ratio taken
//     against their mean;
//   - convergence: the services' pods exist (created and given IPs as a kubelet would, while the
//     manager starts: the audit log must show it wrote nothing before the change); the agents
//     register every endpoint as internal/agent does (create, Registered and Pending,
//     then Healthy); the time until every MeshService's status counts all its endpoints ready
//     with the generated Service's VIP, every endpoint Verified (watch events, no polling), and
//     the manager's requests in that span from the API server's audit log, which also shows
//     that nobody else wrote what the manager owns;
//   - resync: the manager restarted on the converged system, and the writes it makes (target 0);
//   - churn: a rolling update of 10 % of the endpoints (pod deleted, its endpoint removed, a new
//     pod with a new IP registered, its health flapping once), and the manager's writes per
//     changed endpoint.
//
// It prints a markdown table and writes bin/bench/convergence.json, one object per size (keys:
// see result), plus each size's CPU and heap profiles of the manager during convergence
// (bin/bench/<size>/cpu.pprof, heap.pprof, and their `go tool pprof -top` as *.top.txt), the
// manager's logs and the manager binary the profiles belong to (bin/bench/manager).
//
//   - agent (the run's last size only, when it holds 10 000 endpoints or BENCH_AGENT_REST is
//     set; BENCH_AGENT_REST=0 skips it): after the churn, 110
//     managed pods are created on a node of their own (each answering its HTTP health probe on
//     loopback) and one real agent (go build ./cmd/agent, as the node agent of that node, xDS
//     serving on a unix socket so its cluster-wide view and xDS builds run, no CNI hand-over so
//     no capture) registers them; once its view holds every object and its pods are Healthy,
//     and the manager is idle again, a rest window of BENCH_AGENT_REST (default 60s) measures
//     its CPU, its VmRSS and VmHWM at the end, and its API requests by verb (audit log: it
//     speaks through a user of its own) — writes at rest: target 0. Its log is
//     bin/bench/<size>/agent.log.
//
// Tuning under test, from the environment: BENCH_WORKERS, BENCH_QPS, BENCH_BURST, BENCH_WINDOW
// (the manager's --max-concurrent-reconciles, --kube-api-qps, --kube-api-burst, --batch-window;
// default: the manager's own defaults) and BENCH_MANAGER_ARGS (more flags, space-separated).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// config is what the environment asks of a benchmark run.
type config struct {
	sizes       []size
	writers     int
	workers     int
	qps         float64
	burst       int
	window      time.Duration
	managerArgs []string
	agentRest   time.Duration
	agentAsked  bool // BENCH_AGENT_REST was set: measure the agent at any size
	out         string
	// latency is `bench latency` (make bench-latency, latency.go): agents real agent processes,
	// churnRate pods replaced per second.
	latency   bool
	agents    int
	churnRate float64
}

// size is services × endpoints per service.
type size struct{ services, endpoints int }

func (s size) String() string { return fmt.Sprintf("%dx%d", s.services, s.endpoints) }

func main() {
	cfg, err := configFromEnv(len(os.Args) > 1 && os.Args[1] == "latency")
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	// Only the errors of the benchmark's own informers are worth reading.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := benchmark
	if cfg.latency {
		run = latencyBenchmark
	}
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func configFromEnv(latency bool) (config, error) {
	cfg := config{latency: latency, agents: 20, churnRate: 10, writers: 16, workers: controller.DefaultMaxConcurrentReconciles, qps: controller.DefaultKubeAPIQPS,
		burst: controller.DefaultKubeAPIBurst, window: controller.DefaultBatchWindow, agentRest: time.Minute, out: filepath.Join(testenv.RepoRoot(), "bin", "bench")}
	defaultSizes := "100x10,1000x10"
	if latency {
		defaultSizes = "1000x10"
	}
	sizes, err := parseSizes(envOr("BENCH_SIZES", defaultSizes))
	if err != nil {
		return cfg, err
	}
	cfg.sizes = sizes
	for _, knob := range []struct {
		name string
		set  func(string) error
	}{
		{"BENCH_WRITERS", func(v string) (err error) { cfg.writers, err = positive(v); return }},
		{"BENCH_WORKERS", func(v string) (err error) { cfg.workers, err = positive(v); return }},
		{"BENCH_QPS", func(v string) (err error) { cfg.qps, err = strconv.ParseFloat(v, 64); return }},
		{"BENCH_BURST", func(v string) (err error) { cfg.burst, err = strconv.Atoi(v); return }},
		{"BENCH_WINDOW", func(v string) (err error) { cfg.window, err = time.ParseDuration(v); return }},
		{"BENCH_AGENT_REST", func(v string) (err error) { cfg.agentAsked = true; cfg.agentRest, err = time.ParseDuration(v); return }},
		{"BENCH_AGENTS", func(v string) (err error) { cfg.agents, err = positive(v); return }},
		{"BENCH_CHURN_RATE", func(v string) (err error) {
			if cfg.churnRate, err = strconv.ParseFloat(v, 64); err == nil && cfg.churnRate <= 0 {
				err = fmt.Errorf("must be above 0 (pods replaced per second)")
			}
			return
		}},
	} {
		if v := os.Getenv(knob.name); v != "" {
			if err := knob.set(v); err != nil {
				return cfg, fmt.Errorf("%s=%q: %v", knob.name, v, err)
			}
		}
	}
	cfg.managerArgs = strings.Fields(os.Getenv("BENCH_MANAGER_ARGS"))
	return cfg, nil
}

// agentScale is the cluster the agent row is specified at (issue 15): 10 000 MeshEndpoints. A
// run whose last size is smaller (BENCH_SIZES=100x10, a quick check within a minute) measures no
// agent unless BENCH_AGENT_REST asks for it.
const agentScale = 10_000

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func positive(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && n < 1 {
		err = fmt.Errorf("must be at least 1")
	}
	return n, err
}

// parseSizes reads "100x10,1000x10".
func parseSizes(spec string) ([]size, error) {
	var out []size
	for part := range strings.SplitSeq(spec, ",") {
		s, e, ok := strings.Cut(strings.TrimSpace(part), "x")
		services, err1 := strconv.Atoi(s)
		endpoints, err2 := strconv.Atoi(e)
		if !ok || err1 != nil || err2 != nil || services < 1 || endpoints < 1 {
			return nil, fmt.Errorf("BENCH_SIZES=%q: %q is not <services>x<endpoints per service> (for example 100x10)", spec, part)
		}
		out = append(out, size{services, endpoints})
	}
	return out, nil
}

func benchmark(ctx context.Context, cfg config) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	built := buildBinaries(ctx, cfg)
	var results []result
	for _, sz := range cfg.sizes {
		started := time.Now()
		fmt.Fprintf(os.Stderr, "bench: %s: starting\n", sz)
		res, err := runSize(ctx, cfg, sz, built)
		if err != nil {
			return fmt.Errorf("%s: %w", sz, err)
		}
		res.WallS = time.Since(started).Seconds()
		fmt.Fprintf(os.Stderr, "bench: %s: done in %.0fs\n", sz, res.WallS)
		results = append(results, res)
	}
	path, err := writeJSON(cfg.out, "convergence.json", results)
	if err != nil {
		return err
	}
	fmt.Print(table(results))
	fmt.Printf("\nJSON: %s; profiles, logs and pprof tops: %s/<size>/\n", path, cfg.out)
	return nil
}

// writeJSON writes v, indented, to the file name in dir, and returns its path.
func writeJSON(dir, name string, v any) (string, error) {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, append(raw, '\n'), 0o644)
}

// buildBinaries builds the manager, and the agent when a size measures it, into cfg.out, both at
// once and while the first size's control plane starts (runSize waits for them before its
// floors: a link on two cores takes seconds, and would weigh on the floor measured beside it).
// The returned func waits for the builds and gives the manager's path.
func buildBinaries(ctx context.Context, cfg config) func() (string, error) {
	cmds := []string{"manager"}
	if cfg.latency || agentMeasured(cfg, cfg.sizes[len(cfg.sizes)-1]) {
		cmds = append(cmds, "agent")
	}
	errs := make(chan error, len(cmds))
	for _, cmd := range cmds {
		go func() {
			build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(cfg.out, cmd), "./cmd/"+cmd)
			build.Dir = testenv.RepoRoot()
			if out, err := build.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("building cmd/%s: %w\n%s", cmd, err, out)
				return
			}
			errs <- nil
		}()
	}
	wait := sync.OnceValues(func() (string, error) {
		var all []error
		for range cmds {
			all = append(all, <-errs)
		}
		return filepath.Join(cfg.out, "manager"), errors.Join(all...)
	})
	return wait
}
