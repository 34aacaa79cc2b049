// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package manager

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// env is this package's real kube-apiserver and etcd, with config/webhook installed and pointed
// at a port of this process: the replica a test starts there answers admission.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.RunWith(m, testenv.Options{Webhooks: true}, &env)
}

// testElection is short, so that a takeover takes seconds: a lease of 5 s (whole seconds, as
// the Lease holds it), renewed every second, given up after 4 s without a renewal. The renew
// deadline is generous against this shared machine's pauses: a leader that missed it would
// hand over in the middle of a test.
var testElection = Election{Enabled: true, LeaseDuration: 5 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}

// replica is one manager, wired as cmd/manager wires it (Options, Setup), whose requests to the
// API server pass through a transport that counts its writes and can cut it off.
type replica struct {
	name string
	mgr  ctrl.Manager
	// writes counts the write requests (anything but GET) it sent: its reconciles' writes, its
	// Events, its Lease writes. A follower only reads the Lease, so a follower's count is 0.
	writes atomic.Int64
	// severed cuts it off the API server, as if its process were killed: no request leaves it
	// any more, so it neither renews nor releases the Lease, nor writes.
	severed atomic.Bool
	// probe is the address of its /healthz and /readyz.
	probe string

	cancel  context.CancelFunc
	done    chan struct{}
	stopErr error
}

// wrap is the replica's transport: it counts writes and cuts the replica off (see replica).
func (r *replica) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if r.severed.Load() {
			return nil, fmt.Errorf("replica %s is cut off the API server (killed)", r.name)
		}
		if req.Method != http.MethodGet {
			r.writes.Add(1)
		}
		return next.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// startReplica starts a replica over namespace ns (its cache, and its Lease there) with
// election, serving its webhooks on webhookPort of the envtest webhook host. It never releases
// the Lease when stopped: a test stops the leader the way kill -9 does (sever), and a release at
// cleanup would only hide a replica that did.
func startReplica(t testing.TB, name, ns string, election Election, webhookPort int) *replica {
	t.Helper()
	r := &replica{name: name, probe: freeLoopbackAddress(t), done: make(chan struct{})}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = r.wrap
	host, _, certDir := env.Webhook()
	opts := Options(2, election)
	opts.Scheme = env.Scheme
	opts.Cache.DefaultNamespaces = map[string]cache.Config{ns: {}}
	opts.LeaderElectionNamespace = ns
	opts.LeaderElectionReleaseOnCancel = false
	opts.Controller.SkipNameValidation = new(true) // two replicas in one process
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = r.probe
	opts.WebhookServer = crwebhook.NewServer(crwebhook.Options{Host: host, Port: webhookPort, CertDir: certDir})
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if skipped, err := Setup(mgr, Config{MeshDomain: "aether.internal"}); err != nil || len(skipped) > 0 {
		t.Fatalf("setting up replica %s: skipped %v: %v", name, skipped, err)
	}
	r.mgr = mgr
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.stopErr = mgr.Start(ctx)
	}()
	t.Cleanup(r.stop)
	return r
}

// stop stops the replica and waits for it.
func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// leading reports whether the replica has been elected.
func (r *replica) leading() bool {
	select {
	case <-r.mgr.Elected():
		return true
	default:
		return false
	}
}

// ready waits until the replica's /readyz answers 200.
func (r *replica) ready(t testing.TB) {
	t.Helper()
	testenv.Eventually(t, "replica "+r.name+" ready", func() error {
		resp, err := http.Get("http://" + r.probe + "/readyz")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answered %s", resp.Status)
		}
		return nil
	})
}

