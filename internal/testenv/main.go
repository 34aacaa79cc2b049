// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"os"
	"slices"
	"testing"
)

// Run is a package's TestMain: it starts one control plane for all of the package's tests,
// stores it in *env, starts whatever the package runs against it (controllers, webhooks: each
// start returns its stop), runs the tests and stops everything. A control plane that does not
// start fails the package: a test that needs the API server never silently skips.
func Run(m *testing.M, env **Env, starts ...func(*Env) (stop func(), err error)) {
	RunWith(m, Options{}, env, starts...)
}

// RunWith is Run with options for the control plane.
func RunWith(m *testing.M, opts Options, env **Env, starts ...func(*Env) (stop func(), err error)) {
	e, err := StartWith(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	*env = e
	var stops []func()
	stopAll := func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}
	for _, start := range starts {
		stop, err := start(e)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testenv: starting what the tests run against: %v\n", err)
			stopAll()
			_ = e.Stop()
			os.Exit(1)
		}
		stops = append(stops, stop)
	}
	code := m.Run()
	stopAll()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
