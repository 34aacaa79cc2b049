// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// StartManager runs mgr (controllers, webhook servers) until the returned stop is called; stop
// waits for it to finish. Its signature fits Run's starts.
func StartManager(mgr ctrl.Manager) (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "testenv: manager: %v\n", err)
		}
	}, nil
}

// Eventually polls check every 100 ms until it returns nil, failing the test with what and the
// last error after 30 s: controllers converge asynchronously.
func Eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after 30s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
