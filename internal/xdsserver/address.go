// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// networkUnix is the network of a unix socket address.
const networkUnix = "unix"

// DefaultAddress is where the agent serves xDS unless told otherwise: a unix socket the node's
// Envoy reaches through a shared volume.
const DefaultAddress = "unix:///var/run/aether/xds.sock"

// Address is where an xDS server listens: a unix socket or a loopback TCP port.
type Address struct {
	// Network is "unix" or "tcp".
	Network string
	// Path is the unix socket's absolute path, or the TCP listener's host:port.
	Path string
}

// String spells the address as ParseAddress reads it.
func (a Address) String() string { return a.Network + "://" + a.Path }

// addressForms is the fix every ParseAddress error ends with.
const addressForms = "write unix:///path/to/xds.sock or tcp://127.0.0.1:<port>"

// ParseAddress reads unix:///path (an absolute path) or tcp://<loopback IP>:<port>. A TCP address
// must be a loopback IP: the ADS stream carries no TLS, so it never leaves the node.
func ParseAddress(s string) (Address, error) {
	switch {
	case strings.HasPrefix(s, "unix://"):
		path := strings.TrimPrefix(s, "unix://")
		if !filepath.IsAbs(path) {
			return Address{}, fmt.Errorf("xDS address %q: the socket path %q is not absolute; %s", s, path, addressForms)
		}
		return Address{Network: networkUnix, Path: filepath.Clean(path)}, nil
	case strings.HasPrefix(s, "tcp://"):
		hostPort := strings.TrimPrefix(s, "tcp://")
		host, port, err := net.SplitHostPort(hostPort)
		if err != nil {
			return Address{}, fmt.Errorf("xDS address %q: %v; %s", s, err, addressForms)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return Address{}, fmt.Errorf("xDS address %q: port %q is not a number in 0..65535; %s", s, port, addressForms)
		}
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return Address{}, fmt.Errorf("xDS address %q: %q is not a loopback IP address: the xDS stream carries no TLS, so it is served "+
				"on loopback or a unix socket only; %s", s, host, addressForms)
		}
		return Address{Network: "tcp", Path: net.JoinHostPort(ip.String(), port)}, nil
	}
	return Address{}, fmt.Errorf("xDS address %q: unknown scheme; %s", s, addressForms)
}

// Listen opens a's listener. For a unix socket it creates the socket's directory (0750) and
// removes a stale socket left by an earlier run; it refuses to remove anything that is not a
// socket, or a socket another process still serves. The socket is 0660: Envoy connects as the
// agent's user or group.
func Listen(a Address) (net.Listener, error) { return listen(a, 0o750, 0o660) }

// ListenForPods is Listen for the proxyless socket (Options.ProxylessListener), which any pod's
// gRPC client connects to, whatever its uid: a unix socket only, its directory created 0755 and
// the socket 0666. It carries no secret (proxyless.go), and serves proxyless clients only. The
// directory must be writable by the agent: in config/agent it is a hostPath the kubelet creates
// root-owned 0755, and the agent runs as user 0, its owner.
func ListenForPods(a Address) (net.Listener, error) {
	if a.Network != networkUnix {
		return nil, fmt.Errorf("proxyless xDS address %s: pods reach the agent by a unix socket on the node (a hostPath they mount); "+
			"write unix:///path/to/xds.sock", a)
	}
	return listen(a, 0o755, 0o666)
}

// listen is Listen with a unix socket's directory and socket modes.
func listen(a Address, dirMode, socketMode os.FileMode) (net.Listener, error) {
	if a.Network != networkUnix {
		l, err := net.Listen(a.Network, a.Path)
		if err != nil {
			return nil, fmt.Errorf("listening for xDS on %s: %w", a, err)
		}
		return l, nil
	}
	if err := os.MkdirAll(filepath.Dir(a.Path), dirMode); err != nil {
		return nil, fmt.Errorf("creating the xDS socket's directory: %w", err)
	}
	if err := removeStaleSocket(a.Path); err != nil {
		return nil, err
	}
	l, err := net.Listen(networkUnix, a.Path)
	if err != nil {
		return nil, fmt.Errorf("listening for xDS on %s: %w", a, err)
	}
	if err := os.Chmod(a.Path, socketMode); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("setting the xDS socket's mode: %w", err)
	}
	return l, nil
}

// removeStaleSocket removes the socket at path if no process serves it (an agent that died left
// it). Anything else at path stays, with an error that says what is there.
func removeStaleSocket(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket (mode %s): not removing it; remove it or choose another --xds-address", path, info.Mode())
	}
	if c, err := net.DialTimeout(networkUnix, path, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("another process serves %s (is another agent running?); stop it or choose another --xds-address", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing the stale xDS socket %s: %w", path, err)
	}
	return nil
}
