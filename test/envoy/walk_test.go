// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/capture/apply"
	"github.com/aether-mesh/aether-operator/internal/demand"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/testroot"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// TestLiveTrafficAgreesWithTableAndSimulator sends the dial-surface walk's traffic corpus
// (xdswalk: every row of every service's dial surface, by every name that holds, from every local
// client, as HTTP/1.1, HTTP/1.0, h2c, TLS with and without SNI and ALPN, WebSocket, a late first
// byte and a server-first client) through live Envoys to real servers, and compares what each
// client saw with the expectation table (xdswalk.Table, written from the workload page and
// Envoy's documented behaviour) and with the simulator's prediction (xdssim, through
// xdswalk.Predict). Any disagreement fails and prints all three.
//
// Every pod of the scenario, on any node, is a network namespace of the fabric (fabric_test.go)
// serving its declared ports in their protocols (hack/testapp), and every node that runs one has
// its Envoy, served by the agent's xDS server that node's own build (xdstest.Scenario.MeshOn) and
// SDS secrets from one test CA: a hop to a pod on another node arrives, over mTLS, at that node's
// Envoy, whose inbound listener delivers it, so an endpoint the load balancer picks is reached
// wherever it runs and the simulator's choice of endpoints is checked too. The clients are this
// node's pods, whose capture rules (capture.Build) are programmed by the agent's applier
// (internal/capture/apply), as the agent programs them.
//
// Connections the same on the wire (one client, one shape, one destination, one Host and SNI)
// are sent once and judged for each row that makes them: the server-first client of a port makes
// the same connection for every name of the service.
//
// A node that carries its declared upstreams only (declared-upstreams, on-demand) is answered on
// demand as the agent answers (answerDemand), and the simulator likewise
// (xdswalk.FetchAsTheAgent). Left out: uds (its pod serves every port on one Unix socket, which a
// stand-in application cannot demultiplex by port as the workload does) and access-policy (the
// table says where a dial lands, not whether the destination's policies admit its caller:
// TestAccessPolicyEnforcedLive walks it, against authz's reading).
func TestLiveTrafficAgreesWithTableAndSimulator(t *testing.T) {
	scenarios := xdstest.Scenarios()
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		if liveWalkLeavesOut[name] {
			continue
		}
		t.Run(name, func(t *testing.T) {
			opts := meshOptions{}
			if scenarios[name].HopHTTP3 {
				// SVIDs that carry the HTTP/3 hop's names, so that the hop rides HTTP/3 (hop_http3_test.go).
				opts.svidDNS = hopDNSNames
			}
			lm := startMeshWith(t, scenarios[name], opts)
			start := time.Now()
			r := lm.walk(t, nil)
			t.Logf("%s, in %s", r, time.Since(start).Round(time.Millisecond))
			if r.cases == 0 {
				t.Fatal("no connection was walked: the test proves nothing")
			}
		})
	}
}

// liveWalkLeavesOut are the scenarios TestLiveTrafficAgreesWithTableAndSimulator does not run,
// and why (its comment).
var liveWalkLeavesOut = map[string]bool{"uds": true, "access-policy": true}

// liveMesh is a scenario running live: its fabric, an Envoy per node that runs a pod of it, and
// the simulator of each node's resources.
type liveMesh struct {
	// mesh is this node's model (its pods' namespaces filled in); its pods are the clients.
	mesh   model.Mesh
	fabric *fabric
	nodes  map[string]*node
	sims   map[string]*xdssim.Sim
	// filtersTimeout is the capture listener's listener_filters_timeout.
	filtersTimeout time.Duration
	// srv serves every node; builds build each node's resources (with the planted break, if any).
	srv    *xdsServer
	builds map[string]func(model.Mesh) (xds.Resources, error)
	// dir holds the nodes' on-demand records (demandsFile).
	dir string
}

// demandsFile is node's on-demand record's state file.
func (lm *liveMesh) demandsFile(node string) string {
	return filepath.Join(lm.dir, node+"-demands.json")
}

