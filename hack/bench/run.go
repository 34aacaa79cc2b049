// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// run is one size's control plane, clients and workload.
type run struct {
	cfg           config
	size          size
	dir           string // this size's artefacts
	env           *testenv.Env
	work          *workload
	agents        []client.Client // agent i speaks for node i
	managerClient client.Client   // the manager's user and client settings, for its floors
	managerKube   string          // the manager's kubeconfig
	conflicts     atomic.Int64    // the agents' status patches that lost to the manager's
}

// driftSpan is how long a size may run before its floors are measured a second time.
const driftSpan = 2 * time.Minute

// quiet is how long the manager must do nothing, with nothing queued, in a worker or held back
// by its batching window, to count as idle: longer than the 1 s after which it requeues a
// reconcile that lost a race (work no gauge shows), with room for a watch event's delivery.
func (r *run) quiet() time.Duration { return 1500 * time.Millisecond }

func runSize(ctx context.Context, cfg config, sz size, built func() (string, error)) (res result, err error) {
	r := &run{cfg: cfg, size: sz, dir: filepath.Join(cfg.out, sz.String()), work: newWorkload(sz, cfg.writers)}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return res, err
	}
	for _, stale := range []string{"cpu.pprof", "heap.pprof"} { // an earlier run's: writeTops must not take them
		if err := os.Remove(filepath.Join(r.dir, stale)); err != nil && !os.IsNotExist(err) {
			return res, err
		}
	}
	scratch, err := os.MkdirTemp("", "aether-bench-")
	if err != nil {
		return res, err
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	auditLog, policy := filepath.Join(scratch, "audit.log"), filepath.Join(scratch, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return res, err
	}
	r.env, err = testenv.StartWith(testenv.Options{APIServerFlags: map[string]string{
		// envtest's /24 holds ≈ 250 ClusterIPs; the floor and the change need one per service.
		"service-cluster-ip-range": "10.96.0.0/16",
		"audit-policy-file":        policy,
		"audit-log-path":           auditLog,
		"audit-log-format":         "json",
	}})
	if err != nil {
		return res, err
	}
	defer func() {
		// The profiles' tops are written while the control plane stops, when nothing is measured.
		tops := make(chan error, 1)
		go func() { tops <- r.writeTops(ctx) }()
		// A slow stop on a loaded machine is no failure of the run: say so and go on.
		if stopErr := r.env.Stop(); stopErr != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: stopping the control plane: %v\n", sz, stopErr)
		}
		if topsErr := <-tops; err == nil {
			err = topsErr
		}
	}()
	if err := r.clients(ctx); err != nil {
		return res, err
	}
	bin, err := built()
	if err != nil {
		return res, err
	}

	progress(sz, "measuring the write floors (no controller running)")
	floors, err := r.floors(ctx, 1)
	if err != nil {
		return res, err
	}
	r.report(floors)
	floorsAt := time.Now()
	certDir := filepath.Join(scratch, "webhook-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return res, err
	}
	if err := writeServingCert(certDir); err != nil {
		return res, err
	}
	trackCtx, stopTracking := context.WithCancel(ctx)
	defer stopTracking() // before the control plane stops: an open watch holds up its shutdown
	mgr, track, err := r.startAmidPods(ctx, trackCtx, bin, certDir, auditLog)
	if err != nil {
		return res, err
	}
	defer func() { mgr.stop() }()

	progress(sz, "converging: %d agents register %d endpoints", cfg.writers, sz.services*sz.endpoints)
	conv, err := r.converge(ctx, mgr, track, floorSeconds(floors))
	if err != nil {
		return res, err
	}

	progress(sz, "resync: restarting the manager on the converged system")
	mgr.stop()
	resyncFrom := time.Now()
	mgr, err = startManager(ctx, bin, r.managerKube, certDir, filepath.Join(r.dir, "manager-resync.log"), cfg)
	if err != nil {
		return res, err
	}
	if err := mgr.waitIdle(ctx, r.quiet(), 5*time.Minute, sz.services); err != nil {
		return res, err
	}
	resyncTo := time.Now()
	if _, err := track.wait(ctx, time.Second); err != nil {
		return res, fmt.Errorf("after the resync: %w", err)
	}

	progress(sz, "churn: rolling 10%% of the endpoints")
	churnFrom := time.Now()
	changed, churnAt, err := r.churn(ctx, track, floorSeconds(floors))
	if err != nil {
		return res, err
	}
	if err := mgr.waitIdle(ctx, r.quiet(), 5*time.Minute, 0); err != nil {
		return res, err
	}
	churnTo := time.Now()
	resyncErrors, _ := mgr.reconcileErrors()
	laterRaces, err := mgr.races(ctx)
	if err != nil {
		return res, err
	}
	var agentRan *agentRun
	if r.agentEnabled() {
		progress(sz, "agent: one agent process registers %d pods on its node, then rests %s", agentNodePods, cfg.agentRest)
		a, err := r.measureAgent(ctx, mgr, scratch)
		if err != nil {
			return res, fmt.Errorf("agent: %w", err)
		}
		agentRan = &a
	}
	mgr.stop()
	stopTracking()

	// The floor again, the manager stopped: the machine's load drifts over a long run, and the
	// ratio then compares with the mean of the two. A run shorter than driftSpan (100x10 takes
	// about a minute) keeps its first round.
	if time.Since(floorsAt) > driftSpan {
		progress(sz, "measuring the write floors again (no controller running)")
		after, err := r.floors(ctx, 2)
		if err != nil {
			return res, err
		}
		if err := r.clearFloor(ctx); err != nil {
			return res, err
		}
		r.report(after)
		floors = append(floors, after...)
	}

	reqs, err := readAudit(auditLog)
	if err != nil {
		return res, err
	}
	res = r.result(floors, conv, reqs, resyncErrors, spans{
		converge: [2]time.Time{conv.from, conv.idle}, resync: [2]time.Time{resyncFrom, resyncTo}, churn: [2]time.Time{churnFrom, churnTo},
		churnConverged: churnAt, changed: changed,
	})
	res.RacesConverging, res.RacesLater = conv.races, laterRaces
	if agentRan != nil {
		res.Agent = agentRan.figures(reqs)
	}
	return res, nil
}

