// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command localenv runs the whole system locally for `make run`: a real kube-apiserver and etcd
// (from the versioned cache hack/build-binaries.sh fills) with the CRDs installed, the samples
// applied, and a kubeconfig written where kubectl can use it. It runs until interrupted, then
// stops everything and removes the control plane's data.
//
// Later stages add the manager and a node agent to what it runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

func main() {
	kubeconfig := flag.String("kubeconfig-out", filepath.Join(testenv.RepoRoot(), ".local", "kubeconfig"),
		"Where to write the kubeconfig of the local API server.")
	flag.Parse()
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintf(os.Stderr, "localenv: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfigOut string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Fprintln(os.Stderr, "localenv: starting kube-apiserver and etcd with the mesh and Gateway API CRDs")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "localenv: stopping")
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "localenv: stopping: %v\n", err)
		}
		_ = os.Remove(kubeconfigOut)
	}()

	raw, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfigOut), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfigOut, raw, 0o600); err != nil {
		return err
	}

	applyCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, stderr, err := env.Kubectl(applyCtx, "apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "samples"))
	if err != nil {
		return fmt.Errorf("applying config/samples: %w\n%s%s", err, out, stderr)
	}
	fmt.Fprint(os.Stderr, out)

	fmt.Printf(`
The local control plane is up. In another shell:

  export KUBECONFIG=%s
  kubectl get meshendpoints -A          # the sample payments endpoints: 8080/HTTP,9000/TCP,9090/HTTP2
  kubectl get meshservices -A           # filled by the MeshService controller once it runs here
  kubectl explain meshservice.status.dialSurface
  kubectl get crds

A kubectl of the API server's version is in %s.
Press Ctrl-C to stop; the control plane's data is removed.
KUBECONFIG=%s
`, kubeconfigOut, env.Assets, kubeconfigOut)

	<-ctx.Done()
	return nil
}
