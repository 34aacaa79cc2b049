// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package manager

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// apiServerBackoff paces WaitForAPIServer's attempts: quick at first (a restart's gap is
// seconds), then every 5 s.
var apiServerBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 5 * time.Second}

// WaitForAPIServer returns once the API server at cfg answers its version (any authenticated
// or anonymous client may read it), or with ctx's error when ctx ends first. Meanwhile it serves
// the probes on probeAddr (unless "0" or empty): /healthz answers 200, so the kubelet's liveness
// probe does not restart a process that is only waiting, and /readyz 503.
//
// The manager's setup reads the API server (which Gateway API kinds are installed), and a
// process that exits when it cannot is restarted by the kubelet with a backoff that doubles on
// each exit, up to five minutes, and resets only after ten minutes of running. A manager that
// lost its lease in an API server outage and exited (it must: the exit is what guarantees its
// controllers stopped) then crashed on every restart until the outage ended, and came back up
// to five minutes after the API server did. Waiting here, it restarts once per lost lease.
func WaitForAPIServer(ctx context.Context, cfg *rest.Config, probeAddr string, log logr.Logger) error {
	if probeAddr != "" && probeAddr != "0" {
		stop, err := serveWaitingProbes(probeAddr)
		if err != nil {
			return err
		}
		defer stop()
	}
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 5 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return err
	}
	waiting := time.Now()
	backoff := apiServerBackoff
	for {
		_, err := dc.ServerVersion()
		if err == nil {
			if waited := time.Since(waiting); waited > time.Second {
				log.Info("The API server answers: starting", "waited", waited.Round(time.Millisecond))
			}
			return nil
		}
		log.Info("Waiting for the API server before setting up the controllers", "host", cfg.Host, "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff.Step()):
		}
	}
}

// serveWaitingProbes serves /healthz (200) and /readyz (503) on addr until stop, which returns
// once the port is free again for the manager's own probe server.
func serveWaitingProbes(addr string) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving the probes on %s while waiting for the API server: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok: waiting for the API server")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "waiting for the API server", http.StatusServiceUnavailable)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	return func() { _ = srv.Close(); <-done }, nil
}
