// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package netnsprobe asks a pod's network namespace what the node's Envoy needs to know before
// it binds listeners there: whether IPv6 loopback can be bound. A pod whose namespace has IPv6
// turned off (net.ipv6.conf.*.disable_ipv6=1, common in clusters that run IPv4 only inside
// dual-stack nodes) has no ::1, and a listener that also binds [::1] fails whole in it.
package netnsprobe

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// IPv6Loopback reports whether [::1] can be bound in the network namespace at path: the test is
// the bind Envoy would make (a UDP socket on [::1], port 0, closed at once), on an OS thread
// that entered the namespace (setns(2): CAP_SYS_ADMIN) and is never handed back to the
// scheduler. An error means the namespace could not be entered, not that IPv6 is off.
func IPv6Loopback(path string) (bool, error) {
	type answer struct {
		ok  bool
		err error
	}
	done := make(chan answer, 1)
	go func() {
		if err := enter(path); err != nil {
			done <- answer{err: err}
			return
		}
		c, err := net.ListenPacket("udp6", "[::1]:0")
		if err != nil {
			if errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.EAFNOSUPPORT) {
				done <- answer{ok: false}
				return
			}
			done <- answer{err: fmt.Errorf("binding [::1] in %s: %w", path, err)}
			return
		}
		c.Close()
		done <- answer{ok: true}
	}()
	a := <-done
	return a.ok, a.err
}

// Pin holds the network namespace at path alive until the returned file is closed: a socket made
// inside it (every socket holds its namespace), not an open descriptor of path. A descriptor of
// path would hold the mount the path is, and a runtime that removes a sandbox's namespace with a
// plain unmount (not a lazy one) would fail with EBUSY for as long as the pin is held.
func Pin(path string) (*os.File, error) {
	type answer struct {
		fd  int
		err error
	}
	done := make(chan answer, 1)
	go func() {
		if err := enter(path); err != nil {
			done <- answer{err: err}
			return
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			err = fmt.Errorf("a socket in the network namespace %s: %w", path, err)
		}
		done <- answer{fd, err}
	}()
	a := <-done
	if a.err != nil {
		return nil, a.err
	}
	return os.NewFile(uintptr(a.fd), "pin of "+path), nil
}

// enter locks the calling goroutine to its OS thread for good (the thread exits with the
// goroutine, never handed back to the scheduler in another namespace) and moves the thread into
// the network namespace at path (setns(2): CAP_SYS_ADMIN).
func enter(path string) error {
	runtime.LockOSThread()
	f, err := os.Open(path)
	if err == nil {
		err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("entering the network namespace %s: %w", path, err)
	}
	return nil
}
