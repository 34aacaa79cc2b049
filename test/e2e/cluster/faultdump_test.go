//go:build e2e

package cluster

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// dumpLines is how many of each component's last log lines a failed fault spec reports.
const dumpLines = 60

// reportFailure adds to a failed spec's report what the manager and the agent refused or failed
// since the spec started (the audit log's answers of 400 and above, counted) and their last log
// lines: a fault spec that times out then names the component that lost the change and why,
// which a rerun that passes cannot.
func reportFailure() {
	if !CurrentSpecReport().Failed() {
		return
	}
	since := CurrentSpecReport().StartTime
	var b strings.Builder
	failed := map[string]int{}
	for _, r := range audited(since, time.Now()) {
		if (r.User == managerUser || r.User == agentUser) && r.Code >= 400 {
			who := map[bool]string{true: "manager", false: "agent"}[r.User == managerUser]
			failed[fmt.Sprintf("%s %s %s/%s: %d", who, r.Verb, r.Resource, r.Subresource, r.Code)]++
		}
	}
	keys := slices.Sorted(maps.Keys(failed))
	fmt.Fprintf(&b, "requests answered 400 or above since the spec started (%d kinds):\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s (%d)\n", k, failed[k])
	}
	for _, component := range []struct {
		name, container string
		pods            client.MatchingLabels
	}{{"manager", "manager", managerPods}, {"agent", "agent", agentPods}} {
		var pods corev1.PodList
		if err := k8s.List(context.Background(), &pods, client.InNamespace(operatorNamespace), component.pods); err != nil {
			fmt.Fprintf(&b, "%s pods: %v\n", component.name, err)
			continue
		}
		for _, p := range pods.Items {
			// The agent logs every connection the node's Envoy carries: read enough to find the
			// control plane's own lines among them.
			tail := int64(100 * dumpLines)
			raw, err := clientset().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
				Container: component.container, TailLines: &tail, SinceTime: &metav1.Time{Time: since},
			}).DoRaw(context.Background())
			var kept []string
			for line := range strings.Lines(string(raw)) {
				if !strings.Contains(line, `"logger":"access-log"`) {
					kept = append(kept, line)
				}
			}
			kept = kept[max(0, len(kept)-dumpLines):]
			fmt.Fprintf(&b, "--- %s %s (restarts %d), its last %d lines since the spec started but the access log (err %v):\n%s\n",
				component.name, p.Name, restarts(&p), len(kept), err, strings.Join(kept, ""))
		}
	}
	b.WriteString(agentQueues())
	AddReportEntry("the control plane when the spec failed", ReportEntryVisibilityFailureOrVerbose, b.String())
}

// queueSeries are the agent's metrics that tell a stalled controller from a slow one: each
// work queue's depth and its oldest unfinished work, the workers busy, the reconciles that ended
// in an error, and how long reads waited for the cache to see the agent's own writes
// (controller-runtime's read-your-writes consistency blocks a read until it has).
var queueSeries = regexp.MustCompile(`(?m)^(workqueue_depth|workqueue_longest_running_processor_seconds|workqueue_unfinished_work_seconds|controller_runtime_active_workers|controller_runtime_reconcile_errors_total|controller_runtime_client_consistency_wait_duration_seconds_(?:count|sum))(\{[^}]*\})? \S+$`)

// agentQueues is the agent's queueSeries, scraped now, or why they could not be.
func agentQueues() (out string) {
	defer func() {
		if failure := recover(); failure != nil {
			out = fmt.Sprintf("--- agent work queues: not scraped: %v\n", failure)
		}
	}()
	g := NewGomega(func(message string, _ ...int) { panic(message) })
	series := queueSeries.FindAllString(string(scrapeAgent(g, nodeIP())), -1)
	return "--- agent work queues:\n" + strings.Join(series, "\n") + "\n"
}

// restarts sums the restarts of the pod's containers.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}
