// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command aether-identity is a mesh pod's side of its workload identity: it asks SPIRE's
// Workload API, as the pod, for the pod's X.509 SVID. The pod webhook (internal/webhook) runs it
// from the operator image in the containers it injects, the only ones given the Workload API
// socket:
//
//	aether-identity wait  [--socket unix:///run/spire/agent-sockets/spire-agent.sock] [--timeout 5m]
//	aether-identity files [--socket ...] [--dir /var/run/secrets/aether/identity]
//	aether-identity probe [--dir /var/run/secrets/aether/identity]
//
// wait is the identity gate (the init container aether-identity-ready, first in every mesh pod):
// it exits 0 the moment SPIRE has issued the pod an SVID, so that the pod's containers start with
// an identity; while it waits it says every 10 s what it waits for and where to look; after
// --timeout it fails closed (exit 1), and the kubelet runs it again.
//
// files keeps the pod's certificate files — svid.pem (the SVID and its chain), svid_key.pem and
// bundle.pem (the trust domain's roots) — current in --dir as SPIRE rotates them, each replaced
// whole (written aside, then renamed): the native sidecar aether-identity of a proxyless gRPC
// pod, whose clients read them (grpc-go's file_watcher, internal/proxyless). probe, that
// sidecar's startupProbe, exits 0 once the files are there, parse, match and chain to the bundle.
//
// Exit codes: 0 done, 1 failed (said on stderr), 2 bad usage.
package main

import (
	"context"
	"fmt"
	"io"
	"log"

	"github.com/aether-mesh/aether-operator/internal/command"
	"github.com/aether-mesh/aether-operator/internal/version"
)

func main() { command.Main(run) }

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

const usage = `usage:
  aether-identity wait  [--socket ADDR] [--timeout DURATION]  wait until SPIRE issues this pod's X.509 SVID
  aether-identity files [--socket ADDR] [--dir DIR]           keep svid.pem, svid_key.pem and bundle.pem current in DIR
  aether-identity probe [--dir DIR]                           exit 0 when DIR's files parse, match and chain
  aether-identity --version                                   print the version, the commit and the Go version
`

// run runs the subcommand args[0] and returns the process's exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	logger := log.New(stderr, "aether-identity "+args[0]+": ", log.LstdFlags|log.LUTC|log.Lmsgprefix)
	switch args[0] {
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, version.Line("aether-identity"))
		return exitOK
	case "wait":
		return waitCommand(ctx, args[1:], logger)
	case "files":
		return filesCommand(ctx, args[1:], logger)
	case "probe":
		return probeCommand(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "aether-identity: unknown command %q\n%s", args[0], usage)
	return exitUsage
}
