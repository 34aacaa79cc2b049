// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command localenv runs the whole system locally for `make run`: a real kube-apiserver and etcd
// (from the versioned cache hack/build-binaries.sh fills) with the CRDs installed, the samples
// applied, and a kubeconfig written where kubectl can use it. It runs until interrupted, then
// stops everything and removes the control plane's data.
//
// It also builds and runs the manager (cmd/manager) against that API server, logging to
// .local/manager.log, with its pod webhook served on loopback under a CA generated here and
// installed from config/webhook, and config/admission's policy applied. A node agent joins it in
// a later stage.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
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

	hook, err := newLocalWebhook(filepath.Dir(kubeconfigOut))
	if err != nil {
		return fmt.Errorf("generating the webhook's certificates: %w", err)
	}
	manager, err := startManager(ctx, env.Kubeconfig, filepath.Dir(kubeconfigOut), hook.managerArgs()...)
	if err != nil {
		return err
	}
	defer func() {
		_ = manager.Process.Signal(syscall.SIGTERM)
		_ = manager.Wait()
	}()

	applyCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := hook.install(applyCtx, env); err != nil {
		return err
	}
	out, stderr, err := env.Kubectl(applyCtx, "apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "samples"))
	if err != nil {
		return fmt.Errorf("applying config/samples: %w\n%s%s", err, out, stderr)
	}
	fmt.Fprint(os.Stderr, out)

	fmt.Printf(`
The local control plane is up. In another shell:

  export KUBECONFIG=%s
  kubectl get meshendpoints -A          # the sample payments endpoints: 8080/HTTP,9000/TCP,9090/HTTP2
  kubectl get meshservices -A           # derived by the manager: ports, default HTTP and TCP port, VIP
  kubectl describe meshservice payments -n shop   # per-port conditions and the dial surface
  kubectl apply -f config/samples/bad/reserved-port-pod.yaml   # denied by the pod webhook, with the reason
  kubectl explain meshservice.status.dialSurface
  kubectl get crds

A kubectl of the API server's version is in %s.
The manager logs to %s.
Press Ctrl-C to stop; the control plane's data is removed.
KUBECONFIG=%s
`, kubeconfigOut, env.Assets, filepath.Join(filepath.Dir(kubeconfigOut), "manager.log"), kubeconfigOut)

	<-ctx.Done()
	return nil
}

// startManager builds cmd/manager and runs it against the local API server, its log in dir.
func startManager(ctx context.Context, kubeconfig, dir string, args ...string) (*exec.Cmd, error) {
	bin := filepath.Join(dir, "manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/manager")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building cmd/manager: %w\n%s", err, out)
	}
	logFile, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "--health-probe-bind-address=0", "--metrics-bind-address=0"}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the manager: %w", err)
	}
	fmt.Fprintf(os.Stderr, "localenv: manager running (pid %d)\n", cmd.Process.Pid)
	return cmd, nil
}
