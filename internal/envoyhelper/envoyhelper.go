// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package envoyhelper is what the node Envoy's pod (config/envoy) runs beside Envoy, from the
// agent's binary, for what Envoy's image cannot do (it has no HTTP client) and its admin endpoint
// must not (it listens on the pod's loopback only, xds.DefaultAdminAddress, as it can drain,
// reconfigure and stop Envoy):
//
//   - `agent envoy-helper` relays two reads of the admin endpoint to the pod's address, each
//     on a port of its own: GET /ready on the ready address, plain HTTP, for the kubelet's
//     readiness probe (which sends no credentials; the answer says ready or not, and nothing
//     more: the status and Envoy's one word, LIVE or PRE_INITIALIZING); and GET
//     /stats/prometheus on the stats address, HTTPS, for a caller the API server authenticates
//     and allows get on /stats/prometheus (internal/apiauth: the metrics-reader ClusterRole
//     grants it to Prometheus), as the agent's and the manager's metrics are served. Envoy's
//     statistics name every cluster, listener and upstream of the node, which a pod of the node
//     (or anything reaching the pod's address) must not read;
//   - `agent envoy-drain`, the helper's preStop, asks the admin endpoint to drain every listener
//     gracefully (POST /drain_listeners?graceful) and waits the drain time: the new Envoy, bound
//     beside the old one (enable_reuse_port), takes every new connection meanwhile.
//
// It imports internal/apiauth only of this repository.
package envoyhelper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/aether-mesh/aether-operator/internal/apiauth"
)

// Default addresses: the ready and the stats ports of config/envoy's envoy-helper container.
const (
	DefaultReadyAddress = ":19003"
	DefaultStatsAddress = ":19004"
)

// StatsPath is the path of Envoy's statistics, on the stats address.
const StatsPath = "/stats/prometheus"

// Options are Serve's.
type Options struct {
	// Admin is Envoy's admin endpoint, host:port on the pod's loopback.
	Admin string
	// ReadyAddress is where GET /ready is answered, plain HTTP.
	ReadyAddress string
	// StatsAddress is where GET /stats/prometheus is answered, HTTPS, to callers the API server
	// authenticates and authorizes; "0": nowhere.
	StatsAddress string
	// StatsCertDir holds tls.crt and tls.key for the stats address (reloaded on change); empty:
	// a self-signed certificate made at start.
	StatsCertDir string
	// Config reaches the API server, for the reviews (its identity needs create on tokenreviews
	// and subjectaccessreviews). Needed unless StatsAddress is "0".
	Config *rest.Config
}

// Serve serves the ready address and the stats address until ctx ends.
func Serve(ctx context.Context, o Options) error {
	ready := &http.Server{Addr: o.ReadyAddress, Handler: ReadyHandler(o.Admin), ReadHeaderTimeout: 5 * time.Second}
	errs := make(chan error, 2)
	go func() {
		if err := ready.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("the ready address %s: %w", o.ReadyAddress, err)
			return
		}
		errs <- nil
	}()
	stats, err := statsServer(o)
	if err != nil {
		_ = ready.Close()
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	if stats != nil {
		go func() {
			if err := stats.Start(sctx); err != nil {
				errs <- fmt.Errorf("the stats address %s: %w", o.StatsAddress, err)
				return
			}
			errs <- nil
		}()
	}
	select {
	case <-ctx.Done():
		_ = ready.Close()
		return nil
	case err := <-errs: // one of them stopped: a port taken, say
		_ = ready.Close()
		return err
	}
}

// statsServer is the HTTPS server of the stats address, nil when it is "0".
func statsServer(o Options) (metricsserver.Server, error) {
	if o.StatsAddress == "0" {
		return nil, nil
	}
	if o.Config == nil {
		return nil, errors.New("the stats address needs the API server, to review each caller: no kubeconfig, and not in a pod")
	}
	opts := apiauth.Options(o.StatsAddress, o.StatsCertDir, false)
	opts.ExtraHandlers = map[string]http.Handler{StatsPath: StatsHandler(o.Admin)}
	hc, err := rest.HTTPClientFor(o.Config)
	if err != nil {
		return nil, err
	}
	return metricsserver.NewServer(opts, o.Config, hc)
}

// ReadyHandler answers GET /ready with the admin endpoint's /ready, and nothing else.
func ReadyHandler(admin string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		relayAdmin(w, r, adminClient, "http://"+admin+"/ready", 1024)
	})
	return mux
}

// StatsHandler answers GET /stats/prometheus with Envoy's statistics in Prometheus's text
// format; only the query parameter usedonly is passed on.
func StatsHandler(admin string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != StatsPath {
			http.Error(w, "only GET "+StatsPath, http.StatusNotFound)
			return
		}
		target := "http://" + admin + StatsPath
		if r.URL.Query().Has("usedonly") {
			target += "?usedonly"
		}
		relayAdmin(w, r, statsClient, target, maxStatsBytes)
	})
}

// adminClient reaches the admin endpoint on loopback; a stuck Envoy must not hold a probe.
var adminClient = &http.Client{Timeout: 2 * time.Second}

// statsClient reads Envoy's statistics, which take longer to write than /ready on a busy node.
var statsClient = &http.Client{Timeout: 10 * time.Second}

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

// Drain asks the admin endpoint at admin to drain every listener gracefully, then waits
// drainTime (or until ctx ends), so that the kubelet stops Envoy only once its connections had
// the drain time to finish.
func Drain(ctx context.Context, admin string, drainTime time.Duration, out io.Writer) error {
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
