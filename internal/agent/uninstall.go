// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
)

// Results of removing one pod's capture table as the mesh is uninstalled, the values of
// uninstallTables' label result.
const (
	// UninstallRemoved: the pod's namespace held table inet aether, and it was deleted.
	UninstallRemoved = "removed"
	// UninstallAbsent: the namespace is gone (the pod with it) or held no such table.
	UninstallAbsent = "absent"
	// UninstallFailed: the table could not be deleted (logged with the error); the pod stays
	// captured into a proxy that is going away.
	UninstallFailed = "failed"
)

// uninstallTables counts, per pod, what the uninstall did to its capture table. The agent exits
// right after: the counts are for `aether-agent uninstall`'s summary and a scrape racing the exit;
// the log lines are the record.
var uninstallTables = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "aether_agent_uninstall_capture_tables_total",
	Help: "Pods' capture tables (table inet aether in each pod's network namespace) handled as the mesh is uninstalled from the node, by result: removed, absent (namespace or table already gone), failed (the pod stays captured).",
}, []string{resultLabel})

func init() {
	ctrlmetrics.Registry.MustRegister(uninstallTables)
	for _, r := range []string{UninstallRemoved, UninstallAbsent, UninstallFailed} {
		uninstallTables.WithLabelValues(r)
	}
}

// UninstallCount is what RemoveCapture did, pod by pod.
type UninstallCount struct {
	Removed, Absent, Failed int
}

// String is the count as a log line reads it.
func (c UninstallCount) String() string {
	return fmt.Sprintf("%d removed, %d already absent, %d failed", c.Removed, c.Absent, c.Failed)
}

// RemoveCapture restores the node's pods as the mesh is uninstalled: it deletes table inet
// aether from the network namespace of every pod in registry (each pod the CNI plugin handed
// over, the only namespaces capture ever programmed), so that their traffic goes where it is
// addressed again instead of to a node proxy that is going away. Only that table: the
// namespace's other tables (the primary CNI's, a workload's own) are not touched, nor are
// namespaces the registry does not name. Each pod is logged and counted; the error joins every
// failure, and the other pods are restored whatever one did.
//
// Only for an uninstall: an agent that restarts or is upgraded leaves every table in place, so no
// meshed pod goes uncaptured while no agent runs.
func RemoveCapture(registry *NetNS, log logr.Logger) (UninstallCount, error) {
	paths := registry.Paths()
	var count UninstallCount
	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(paths)) {
		path := paths[uid]
		removed, err := apply.RemoveTable(path)
		switch {
		case err != nil:
			count.Failed++
			uninstallTables.WithLabelValues(UninstallFailed).Inc()
			errs = append(errs, fmt.Errorf("pod %s: %w", uid, err))
			log.Error(err, "Could not remove a pod's capture table: the pod stays captured; delete it by hand (nft delete table inet aether in its network namespace) or recreate the pod",
				"podUID", uid, "netns", path)
		case removed:
			count.Removed++
			uninstallTables.WithLabelValues(UninstallRemoved).Inc()
			log.Info("Removed a pod's capture table: its traffic goes directly to its destinations again", "podUID", uid, "netns", path)
		default:
			count.Absent++
			uninstallTables.WithLabelValues(UninstallAbsent).Inc()
			log.Info("A pod's capture table was already gone", "podUID", uid, "netns", path)
		}
		if err == nil {
			registry.Forget(uid) // a second run (the uninstall subcommand after a failed stop) tries only the failures
		}
	}
	log.Info("Removed the capture of the node's pods", "table", capture.TableFamily+" "+capture.TableName, "pods", len(paths), "result", count.String())
	return count, errors.Join(errs...)
}

// UninstallIfRemoved runs when the agent stops. If its DaemonSet is going away (Uninstalling, read
// with c, then spare), it takes the mesh off the node: removePlugin first (the CNI plugin, so that
// no pod is handed over any more), then every pod's capture table (RemoveCapture), and reports
// true. Otherwise (a restart, an upgrade, a node drain, or it cannot tell) it leaves both, so
// that the next agent finds them and no meshed pod goes uncaptured meanwhile, and reports false.
// The error joins what failed; the registry then still names the pods left captured.
func UninstallIfRemoved(ctx context.Context, self Self, c, spare client.Reader, registry *NetNS, removePlugin func() error, log logr.Logger) (bool, error) {
	removed, why, err := Uninstalling(ctx, self, c, spare)
	if err != nil {
		log.Error(err, "Leaving the CNI plugin installed and the pods captured: whether the agent's DaemonSet is deleted cannot be told; if it is, run `agent uninstall` on the node (see config/agent)")
		return false, nil
	}
	if !removed {
		log.Info("Leaving the CNI plugin installed and the pods captured: meshed pods fail to start until the next agent answers", "why", why)
		return false, nil
	}
	log.Info("Uninstalling the mesh from the node: the agent's DaemonSet is going away", "why", why)
	var errs []error
	if err := removePlugin(); err != nil {
		errs = append(errs, fmt.Errorf("removing the CNI plugin: %w", err))
	} else {
		log.Info("Removed the CNI plugin from the node")
	}
	if _, err := RemoveCapture(registry, log); err != nil {
		errs = append(errs, err)
	}
	return true, errors.Join(errs...)
}
