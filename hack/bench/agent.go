// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// The agent process's node, and how many managed pods it runs (a node's default pod limit).
const (
	agentNode     = "bench-agent-node"
	agentNodePods = 110
)

// agentRun is what measureAgent saw; the requests come from the audit log afterwards.
type agentRun struct {
	began, synced, restFrom, restTo time.Time
	clusterEndpoints                int
	syncCPUS, restCPUS              float64
	rssMiB, peakRSSMiB              float64
}

// measureAgent runs one real agent (the binary, as the node agent of agentNode with xDS serving
// on a unix socket, so its cluster-wide view and xDS builds run; no CNI hand-over, so no capture)
// on the converged cluster: agentNodePods managed pods are created on its node first, each with
// an HTTP server answering its health probe, and the agent registers them itself. Synced is when
// its view holds every MeshService and MeshEndpoint and its node's endpoints are all Healthy;
// after the manager is idle again (it verifies the new endpoints), the rest window of
// cfg.agentRest measures the agent doing nothing: its CPU, and (from the audit log) its requests.
func (r *run) measureAgent(ctx context.Context, mgr *manager, scratch string) (agentRun, error) {
	var a agentRun
	eps := r.agentEndpoints()
	stopApps, err := serveHealth(eps)
	if err != nil {
		return a, err
	}
	defer stopApps()
	if err := parallel(ctx, spread(eps, 16), func(ctx context.Context, _ int, ep *endpoint) error {
		return createPod(ctx, r.env.Client, ep)
	}); err != nil {
		return a, err
	}
	kubeconfig, err := r.agentKubeconfig()
	if err != nil {
		return a, err
	}
	// Every service for its pods (--upstreams=all): this agent's sync is the cost of a node that
	// carries the whole mesh.
	proc, err := startAgent(ctx, filepath.Join(r.cfg.out, "agent"), kubeconfig, agentNode, filepath.Join(scratch, "agent-xds"),
		filepath.Join(r.dir, "agent.log"), model.UpstreamsAll, 0,
		// No CNI hand-over, no plugin install: no pod's network namespace is known, so no capture.
		"--cni-socket=", "--cni-kubeconfig=")
	if err != nil {
		return a, err
	}
	defer proc.stop()
	a.began = proc.began
	if a.clusterEndpoints, err = proc.waitSynced(ctx, r.env.Client); err != nil {
		return a, err
	}
	a.synced = time.Now()
	if a.syncCPUS, err = testenv.CPUSeconds(proc.cmd.Process.Pid); err != nil {
		return a, err
	}
	if err := mgr.waitIdle(ctx, r.quiet(), 2*time.Minute, 0); err != nil {
		return a, fmt.Errorf("after the agent registered its pods: %w", err)
	}

	a.restFrom = time.Now()
	cpuBefore, err := testenv.CPUSeconds(proc.cmd.Process.Pid)
	if err != nil {
		return a, err
	}
	// The rest window is a span to measure over, not a wait for something to happen.
	select {
	case <-time.After(r.cfg.agentRest):
	case <-proc.done:
		return a, fmt.Errorf("the agent exited at rest (%v); its log is %s", proc.exit, proc.log)
	case <-ctx.Done():
		return a, ctx.Err()
	}
	a.restTo = time.Now()
	cpuAfter, err := testenv.CPUSeconds(proc.cmd.Process.Pid)
	if err != nil {
		return a, err
	}
	a.restCPUS = cpuAfter - cpuBefore
	if a.rssMiB, err = testenv.MemoryMiB(proc.cmd.Process.Pid, "VmRSS"); err != nil {
		return a, err
	}
	a.peakRSSMiB, err = testenv.MemoryMiB(proc.cmd.Process.Pid, "VmHWM")
	return a, err
}

