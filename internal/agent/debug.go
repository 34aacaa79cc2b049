// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"

	"github.com/aether-mesh/aether-operator/internal/proxyconfig"
)

// debugServer serves internal/proxyconfig's endpoint (each pod's part of the node's published
// configuration) on its listener, a loopback one (proxyconfig.ParseAddress), until the manager
// stops.
type debugServer struct {
	listener net.Listener
	handler  http.Handler
	log      logr.Logger
}

// NeedLeaderElection is false: every node's agent serves its own node's configuration.
func (d *debugServer) NeedLeaderElection() bool { return false }

func (d *debugServer) Start(ctx context.Context) error {
	srv := &http.Server{Handler: d.handler, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	d.log.Info("Serving the pods' proxy configuration on loopback", "address", d.listener.Addr().String(), "path", proxyconfig.Path+"<namespace>/<pod>")
	if err := srv.Serve(d.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