// writeTops writes `go tool pprof -top` beside each profile the convergence span took.
func (r *run) writeTops(ctx context.Context) error {
	for _, p := range []struct {
		file  string
		extra []string
	}{{"cpu.pprof", nil}, {"heap.pprof", []string{"-sample_index=inuse_space"}}} {
		path := filepath.Join(r.dir, p.file)
		if _, err := os.Stat(path); err != nil {
			continue // the run ended before it was taken
		}
		if err := topOf(ctx, filepath.Join(r.cfg.out, "manager"), path, p.extra...); err != nil {
			return err
		}
	}
	return nil
}

// startAmidPods clears the floor's objects and makes the pods while the manager starts (once
// the floor's objects are gone: it must never see them), as in a cluster whose pods come and go:
// it watches them and has nothing to write until their endpoints are registered, which the audit
// log is checked for. It returns the manager, idle, and the tracker of the services' state.
func (r *run) startAmidPods(ctx, trackCtx context.Context, bin, certDir, auditLog string) (*manager, *tracker, error) {
	sz := r.size
	progress(sz, "creating %d pods with their IPs while the manager starts", sz.services*sz.endpoints)
	setUp := make(chan error, 1)
	go func() { setUp <- r.setup(ctx) }()
	if err := r.clearFloor(ctx); err != nil {
		return nil, nil, errors.Join(err, <-setUp)
	}
	track := newTracker()
	if err := track.start(trackCtx, r.env.Config); err != nil {
		return nil, nil, errors.Join(err, <-setUp)
	}
	track.expect(r.work.expected())

	started := time.Now()
	mgr, err := startManager(ctx, bin, r.managerKube, certDir, filepath.Join(r.dir, "manager.log"), r.cfg)
	if err != nil {
		return nil, nil, errors.Join(err, <-setUp)
	}
	err = <-setUp
	if err == nil {
		err = mgr.waitIdle(ctx, r.quiet(), 2*time.Minute, sz.services)
	}
	if err == nil {
		// (The floors wrote as the manager's user too, before it started.)
		var early []request
		if early, err = readAudit(auditLog); err == nil {
			if written := writesOf(window(early, started, time.Now()), byManager); written.total() > 0 {
				err = fmt.Errorf("the manager wrote before any endpoint was registered (%s); its log is %s", written, mgr.log)
			}
		}
	}
	if err != nil {
		mgr.stop()
		return nil, nil, err
	}
	return mgr, track, nil
}