// freeLoopbackAddress is a loopback address with a port nothing listens on now.
func freeLoopbackAddress(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func freePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeLoopbackAddress(t))
	var n int
	_, _ = fmt.Sscan(port, &n)
	return n
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func namespace(t testing.TB, ctx context.Context) string {
	t.Helper()
	ns, err := env.Namespace(ctx, strings.ToLower(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// register creates a managed pod of ServiceAccount service with an IP, and its MeshEndpoint as
// the node agent writes it (registration.Registration): a change the MeshService controller
// reconciles by creating the service's MeshService and Service and writing their status.
func register(t testing.TB, ctx context.Context, ns, service string) {
	t.Helper()
	pod := env.CreatePod(t, ctx, ns, service+"-0", service, "node-a", testenv.PodIP(), map[string]string{portspec.AnnotationPorts: "8080,9000=tcp"})
	ep := testenv.EndpointOf(t, pod)
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatalf("creating MeshEndpoint %s: %v", ep.Name, err)
	}
}

// reconciled reports whether service's MeshService counts its one endpoint.
func reconciled(ctx context.Context, ns, service string) error {
	ms := &meshv1alpha1.MeshService{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: service}, ms); err != nil {
		return err
	}
	if ms.Status.Endpoints.Total != 1 || ms.Status.VIP == "" {
		return fmt.Errorf("MeshService %s: %d endpoints, VIP %q", service, ms.Status.Endpoints.Total, ms.Status.VIP)
	}
	return nil
}

// maxChanges is how many services churn registers at most.
const maxChanges = 8

// churn registers services one at a time, each reconciled before the next, until every one of
// replicas has sent a write or maxChanges services were registered, and returns how many it
// registered. One at a time, because a replica's controllers start a moment after it is ready:
// the changes go on until both run, whoever wins each race.
func churn(t *testing.T, ctx context.Context, ns string, replicas ...*replica) int {
	t.Helper()
	allWrote := func() bool {
		for _, r := range replicas {
			if r.writes.Load() == 0 {
				return false
			}
		}
		return true
	}
	n := 0
	for n < maxChanges && !allWrote() {
		service := fmt.Sprintf("svc-%d", n)
		register(t, ctx, ns, service)
		testenv.Eventually(t, "MeshService "+service+" reconciled", func() error { return reconciled(ctx, ns, service) })
		n++
	}
	return n
}

// electedPair starts replica a, waits until it leads, then starts replica b (its webhooks on
// webhookPort) and waits until b is ready while a leads: a leader and a follower.
func electedPair(t testing.TB, ns string, webhookPort int) (leader, follower *replica) {
	t.Helper()
	leader = startReplica(t, "a", ns, testElection, freePort(t))
	select {
	case <-leader.mgr.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("replica a, alone, was not elected within 30s")
	}
	follower = startReplica(t, "b", ns, testElection, webhookPort)
	follower.ready(t)
	if follower.leading() {
		t.Fatal("replica b was elected while replica a holds the Lease")
	}
	return leader, follower
}

// kill kills the leader as kill -9 does (sever: no renewal, no release), registers a new service
// at once and waits until it is reconciled: it returns how long after the kill the follower was
// elected, and how long after it the change was reconciled.
func kill(t testing.TB, ctx context.Context, ns string, leader, follower *replica) (election, total time.Duration) {
	t.Helper()
	killed := time.Now()
	leader.severed.Store(true)
	elected := make(chan time.Time, 1)
	go func() {
		<-follower.mgr.Elected()
		elected <- time.Now()
	}()
	register(t, ctx, ns, "after-failover")
	testenv.Eventually(t, "the follower reconciles after the leader was killed", func() error {
		return reconciled(ctx, ns, "after-failover")
	})
	reconciledAt := time.Now()
	select {
	case electedAt := <-elected:
		return electedAt.Sub(killed), reconciledAt.Sub(killed)
	default:
		t.Fatal("the change was reconciled, yet the follower was never elected")
		return 0, 0
	}
}

// TestOnlyTheLeaderReconciles runs two replicas with leader election: the leader writes
// everything, the follower sends not one write request while it follows, yet is ready and
// answers admission. Then the leader is killed (cut off the API server: it neither renews nor
// releases the Lease) and the follower reconciles the next change once the lease has run out,
// within Election.TakeoverBound. TestWithoutLeaderElectionBothReconcile is its negative control.
func TestOnlyTheLeaderReconciles(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	_, webhookPort, _ := env.Webhook()

	// The follower serves the port the API server sends admission to.
	leader, follower := electedPair(t, ns, webhookPort)

	n := churn(t, ctx, ns, leader, follower)
	if got := follower.writes.Load(); got != 0 {
		t.Errorf("the follower sent %d write requests while replica a led, over %d changes; want none", got, n)
	}
	if leader.writes.Load() == 0 {
		t.Error("the leader sent no write request, yet every service was reconciled")
	}

	// Admission is the follower's: a managed pod declaring a reserved port is denied.
	bad := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reserved",
			Labels:      map[string]string{registration.LabelManaged: registration.ManagedValue},
			Annotations: map[string]string{portspec.AnnotationPorts: "18081"}},
		Spec: corev1.PodSpec{ServiceAccountName: "reserved", Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	err := env.Client.Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "18081") {
		t.Fatalf("creating a pod declaring port 18081 through the follower's webhook: got %v, want the denial naming 18081", err)
	}
	if follower.leading() {
		t.Fatal("replica b was elected while replica a holds the Lease")
	}

	election, total := kill(t, ctx, ns, leader, follower)
	t.Logf("takeover after kill -9: elected %s after the kill, the change reconciled %s after it (lease %s, retry period %s, bound %s)",
		election.Round(time.Millisecond), total.Round(time.Millisecond), testElection.LeaseDuration, testElection.RetryPeriod, testElection.TakeoverBound())
	// Not before the lease ran out (the leader released nothing): its last renewal was at most a
	// retry period (and a request's latency) before the kill.
	if floor := testElection.LeaseDuration - 2*testElection.RetryPeriod; election < floor {
		t.Errorf("the follower led %s after the kill, before the lease could run out (at least %s): the killed leader released the Lease", election, floor)
	}
	if bound := testElection.TakeoverBound(); election > bound {
		t.Errorf("the follower led %s after the kill; client-go's election bounds it at %s", election, bound)
	}
	if follower.writes.Load() == 0 {
		t.Error("the new leader sent no write request, yet the change was reconciled")
	}

	// The killed leader, unable to renew, gave up leading within its renew deadline: in the
	// binary, main then exits.
	select {
	case <-leader.done:
		if leader.stopErr == nil || !strings.Contains(leader.stopErr.Error(), "leader election lost") {
			t.Errorf("the killed leader stopped with %v; want leader election lost", leader.stopErr)
		}
	case <-time.After(testElection.RenewDeadline + 30*time.Second):
		t.Error("the killed leader still runs, long after its renew deadline")
	}
}

