// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package command is how the operator's small binaries start: each is a run function of its
// arguments, output streams and a context, returning an exit code, so that its tests call run
// directly; Main wires it to the process. Standard library only.
package command

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is a binary's body: it reads args (without the program's name), writes to stdout and
// stderr, stops when ctx is cancelled, and returns the process's exit code.
type Run func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Main runs run with the process's arguments and streams, in a context cancelled on SIGTERM (the
// kubelet stopping the container) or an interrupt, and exits with the code run returns.
func Main(run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
