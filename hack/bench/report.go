// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
)

// result is one size's figures, as written to convergence.json. The first nine keys are the
// issue's; a script compares runs by them.
type result struct {
	// Size is "<services>x<endpoints per service>".
	Size string `json:"size"`
	// FloorWritesPerS is the change's required writes (the agents' and the manager's) divided by
	// FloorS: the rate at which the API server alone would take the whole change.
	FloorWritesPerS float64 `json:"floor_writes_per_s"`
	// ConvergenceS is from the agents' first write to the moment every service is converged.
	ConvergenceS float64 `json:"convergence_s"`
	// ConvergenceRatio is ConvergenceS ÷ FloorS (target ≤ 1.3).
	ConvergenceRatio float64 `json:"convergence_ratio"`
	// RequiredWrites is the manager's required writes: one Verified per endpoint, and per service
	// one MeshService create, one Service create and one status write.
	RequiredWrites int `json:"required_writes"`
	// ManagerWrites is every write request the manager made from the agents' first write until it
	// was idle after convergence, whatever the answer (conflicts and refusals count).
	ManagerWrites int `json:"manager_writes"`
	// WritesPerRequiredWrite is ManagerWrites ÷ RequiredWrites (target ≤ 1.05).
	WritesPerRequiredWrite float64 `json:"writes_per_required_write"`
	// ResyncWrites is the writes of a restarted manager on the converged system (target 0).
	ResyncWrites int `json:"resync_writes"`
	// ChurnWritesPerChangedEndpoint is the manager's writes during the churn ÷ the endpoints
	// changed (target ≤ 1.1; the one required is the new endpoint's Verified).
	ChurnWritesPerChangedEndpoint float64 `json:"churn_writes_per_changed_endpoint"`

	// FloorS is Σ over the kinds of write of (required writes of the kind ÷ its floor rate), the
	// mean of the floor measured before the manager ran and after it stopped.
	FloorS float64 `json:"floor_s"`
	// Floors is each kind's floor, in both rounds.
	Floors []floor `json:"floors"`
	// AgentsS is how long the agents took to write the change, the manager running meanwhile.
	AgentsS float64 `json:"agents_s"`
	// AgentConflicts counts the agents' status patches that lost to another writer (the manager's
	// Verified) and were retried, over the whole run.
	AgentConflicts int `json:"agent_conflicts"`
	// AgentSpreadMedianS and AgentSpreadP90S are the median and 90th percentile, over the
	// services, of the time from the first to the last agent write to a service's endpoints:
	// how far apart one service's changes arrive (what a batching window can merge).
	AgentSpreadMedianS float64 `json:"agent_spread_median_s"`
	AgentSpreadP90S    float64 `json:"agent_spread_p90_s"`
	// AgentRequiredWrites is the agents' writes of the change: create, Registered, Healthy.
	AgentRequiredWrites int `json:"agent_required_writes"`
	// AgentWrites is the agents' write requests in the convergence span (conflict retries count).
	AgentWrites int `json:"agent_writes"`
	// ManagerWritesBy breaks ManagerWrites down by "verb resource code".
	ManagerWritesBy tally `json:"manager_writes_by"`
	// ManagerReadsBy counts the manager's reads (mostly its informers' list and watch).
	ManagerReadsBy tally `json:"manager_reads_by"`
	// OtherWrites counts writes to the mesh's objects and Services by anyone but the manager and
	// the agents during the measured spans, by user (expected: none).
	OtherWrites tally `json:"other_writes"`
	// RacesConverging and RacesLater are the manager's quiet requeues after a race with another
	// writer or its own cache (conflict, not_found, already_exists), during convergence and in
	// the restarted manager (resync and churn).
	RacesConverging tally `json:"races_converging"`
	RacesLater      tally `json:"races_resync_and_churn"`
	// ManagerReconcileErrors counts "Reconciler error" lines in the manager's logs.
	ManagerReconcileErrors int `json:"manager_reconcile_errors"`
	// ManagerCPUS is the manager's CPU time during convergence; ManagerPeakRSSMiB its peak RSS.
	ManagerCPUS       float64 `json:"manager_cpu_s"`
	ManagerPeakRSSMiB float64 `json:"manager_peak_rss_mib"`
	// ResyncS is from the restarted manager's start to its being idle.
	ResyncS        float64 `json:"resync_s"`
	ResyncWritesBy tally   `json:"resync_writes_by"`
	// ChurnChangedEndpoints, ChurnS and ChurnManagerWrites describe the rolling update.
	ChurnChangedEndpoints int     `json:"churn_changed_endpoints"`
	ChurnS                float64 `json:"churn_s"`
	ChurnManagerWrites    int     `json:"churn_manager_writes"`
	ChurnWritesBy         tally   `json:"churn_writes_by"`
	// Agent is one real agent's memory, CPU and requests (measured at the run's last size only;
	// null at the others and with BENCH_AGENT_REST=0).
	Agent *agentFigures `json:"agent"`
	// Settings are what this run used.
	Settings settings `json:"settings"`
	// WallS is how long this size took, setup included.
	WallS float64 `json:"wall_s"`
}

