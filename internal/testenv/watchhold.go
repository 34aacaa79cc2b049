// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"io"
	"net/http"
	"strings"
	"sync"
)

// WatchHold holds back what a client's watches of one resource deliver, while it is held: the lag
// of a loaded API server's watch, made certain, for a test to show what a component does before
// its cache sees an event. Install it with rest.Config.WrapTransport = h.Wrap.
type WatchHold struct {
	resource string // plural, as in the path: "meshendpoints"
	mu       sync.RWMutex
	held     sync.Mutex // guards holding
	holding  bool
}

// NewWatchHold holds watches of resource (its plural name) once Hold is called.
func NewWatchHold(resource string) *WatchHold { return &WatchHold{resource: resource} }

// Hold starts holding back the watches' events; Release hands them over. Each is idempotent.
func (h *WatchHold) Hold() {
	h.held.Lock()
	defer h.held.Unlock()
	if !h.holding {
		h.holding = true
		h.mu.Lock()
	}
}

// Release hands over what was held, and what comes later, at once.
func (h *WatchHold) Release() {
	h.held.Lock()
	defer h.held.Unlock()
	if h.holding {
		h.holding = false
		h.mu.Unlock()
	}
}

// Wrap wraps a client's transport: the body of a watch of the resource hands over each read only
// while the hold is not held (a read under way when Hold is called hands its bytes over at
// Release).
func (h *WatchHold) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && req.URL.Query().Get("watch") == "true" && strings.HasSuffix(req.URL.Path, "/"+h.resource) {
			resp.Body = &heldBody{ReadCloser: resp.Body, hold: h}
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

type heldBody struct {
	io.ReadCloser
	hold *WatchHold
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.hold.mu.RLock()
	defer b.hold.mu.RUnlock()
	return n, err
}
