// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testapp

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Load is a steady stream of HTTP requests, as a service's callers send while the mesh under it
// changes (a rolling update, the node proxy's hand-over, its agent killed): Rate requests a
// second for For, each sent on schedule in its own goroutine (an open loop: a slow or lost answer
// does not slow the stream, so every second of a disruption is tried), over a pool of keep-alive
// connections as a real client keeps them. A request is answered when its status is 200; anything
// else (another status, a reset, a timeout after Timeout) is a failure.
type Load struct {
	Method, URL, Host string
	Rate              int
	For, Timeout      time.Duration
}

// LoadResult is what a Load sent and how each was answered.
type LoadResult struct {
	Sent, Answered int
	// Failures are the failed requests, each "<when it was sent, RFC 3339> <its answer line>" (as
	// RequestOnce prints it), in the order they ended.
	Failures []string
}

// String is the result's summary line: "load done sent=<n> answered=<n> failed=<n>".
func (r LoadResult) String() string {
	return fmt.Sprintf("load done sent=%d answered=%d failed=%d", r.Sent, r.Answered, len(r.Failures))
}

// Run sends the load and returns when every request it sent has ended; failed is called with
// each failure as it ends (a log line while the load runs).
func (l Load) Run(failed func(string)) LoadResult {
	client := &http.Client{Timeout: l.Timeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: l.Rate}}
	defer client.CloseIdleConnections()
	var (
		mu     sync.Mutex
		result LoadResult
		wg     sync.WaitGroup
	)
	every := time.Second / time.Duration(l.Rate)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for end := time.Now().Add(l.For); time.Now().Before(end); <-tick.C {
		result.Sent++
		wg.Go(func() {
			sent := time.Now()
			status, answer := send(client, l.Method, l.URL, l.Host)
			mu.Lock()
			defer mu.Unlock()
			if status == http.StatusOK {
				result.Answered++
				return
			}
			line := sent.UTC().Format(time.RFC3339Nano) + " " + methodPrefix(l.Method) + answer
			result.Failures = append(result.Failures, line)
			if failed != nil {
				failed(line)
			}
		})
	}
	wg.Wait()
	return result
}
