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
//     admin endpoint's /ready (200 once Envoy has its first configuration);
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
	flags.StringVar(&f.listen, "ready-address", ":19003", "envoy-helper: where it answers GET /ready with the admin endpoint's /ready, for the kubelet's probe.")
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

// serveReady answers GET /ready on listen with the status of the admin endpoint's /ready, until
// ctx ends.
func serveReady(ctx context.Context, listen, admin string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+admin+"/ready", nil)
		if err == nil {
			var resp *http.Response
			if resp, err = adminClient.Do(req); err == nil {
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				_ = resp.Body.Close()
				w.WriteHeader(resp.StatusCode)
				_, _ = w.Write(body)
				return
			}
		}
		http.Error(w, "Envoy's admin endpoint does not answer: "+err.Error(), http.StatusServiceUnavailable)
	})
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
