// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeaddrs

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// rejoinDelay is how long the Watcher waits before opening its subscription again after it
// broke (Refresh, the agent's resync, still reads the interfaces meanwhile).
const rejoinDelay = 5 * time.Second

// Watcher keeps the node's interface addresses (Read) current: it reads them once when it
// starts, then again on every change rtnetlink announces to its address groups (an address added
// or removed, with its interface too) but of an interface that does not count (kube-ipvs0's
// changes with every Service of the cluster, and reading a busy node's interfaces again takes
// about 10 ms), and on every Refresh; it calls onChange when they differ. It follows addresses,
// not links: an interface that comes or goes without addresses changes nothing, and one that
// goes takes its addresses with it, which rtnetlink announces. (An interface renamed to
// kube-ipvs0 is seen by the next Refresh: the agent's resync.)
type Watcher struct {
	path string
	log  logr.Logger

	// reading makes one Refresh at a time, so that a slower read never stores older addresses
	// over a newer one's.
	reading sync.Mutex
	mu      sync.Mutex
	addrs   []netip.Addr
	// left are the indexes of the interfaces that did not count at the last read.
	left     map[uint32]bool
	onChange func()
}

// NewWatcher watches the interfaces of the network namespace at path ("" for the agent's own).
func NewWatcher(path string, log logr.Logger) *Watcher {
	return &Watcher{path: path, log: log}
}

// Start subscribes to the namespace's address changes, reads its addresses, then follows the
// changes until ctx ends, calling onChange after each one that changes the addresses. It fails
// when the first read does.
func (w *Watcher) Start(ctx context.Context, onChange func()) error {
	w.mu.Lock()
	w.onChange = onChange
	w.mu.Unlock()
	// Subscribed before the read: a change between the two is announced, not lost.
	c, err := dial(w.path, unix.RTMGRP_IPV4_IFADDR|unix.RTMGRP_IPV6_IFADDR)
	if err != nil {
		return err
	}
	if _, err := w.Refresh(); err != nil {
		c.Close()
		return err
	}
	go w.follow(ctx, c)
	return nil
}

// follow reads on each announcement until ctx ends; a broken subscription is opened again.
func (w *Watcher) follow(ctx context.Context, c *netlink.Conn) {
	for {
		w.followConn(ctx, c)
		select {
		case <-ctx.Done():
			return
		case <-time.After(rejoinDelay):
		}
		var err error
		if c, err = dial(w.path, unix.RTMGRP_IPV4_IFADDR|unix.RTMGRP_IPV6_IFADDR); err != nil {
			w.log.Error(err, "Could not follow the node's interface addresses again; the resync reads them meanwhile")
			continue
		}
		w.refreshLogged()
	}
}

// followConn reads on each announcement c receives, until ctx ends or c breaks (logged).
func (w *Watcher) followConn(ctx context.Context, c *netlink.Conn) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer func() {
		if stop() {
			c.Close()
		}
	}()
	for {
		msgs, err := c.Receive()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, unix.ENOBUFS):
			// Announcements were dropped (the socket's buffer overflowed): read it all again.
		case err != nil:
			w.log.Error(err, "The subscription to the node's interface addresses broke; opening it again")
			return
		case !w.concerns(msgs):
			continue
		}
		w.refreshLogged()
	}
}

// concerns reports whether any of the announcements msgs is of an interface that counted, or
// that the last read did not know.
func (w *Watcher) concerns(msgs []netlink.Message) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range msgs {
		if len(m.Data) < unix.SizeofIfAddrmsg || !w.left[binary.NativeEndian.Uint32(m.Data[4:8])] {
			return true
		}
	}
	return false
}

func (w *Watcher) refreshLogged() {
	if _, err := w.Refresh(); err != nil {
		w.log.Error(err, "Could not read the node's interface addresses; the last ones read stay")
	}
}

// Refresh reads the addresses again and reports whether they changed, calling onChange if so.
// After an error the last addresses read stay.
func (w *Watcher) Refresh() (bool, error) {
	w.reading.Lock()
	defer w.reading.Unlock()
	addrs, left, err := read(w.path)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	changed := !slices.Equal(w.addrs, addrs)
	w.addrs, w.left = addrs, left
	onChange := w.onChange
	w.mu.Unlock()
	if changed && onChange != nil {
		onChange()
	}
	return changed, nil
}

// Addrs are the addresses last read (nil before Start). The caller must not change them.
func (w *Watcher) Addrs() []netip.Addr {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.addrs
}