func progress(sz size, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: %s: %s %s\n", sz, time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// clients makes the manager's user (bound to config/rbac's manager-role) and the agents'
// identity (config/admission's policy, the agent's role), and the clients that speak as them.
func (r *run) clients(ctx context.Context) error {
	if _, err := testenv.InstallNodeAuthority(r.env); err != nil {
		return err
	}
	if out, stderr, err := r.env.Kubectl(ctx, "apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml")); err != nil {
		return fmt.Errorf("kubectl apply config/rbac/role.yaml: %w\n%s%s", err, out, stderr)
	}
	if err := r.env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: managerUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "manager-role"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: managerUser}},
	}); err != nil {
		return err
	}
	var err error
	if r.managerKube, err = r.env.UserKubeconfig(managerUser); err != nil {
		return err
	}
	managerConfig, err := clientcmd.BuildConfigFromFlags("", r.managerKube)
	if err != nil {
		return err
	}
	managerConfig.QPS, managerConfig.Burst = float32(r.cfg.qps), r.cfg.burst // as the manager sets them
	if r.managerClient, err = client.New(managerConfig, client.Options{Scheme: r.env.Scheme}); err != nil {
		return err
	}
	for w := range r.cfg.writers {
		agentConfig := r.env.AgentConfig(nodeName(w))
		agentConfig.QPS = -1 // the agent's: controller-runtime's default, no client-side limit
		c, err := client.New(agentConfig, client.Options{Scheme: r.env.Scheme})
		if err != nil {
			return err
		}
		r.agents = append(r.agents, c)
	}
	return nil
}

// setup creates the namespaces, one ServiceAccount per service, and every pod with its IP.
func (r *run) setup(ctx context.Context) error {
	for _, ns := range r.work.namespaces() {
		if err := r.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := parallel(ctx, spread(r.work.services, 16), func(ctx context.Context, _ int, svc types.NamespacedName) error {
		return r.env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}})
	}); err != nil {
		return err
	}
	var all []*endpoint
	for _, eps := range r.work.endpoints {
		all = append(all, eps...)
	}
	return parallel(ctx, spread(all, 32), func(ctx context.Context, _ int, ep *endpoint) error {
		return createPod(ctx, r.env.Client, ep)
	})
}

// convergence is what the convergence span measured.
type convergence struct {
	from, agentsDone time.Time // the agents' first write, and when their last one returned
	converged, idle  time.Time
	cpuS, peakRSSMiB float64
	reconcileErrors  int
	races            tally
}

// converge has the agents register every endpoint, profiling the manager meanwhile, and waits
// until every service is converged and the manager is idle.
func (r *run) converge(ctx context.Context, mgr *manager, track *tracker, floorS float64) (convergence, error) {
	var c convergence
	cpuBefore, err := mgr.cpuSeconds()
	if err != nil {
		return c, err
	}
	profiler := mgr.profileCPU(ctx)
	c.from = time.Now()
	if err := parallel(ctx, r.work.byWriter(func(*endpoint) bool { return true }), func(ctx context.Context, w int, ep *endpoint) error {
		_, err := r.agent(w).register(ctx, ep.pod)
		return err
	}); err != nil {
		return c, err
	}
	c.agentsDone = time.Now()
	if c.converged, err = track.wait(ctx, timeoutFor(floorS)); err != nil {
		return c, err
	}
	if err := mgr.waitIdle(ctx, r.quiet(), 5*time.Minute, 0); err != nil {
		return c, err
	}
	c.idle = time.Now().Add(-r.quiet()) // idle since then; later requests are not convergence's
	cpuAfter, err := mgr.cpuSeconds()
	if err != nil {
		return c, err
	}
	c.cpuS = cpuAfter - cpuBefore
	if err := profiler.finish(filepath.Join(r.dir, "cpu.pprof")); err != nil {
		return c, err
	}
	if err := mgr.heapProfile(ctx, filepath.Join(r.dir, "heap.pprof")); err != nil {
		return c, err
	}
	if c.peakRSSMiB, err = mgr.peakRSSMiB(); err != nil {
		return c, err
	}
	if c.races, err = mgr.races(ctx); err != nil {
		return c, err
	}
	c.reconcileErrors, err = mgr.reconcileErrors()
	return c, err
}

func (r *run) agent(w int) *agentWriter { return &agentWriter{c: r.agents[w], conflicts: &r.conflicts} }

// timeoutFor bounds a wait for convergence: generous beside the floor, never endless.
func timeoutFor(floorS float64) time.Duration {
	return 3*time.Minute + time.Duration(10*floorS*float64(time.Second))
}

