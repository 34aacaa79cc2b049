// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command pause is the pod sandbox's pause process: it holds the pod's namespaces and exits on
// SIGTERM or SIGINT, reaping nothing (the kubelet's images are static, single-process).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