// figures are the agent's row, its requests read from the audit log.
func (a agentRun) figures(reqs []request) *agentFigures {
	rest := window(reqs, a.restFrom, a.restTo)
	syncing := window(reqs, a.began, a.synced)
	minutes := a.restTo.Sub(a.restFrom).Minutes()
	f := &agentFigures{
		ClusterEndpoints: a.clusterEndpoints, NodePods: agentNodePods,
		RSSMiB: a.rssMiB, PeakRSSMiB: a.peakRSSMiB,
		SyncS: a.synced.Sub(a.began).Seconds(), SyncCPUS: a.syncCPUS, SyncWritesBy: writesOf(syncing, byAgentProcess),
		SyncReadsBy: readsOf(syncing, byAgentProcess),
		RestS:       a.restTo.Sub(a.restFrom).Seconds(), RestCPUS: a.restCPUS,
		RestWritesBy: writesOf(rest, byAgentProcess), RestReadsBy: readsOf(rest, byAgentProcess),
	}
	f.RestWrites = f.RestWritesBy.total()
	f.RequestsPerMin = float64(f.RestWrites+f.RestReadsBy.total()) / minutes
	f.WritesPerMinAtRest = float64(f.RestWrites) / minutes
	return f
}

// agentEndpoints are the agent's node's pods, spread over the services (each joins one).
func (r *run) agentEndpoints() []*endpoint {
	out := make([]*endpoint, agentNodePods)
	for i := range out {
		svc := r.work.services[i*len(r.work.services)/agentNodePods]
		out[i] = &endpoint{key: types.NamespacedName{Namespace: svc.Namespace, Name: fmt.Sprintf("%s-a%03d", svc.Name, i)},
			svc: svc.Name, node: agentNode, ip: r.work.newIP()}
	}
	return out
}

// agentKubeconfig is a kubeconfig of agentProcessUser (its own certificate, so the audit log
// logs its requests) impersonating the node agent with agentNode's claim: the agent then works
// under its own role and the node-authority admission policy, as in a cluster.
func (r *run) agentKubeconfig() (string, error) { return r.agentKubeconfigFor(agentNode, "") }

// agentKubeconfigFor is agentKubeconfig for node, written to path (agentProcessUser's own when
// empty): each agent process of the latency run speaks for a node of its own.
func (r *run) agentKubeconfigFor(node, path string) (string, error) {
	userPath, err := r.env.UserKubeconfig(agentProcessUser, "system:masters")
	if err != nil {
		return "", err
	}
	if path == "" {
		path = userPath
	}
	cfg, err := clientcmd.LoadFromFile(userPath)
	if err != nil {
		return "", err
	}
	as := r.env.AgentConfig(node).Impersonate
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate, auth.ImpersonateGroups, auth.ImpersonateUserExtra = as.UserName, as.Groups, as.Extra
	}
	return path, clientcmd.WriteToFile(*cfg, path)
}

// serveHealth answers 200 on each endpoint's primary port (its pod IP, in 127.0.0.0/8): the
// agent's HTTP probes find its pods Healthy, as a node's running pods are.
func serveHealth(eps []*endpoint) (stop func(), err error) {
	server := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }),
		ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	stop = func() { _ = server.Close(); wg.Wait() }
	for _, ep := range eps {
		l, err := net.Listen("tcp", net.JoinHostPort(ep.ip, fmt.Sprint(ports[0].Port)))
		if err != nil {
			stop()
			return nil, err
		}
		wg.Go(func() { _ = server.Serve(l) })
	}
	return stop, nil
}

// agentProcess is one run of the agent binary.
type agentProcess struct {
	cmd     *exec.Cmd
	log     string
	metrics string
	pprof   string // base URL of its pprof endpoints
	times   string // URL of its endpoint times (--debug-endpoint-times)
	began   time.Time
	done    chan struct{}
	exit    error
	stopped sync.Once
}