// TestWithoutLeaderElectionBothReconcile is TestOnlyTheLeaderReconciles's negative control: the
// same two replicas and the same churn with the election off, and the second replica's write
// count, which the test above requires to be 0, is not: both reconcile. A test of the election that
// could not tell the difference would pass here too.
func TestWithoutLeaderElectionBothReconcile(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	off := testElection
	off.Enabled = false
	a := startReplica(t, "a", ns, off, freePort(t))
	b := startReplica(t, "b", ns, off, freePort(t))
	a.ready(t)
	b.ready(t)

	n := churn(t, ctx, ns, a, b)
	for _, r := range []*replica{a, b} {
		if r.writes.Load() == 0 {
			t.Errorf("replica %s sent no write request over %d changes without leader election; want both to reconcile", r.name, n)
		}
	}
	t.Logf("without leader election, over %d changes: replica a sent %d write requests, replica b %d", n, a.writes.Load(), b.writes.Load())
}

// TestElectionCheck: each setting client-go would refuse or misread is refused with the flag,
// the value and the fix; the defaults pass.
func TestElectionCheck(t *testing.T) {
	defaults := Election{LeaseDuration: DefaultLeaseDuration, RenewDeadline: DefaultRenewDeadline, RetryPeriod: DefaultRetryPeriod}
	cases := map[string]struct {
		change func(*Election)
		want   string // in the error; empty: no error
	}{
		"defaults":                        {change: func(*Election) {}},
		"lease of a fraction of a second": {change: func(e *Election) { e.LeaseDuration = 15500 * time.Millisecond }, want: "--leader-elect-lease-duration=15.5s: give whole seconds"},
		"no lease":                        {change: func(e *Election) { e.LeaseDuration = 0 }, want: "--leader-elect-lease-duration=0s"},
		"deadline as long as the lease":   {change: func(e *Election) { e.RenewDeadline = e.LeaseDuration }, want: "--leader-elect-renew-deadline=15s with --leader-elect-lease-duration=15s"},
		"deadline within the jitter":      {change: func(e *Election) { e.RenewDeadline = 2400 * time.Millisecond }, want: "must exceed 1.2 retry periods"},
		"no retry period":                 {change: func(e *Election) { e.RetryPeriod = 0 }, want: "--leader-elect-retry-period=0s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := defaults
			tc.change(&e)
			err := e.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if got, want := defaults.TakeoverBound(), 15*time.Second+8800*time.Millisecond; got != want {
		t.Errorf("TakeoverBound() of the defaults = %s, want %s", got, want)
	}
}

// BenchmarkTakeoverAfterKill measures a takeover as TestOnlyTheLeaderReconciles makes one, with
// testElection's timings: the medians, from the leader's kill (no renewal, no release), of the
// follower's election (elected-s) and of its reconcile of a change made right after the kill
// (reconciled-s). Each iteration is a fresh pair of replicas. Run with -benchtime=Nx.
func BenchmarkTakeoverAfterKill(b *testing.B) {
	ctx := testContext(b)
	var elected, reconciledAfter []time.Duration
	for b.Loop() {
		ns := namespace(b, ctx)
		leader, follower := electedPair(b, ns, freePort(b))
		election, total := kill(b, ctx, ns, leader, follower)
		elected, reconciledAfter = append(elected, election), append(reconciledAfter, total)
		leader.stop()
		follower.stop()
	}
	b.ReportMetric(median(elected).Seconds(), "elected-s")
	b.ReportMetric(median(reconciledAfter).Seconds(), "reconciled-s")
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}