// startMesh runs s live: the fabric, an Envoy per node (this node's resources changed by mutate,
// a negative control's planted break, when set), each node's snapshot accepted and its listeners
// bound, and this node's pods' capture programmed.
func startMesh(t testing.TB, s xdstest.Scenario, mutate func(*xds.Resources)) *liveMesh {
	t.Helper()
	return startMeshWith(t, s, meshOptions{mutate: mutate})
}

// meshOptions are what startMeshWith changes in a scenario run live.
type meshOptions struct {
	// mutate changes this node's resources (a negative control's planted break).
	mutate func(*xds.Resources)
	// failingHealth are the pods (xds.PodKey) whose applications answer their health path 503;
	// fortio those whose applications are fortio's servers.
	failingHealth, fortio []string
	// accessLog, when set, is served beside the xDS server, as the agent serves it.
	accessLog *accesslog.Server
	// envoyArgs are every node's Envoy's extra command-line arguments.
	envoyArgs []string
	// maxConnections is this node's cap on Envoy's downstream connections (0: the default).
	maxConnections int64
	// svidDNS, when set, are the DNS SANs of each SVID the test CA issues (spiffetest.CA.DNSNames).
	svidDNS func(id string) []string
}

// startMeshWith is startMesh with opts.
func startMeshWith(t testing.TB, s xdstest.Scenario, opts meshOptions) *liveMesh {
	t.Helper()
	mutate := opts.mutate
	testroot.Require(t, "network namespaces, nftables and Envoy's listeners in them")
	f := newFabric(t, s, fabricOptions{failingHealth: opts.failingHealth, fortio: opts.fortio})
	ca, err := spiffetest.NewCA(xdstest.Domain)
	if err != nil {
		t.Fatal(err)
	}
	ca.DNSNames = opts.svidDNS
	srv := serveXDSWith(t, filepath.Join(t.TempDir(), "xds.sock"), opts.accessLog)
	lm := &liveMesh{fabric: f, nodes: map[string]*node{}, sims: map[string]*xdssim.Sim{}, srv: srv, dir: t.TempDir()}
	var names []string
	for _, w := range s.Workloads {
		names = append(names, w.Node)
	}
	slices.Sort(names)
	builds := map[string]func(model.Mesh) (xds.Resources, error){}
	for _, name := range slices.Compact(names) {
		m := s.MeshOn(name)
		// A node that carries its declared upstreams only asks for the others on demand, which
		// Envoy does on a delta stream alone.
		o := nodeOptions{pods: f.pods, netns: f.router, xds: srv, ca: ca, delta: m.Upstreams == model.UpstreamsDeclared, envoyArgs: opts.envoyArgs}
		if name == xdstest.ThisNode {
			o.mutate, o.maxConnections = mutate, opts.maxConnections
		}
		builds[name] = func(m model.Mesh) (xds.Resources, error) {
			res, err := xds.Build(m)
			if err == nil && o.mutate != nil {
				o.mutate(&res)
			}
			return res, err
		}
		n := startNodeOn(t, m, o)
		lm.nodes[name] = n
		if o.delta {
			answerDemand(t, srv, lm.demandsFile(name), n.mesh, builds[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(lm.nodes)) {
		n := lm.nodes[name]
		n.requireAccepted(t)
		n.requireBound(t)
		lm.sims[name] = xdssim.New(n.res)
		lm.sims[name].FetchOnDemand(xdswalk.FetchAsTheAgent(n.mesh, builds[name], func(err error) { t.Errorf("%v", err) }))
	}
	lm.builds = builds
	here := lm.nodes[xdstest.ThisNode]
	if here == nil {
		t.Fatalf("no pod runs on %s: the scenario has no client", xdstest.ThisNode)
	}
	lm.mesh = here.mesh
	applier := apply.New()
	for _, p := range lm.mesh.Pods {
		if _, err := applier.Sync(p.NetNS, capture.Build(lm.mesh, p, capture.Options{})); err != nil {
			t.Fatalf("programming %s/%s's capture: %v", p.Namespace, p.Name, err)
		}
		if lm.filtersTimeout == 0 {
			lm.filtersTimeout = filtersTimeoutOf(t, here.res, xds.CaptureListener(xds.PodKey(p.Namespace, p.Name)))
		}
	}
	return lm
}

// answerDemand answers the on-demand requests of m's node as the agent does, with the agent's
// record (internal/demand, kept in file): each request, on its own goroutine, builds the node's
// configuration again (build) from m with what the record carries (beside what m's scenario
// demands) and publishes it on srv. It stops when t ends. poke asks for a build (a restarted
// agent's first).
func answerDemand(t testing.TB, srv *xdsServer, file string, m model.Mesh, build func(model.Mesh) (xds.Resources, error)) (poke func()) {
	t.Helper()
	rec, err := demand.Open(demand.Options{Log: logr.Discard(), File: file})
	if err != nil {
		t.Fatal(err)
	}
	kick := make(chan struct{}, 1)
	poke = func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-kick:
			}
			withRecord := rec.Apply(m, time.Now())
			for identity, services := range m.Demanded {
				for _, service := range services {
					withRecord = xds.WithDemand(withRecord, identity, service)
				}
			}
			res, err := build(withRecord)
			if err != nil {
				t.Errorf("the on-demand answer: Build: %v", err)
				continue
			}
			if _, err := srv.Publish(m.Node.Name, res); err != nil {
				t.Errorf("the on-demand answer: Publish: %v", err)
			}
		}
	}()
	srv.OnClusterDemand(rec.Ask(m.Node.Name, poke))
	return poke
}