// churn replaces every tenth endpoint as a rolling update does: the old pod is deleted and its
// agent removes its endpoint; a new pod (new name, new IP) starts on the same node and its
// agent registers it, Healthy; its health then flaps once (Unhealthy, Healthy). It returns how
// many endpoints changed and when every service was converged again.
func (r *run) churn(ctx context.Context, track *tracker, floorS float64) (int, time.Time, error) {
	type change struct{ old, replacement *endpoint }
	perWriter := make([][]change, r.cfg.writers)
	changed := 0
	for s := range r.work.endpoints {
		for j, ep := range r.work.endpoints[s] {
			if (s*r.size.endpoints+j)%10 != 0 {
				continue
			}
			replacement := &endpoint{key: types.NamespacedName{Namespace: ep.key.Namespace, Name: ep.key.Name + "-r1"},
				svc: ep.svc, writer: ep.writer, ip: r.work.newIP()}
			perWriter[ep.writer] = append(perWriter[ep.writer], change{ep, replacement})
			r.work.endpoints[s][j] = replacement
			changed++
		}
	}
	track.expect(r.work.expected())
	err := parallel(ctx, perWriter, func(ctx context.Context, w int, c change) error {
		agent := r.agent(w)
		if err := deletePod(ctx, r.env.Client, c.old); err != nil {
			return err
		}
		if err := agent.remove(ctx, c.old.key); err != nil {
			return err
		}
		if err := createPod(ctx, r.env.Client, c.replacement); err != nil {
			return err
		}
		ep, err := agent.register(ctx, c.replacement.pod)
		if err != nil {
			return err
		}
		if ep, err = agent.setHealth(ctx, ep, meshv1alpha1.HealthUnhealthy); err != nil {
			return err
		}
		_, err = agent.setHealth(ctx, ep, meshv1alpha1.HealthHealthy)
		return err
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	at, err := track.wait(ctx, timeoutFor(floorS))
	return changed, at, err
}

// floorSeconds is Σ over the kinds of (required writes ÷ floor rate), averaged over the rounds
// measured.
func floorSeconds(floors []floor) float64 {
	total, rounds := 0.0, map[int]bool{}
	for _, f := range floors {
		total += float64(f.Required) / f.WritesPerS
		rounds[f.Round] = true
	}
	return total / float64(max(1, len(rounds)))
}

func (r *run) report(floors []floor) {
	for _, f := range floors {
		progress(r.size, "floor of %s: %.0f writes/s (%d at %d at once)", f.Kind, f.WritesPerS, f.Sampled, f.Concurrency)
	}
}

// spans are the measured spans of one size.
type spans struct {
	converge, resync, churn [2]time.Time
	churnConverged          time.Time
	changed                 int
}

// result computes one size's figures.
func (r *run) result(floors []floor, conv convergence, reqs []request, resyncErrors int, s spans) result {
	e, n := r.size.services*r.size.endpoints, r.size.services
	converging := window(reqs, s.converge[0], s.converge[1])
	resyncing := window(reqs, s.resync[0], s.resync[1])
	churning := window(reqs, s.churn[0], s.churn[1])
	res := result{
		Size:                  r.size.String(),
		FloorS:                floorSeconds(floors),
		Floors:                floors,
		ConvergenceS:          conv.converged.Sub(conv.from).Seconds(),
		AgentsS:               conv.agentsDone.Sub(conv.from).Seconds(),
		RequiredWrites:        e + 3*n,
		AgentRequiredWrites:   3 * e,
		AgentWrites:           writesOf(converging, byAgent).total(),
		ManagerWritesBy:       writesOf(converging, byManager),
		ManagerReadsBy:        readsOf(converging, byManager),
		OtherWrites:           othersWrites(append(append(converging, resyncing...), churning...)),
		ManagerCPUS:           conv.cpuS,
		ManagerPeakRSSMiB:     conv.peakRSSMiB,
		ResyncWritesBy:        writesOf(resyncing, byManager),
		ResyncS:               s.resync[1].Sub(s.resync[0]).Seconds() - r.quiet().Seconds(),
		ChurnChangedEndpoints: s.changed,
		ChurnS:                s.churnConverged.Sub(s.churn[0]).Seconds(),
		ChurnWritesBy:         writesOf(churning, byManager),
		Settings: settings{AgentWriters: r.cfg.writers, Workers: r.cfg.workers, QPS: r.cfg.qps, Burst: r.cfg.burst, Window: r.cfg.window.String(),
			ManagerArgs: r.cfg.managerArgs},
	}
	res.ManagerReconcileErrors = conv.reconcileErrors + resyncErrors
	res.AgentConflicts = int(r.conflicts.Load())
	if spread := spreads(converging, r.work.serviceOf); len(spread) > 0 {
		res.AgentSpreadMedianS = spread[len(spread)/2].Seconds()
		res.AgentSpreadP90S = spread[len(spread)*9/10].Seconds()
	}
	res.ManagerWrites = res.ManagerWritesBy.total()
	res.ResyncWrites = res.ResyncWritesBy.total()
	res.ChurnManagerWrites = res.ChurnWritesBy.total()
	res.FloorWritesPerS = float64(res.RequiredWrites+res.AgentRequiredWrites) / res.FloorS
	res.ConvergenceRatio = res.ConvergenceS / res.FloorS
	res.WritesPerRequiredWrite = float64(res.ManagerWrites) / float64(res.RequiredWrites)
	if s.changed > 0 {
		res.ChurnWritesPerChangedEndpoint = float64(res.ChurnManagerWrites) / float64(s.changed)
	}
	return res
}