// agentFigures is one real agent's row (issue 15, Deliver 1, "agent"): the agent binary on a
// node of agentNodePods pods, after the size converged (the cluster holding ClusterEndpoints).
type agentFigures struct {
	ClusterEndpoints int `json:"cluster_endpoints"`
	NodePods         int `json:"node_pods"`
	// RSSMiB is its VmRSS at the end of the rest window (target < 150 MiB at 10 000 cluster
	// endpoints); PeakRSSMiB its VmHWM, the initial lists' decoding included.
	RSSMiB     float64 `json:"rss_mib"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// SyncS is from its start until its view held every MeshService and MeshEndpoint and its
	// node's endpoints were all registered and Healthy; SyncCPUS its CPU time until then.
	SyncS        float64 `json:"sync_s"`
	SyncCPUS     float64 `json:"sync_cpu_s"`
	SyncWritesBy tally   `json:"sync_writes_by"`
	SyncReadsBy  tally   `json:"sync_reads_by"`
	// RestS is the rest window (BENCH_AGENT_REST), the manager idle and nothing changing;
	// RestCPUS the agent's CPU time in it (its health probes of its pods included).
	RestS    float64 `json:"rest_s"`
	RestCPUS float64 `json:"rest_cpu_s"`
	// RequestsPerMin and WritesPerMinAtRest are its API requests per minute in the rest window
	// (from the audit log, by its user); RestWrites (target 0) and the breakdowns by verb.
	RequestsPerMin     float64 `json:"requests_per_min"`
	WritesPerMinAtRest float64 `json:"writes_per_min_at_rest"`
	RestWrites         int     `json:"rest_writes"`
	RestWritesBy       tally   `json:"rest_writes_by"`
	RestReadsBy        tally   `json:"rest_reads_by"`
}

type settings struct {
	AgentWriters int      `json:"agent_writers"`
	Workers      int      `json:"manager_max_concurrent_reconciles"`
	QPS          float64  `json:"manager_kube_api_qps"`
	Burst        int      `json:"manager_kube_api_burst"`
	Window       string   `json:"manager_batch_window"`
	ManagerArgs  []string `json:"manager_args,omitempty"`
}

// table renders the results as markdown: one row per figure, one column per size.
func table(results []result) string {
	var b strings.Builder
	b.WriteString("\n| figure | target |")
	for _, r := range results {
		fmt.Fprintf(&b, " %s |", r.Size)
	}
	b.WriteString("\n|---|---|")
	for range results {
		b.WriteString("---|")
	}
	row := func(name, target string, cell func(r result) string) {
		fmt.Fprintf(&b, "\n| %s | %s |", name, target)
		for _, r := range results {
			fmt.Fprintf(&b, " %s |", cell(r))
		}
	}
	row("floor: required writes ÷ Σ(writes of a kind ÷ its floor)", "", func(r result) string {
		return fmt.Sprintf("%.0f writes/s (%.1f s)", r.FloorWritesPerS, r.FloorS)
	})
	row("convergence (the agents' writes done after)", "", func(r result) string {
		return fmt.Sprintf("%.1f s (%.1f s)", r.ConvergenceS, r.AgentsS)
	})
	row("convergence ÷ floor", "≤ 1.3", func(r result) string { return fmt.Sprintf("%.2f", r.ConvergenceRatio) })
	row("manager writes ÷ required", "≤ 1.05", func(r result) string {
		return fmt.Sprintf("%.2f (%d ÷ %d)", r.WritesPerRequiredWrite, r.ManagerWrites, r.RequiredWrites)
	})
	row("agent writes (required); a service's writes spread over, median and p90", "", func(r result) string {
		return fmt.Sprintf("%d (%d); %.1f s, %.1f s", r.AgentWrites, r.AgentRequiredWrites, r.AgentSpreadMedianS, r.AgentSpreadP90S)
	})
	row("resync writes", "0", func(r result) string { return fmt.Sprintf("%d (idle after %.1f s)", r.ResyncWrites, r.ResyncS) })
	row("churn: manager writes per changed endpoint", "≤ 1.1", func(r result) string {
		return fmt.Sprintf("%.2f (%d ÷ %d, %.1f s)", r.ChurnWritesPerChangedEndpoint, r.ChurnManagerWrites, r.ChurnChangedEndpoints, r.ChurnS)
	})
	row("manager CPU, peak RSS (convergence)", "", func(r result) string {
		return fmt.Sprintf("%.1f s, %.0f MiB", r.ManagerCPUS, r.ManagerPeakRSSMiB)
	})
	row("manager reconcile errors; races requeued", "0", func(r result) string {
		return fmt.Sprintf("%d; %d, %d later", r.ManagerReconcileErrors, r.RacesConverging.total(), r.RacesLater.total())
	})
	row("writes by others to what the manager owns", "0", func(r result) string { return fmt.Sprint(r.OtherWrites.total()) })
	row("agent (110 pods on its node): RSS (peak) at the cluster's endpoints; writes/min at rest", "< 150 MiB at 10 000; 0", func(r result) string {
		if r.Agent == nil {
			return "— (measured at 10 000 endpoints; BENCH_AGENT_REST=60s asks for it at any size)"
		}
		return fmt.Sprintf("%.0f MiB (%.0f) at %d; %.1f", r.Agent.RSSMiB, r.Agent.PeakRSSMiB, r.Agent.ClusterEndpoints, r.Agent.WritesPerMinAtRest)
	})
	row("agent: sync (CPU); CPU at rest; requests/min at rest", "", func(r result) string {
		if r.Agent == nil {
			return "—"
		}
		return fmt.Sprintf("%.1f s (%.1f s); %.1f s in %.0f s; %.1f", r.Agent.SyncS, r.Agent.SyncCPUS, r.Agent.RestCPUS, r.Agent.RestS, r.Agent.RequestsPerMin)
	})
	b.WriteString("\n\nManager writes by verb, resource and answer:\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- %s convergence: %s\n", r.Size, r.ManagerWritesBy)
		fmt.Fprintf(&b, "- %s churn: %s\n", r.Size, r.ChurnWritesBy)
		if r.ResyncWrites > 0 {
			fmt.Fprintf(&b, "- %s resync: %s\n", r.Size, r.ResyncWritesBy)
		}
		if r.Agent != nil {
			fmt.Fprintf(&b, "- %s agent at rest: writes: %s; reads: %s\n", r.Size, orNone(r.Agent.RestWritesBy), orNone(r.Agent.RestReadsBy))
			fmt.Fprintf(&b, "- %s agent's sync: writes: %s; reads: %s\n", r.Size, orNone(r.Agent.SyncWritesBy), orNone(r.Agent.SyncReadsBy))
		}
		if len(r.OtherWrites) > 0 {
			fmt.Fprintf(&b, "- %s writes by others: %s\n", r.Size, r.OtherWrites)
		}
	}
	return b.String()
}

func orNone(t tally) string {
	if len(t) == 0 {
		return "none"
	}
	return t.String()
}