// filtersTimeoutOf is listener's listener_filters_timeout in res.
func filtersTimeoutOf(t testing.TB, res xds.Resources, listener string) time.Duration {
	t.Helper()
	for _, l := range res.Listeners {
		if l.GetName() == listener {
			return l.GetListenerFiltersTimeout().AsDuration()
		}
	}
	t.Fatalf("no listener %s", listener)
	return 0
}

// hop finds the node simulator and the pod behind an endpoint's address.
func (lm *liveMesh) hop(address string) (*xdssim.Sim, model.LocalPod, bool) {
	for name, n := range lm.nodes {
		for _, p := range n.mesh.Pods {
			if p.Address == address {
				return lm.sims[name], p, true
			}
		}
	}
	return nil, model.LocalPod{}, false
}

// liveCase is one connection the walk judges: a case of the walk as one shape, what the table
// wants of it and what the simulator predicts.
type liveCase struct {
	xdswalk.Case
	shape     xdswalk.Shape
	conn      xdssim.Conn
	want      xdswalk.Expectation
	predicted xdswalk.Seen
	// wire is what the connection is on the wire: cases alike there are sent once.
	wire string
}

// walkResult counts a walk: the cases judged, the connections sent, the disagreements.
type walkResult struct {
	cases, sent      int
	table, simulator int
	// kinds counts what the clients saw, by kind (of the cases).
	kinds map[xdswalk.SeenKind]int
}

// String counts what was seen: a walk that passes shows what it passed on.
func (r walkResult) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.kinds)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.kinds[k]))
	}
	return fmt.Sprintf("%d connections (%d distinct on the wire; seen: %s); %d disagree with the table, %d with the simulator",
		r.cases, r.sent, strings.Join(parts, ", "), r.table, r.simulator)
}

