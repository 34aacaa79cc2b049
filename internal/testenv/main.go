// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Run is a package's TestMain: it starts one control plane for all of the package's tests,
// stores it in *env, runs the tests and stops it. A control plane that does not start fails the
// package: a test that needs the API server never silently skips.
func Run(m *testing.M, env **Env) {
	e, err := Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
