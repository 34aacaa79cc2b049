// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// latencyResult is one size's endpoint programming latency (bin/bench/latency.json). A change
// is one endpoint added or one removed: a churned pod is two.
type latencyResult struct {
	Size    string `json:"size"`
	Agents  int    `json:"agents"`
	Churned int    `json:"churned_pods"`
	Changes int    `json:"changes"`
	// ChurnRate is the churned pods replaced per second.
	ChurnRate float64 `json:"churn_pods_per_s"`
	// Add: from the owning agent's probe answer that made the new endpoint Healthy to the
	// last agent's first published snapshot holding it Healthy.
	AddP50Ms float64 `json:"add_p50_ms"`
	AddP90Ms float64 `json:"add_p90_ms"`
	AddP99Ms float64 `json:"add_p99_ms"`
	AddMaxMs float64 `json:"add_max_ms"`
	// Remove: from the pod's deletion to the last agent's first published snapshot without it.
	RemoveP50Ms float64 `json:"remove_p50_ms"`
	RemoveP90Ms float64 `json:"remove_p90_ms"`
	RemoveP99Ms float64 `json:"remove_p99_ms"`
	RemoveMaxMs float64 `json:"remove_max_ms"`
	// Healthy: from the new pod's creation (with its IP) to its agent's Healthy probe answer:
	// registration and the probe interval, which Add starts after.
	HealthyP50Ms float64 `json:"healthy_after_create_p50_ms"`
	HealthyP99Ms float64 `json:"healthy_after_create_p99_ms"`
	// First: the same spans to the first agent's snapshot instead of the last's: what the manager
	// and the API server take, before the agents' own spread.
	AddFirstP50Ms    float64 `json:"add_first_agent_p50_ms"`
	AddFirstP99Ms    float64 `json:"add_first_agent_p99_ms"`
	RemoveFirstP50Ms float64 `json:"remove_first_agent_p50_ms"`
	RemoveFirstP99Ms float64 `json:"remove_first_agent_p99_ms"`
	// DeleteCallP50Ms is how long the pod deletions took to return (the API server's load).
	DeleteCallP50Ms float64 `json:"delete_call_p50_ms"`
	DeleteCallP99Ms float64 `json:"delete_call_p99_ms"`
	// WatchEvents are the view's watch events per agent per change (the agents' own counter,
	// aether_agent_view_events_total), and by kind and event.
	WatchEventsPerAgentPerChange float64            `json:"watch_events_per_agent_per_change"`
	WatchEventsBy                map[string]float64 `json:"watch_events_per_agent_per_change_by"`
	// AgentWritesPerChurnedPod are the agents' writes during the churn (audit log) per churned pod.
	AgentWritesPerChurnedPod float64 `json:"agent_writes_per_churned_pod"`
	AgentWritesBy            tally   `json:"agent_writes_by"`
	// PublishesPerAgent are the snapshots each agent published during the churn, on average;
	// AgentCPUS its CPU seconds in that span, on average.
	PublishesPerAgent float64 `json:"publishes_per_agent"`
	AgentCPUS         float64 `json:"agent_cpu_s"`
	// CPUCores is, per process (kube-apiserver, etcd, manager, the agents together, the benchmark
	// itself), the CPU it used over the churn in cores (CPU seconds per second of churn): where
	// the machine's cores went.
	CPUCores map[string]float64 `json:"cpu_cores_over_churn"`
	// The manager's MeshService controller over the churn (its workqueue and controller-runtime
	// metrics): how many reconciles, the mean time a service waited in the queue for a worker,
	// and the mean reconcile.
	ManagerReconciles float64 `json:"manager_reconciles"`
	ManagerQueueWaitS float64 `json:"manager_queue_wait_mean_s"`
	ManagerReconcileS float64 `json:"manager_reconcile_mean_s"`
	// ManagerReadWaitS is how long the manager's reads waited for its cache to see its own
	// writes (its read-your-writes client), in seconds over the churn, all its reads together.
	ManagerReadWaitS float64 `json:"manager_read_wait_s"`
	ChurnS           float64 `json:"churn_s"`
	WallS            float64 `json:"wall_s"`
}