// waitProbed waits until every Envoy of the mesh has probed every host its active health checks
// cover twice, and found it healthy (a scenario whose services ask for them: the simulator, which
// does not probe, takes every published host for healthy). Twice: after a cluster's first round
// Envoy 1.40 reports its hosts healthy but still balances as if they were not, over the other
// localities, until the next round (seen live: every request of the walk went to the next
// priority). Nothing to wait for without active checks.
func (lm *liveMesh) waitProbed(t testing.TB) {
	passed := regexp.MustCompile(`^cluster\.(.+)\.health_check\.success$`)
	for _, name := range slices.Sorted(maps.Keys(lm.nodes)) {
		e := lm.nodes[name].envoy
		e.WaitFor(t, 30*time.Second, name+"'s hosts probed healthy twice", func() (bool, string) {
			stats, err := e.Stats()
			if err != nil {
				return false, err.Error()
			}
			for stat, n := range stats {
				m := passed.FindStringSubmatch(stat)
				if m == nil {
					continue
				}
				if hosts := stats["cluster."+m[1]+".membership_total"]; n < 2*hosts || stats["cluster."+m[1]+".membership_healthy"] != hosts {
					return false, fmt.Sprintf("cluster %s: %d hosts, %d healthy, %d probes passed", m[1], hosts, stats["cluster."+m[1]+".membership_healthy"], n)
				}
			}
			return true, ""
		})
	}
}

// walk sends every case of the corpus from this node's pods (those keep selects, when set),
// reports each disagreement on t and counts them.
func (lm *liveMesh) walk(t testing.TB, keep func(liveCase) bool) walkResult {
	lm.waitProbed(t)
	cases := lm.cases(t, keep)
	seen := lm.send(cases)
	r := walkResult{cases: len(cases), sent: len(seen), kinds: map[xdswalk.SeenKind]int{}}
	for _, lc := range cases {
		live := seen[lc.wire]
		r.kinds[live.Kind]++
		tableErr := lc.want.Admits(live, lc.Row.Result, lm.filtersTimeout)
		simDiff := live.Differs(lc.predicted, lm.filtersTimeout)
		if tableErr == nil && simDiff == "" {
			continue
		}
		verdict := func(disagrees bool, why string) string {
			if !disagrees {
				return "agrees"
			}
			return "DISAGREES: " + why
		}
		if tableErr != nil {
			r.table++
		}
		if simDiff != "" {
			r.simulator++
		}
		t.Errorf("%s dials %q, shape %s (%s):\n\tlive Envoy: %s\n\ttable:      %s; %s\n\tsimulator:  %s; %s",
			lc.Client.Name, lc.Row.Address, lc.shape, xdswalk.Describe(lc.conn), live,
			lc.want, verdict(tableErr != nil, fmt.Sprint(tableErr)),
			lc.predicted, verdict(simDiff != "", simDiff))
	}
	return r
}

// cases are the corpus's cases from this node's pods (those keep selects, when set), each with
// what the table expects and the simulator predicts.
func (lm *liveMesh) cases(t testing.TB, keep func(liveCase) bool) []liveCase {
	var cases []liveCase
	here := lm.sims[xdstest.ThisNode]
	shared := xdswalk.SharedPorts(lm.mesh)
	for _, client := range lm.mesh.Pods {
		rules := capture.Build(lm.mesh, client, capture.Options{})
		for _, c := range xdswalk.Cases(lm.mesh, client) {
			listener, captured, err := xdswalk.CapturedBy(here, client, rules, c.Conn)
			if err != nil {
				t.Errorf("%s dials %q (%s): %v", client.Name, c.Row.Address, xdswalk.Describe(c.Conn), err)
				continue
			}
			canonical := c.Conn
			canonical.Listener = listener
			for _, sh := range xdswalk.Corpus {
				conn := xdswalk.ShapeConn(canonical, sh, c.Name)
				lc := liveCase{Case: c, shape: sh, conn: conn,
					want: xdswalk.Expected(c.Row, sh, uint16(conn.DstPort), shared[conn.DstPort]),
					wire: fmt.Sprintf("%s %s %s", client.Name, sh, xdswalk.Describe(conn))}
				if captured {
					lc.predicted = xdswalk.Predict(here.Dial(conn), conn, sh, lm.hop)
				} else {
					lc.predicted = xdswalk.Seen{Kind: xdswalk.SawRefusal, Detail: "capture leaves it alone: it goes to the VIP, which refuses it"}
				}
				if keep == nil || keep(lc) {
					cases = append(cases, lc)
				}
			}
		}
	}
	return cases
}

