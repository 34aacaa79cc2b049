// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestManagerTuningFlags runs the manager binary against the real API server, as the benchmark
// does, and reads on its metrics endpoint what its tuning flags did: the workers each controller
// runs, and the client-side rate limit (every request waits on a limiter only when one is set).
// The defaults are the negative control: no limiter, so no request waited on one.
func TestManagerTuningFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/manager")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/manager: %v\n%s", err, out)
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping the control plane: %v", err)
		}
	}()
	if err := writeServingCert(dir); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		cfg     config
		workers float64
		limited bool
	}{
		"defaults": {cfg: config{workers: controller.DefaultMaxConcurrentReconciles, qps: controller.DefaultKubeAPIQPS,
			burst: controller.DefaultKubeAPIBurst, window: controller.DefaultBatchWindow}, workers: controller.DefaultMaxConcurrentReconciles},
		"tuned": {cfg: config{workers: 3, qps: 5, burst: 1, window: time.Second}, workers: 3, limited: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mgr, err := startManager(ctx, bin, env.Kubeconfig, dir, filepath.Join(dir, name+".log"), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer mgr.stop()
			// Its controllers have started (and made their first requests) once the MeshService
			// controller exports its worker count (it starts after the leader election, which
			// may take a while on a loaded machine) and they are idle.
			const workers = `controller_runtime_max_concurrent_reconciles{controller="meshservice"}`
			if err := mgr.waitForSeries(ctx, workers, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := mgr.waitIdle(ctx, 2*time.Second, time.Minute, 0); err != nil {
				t.Fatal(err)
			}
			series, err := mgr.scrape(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := series[workers]; got != tc.workers {
				t.Errorf("the MeshService controller runs %v workers, want %v", got, tc.workers)
			}
			waited := sum(series, "rest_client_rate_limiter_duration_seconds_count")
			if tc.limited != (waited > 0) {
				t.Errorf("%v requests waited on a client-side rate limiter (want some: %v); the log is %s:\n%s",
					waited, tc.limited, mgr.log, tail(mgr.log))
			}
		})
	}
}

func tail(path string) string {
	raw, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}

// TestFreePortsAreNeverHandedOutTwice: ports handed out once are not handed out again, even
// after their listeners closed (the agents bind them later), and none is in the ephemeral range,
// where an outgoing connection could take one before its agent binds it.
func TestFreePortsAreNeverHandedOutTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		ports, err := freePorts(3)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			if p < firstHarnessPort || p >= 32768 {
				t.Fatalf("port %d is outside %d-32767", p, firstHarnessPort)
			}
			seen[p] = true
		}
	}
}
