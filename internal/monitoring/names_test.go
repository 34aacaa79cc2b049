// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package monitoring

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	// The agent's metrics: registered in controller-runtime's registry when the packages are
	// loaded, as in the agent's binary (cmd/agent imports them).
	_ "github.com/aether-mesh/aether-operator/internal/agent"
	_ "github.com/aether-mesh/aether-operator/internal/agent/svid"
	"github.com/aether-mesh/aether-operator/internal/manager"
	_ "github.com/aether-mesh/aether-operator/internal/spireregistrar"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	_ "github.com/aether-mesh/aether-operator/internal/xdsserver"
)

// env is this package's real kube-apiserver and etcd, with config/webhook installed and pointed
// at this process: the manager the test starts answers admission.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.RunWith(m, testenv.Options{Webhooks: true}, &env)
}

// TestQueriedMetricsAreExported fails for each metric name that an alert, a promtool test's input
// series or a dashboard panel queries and that the manager and the agent do not export. The
// exported names are gathered from controller-runtime's registry, where both binaries register
// everything they serve on /metrics: the agent's packages at load, and a manager started as
// cmd/manager starts one (internal/manager's Options and Setup, leader election on), elected,
// its controllers running and its pod webhook called once, so that controller-runtime's own
// series (reconciles, workqueues, leases, webhooks) exist too. A histogram exports its name's
// _bucket, _sum and _count series.
func TestQueriedMetricsAreExported(t *testing.T) {
	startManager(t)
	exported := exportedNames(t)
	queried := queriedNames(t, readRules(t))
	for _, name := range slices.Sorted(maps.Keys(queried)) {
		if !exported[name] {
			t.Errorf("metric %s is queried by %s but neither the manager nor the agent exports it", name, strings.Join(queried[name], "; "))
		}
	}

	// The negative control: an alert querying a metric the code does not export is named.
	rules := readRules(t)
	const from, to = "aether_agent_xds_nacks_total", "aether_agent_xds_nack_total"
	renamed := false
	for g := range rules.Groups {
		for r := range rules.Groups[g].Rules {
			if e := rules.Groups[g].Rules[r].Expr; strings.Contains(e, from) {
				rules.Groups[g].Rules[r].Expr, renamed = strings.ReplaceAll(e, from, to), true
			}
		}
	}
	if !renamed {
		t.Fatalf("no alert queries %s any more: pick another metric for the negative control", from)
	}
	if where := queriedNames(t, rules)[to]; exported[to] || len(where) == 0 {
		t.Errorf("with %s renamed %s in the rules: exported %v, queried by %q; want it queried and reported as not exported", from, to, exported[to], where)
	}
}

// startManager starts a manager replica as cmd/manager does, in a namespace of its own, waits
// until it leads and serves its webhooks, and has the API server call its pod webhook once.
func startManager(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns, err := env.Namespace(ctx, "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	host, port, certDir := env.Webhook()
	opts := manager.Options(1, manager.Election{Enabled: true, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second})
	opts.Scheme = env.Scheme
	opts.Cache.DefaultNamespaces = map[string]cache.Config{ns: {}}
	opts.LeaderElectionNamespace = ns
	opts.Metrics = metricsserver.Options{BindAddress: "0"} // gathered from the registry directly
	opts.Controller.SkipNameValidation = new(true)         // go test -count=2 starts it again in this process
	opts.WebhookServer = crwebhook.NewServer(crwebhook.Options{Host: host, Port: port, CertDir: certDir})
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := manager.Setup(mgr, manager.Config{MeshDomain: "aether.internal"}); err != nil {
		t.Fatal(err)
	}
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	select {
	case <-mgr.Elected():
	case <-ctx.Done():
		t.Fatal("the manager was not elected")
	}
	// Something for the MeshService controller to queue (it watches ServiceAccounts), as a
	// cluster's objects are at a real start: a workqueue's depth is a series from its first add.
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	// Its controllers started: their reconcile and workqueue series exist from then on.
	testenv.Eventually(t, "the manager's controllers and lease export their series", func() error {
		exported := exportedNames(t)
		for _, name := range []string{"controller_runtime_reconcile_errors_total", "workqueue_depth", "leader_election_master_status"} {
			if !exported[name] {
				return fmt.Errorf("no series %s yet", name)
			}
		}
		return nil
	})
	// A managed pod, created in a dry run: admission calls the pod webhooks, nothing is stored.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Labels: map[string]string{"aether.io/managed": "true"}},
		Spec:       corev1.PodSpec{ServiceAccountName: "app", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	testenv.Eventually(t, "the pod webhook answers", func() error {
		if err := env.Client.Create(ctx, pod.DeepCopy(), client.DryRunAll); err != nil {
			return err
		}
		n, err := testenv.Counter("controller_runtime_webhook_requests_total", "webhook", "/validate--v1-pod")
		if err == nil && n == 0 {
			err = fmt.Errorf("no request of the pod webhook counted yet")
		}
		return err
	})
}

// exportedNames are the series names in controller-runtime's registry: each family's name, and a
// histogram's or summary's series names.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// up is not the code's: Prometheus writes it for every target it scrapes (1 answered, 0 not),
	// and the target-down alerts read it.
	names := map[string]bool{"up": true}
	for _, f := range families {
		names[f.GetName()] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		case dto.MetricType_SUMMARY:
			for _, s := range []string{"_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

// queriedNames are the metric names that rules' expressions, the promtool tests' series and
// expressions and the dashboard's panels query, each with where.
func queriedNames(t *testing.T, rules RuleFile) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(where, expr string) {
		names, err := MetricNames(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
		}
		for _, n := range names {
			out[n] = append(out[n], where)
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			add("rule "+r.Alert+r.Record+" in "+rulesPath, r.Expr)
		}
	}
	for _, g := range readRuleTests(t).Tests {
		for _, s := range g.InputSeries {
			add("test "+g.Name+"'s input series in "+ruleTestsPath, s.Series)
		}
		for _, e := range g.ExprTests {
			add("test "+g.Name+"'s promql_expr_test in "+ruleTestsPath, e.Expr)
		}
	}
	panels, err := DashboardQueries(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	for title, exprs := range panels {
		for _, e := range exprs {
			add("panel \""+title+"\" of "+dashboardPath, e)
		}
	}
	return out
}
