// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command localenv runs the whole system locally for `make run`: a real kube-apiserver and etcd
// (from the versioned cache hack/build-binaries.sh fills) with the CRDs installed, the samples
// applied, and a kubeconfig written where kubectl can use it. It runs until interrupted, then
// stops everything and removes the control plane's data.
//
// It also builds and runs the manager (cmd/manager) against that API server, logging to
// .local/manager.log, with its pod webhook served on loopback under a CA generated here and
// installed from config/webhook, and config/admission's policy applied; and a node agent for
// node-a (cmd/agent, .local/agent.log), with the sample Deployment's pods bound to node-a on
// loopback addresses and a stand-in app listening there, so their health is real. The agent
// serves xDS to node-a's Envoy on a loopback port (printed; there is no Envoy here, but any ADS
// client can connect as node ID node-a), with the pods' network namespaces named by a template
// (no CNI plugin runs here to hand them over), so the snapshot has their listeners; it answers
// the CNI plugin on a socket in .local/cni.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

func main() {
	kubeconfig := flag.String("kubeconfig-out", filepath.Join(testenv.RepoRoot(), ".local", "kubeconfig"),
		"Where to write the kubeconfig of the local API server.")
	xdsPort := flag.Int("xds-port", 0, "The loopback port the agent serves xDS on; 0 picks a free one.")
	flag.Parse()
	if err := run(*kubeconfig, *xdsPort); err != nil {
		fmt.Fprintf(os.Stderr, "localenv: %v\n", err)
		os.Exit(1)
	}
}

// localNetNSTemplate names the sample pods' network namespaces for the agent (--netns-path-template)
// until the CNI plugin records them: the paths do not exist here, no Envoy reads them.
const localNetNSTemplate = "/var/run/netns/aether-{{.Namespace}}-{{.Name}}"

func run(kubeconfigOut string, xdsPort int) error {
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
	dir := filepath.Dir(kubeconfigOut)
	manager, err := startBinary(ctx, "manager", env.Kubeconfig, dir, hook.managerArgs()...)
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

	stopWorkload, err := startSampleWorkload(applyCtx, env)
	if err != nil {
		return fmt.Errorf("starting the sample workload: %w", err)
	}
	defer stopWorkload()
	xdsAddress, err := loopbackAddress(xdsPort)
	if err != nil {
		return err
	}
	// The CNI hand-over's socket (and its netns registry) in the local directory, not the host's
	// /var/run/aether/cni: no runtime calls the plugin here, but a person may, by hand.
	cniSocket := filepath.Join(dir, "cni", "cni.sock")
	// A loopback TCP port carries no peer credentials: the agent serves it only when told to
	// serve the node's own processes, and then whoever reaches the port (a development node).
	nodeAgent, err := startBinary(ctx, "agent", env.Kubeconfig, dir, "--node-name="+localNode,
		"--xds-address="+xdsAddress, "--node-envoy-host=true", "--netns-path-template="+localNetNSTemplate, "--cni-socket="+cniSocket)
	if err != nil {
		return err
	}
	defer func() {
		_ = nodeAgent.Process.Signal(syscall.SIGTERM)
		_ = nodeAgent.Wait()
	}()

	fmt.Printf(`
The local control plane is up. In another shell:

  export KUBECONFIG=%s
  kubectl get meshendpoints -A          # written by the agent of node-a for the three payments pods
  kubectl get meshservices -A           # derived by the manager: ports, default HTTP and TCP port, VIP
  kubectl describe meshservice payments -n shop   # per-port conditions and the dial surface
  kubectl apply -f config/samples/bad/reserved-port-pod.yaml   # denied by the pod webhook, with the reason
  kubectl apply -f config/samples/bad/httproute-to-tcp-port.yaml
  kubectl get httproute payments-ledger -n shop -o yaml        # ResolvedRefs=False UnsupportedProtocol, and why
  kubectl explain meshservice.status.dialSurface
  kubectl get crds

A kubectl of the API server's version is in %s.
The manager and the agent log to %s.
The agent serves xDS (ADS, state of the world and delta) to %s's Envoy on %s:
an ADS client that says node ID %q gets the node's listeners, clusters, endpoints and routes.
The agent answers the CNI plugin (cmd/cni) on %s.
Press Ctrl-C to stop; the control plane's data is removed.
XDS=%s
KUBECONFIG=%s
`, kubeconfigOut, env.Assets, filepath.Join(dir, "{manager,agent}.log"), localNode, xdsAddress, localNode, cniSocket, xdsAddress, kubeconfigOut)

	<-ctx.Done()
	return nil
}

// startBinary builds cmd/<name> and runs it against the local API server, its log in
// dir/<name>.log.
func startBinary(ctx context.Context, name, kubeconfig, dir string, args ...string) (*exec.Cmd, error) {
	bin := filepath.Join(dir, name)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name)
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building cmd/%s: %w\n%s", name, err, out)
	}
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "--health-probe-bind-address=0", "--metrics-bind-address=0"}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	fmt.Fprintf(os.Stderr, "localenv: %s running (pid %d), log in %s\n", name, cmd.Process.Pid, logFile.Name())
	return cmd, nil
}

// loopbackAddress is the agent's --xds-address: tcp://127.0.0.1:port, a free port when port is 0
// (the port is released before the agent binds it; nothing else here takes ports meanwhile).
func loopbackAddress(port int) (string, error) {
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("finding a free port for xDS: %w", err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	return "tcp://127.0.0.1:" + strconv.Itoa(port), nil
}
