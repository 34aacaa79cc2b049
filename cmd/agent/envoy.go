// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/aether-mesh/aether-operator/internal/envoyhelper"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// The node Envoy's pod (config/envoy) runs the agent's image beside Envoy, as the container
// envoy-helper: `agent envoy-helper` answers the kubelet's readiness probe and Prometheus (each
// scrape authenticated and authorized by the API server), and `agent envoy-drain`, its preStop,
// drains Envoy before it is stopped (internal/envoyhelper says what each does and why).

// envoyFlags are both subcommands' flags.
type envoyFlags struct {
	admin, ready, stats, statsCertDir string
	drainTime                         time.Duration
}

func (f *envoyFlags) bind(flags *flag.FlagSet) {
	flags.StringVar(&f.admin, "admin-address", xds.DefaultAdminAddress, "Envoy's admin endpoint, on the pod's loopback (the bootstrap's).")
	flags.StringVar(&f.ready, "ready-address", envoyhelper.DefaultReadyAddress, "envoy-helper: where it answers GET /ready with the admin endpoint's /ready, for the kubelet's readiness probe: plain HTTP, without credentials, and nothing else.")
	flags.StringVar(&f.stats, "stats-address", envoyhelper.DefaultStatsAddress, "envoy-helper: where it answers GET "+envoyhelper.StatsPath+" with Envoy's statistics, for Prometheus: HTTPS, to a caller the API server authenticates (a bearer token) and allows get on "+envoyhelper.StatsPath+" (the metrics-reader ClusterRole); its own identity needs create on tokenreviews and subjectaccessreviews. 0: nowhere.")
	flags.StringVar(&f.statsCertDir, "stats-cert-dir", "", "envoy-helper: directory holding tls.crt and tls.key for --stats-address (reloaded on change); empty: a self-signed certificate made at start.")
	flags.DurationVar(&f.drainTime, "drain-time", 20*time.Second, "envoy-drain: how long to wait after asking Envoy to drain its listeners: Envoy's --drain-time-s.")
}

// runEnvoySubcommand runs `agent envoy-helper` or `agent envoy-drain` with args, and returns the
// process's exit code.
func runEnvoySubcommand(name string, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("agent "+name, flag.ContinueOnError)
	flags.SetOutput(stderr)
	var f envoyFlags
	f.bind(flags)
	if err := flags.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	if name == "envoy-drain" {
		err = envoyhelper.Drain(ctx, f.admin, f.drainTime, stdout)
	} else {
		var cfg *rest.Config
		if f.stats != "0" {
			// In the pod: the token projected into this container only (config/envoy).
			if cfg, err = ctrl.GetConfig(); err != nil {
				fmt.Fprintf(stderr, "agent %s: --stats-address %s authenticates each scrape with the API server, which it cannot reach: %v (run it in a pod with a token mounted, or set --stats-address=0)\n", name, f.stats, err)
				return 2
			}
		}
		err = envoyhelper.Serve(ctx, envoyhelper.Options{Admin: f.admin, ReadyAddress: f.ready, StatsAddress: f.stats, StatsCertDir: f.statsCertDir, Config: cfg})
	}
	if err != nil {
		fmt.Fprintf(stderr, "agent %s: %v\n", name, err)
		return 1
	}
	return 0
}
