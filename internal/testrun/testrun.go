// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testrun is test support: it runs a component that serves until its context ends (a
// Start(ctx) error method, as controller-runtime runs one) for the length of one test. It holds
// nothing of the project's and imports only the standard library.
package testrun

import (
	"context"
	"testing"
)

// UntilCleanup runs start in a goroutine of its own until the test ends: then it cancels start's
// context, waits for start to return, and fails the test, naming what, if start returned an
// error. It returns start's context, which ends with the test.
func UntilCleanup(t testing.TB, what string, start func(context.Context) error) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s stopped with %v", what, err)
		}
	})
	return ctx
}
