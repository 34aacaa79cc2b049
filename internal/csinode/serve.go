// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package csinode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Sockets are the two sockets the plugin serves on the node.
type Sockets struct {
	// CSI is the CSI socket's path (DefaultCSISocket).
	CSI string
	// RegistrationDir is the kubelet's plugin registration dir (DefaultRegistrationDir).
	RegistrationDir string
}

// Serve serves srv's CSI services on s.CSI, then the registration on the registration socket,
// until ctx ends (nil) or the kubelet refuses the plugin (its error). The registration socket is
// removed on return, so the kubelet deregisters the plugin; sockets left by an earlier run are
// removed first.
func Serve(ctx context.Context, srv *Server, s Sockets) error {
	csiListener, err := listenUnix(s.CSI)
	if err != nil {
		return err
	}
	csiServer := grpc.NewServer()
	csi.RegisterIdentityServer(csiServer, srv)
	csi.RegisterNodeServer(csiServer, srv)
	errs := make(chan error, 2)
	go func() { errs <- csiServer.Serve(csiListener) }()
	defer csiServer.Stop()

	// The CSI socket serves before the kubelet learns of it: the kubelet calls NodeGetInfo as
	// part of the registration.
	reg := NewRegistration(s.CSI, srv.Log)
	regPath := filepath.Join(s.RegistrationDir, RegistrationSocketName)
	regListener, err := listenUnix(regPath)
	if err != nil {
		return err
	}
	regServer := grpc.NewServer()
	registerapi.RegisterRegistrationServer(regServer, reg)
	go func() { errs <- regServer.Serve(regListener) }()
	defer func() {
		// Graceful: a refusal ends Serve from inside NotifyRegistrationStatus, whose answer is
		// still to be sent.
		regServer.GracefulStop()
		_ = os.Remove(regPath)
	}()
	srv.Log.Printf("serving CSI on %s, registration on %s", s.CSI, regPath)

	select {
	case <-ctx.Done():
		return nil
	case err := <-reg.Refused:
		return err
	case err := <-errs:
		return fmt.Errorf("serving: %w", err)
	}
}

// listenUnix listens on a unix socket at path, in its directory (created 0750), replacing a
// socket left there by an earlier run; anything else at path is an error, not removed.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket (%s): remove it", path, fi.Mode().Type())
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}