// upstreamsAnnotations lists every service as "<name>.<namespace>" in as few
// config.aether.io/upstreams values as fit under the annotation's cap.
func upstreamsAnnotations(services []types.NamespacedName) []string {
	var out []string
	var value strings.Builder
	for _, svc := range services {
		name := svc.Name + "." + svc.Namespace
		if value.Len() > 0 && value.Len()+len(",")+len(name) > portspec.MaxUpstreamsLength {
			out = append(out, value.String())
			value.Reset()
		}
		if value.Len() > 0 {
			value.WriteByte(',')
		}
		value.WriteString(name)
	}
	return append(out, value.String())
}

// latencyNode is the node of agent process k.
func latencyNode(k int) string { return fmt.Sprintf("bench-lat-node-%02d", k) }

// latencyAgent is one agent process of the latency run and its node.
type latencyAgent struct {
	node string
	proc *agentProcess
	// anchors are the node's pods of one service (one local identity) that together declare
	// every service as an upstream: the node carries every service, so every change must reach
	// every agent.
	anchors []*endpoint
	netns   []string // the anchors' network namespaces (ip netns), where their capture is programmed
}

// churnChange is one churned pod: the old one deleted, its replacement created on its node.
type churnChange struct {
	old, replacement *endpoint
	agent            int
	// deleted is when the old pod's deletion was sent, removed when it returned; created when the
	// replacement existed with its IP.
	deleted, removed, created time.Time
}

// latencyBenchmark is `make bench-latency`: for each size, BENCH_AGENTS real agent processes
// against one API server and the manager, 10 % of the pods replaced at BENCH_CHURN_RATE pods
// per second, and each change's latency to every agent's published snapshot.
func latencyBenchmark(ctx context.Context, cfg config) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	built := buildBinaries(ctx, cfg)
	var results []latencyResult
	for _, sz := range cfg.sizes {
		started := time.Now()
		progress(sz, "latency: starting, %d agents", cfg.agents)
		res, err := runLatency(ctx, cfg, sz, built)
		if err != nil {
			return fmt.Errorf("%s: %w", sz, err)
		}
		res.WallS = time.Since(started).Seconds()
		progress(sz, "latency: done in %.0fs", res.WallS)
		results = append(results, res)
	}
	path, err := writeJSON(cfg.out, "latency.json", results)
	if err != nil {
		return err
	}
	fmt.Print(latencyTable(results))
	fmt.Printf("\nJSON: %s; agent and manager CPU profiles, logs: %s/latency-<size>/\n", path, cfg.out)
	return nil
}

// runLatency runs one size: the workload's pods, 10 % of them (every tenth endpoint, as the
// convergence churn picks them) on the agents' nodes and registered by the agents themselves, the
// rest registered by the benchmark's writers as bench-convergence does; on each agent node the
// anchor pods that declare every service; then the churn, each churned pod replaced by a new one
// on the same node. The agents run with declared upstreams (the default): each node carries every
// service for its anchors' identity, its one local identity (the churned pods have no network
// namespace handed over, so no proxy configuration). The agents start before the manager and
// register their pods, so that the manager's first pass finds every endpoint: started after it, as
// agents joining a running cluster, they had it reconcile every service a second time (each has
// one endpoint on an agent's node) while all twenty made their first sync.
func runLatency(ctx context.Context, cfg config, sz size, built func() (string, error)) (res latencyResult, err error) {
	r := &run{cfg: cfg, size: sz, dir: filepath.Join(cfg.out, "latency-"+sz.String()), work: newWorkload(sz, cfg.writers)}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return res, err
	}
	scratch, err := os.MkdirTemp("", "aether-bench-latency-")
	if err != nil {
		return res, err
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	auditLog := filepath.Join(scratch, "audit.log")
	if r.env, err = startAuditedControlPlane(scratch, auditLog); err != nil {
		return res, err
	}
	defer func() {
		if stopErr := r.env.Stop(); stopErr != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: stopping the control plane: %v\n", sz, stopErr)
		}
	}()
	if err := r.clients(ctx); err != nil {
		return res, err
	}
	agents, changes := r.latencyPlan()
	// Every pod on an agent's node answers its health probe, the replacements' from the start.
	var probed []*endpoint
	for _, a := range agents {
		probed = append(probed, a.anchors...)
	}
	for _, c := range changes {
		probed = append(probed, c.old, c.replacement)
	}
	stopApps, err := serveHealth(probed)
	if err != nil {
		return res, err
	}
	defer stopApps()
	if err := r.latencyPods(ctx, agents, len(changes)); err != nil {
		return res, err
	}
	if _, err := built(); err != nil {
		return res, err
	}
	progress(sz, "latency: starting %d agents", cfg.agents)
	for _, a := range agents {
		defer a.stop()
	}
	if err := r.startLatencyAgents(ctx, filepath.Join(cfg.out, "agent"), scratch, agents); err != nil {
		return res, err
	}
	var local []*endpoint // the pods on the agents' nodes
	for _, a := range agents {
		local = append(local, a.anchors...)
	}
	for _, c := range changes {
		local = append(local, c.old)
	}
	if err := r.waitRegistered(ctx, local, 5*time.Minute); err != nil {
		return res, err
	}
	mgr, err := r.startLatencyManager(ctx, built, scratch)
	if mgr != nil {
		defer mgr.stop()
	}
	if err != nil {
		return res, err
	}
	total := sz.services*sz.endpoints + cfg.agents*len(agents[0].anchors)
	progress(sz, "latency: waiting for every agent to hold the %d endpoints", total)
	if err := waitAgents(ctx, sz, agents, 10*time.Minute, countOnly, func(times agent.EndpointTimesAnswer) error {
		if times.Held != total {
			return fmt.Errorf("its snapshot holds %d of the %d endpoints Healthy", times.Held, total)
		}
		return nil
	}); err != nil {
		return res, fmt.Errorf("the agents did not sync: %w", err)
	}
	if err := mgr.waitIdle(ctx, r.quiet(), 5*time.Minute, 0); err != nil {
		return res, err
	}
	return r.measureChurn(ctx, mgr, agents, changes, auditLog)
}

