// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubectl-aether is the kubectl plugin `kubectl aether` (on the PATH, kubectl finds it by
// its name). The commands live in internal/plugin; this is only their entry point.
package main

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/aether-mesh/aether-operator/internal/plugin"
)

func main() {
	os.Exit(run())
}

func run() int {
	err := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "error:", err)
	if exit, ok := errors.AsType[*plugin.ExitError](err); ok {
		return exit.Code
	}
	return plugin.ExitUsage
}
