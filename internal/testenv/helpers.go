// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// EventuallyGone waits until c reads obj (by its key) as not found: deleted, and any finalizers
// run.
func EventuallyGone(t testing.TB, c client.Reader, obj client.Object) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	Eventually(t, fmt.Sprintf("%T %s is gone", obj, key), func() error {
		err := c.Get(context.Background(), key, obj.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return cmp.Or(err, errors.New("still there"))
	})
}