// latencyPlan deals every tenth endpoint over the agents' nodes, each with its replacement, and
// gives each agent node its anchor pods.
func (r *run) latencyPlan() ([]*latencyAgent, []*churnChange) {
	agents := make([]*latencyAgent, r.cfg.agents)
	declared := upstreamsAnnotations(r.work.services)
	for k := range agents {
		svc := r.work.services[k*len(r.work.services)/r.cfg.agents]
		agents[k] = &latencyAgent{node: latencyNode(k)}
		for i, upstreams := range declared {
			agents[k].anchors = append(agents[k].anchors, &endpoint{
				key: types.NamespacedName{Namespace: svc.Namespace, Name: fmt.Sprintf("%s-anchor%02d-%d", svc.Name, k, i)},
				svc: svc.Name, node: latencyNode(k), ip: r.work.newIP(), upstreams: upstreams})
		}
	}
	var changes []*churnChange
	for s := range r.work.endpoints {
		for j, ep := range r.work.endpoints[s] {
			if (s*r.size.endpoints+j)%10 != 0 {
				continue
			}
			k := len(changes) % r.cfg.agents
			ep.node = agents[k].node
			replacement := &endpoint{key: types.NamespacedName{Namespace: ep.key.Namespace, Name: ep.key.Name + "-r1"},
				svc: ep.svc, node: ep.node, ip: r.work.newIP()}
			changes = append(changes, &churnChange{old: ep, replacement: replacement, agent: k})
		}
	}
	return agents, changes
}

// latencyPods creates every pod with its IP and the anchors, and has the writers register the
// endpoints off the agents' nodes (onAgents of them are on the agents' nodes, registered by the
// agents themselves).
func (r *run) latencyPods(ctx context.Context, agents []*latencyAgent, onAgents int) error {
	sz := r.size
	progress(sz, "latency: creating %d pods with their IPs", sz.services*sz.endpoints+len(agents)*len(agents[0].anchors))
	if err := r.setup(ctx); err != nil {
		return err
	}
	for _, a := range agents {
		for _, anchor := range a.anchors {
			if err := createPod(ctx, r.env.Client, anchor); err != nil {
				return err
			}
		}
	}
	progress(sz, "latency: %d writers register the %d endpoints off the agents' nodes", r.cfg.writers, sz.services*sz.endpoints-onAgents)
	return parallel(ctx, r.work.byWriter(func(ep *endpoint) bool { return ep.node == "" }), func(ctx context.Context, w int, ep *endpoint) error {
		_, err := r.agent(w).registerAnswering(ctx, ep.pod)
		return err
	})
}

