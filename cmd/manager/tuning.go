// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/rest"

	"github.com/aether-mesh/aether-operator/internal/controller"
)

// tuning holds the manager's throughput knobs. Their defaults are measured by hack/bench
// (make bench-convergence); docs/operations/tuning.md says why each is what it is.
type tuning struct {
	// workers is MaxConcurrentReconciles of every controller: reconciles of different services
	// run in parallel (never two of the same service). A reconcile spends most of its time
	// waiting on the API server, so one worker leaves the manager behind the agents.
	workers int
	// qps and burst are the client's rate limit towards the API server; qps < 0 turns the
	// client-side limiter off and leaves fairness to the API server (API Priority and Fairness).
	qps   float64
	burst int
	// batchWindow holds a service's reconcile back after a change, merging the changes within it.
	batchWindow time.Duration
	// pprofAddr serves net/http/pprof; "0" disables it. Loopback only (see checkPprofAddress).
	pprofAddr string
}

// The defaults live with the controller, where hack/bench reads them too.
const (
	defaultWorkers = controller.DefaultMaxConcurrentReconciles
	defaultQPS     = controller.DefaultKubeAPIQPS
	defaultBurst   = controller.DefaultKubeAPIBurst
)

func (t *tuning) bindFlags(fs *flag.FlagSet) {
	fs.IntVar(&t.workers, "max-concurrent-reconciles", defaultWorkers,
		"Reconciles each controller runs in parallel (never two of the same object at once).")
	fs.Float64Var(&t.qps, "kube-api-qps", defaultQPS,
		"Requests per second the manager's client sends the API server at most; negative turns the client-side limit off, leaving fairness to the API server's API Priority and Fairness.")
	fs.IntVar(&t.burst, "kube-api-burst", defaultBurst,
		"Requests the manager's client may send at once above --kube-api-qps (ignored while --kube-api-qps is negative).")
	fs.DurationVar(&t.batchWindow, "batch-window", controller.DefaultBatchWindow,
		"How long a service's reconcile waits after the first change of its endpoints, pods or Service, so that the changes within it are written once (a rollout's steps, an endpoint's Pending then Healthy); 0 reconciles at once.")
	fs.StringVar(&t.pprofAddr, "pprof-bind-address", "0",
		"Loopback address (127.0.0.1:8082, [::1]:8082 or localhost:8082) serving Go's pprof profiles under /debug/pprof/; 0 disables it. Reach it with kubectl port-forward.")
}

// check reports the first knob that cannot work, naming the flag, the value and the fix.
func (t *tuning) check() error {
	if t.workers < 1 {
		return fmt.Errorf("--max-concurrent-reconciles=%d: at least 1 reconcile must run; the default is %d", t.workers, defaultWorkers)
	}
	if t.batchWindow < 0 || t.batchWindow > time.Minute {
		return fmt.Errorf("--batch-window=%s: give a duration from 0 (no batching) to 1m; the default is %s", t.batchWindow, controller.DefaultBatchWindow)
	}
	if t.qps >= 0 && t.burst < 1 {
		return fmt.Errorf("--kube-api-burst=%d with --kube-api-qps=%v: a rate-limited client needs a burst of at least 1 (for example --kube-api-burst=%d)",
			t.burst, t.qps, max(1, int(2*t.qps)))
	}
	return checkPprofAddress(t.pprofAddr)
}

// apply sets the rate limit on cfg.
func (t *tuning) apply(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = float32(t.qps), t.burst
}

// checkPprofAddress accepts "0" (off) or a loopback host with a port: profiles show the
// manager's memory, which holds what it read from the API server, so they are served to this
// host only.
func checkPprofAddress(addr string) error {
	if addr == "0" || addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-bind-address=%q: %v; give a loopback host and port such as 127.0.0.1:8082, or 0 to disable", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--pprof-bind-address=%q: profiles are served on loopback only (they expose the manager's memory); use 127.0.0.1:<port> or [::1]:<port> and kubectl port-forward, or 0 to disable", addr)
	}
	return nil
}