// liveParallel is how many connections that send at once are open at once: the CPU they take is
// the proxies' and the servers'. The slow shapes (a late client, a server-first one) spend their
// time waiting, so they all go at once, first, beside them.
const liveParallel = 64

// send sends each distinct connection of cases once, the slow shapes first and all at once, and
// returns what each saw, by its wire key.
func (lm *liveMesh) send(cases []liveCase) map[string]xdswalk.Seen {
	var distinct []liveCase
	queued := map[string]bool{}
	for _, lc := range cases {
		if !queued[lc.wire] {
			queued[lc.wire] = true
			distinct = append(distinct, lc)
		}
	}
	slow := func(lc liveCase) bool { return lc.conn.ServerFirst || lc.conn.FirstBytesAfter > 0 }
	slices.SortStableFunc(distinct, func(a, b liveCase) int {
		switch {
		case slow(a) && !slow(b):
			return -1
		case slow(b) && !slow(a):
			return 1
		}
		return 0
	})
	clients := map[string]client{}
	for _, p := range lm.mesh.Pods {
		clients[p.Name] = client{ns: lm.fabric.pods[xds.PodKey(p.Namespace, p.Name)], podOf: lm.fabric.pod,
			window: lm.filtersTimeout + 2*time.Second}
	}
	var mu sync.Mutex
	seen := map[string]xdswalk.Seen{}
	slots := make(chan struct{}, liveParallel)
	var wg sync.WaitGroup
	for _, lc := range distinct {
		if !slow(lc) {
			slots <- struct{}{}
		}
		wg.Add(1)
		go func() {
			defer func() {
				if !slow(lc) {
					<-slots
				}
				wg.Done()
			}()
			s := clients[lc.Client.Name].send(lc.conn, lc.shape)
			mu.Lock()
			seen[lc.wire] = s
			mu.Unlock()
		}()
	}
	wg.Wait()
	return seen
}

// failureRecorder is a testing.TB that keeps the failures a negative control expects.
type failureRecorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *failureRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// TestLiveWalkCatchesABrokenBuild is the live walk's negative control: a break planted in what
// the builder made, which the simulator does not see (it does not speak to applications), must
// fail the walk by what the clients observe. payments' HTTP/1.1 port 8080 is delivered to the
// application as HTTP/2 (its application cluster given the h2 port's protocol options): the
// HTTP/1.1 server refuses the HTTP/2 preface, and Envoy answers the clients itself (502), saying why ("reset reason: protocol error").
func TestLiveWalkCatchesABrokenBuild(t *testing.T) {
	lm := startMesh(t, xdstest.Scenarios()["mixed-http-primary"], func(res *xds.Resources) {
		pod := xds.PodKey("shop", "payments-0")
		http1, http2 := xds.AppCluster(pod, 8080), xds.AppCluster(pod, 9090)
		var options map[string]*anypb.Any
		for _, c := range res.Clusters {
			if c.GetName() == http2 {
				options = c.GetTypedExtensionProtocolOptions()
			}
		}
		for _, c := range res.Clusters {
			if c.GetName() == http1 {
				c.TypedExtensionProtocolOptions = options
			}
		}
	})
	rec := &failureRecorder{TB: t}
	// The HTTP/1.1 client of payments' mesh name, enough to show the break.
	r := lm.walk(rec, func(lc liveCase) bool {
		return lc.Client.Name == "frontend-0" && lc.Name == lc.FQDN && lc.shape == xdswalk.ShapeHTTP11
	})
	var caught []string
	for _, f := range rec.failures {
		if strings.Contains(f, ":8080") && strings.Contains(f, "table:") && strings.Contains(f, "DISAGREES") {
			caught = append(caught, f)
		}
	}
	if len(caught) == 0 {
		t.Fatalf("the live walk passed the planted break (%d cases, %d failures: %v); it must fail", r.cases, len(rec.failures), rec.failures)
	}
	t.Logf("caught (%d of %d cases disagree with the table, %d with the simulator), e.g.:\n%s", r.table, r.cases, r.simulator, caught[0])
}
