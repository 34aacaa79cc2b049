// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseAddress: a unix socket at an absolute path, or a loopback IP and a port; anything
// else (a non-loopback or unspecified address, a name, a relative path, another scheme) is an
// error naming the value and the forms that work.
func TestParseAddress(t *testing.T) {
	for in, want := range map[string]struct {
		addr Address
		err  string
	}{
		"unix:///var/run/aether/xds.sock": {addr: Address{"unix", "/var/run/aether/xds.sock"}},
		"unix:///tmp//a/../xds.sock":      {addr: Address{"unix", "/tmp/xds.sock"}},
		"tcp://127.0.0.1:18000":           {addr: Address{"tcp", "127.0.0.1:18000"}},
		"tcp://127.0.0.5:0":               {addr: Address{"tcp", "127.0.0.5:0"}},
		"tcp://[::1]:18000":               {addr: Address{"tcp", "[::1]:18000"}},
		"tcp://0.0.0.0:18000":             {err: `"0.0.0.0" is not a loopback IP address: the xDS stream carries no TLS`},
		"tcp://10.0.0.7:18000":            {err: `"10.0.0.7" is not a loopback IP address`},
		"tcp://localhost:18000":           {err: `"localhost" is not a loopback IP address`},
		"tcp://:18000":                    {err: `"" is not a loopback IP address`},
		"tcp://127.0.0.1:http":            {err: `port "http" is not a number in 0..65535`},
		"tcp://127.0.0.1":                 {err: "missing port in address"},
		"unix://xds.sock":                 {err: `the socket path "xds.sock" is not absolute`},
		"/var/run/aether/xds.sock":        {err: "unknown scheme"},
		"":                                {err: "unknown scheme"},
	} {
		got, err := ParseAddress(in)
		switch {
		case want.err == "" && (err != nil || got != want.addr):
			t.Errorf("ParseAddress(%q) = %+v, %v; want %+v", in, got, err, want.addr)
		case want.err != "" && (err == nil || !strings.Contains(err.Error(), want.err) ||
			!strings.Contains(err.Error(), in) || !strings.Contains(err.Error(), addressForms)):
			t.Errorf("ParseAddress(%q) = %+v, %v; want an error naming the value, saying %q and the forms that work", in, got, err, want.err)
		}
		if want.err == "" && got.String() != strings.ReplaceAll(in, "//a/..", "") {
			t.Errorf("ParseAddress(%q).String() = %q", in, got.String())
		}
	}
}

// TestListenUnix: the socket's directory is created 0750 and the socket is 0660; a stale socket
// (its server gone) is replaced; a live socket or a file that is not a socket is left alone, with
// an error that says what is there.
func TestListenUnix(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "aether")
	addr := Address{Network: "unix", Path: filepath.Join(dir, "xds.sock")}

	l, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o750 {
		t.Errorf("socket directory: %v, %v; want mode 0750", info.Mode(), err)
	}
	if info, err := os.Stat(addr.Path); err != nil || info.Mode().Perm() != 0o660 {
		t.Errorf("socket: %v, %v; want mode 0660", info.Mode(), err)
	}

	// Live: another process (here, this listener) serves it.
	if _, err := Listen(addr); err == nil || !strings.Contains(err.Error(), "another process serves") {
		t.Errorf("Listen on a served socket: %v, want an error saying another process serves it", err)
	}

	// Stale: its server is gone but the file stays (as after a crash).
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = l.Close()
	if _, err := os.Stat(addr.Path); err != nil {
		t.Fatalf("the stale socket should still exist: %v", err)
	}
	l2, err := Listen(addr)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	c, err := net.Dial("unix", addr.Path)
	if err != nil {
		t.Errorf("the new socket does not accept: %v", err)
	} else {
		_ = c.Close()
	}
	_ = l2.Close()

	// Not a socket: never removed.
	if err := os.WriteFile(addr.Path, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(addr); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("Listen over a regular file: %v, want an error saying it is not a socket", err)
	}
	if b, err := os.ReadFile(addr.Path); err != nil || string(b) != "keep me" {
		t.Errorf("the regular file was touched: %q, %v", b, err)
	}
}

// TestListenForPods: the proxyless socket's directory is created 0755 and the socket is 0666 (any
// pod's user connects); a TCP address is refused.
func TestListenForPods(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "aether-proxyless")
	addr := Address{Network: "unix", Path: filepath.Join(dir, "xds.sock")}
	l, err := ListenForPods(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("socket directory: %v, %v; want mode 0755", info.Mode(), err)
	}
	if info, err := os.Stat(addr.Path); err != nil || info.Mode().Perm() != 0o666 {
		t.Errorf("socket: %v, %v; want mode 0666", info.Mode(), err)
	}
	if _, err := ListenForPods(Address{Network: "tcp", Path: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "unix socket on the node") {
		t.Errorf("ListenForPods on TCP: %v, want it refused", err)
	}
}