// startAgent runs the agent binary as the node agent of node (kubeconfig), xDS serving on a unix
// socket in dir, metrics and pprof on loopback ports of its own, carrying upstreams (its
// --upstreams), with the flags more, at the scheduling priority niceness (nice(1); 0: this
// process's). The proxy-config endpoint is off (its metrics endpoint is plain HTTP here, where
// the agent would not serve it anyway).
func startAgent(ctx context.Context, bin, kubeconfig, node, dir, logPath string, upstreams model.UpstreamsMode, niceness int, more ...string) (*agentProcess, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &agentProcess{log: logPath, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]),
		pprof: fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", ports[1]), done: make(chan struct{})}
	p.times = strings.TrimSuffix(p.metrics, "/metrics") + agent.EndpointTimesPath
	args := append([]string{"--kubeconfig=" + kubeconfig, "--node-name=" + node,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]), "--metrics-secure=false", "--health-probe-bind-address=0",
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", ports[1]),
		"--xds-address=unix://" + filepath.Join(dir, "xds.sock"), "--upstreams=" + string(upstreams), "--proxy-config=false"}, more...)
	if niceness != 0 {
		// nice execs the agent: the process started is the agent's.
		args = append([]string{"-n", strconv.Itoa(niceness), bin}, args...)
		bin = "nice"
	}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.began = time.Now()
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the agent: %w", err)
	}
	go func() { p.exit = p.cmd.Wait(); _ = logFile.Close(); close(p.done) }()
	return p, nil
}

// stop ends the agent as Kubernetes does (SIGTERM) and waits for it.
func (p *agentProcess) stop() {
	p.stopped.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// waitSynced polls until the agent's view (aether_agent_view_objects) holds as many MeshServices
// and MeshEndpoints as the API server, and every MeshEndpoint of its node (spec.nodeName) is
// Healthy, agentNodePods of them. It returns the cluster's MeshEndpoints.
func (p *agentProcess) waitSynced(ctx context.Context, c client.Client) (int, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		state, err := p.syncState(ctx, c)
		if err == nil && state.synced() {
			return state.endpoints, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the agent did not sync within 5 minutes: %+v (%v); its log is %s", state, err, p.log)
		}
		select {
		case <-p.done:
			return 0, fmt.Errorf("the agent exited before it synced (%v); its log is %s", p.exit, p.log)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type syncState struct {
	services, endpoints         int // in the API server
	viewServices, viewEndpoints int // in the agent's view
	nodeEndpoints, nodeHealthy  int
}

func (s syncState) synced() bool {
	return s.viewServices == s.services && s.viewEndpoints == s.endpoints &&
		s.nodeEndpoints == agentNodePods && s.nodeHealthy == agentNodePods
}

func (p *agentProcess) syncState(ctx context.Context, c client.Client) (syncState, error) {
	var s syncState
	series, err := scrape(ctx, p.metrics)
	if err != nil {
		return s, err
	}
	s.viewServices = int(sum(series, `aether_agent_view_objects{kind="MeshService"`))
	s.viewEndpoints = int(sum(series, `aether_agent_view_objects{kind="MeshEndpoint"`))
	if s.services, err = count(ctx, c, &meshv1alpha1.MeshServiceList{}); err != nil {
		return s, err
	}
	if s.endpoints, err = count(ctx, c, &meshv1alpha1.MeshEndpointList{}); err != nil {
		return s, err
	}
	var mine meshv1alpha1.MeshEndpointList
	if err := c.List(ctx, &mine, client.MatchingFields{"spec.nodeName": agentNode}); err != nil {
		return s, err
	}
	s.nodeEndpoints = len(mine.Items)
	for _, ep := range mine.Items {
		if ep.Status.Health == meshv1alpha1.HealthHealthy {
			s.nodeHealthy++
		}
	}
	return s, nil
}

// count is how many objects of list's kind exist, cluster-wide, without listing them all: a
// one-item page and the API server's count of the rest.
func count(ctx context.Context, c client.Client, list client.ObjectList) (int, error) {
	if err := c.List(ctx, list, client.Limit(1)); err != nil {
		return 0, err
	}
	n := meta.LenList(list)
	if rest := list.GetRemainingItemCount(); rest != nil {
		n += int(*rest)
	}
	return n, nil
}

// agentEnabled reports whether this size measures the agent: the last size of the run (the
// largest, as BENCH_SIZES lists them) when it is the scale the agent row is specified at, or
// any last size when BENCH_AGENT_REST asks; BENCH_AGENT_REST=0 turns the agent off.
func (r *run) agentEnabled() bool { return agentMeasured(r.cfg, r.size) }

func agentMeasured(cfg config, sz size) bool {
	last := sz == cfg.sizes[len(cfg.sizes)-1]
	atScale := sz.services*sz.endpoints >= agentScale
	return cfg.agentRest > 0 && last && (atScale || cfg.agentAsked)
}