// startLatencyManager starts the manager once every endpoint is registered, and waits until it
// is idle: it finds them all at its first list and reconciles each service once, where a manager
// already running would reconcile each service again at each of its endpoints' writes, and race
// the writers' status patches. The manager is returned to be stopped, even with an error.
func (r *run) startLatencyManager(ctx context.Context, built func() (string, error), scratch string) (*manager, error) {
	certDir := filepath.Join(scratch, "webhook-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	if err := writeServingCert(certDir); err != nil {
		return nil, err
	}
	bin, err := built()
	if err != nil {
		return nil, err
	}
	progress(r.size, "latency: starting the manager")
	mgr, err := startManager(ctx, bin, r.managerKube, certDir, filepath.Join(r.dir, "manager.log"), r.cfg)
	if err != nil {
		return mgr, err
	}
	return mgr, mgr.waitIdle(ctx, r.quiet(), 10*time.Minute, r.size.services)
}

// startLatencyAgents writes each agent's kubeconfig (one at a time: each is written from the same
// user's), then starts every agent at once.
func (r *run) startLatencyAgents(ctx context.Context, bin, scratch string, agents []*latencyAgent) error {
	dirs, kubeconfigs := make([]string, len(agents)), make([]string, len(agents))
	for k, a := range agents {
		dirs[k] = filepath.Join(scratch, fmt.Sprintf("agent-%02d", k))
		if err := os.MkdirAll(dirs[k], 0o700); err != nil {
			return err
		}
		var err error
		if kubeconfigs[k], err = r.agentKubeconfigFor(a.node, filepath.Join(dirs[k], "kubeconfig")); err != nil {
			return err
		}
	}
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for k, a := range agents {
		wg.Go(func() { errs[k] = r.startLatencyAgent(ctx, bin, dirs[k], kubeconfigs[k], k, a) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitRegistered waits until the agents have registered each of eps (the pods on their nodes) and
// found it Healthy, reading those MeshEndpoints alone: the manager starts after, and finds every
// endpoint at its first list.
func (r *run) waitRegistered(ctx context.Context, eps []*endpoint, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pending := eps
	for {
		var mu sync.Mutex
		var still []*endpoint
		if err := parallel(ctx, spread(pending, 16), func(ctx context.Context, _ int, ep *endpoint) error {
			var got meshv1alpha1.MeshEndpoint
			err := r.env.Client.Get(ctx, ep.key, &got)
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			if err != nil || got.Status.Health != meshv1alpha1.HealthHealthy {
				mu.Lock()
				still = append(still, ep)
				mu.Unlock()
			}
			return nil
		}); err != nil {
			return err
		}
		if pending = still; len(pending) == 0 {
			progress(r.size, "latency: the agents registered their %d endpoints", len(eps))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agents did not register %d of their %d endpoints Healthy within %s, %s among them",
				len(pending), len(eps), timeout, pending[0].key)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// measureChurn replaces the churned pods, waits until every agent's snapshot followed, and
// computes the figures, with the agents' counters and the audit log over the churn, and the CPU
// profiles of agent 0 and the manager.
func (r *run) measureChurn(ctx context.Context, mgr *manager, agents []*latencyAgent, changes []*churnChange, auditLog string) (latencyResult, error) {
	var res latencyResult
	progress(r.size, "latency: churn: replacing %d pods at %.0f/s", len(changes), r.cfg.churnRate)
	eventsBefore, publishesBefore, cpuBefore, err := agentCounters(ctx, agents)
	if err != nil {
		return res, err
	}
	split := processesOf(mgr, agents)
	splitBefore, err := split.cpu()
	if err != nil {
		return res, err
	}
	queueBefore, err := scrape(ctx, mgr.metrics)
	if err != nil {
		return res, err
	}
	apiServer, err := rest.HTTPClientFor(r.env.Config)
	if err != nil {
		return res, err
	}
	profiles := []struct {
		profiler  *cpuProfiler
		file, bin string
	}{
		{profileCPU(ctx, agents[0].proc.pprof), "agent-cpu.pprof", filepath.Join(r.cfg.out, "agent")},
		{mgr.profileCPU(ctx), "manager-cpu.pprof", filepath.Join(r.cfg.out, "manager")},
		// Its profile names its functions; the binary is not needed to read it.
		{profileCPUVia(ctx, apiServer, strings.TrimSuffix(r.env.Config.Host, "/")+"/debug/pprof/"), "apiserver-cpu.pprof", ""},
	}
	churnFrom := time.Now()
	if err := r.churnAt(ctx, changes, r.cfg.churnRate); err != nil {
		return res, err
	}
	if err := waitAgents(ctx, r.size, agents, 5*time.Minute, churnFrom, func(times agent.EndpointTimesAnswer) error {
		for _, c := range changes {
			if times.Endpoints[keyOf(c.old)].Dropped.IsZero() {
				return fmt.Errorf("its snapshot still holds %s", c.old.key)
			}
			if times.Endpoints[keyOf(c.replacement)].Held.IsZero() {
				return fmt.Errorf("its snapshot does not hold %s yet", c.replacement.key)
			}
		}
		return nil
	}); err != nil {
		return res, fmt.Errorf("after the churn: %w", err)
	}
	churnTo := time.Now()
	for _, p := range profiles {
		if err := p.profiler.finish(filepath.Join(r.dir, p.file)); err != nil {
			return res, err
		}
	}
	eventsAfter, publishesAfter, cpuAfter, err := agentCounters(ctx, agents)
	if err != nil {
		return res, err
	}
	splitAfter, err := split.cpu()
	if err != nil {
		return res, err
	}
	queueAfter, err := scrape(ctx, mgr.metrics)
	if err != nil {
		return res, err
	}
	last := map[string]map[string]agent.EndpointTime{} // by node
	for _, a := range agents {
		times, err := a.times(ctx, churnFrom)
		if err != nil {
			return res, err
		}
		last[a.node] = times.Endpoints
	}
	reqs, err := readAudit(auditLog)
	if err != nil {
		return res, err
	}
	res = latencyFigures(r.cfg, r.size, changes, agents, last)
	res.ChurnS = churnTo.Sub(churnFrom).Seconds()
	n, perChange := float64(len(agents)), float64(res.Changes)
	res.WatchEventsBy = map[string]float64{}
	for series, after := range eventsAfter {
		v := (after - eventsBefore[series]) / n / perChange
		res.WatchEventsPerAgentPerChange += v
		res.WatchEventsBy[series] = v
	}
	res.PublishesPerAgent = (publishesAfter - publishesBefore) / n
	res.AgentCPUS = (cpuAfter - cpuBefore) / n
	res.CPUCores = map[string]float64{}
	for name, after := range splitAfter {
		res.CPUCores[name] = (after - splitBefore[name]) / res.ChurnS
	}
	res.ManagerReconciles, res.ManagerQueueWaitS, res.ManagerReconcileS = managerQueue(queueBefore, queueAfter)
	const readWait = "controller_runtime_client_consistency_wait_duration_seconds_sum"
	res.ManagerReadWaitS = sum(queueAfter, readWait) - sum(queueBefore, readWait)
	res.AgentWritesBy = writesOf(window(reqs, churnFrom, churnTo), byAgentProcess)
	res.AgentWritesPerChurnedPod = float64(res.AgentWritesBy.total()) / float64(len(changes))
	for _, p := range profiles {
		if err := topOf(ctx, p.bin, filepath.Join(r.dir, p.file)); err != nil {
			return res, err
		}
	}
	return res, nil
}

// processes are the run's processes by what they are, for their CPU time.
type processes map[string][]int

// processesOf are the API server and etcd (this process's children, as envtest started them),
// the manager, the agents and this benchmark.
func processesOf(mgr *manager, agents []*latencyAgent) processes {
	ps := processes{"manager": {mgr.cmd.Process.Pid}, "bench": {os.Getpid()}}
	for _, comm := range []string{"kube-apiserver", "etcd"} {
		if pid, err := testenv.ChildPID(comm); err == nil {
			ps[comm] = []int{pid}
		} else {
			fmt.Fprintf(os.Stderr, "bench: its CPU time is not reported: %v\n", err)
		}
	}
	for _, a := range agents {
		ps["agents"] = append(ps["agents"], a.proc.cmd.Process.Pid)
	}
	return ps
}

// cpu is each kind's CPU seconds so far.
func (ps processes) cpu() (map[string]float64, error) {
	out := map[string]float64{}
	for name, pids := range ps {
		for _, pid := range pids {
			s, err := testenv.CPUSeconds(pid)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out[name] += s
		}
	}
	return out, nil
}

// managerQueue is, between two scrapes of the manager's metrics, how many MeshService reconciles
// it made, the mean time a service waited in its queue, and the mean reconcile.
func managerQueue(before, after map[string]float64) (reconciles, queueWait, reconcile float64) {
	delta := func(series string) float64 { return sum(after, series) - sum(before, series) }
	const queue, reconciled = `workqueue_queue_duration_seconds_%s{controller="meshservice"`, `controller_runtime_reconcile_time_seconds_%s{controller="meshservice"`
	if n := delta(fmt.Sprintf(queue, "count")); n > 0 {
		queueWait = delta(fmt.Sprintf(queue, "sum")) / n
	}
	if reconciles = delta(fmt.Sprintf(reconciled, "count")); reconciles > 0 {
		reconcile = delta(fmt.Sprintf(reconciled, "sum")) / reconciles
	}
	return reconciles, queueWait, reconcile
}

// startAuditedControlPlane starts the API server and etcd as runSize does: the Service CIDR
// widened to a /16, the audit log on.
func startAuditedControlPlane(scratch, auditLog string) (*testenv.Env, error) {
	policy := filepath.Join(scratch, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	return testenv.StartWith(testenv.Options{APIServerFlags: map[string]string{
		"service-cluster-ip-range": "10.96.0.0/16",
		"audit-policy-file":        policy,
		"audit-log-path":           auditLog,
		"audit-log-format":         "json",
	}})
}

// startLatencyAgent makes the network namespaces of agent k's anchor pods (recorded in the
// registry the agent reads at start as the CNI plugin would have handed them over: only a pod
// with one gets a proxy configuration) and starts it, with its kubeconfig, in dir.
func (r *run) startLatencyAgent(ctx context.Context, bin, dir, kubeconfig string, k int, a *latencyAgent) error {
	pods := map[string]any{}
	for i, anchor := range a.anchors {
		netns := fmt.Sprintf("aether-latency-%d-%02d-%d", os.Getpid(), k, i)
		if out, err := exec.CommandContext(ctx, "ip", "netns", "add", netns).CombinedOutput(); err != nil {
			return fmt.Errorf("ip netns add %s: %w: %s", netns, err, out)
		}
		a.netns = append(a.netns, netns)
		pods[string(anchor.pod.UID)] = map[string]string{"netns": "/run/netns/" + netns}
	}
	registry, err := json.Marshal(map[string]any{"pods": pods})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "netns.json"), registry, 0o600); err != nil {
		return err
	}
	// A loopback port picked free can be taken (by another process's outgoing connection) before
	// the agent binds it: the agent then exits at once, and starts again on other ports.
	for attempt := 1; ; attempt++ {
		a.proc, err = startAgent(ctx, bin, kubeconfig, a.node, dir, filepath.Join(r.dir, a.node+".log"), model.UpstreamsDeclared, agentNiceness,
			"--debug-endpoint-times", "--mesh-dns=false", "--cni-socket="+filepath.Join(dir, "cni.sock"), "--cni-kubeconfig=")
		if err != nil {
			return err
		}
		err = a.proc.waitServing(ctx)
		if err == nil || attempt == 3 || !errors.Is(err, errPortTaken) {
			return err
		}
	}
}

// agentNiceness is the agents' scheduling priority (nice(1)) in the latency run. Twenty agents
// stand for twenty nodes, each with cores of its own, and the API server, etcd and the manager for
// a control plane on machines of its own. At the same priority, on one machine's two cores, the
// agents took five times the API server's CPU (1.51 cores to 0.30 over a 1000x10 churn) and a
// pod's deletion took the API server 8.4 s (median): every change waited on a control plane that
// no cluster starves that way. At a lower priority the agents get what the control plane leaves.
const agentNiceness = 10

// errPortTaken is waitServing's answer for an agent that exited because a port was taken.
var errPortTaken = errors.New("a port the agent was given was taken")

// waitServing waits until the agent's metrics endpoint answers; an agent that exits first is an
// error, errPortTaken when its log says a port was in use.
func (p *agentProcess) waitServing(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := get(ctx, p.metrics); err == nil {
			return nil
		}
		select {
		case <-p.done:
			if raw, err := os.ReadFile(p.log); err == nil && strings.Contains(string(raw), "address already in use") {
				return errPortTaken
			}
			return fmt.Errorf("the agent exited at start (%v); its log is %s", p.exit, p.log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent's metrics endpoint did not answer within 2 minutes; its log is %s", p.log)
		}
	}
}

// stop ends the agent and removes its network namespace.
func (a *latencyAgent) stop() {
	if a.proc != nil {
		a.proc.stop()
	}
	for _, netns := range a.netns {
		_ = exec.Command("ip", "netns", "delete", netns).Run()
	}
}

// countOnly is a since no endpoint's time reaches: the agent answers its count of endpoints held
// alone, which is all the wait for the first sync needs (a whole answer is 0.75 MB at 10 000
// endpoints, about 50 ms of CPU to encode and decode: twenty agents polled each second would
// take about one of this machine's two cores).
var countOnly = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// times reads the agent's endpoint times: its count of endpoints held, and the endpoints with a
// time at or after since.
func (a *latencyAgent) times(ctx context.Context, since time.Time) (agent.EndpointTimesAnswer, error) {
	var out agent.EndpointTimesAnswer
	body, err := get(ctx, a.proc.times+"?since="+url.QueryEscape(since.Format(time.RFC3339Nano)))
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, fmt.Errorf("reading %s: %w", a.proc.times, err)
	}
	return out, nil
}

// waitAgents polls every agent's endpoint times (since since) until done says nothing is missing
// for each, telling the size's progress every 15 s.
func waitAgents(ctx context.Context, sz size, agents []*latencyAgent, timeout time.Duration, since time.Time, done func(agent.EndpointTimesAnswer) error) error {
	deadline := time.Now().Add(timeout)
	pending := slices.Clone(agents)
	reported := time.Now()
	for {
		var why error
		var still []*latencyAgent
		for _, a := range pending {
			select {
			case <-a.proc.done:
				return fmt.Errorf("agent %s exited (%v); its log is %s", a.node, a.proc.exit, a.proc.log)
			default:
			}
			times, err := a.times(ctx, since)
			if err == nil {
				err = done(times)
			}
			if err != nil {
				still = append(still, a)
				why = fmt.Errorf("agent %s: %w (its log is %s)", a.node, err, a.proc.log)
			}
		}
		if pending = still; len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d agents not there within %s; %w", len(pending), timeout, why)
		}
		if time.Since(reported) >= 15*time.Second {
			progress(sz, "latency: %d of %d agents there; %v", len(agents)-len(pending), len(agents), why)
			reported = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func keyOf(ep *endpoint) string { return ep.key.Namespace + "/" + ep.key.Name }

// churnAt replaces each churned pod, rate of them per second, each change started on its tick:
// the old pod deleted (its agent removes its endpoint), then its replacement created with its IP
// (its agent registers it and probes it Healthy).
func (r *run) churnAt(ctx context.Context, changes []*churnChange, rate float64) error {
	ticker := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer ticker.Stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(changes))
	for _, c := range changes {
		select {
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		case <-ticker.C:
		}
		wg.Go(func() {
			c.deleted = time.Now()
			if err := deletePod(ctx, r.env.Client, c.old); err != nil {
				errs <- err
				return
			}
			c.removed = time.Now()
			err := createPod(ctx, r.env.Client, c.replacement)
			c.created = time.Now() // with its IP: what the agent registers from
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// agentCounters sums the agents' view events (by kind and event), published snapshots and CPU
// seconds.
func agentCounters(ctx context.Context, agents []*latencyAgent) (events map[string]float64, publishes, cpu float64, err error) {
	events = map[string]float64{}
	for _, a := range agents {
		series, err := scrape(ctx, a.proc.metrics)
		if err != nil {
			return nil, 0, 0, err
		}
		for s, v := range series {
			if labels, ok := strings.CutPrefix(s, "aether_agent_view_events_total{"); ok {
				events[strings.TrimSuffix(labels, "}")] += v
			}
		}
		publishes += sum(series, `aether_agent_xds_snapshots_total{result="published"`)
		seconds, err := testenv.CPUSeconds(a.proc.cmd.Process.Pid)
		if err != nil {
			return nil, 0, 0, err
		}
		cpu += seconds
	}
	return events, publishes, cpu, nil
}

// latencyFigures computes each change's latency from the agents' times: an add from the owning
// agent's Healthy answer to the latest agent's first snapshot holding it, a remove from the pod's
// deletion to the latest agent's first snapshot without it.
func latencyFigures(cfg config, sz size, changes []*churnChange, agents []*latencyAgent, times map[string]map[string]agent.EndpointTime) latencyResult {
	var adds, removes, healthy, firstAdds, firstRemoves, deleteCalls []time.Duration
	for _, c := range changes {
		newKey, oldKey := keyOf(c.replacement), keyOf(c.old)
		ready := times[agents[c.agent].node][newKey].Healthy
		var held, dropped time.Time
		firstHeld, firstDropped := times[agents[0].node][newKey].Held, times[agents[0].node][oldKey].Dropped
		for _, a := range agents {
			t := times[a.node][newKey].Held
			held, firstHeld = later(held, t), earlier(firstHeld, t)
			t = times[a.node][oldKey].Dropped
			dropped, firstDropped = later(dropped, t), earlier(firstDropped, t)
		}
		adds = append(adds, held.Sub(ready))
		removes = append(removes, dropped.Sub(c.deleted))
		healthy = append(healthy, ready.Sub(c.created))
		firstAdds = append(firstAdds, firstHeld.Sub(ready))
		firstRemoves = append(firstRemoves, firstDropped.Sub(c.deleted))
		deleteCalls = append(deleteCalls, c.removed.Sub(c.deleted))
	}
	res := latencyResult{Size: sz.String(), Agents: len(agents), Churned: len(changes), Changes: 2 * len(changes), ChurnRate: cfg.churnRate}
	res.AddP50Ms, res.AddP90Ms, res.AddP99Ms, res.AddMaxMs = quantilesMs(adds)
	res.RemoveP50Ms, res.RemoveP90Ms, res.RemoveP99Ms, res.RemoveMaxMs = quantilesMs(removes)
	res.HealthyP50Ms, _, res.HealthyP99Ms, _ = quantilesMs(healthy)
	res.AddFirstP50Ms, _, res.AddFirstP99Ms, _ = quantilesMs(firstAdds)
	res.RemoveFirstP50Ms, _, res.RemoveFirstP99Ms, _ = quantilesMs(firstRemoves)
	res.DeleteCallP50Ms, _, res.DeleteCallP99Ms, _ = quantilesMs(deleteCalls)
	return res
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// quantilesMs are the p50, p90, p99 and max of ds, in milliseconds (nearest rank).
func quantilesMs(ds []time.Duration) (p50, p90, p99, maxMs float64) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := int(q*float64(len(ds))+0.5) - 1
		return float64(ds[min(max(i, 0), len(ds)-1)].Microseconds()) / 1000
	}
	return at(0.50), at(0.90), at(0.99), at(1)
}

func latencyTable(results []latencyResult) string {
	var b strings.Builder
	b.WriteString("| size | agents | churned pods | add p50/p90/p99/max ms | remove p50/p90/p99/max ms | watch events per agent per change | agent writes per churned pod |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f / %.0f / %.0f / %.0f | %.0f / %.0f / %.0f / %.0f | %.2f | %.2f |\n", r.Size, r.Agents, r.Churned,
			r.AddP50Ms, r.AddP90Ms, r.AddP99Ms, r.AddMaxMs, r.RemoveP50Ms, r.RemoveP90Ms, r.RemoveP99Ms, r.RemoveMaxMs,
			r.WatchEventsPerAgentPerChange, r.AgentWritesPerChurnedPod)
	}
	for _, r := range results {
		names := slices.Sorted(maps.Keys(r.CPUCores))
		cores := make([]string, len(names))
		for i, n := range names {
			cores[i] = fmt.Sprintf("%s %.2f", n, r.CPUCores[n])
		}
		fmt.Fprintf(&b, "\n%s over the churn: cores used: %s; the manager: %.0f reconciles, a service waited %.2f s in its queue and was reconciled in %.2f s (means); its reads waited %.0f s in all for its cache to see its own writes\n",
			r.Size, strings.Join(cores, ", "), r.ManagerReconciles, r.ManagerQueueWaitS, r.ManagerReconcileS, r.ManagerReadWaitS)
	}
	return b.String()
}
