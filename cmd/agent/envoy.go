// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// The node Envoy's pod (config/envoy) runs the agent's image beside Envoy, as the container
// envoy-helper, for the two things Envoy's image cannot do (it has no HTTP client, and its admin
// endpoint listens on the pod's loopback only, xds.DefaultAdminAddress):
//
//   - `agent envoy-helper` answers the kubelet's readiness probe on the pod's address with the
//     admin endpoint's /ready (200 once Envoy has its first configuration), and Prometheus with
//     the admin endpoint's /stats/prometheus: those two reads of the admin endpoint, nothing else;
//   - `agent envoy-drain`, the helper's preStop, asks the admin endpoint to drain every listener
//     gracefully (POST /drain_listeners?graceful) and waits the drain time: the new Envoy, bound
//     beside the old one (enable_reuse_port), takes every new connection meanwhile.

// envoyFlags are both subcommands' flags.
type envoyFlags struct {
	admin     string
	listen    string
	drainTime time.Duration
}

func (f *envoyFlags) bind(flags *flag.FlagSet) {
	flags.StringVar(&f.admin, "admin-address", xds.DefaultAdminAddress, "Envoy's admin endpoint, on the pod's loopback (the bootstrap's).")
	flags.StringVar(&f.listen, "ready-address", ":19003", "envoy-helper: where it answers GET /ready with the admin endpoint's /ready, for the kubelet's probe, and GET /stats/prometheus with Envoy's statistics, for Prometheus.")
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
		err = drainEnvoy(ctx, f.admin, f.drainTime, stdout)
	} else {
		err = serveReady(ctx, f.listen, f.admin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "agent %s: %v\n", name, err)
		return 1
	}
	return 0
}

// adminClient reaches the admin endpoint on loopback; a stuck Envoy must not hold a probe.
var adminClient = &http.Client{Timeout: 2 * time.Second}

// drainEnvoy asks the admin endpoint at admin to drain every listener gracefully, then waits
// drainTime (or until ctx ends), so that the kubelet stops Envoy only once its connections had
// the drain time to finish.
func drainEnvoy(ctx context.Context, admin string, drainTime time.Duration, out io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+admin+"/drain_listeners?graceful", nil)
	if err != nil {
		return err
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return fmt.Errorf("asking Envoy to drain its listeners: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("asking Envoy to drain its listeners: %s: %s", resp.Status, body)
	}
	fmt.Fprintf(out, "Envoy drains its listeners; waiting %s before it is stopped\n", drainTime)
	t := time.NewTimer(drainTime)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// serveReady serves the helper's endpoints (helperHandler) on listen until ctx ends.
func serveReady(ctx context.Context, listen, admin string) error {
	srv := &http.Server{Addr: listen, Handler: helperHandler(admin), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// statsClient reads Envoy's statistics, which take longer to write than /ready on a busy node.
var statsClient = &http.Client{Timeout: 10 * time.Second}

// helperHandler answers, on the pod's address, two GETs of the admin endpoint and nothing else of
// it (the admin endpoint can drain, reconfigure and stop Envoy, so it stays on loopback):
//   - GET /ready: the admin endpoint's /ready, for the kubelet's readiness probe;
//   - GET /stats/prometheus: Envoy's statistics in Prometheus's text format, for Prometheus
//     (config/prometheus's PodMonitor); only the query parameter usedonly is passed on.
func helperHandler(admin string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		relayAdmin(w, r, adminClient, "http://"+admin+"/ready", 1024)
	})
	mux.HandleFunc("GET /stats/prometheus", func(w http.ResponseWriter, r *http.Request) {
		target := "http://" + admin + "/stats/prometheus"
		if r.URL.Query().Has("usedonly") {
			target += "?usedonly"
		}
		relayAdmin(w, r, statsClient, target, maxStatsBytes)
	})
	return mux
}

// maxStatsBytes caps one statistics answer: a node with thousands of clusters writes tens of
// megabytes; anything beyond this is cut rather than held in memory.
const maxStatsBytes = 64 << 20

// relayAdmin answers w with the admin endpoint's answer to GET target: its status, content type
// and at most limit bytes of its body; 503 when the admin endpoint does not answer.
func relayAdmin(w http.ResponseWriter, r *http.Request, c *http.Client, target string, limit int64) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target, nil)
	if err == nil {
		var resp *http.Response
		if resp, err = c.Do(req); err == nil {
			defer func() { _ = resp.Body.Close() }()
			if ct := resp.Header.Get("Content-Type"); ct != "" {
				w.Header().Set("Content-Type", ct)
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, io.LimitReader(resp.Body, limit))
			return
		}
	}
	http.Error(w, "Envoy's admin endpoint does not answer: "+err.Error(), http.StatusServiceUnavailable)
}
