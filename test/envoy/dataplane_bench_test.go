// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/envoytest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The data-plane benchmark (make bench-dataplane): what the mesh costs a request, measured on the
// live Envoy. A client pod and a server pod on one node, so that one node proxy carries both ends
// of every call (capture, the mTLS hop, the inbound), as it does for a same-node call; fortio's
// load from the client pod's namespace, fortio's servers as the server's application. Each case
// runs twice in the same run: direct (the client dials the server pod's address, which capture
// leaves alone) and through the mesh (it dials the service's VIP and port, which capture takes).
// Envoy runs with 2 worker threads. The xDS server and the access log server of the agent run in
// the benchmark's own process: its CPU over a run is the agent's share.

const (
	benchNamespace = "bench"
	// The server pod serves HTTP/1.1 on 8080 (its primary), gRPC on 9090 and raw TCP on 7000.
	benchServerVIP, benchServerIP              = "10.96.0.30", "10.244.1.31"
	benchClientVIP, benchClientIP              = "10.96.0.31", "10.244.1.30"
	benchHTTPPort, benchGRPCPort, benchTCPPort = 8080, 9090, 7000
	// benchSecondsEnv sets each case's duration in seconds (default 60).
	benchSecondsEnv = "AETHER_BENCH_SECONDS"
	// benchOutEnv is where the JSON report is written (default bin/bench/dataplane.json).
	benchOutEnv = "AETHER_BENCH_OUT"
	// benchMemoryEnv, "off", leaves out the memory runs (about 4 minutes): for a run that asks
	// only about latency and CPU.
	benchMemoryEnv = "AETHER_BENCH_MEMORY"
	// benchHopEnv, "http3", runs the whole benchmark with the HTTP/3 hop on (--hop-http3, SVIDs
	// carrying its DNS SANs): its HTTP cases then cross the hop over QUIC (the run fails if none
	// did); "http2" or unset, the default hop.
	benchHopEnv = "AETHER_BENCH_HOP"
)

// benchHop reads benchHopEnv: whether the run's hop prefers HTTP/3.
func benchHop(b testing.TB) bool {
	switch v := os.Getenv(benchHopEnv); v {
	case "", "http2":
		return false
	case "http3":
		return true
	default:
		b.Fatalf("%s=%q: want http2 (the default hop) or http3", benchHopEnv, v)
		return false
	}
}

// benchScenario is the benchmark's node: the client and the server, both on ThisNode.
func benchScenario() xdstest.Scenario {
	created := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	return xdstest.Scenario{
		Services: []xdstest.ServiceDecl{{Namespace: benchNamespace, Name: "server", VIP: benchServerVIP}, {Namespace: benchNamespace, Name: "client", VIP: benchClientVIP}},
		Workloads: []xdstest.Workload{{
			Namespace: benchNamespace, Service: "server", Name: "server-0", Node: xdstest.ThisNode, Address: benchServerIP,
			Port: strconv.Itoa(benchHTTPPort), Ports: fmt.Sprintf("%d,%d=grpc,%d=tcp", benchHTTPPort, benchGRPCPort, benchTCPPort),
			Health: meshv1alpha1.HealthHealthy, Created: created,
		}, {
			Namespace: benchNamespace, Service: "client", Name: "client-0", Node: xdstest.ThisNode, Address: benchClientIP,
			Port: strconv.Itoa(benchHTTPPort), Health: meshv1alpha1.HealthHealthy, Created: created,
		}},
	}
}

// benchPolicy governs the server's HTTP port with ten rules, as a platform team's policy might:
// nine admit other ServiceAccounts for some methods and paths, the last admits the client's for
// what fortio sends (GET and POST, any path), so every request is evaluated against them all.
func benchPolicy() []configv1.AccessPolicy {
	var rules []configv1.AccessRule
	for i := range 9 {
		rules = append(rules, configv1.AccessRule{
			From:    []configv1.AccessSource{{ServiceAccount: &configv1.ServiceAccountRef{Name: fmt.Sprintf("team-%d", i)}}},
			Methods: []string{"GET", "PUT"}, PathPrefixes: []string{fmt.Sprintf("/api/v%d", i), "/healthz"},
		})
	}
	rules = append(rules, configv1.AccessRule{
		From:    []configv1.AccessSource{{ServiceAccount: &configv1.ServiceAccountRef{Name: "client"}}},
		Methods: []string{"GET", "POST"},
	})
	return []configv1.AccessPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: "server-http"},
		Spec: configv1.AccessPolicySpec{
			TargetRef: &configv1.TargetRef{Kind: configv1.KindService, Name: "server"}, Ports: []int32{benchHTTPPort}, Rules: rules,
		}}}
}

// benchCase is one protocol's load.
type benchCase struct {
	name string
	kind string
	port int
	// authority is the mesh name the mesh run sends (HTTP and gRPC route by it).
	authority bool
}

var benchCases = []benchCase{
	{"http1", "http", benchHTTPPort, true},
	{"grpc", "grpc", benchGRPCPort, true},
	{"tcp", "tcp", benchTCPPort, false},
}

// spec is c's load at qps for d, direct or through the mesh.
func (c benchCase) spec(mesh bool, qps float64, d time.Duration) loadSpec {
	s := loadSpec{Kind: c.kind, QPS: qps, Duration: d, Connections: 16, Payload: 1024,
		Target: fmt.Sprintf("%s:%d", benchServerIP, c.port)}
	if mesh {
		s.Target = fmt.Sprintf("%s:%d", benchServerVIP, c.port)
		if c.authority {
			s.Authority = fmt.Sprintf("server.%s.%s:%d", benchNamespace, xdstest.Domain, c.port)
		}
	}
	return s
}

// run is one load's result with what the processes spent on it.
type run struct {
	loadResult
	// EnvoyCPU and AgentCPU are seconds of CPU over the run; EnvoyRSS Envoy's resident memory
	// after it, in MB.
	EnvoyCPU, AgentCPU float64
	EnvoyRSS           float64
	// Handshakes are the TLS handshakes the inbound listeners completed over the run.
	Handshakes uint64
}

// caseReport is one case's figures, under the keys the report promises.
type caseReport struct {
	DirectP50     float64 `json:"direct_p50_ms"`
	DirectP99     float64 `json:"direct_p99_ms"`
	MeshP50       float64 `json:"mesh_p50_ms"`
	MeshP90       float64 `json:"mesh_p90_ms"`
	MeshP99       float64 `json:"mesh_p99_ms"`
	MeshP999      float64 `json:"mesh_p999_ms"`
	AddedP90      float64 `json:"added_p90_ms"`
	AddedP99      float64 `json:"added_p99_ms"`
	EnvoyCPUPer1k float64 `json:"envoy_cpu_s_per_1k"`
	EnvoyVCPU     float64 `json:"envoy_vcpu"`
	EnvoyRSS      float64 `json:"envoy_rss_mb"`
	AgentCPUPer1k float64 `json:"agent_cpu_s_per_1k"`
	MeshQPS       float64 `json:"mesh_qps"`
	Requests      int64   `json:"mesh_requests"`
	Errors        int64   `json:"mesh_errors"`
	// HandshakeShare is the fraction of the mesh run's requests that paid an mTLS handshake.
	HandshakeShare float64 `json:"handshake_share"`
	// MaxQPS are the highest rates sustained with p99 under 10 ms, direct and through the mesh.
	MaxDirectQPS float64 `json:"max_direct_qps"`
	MaxMeshQPS   float64 `json:"max_mesh_qps"`
}

// dataplaneReport is bin/bench/dataplane.json.
type dataplaneReport struct {
	Seconds int `json:"seconds_per_case"`
	// Hop is the hop's protocol the run measured: http2, or http3 (benchHopEnv).
	Hop   string                `json:"hop"`
	Cases map[string]caseReport `json:"cases"`
	// Handshakes is the inbound's mTLS handshakes a second under connection-per-request HTTP
	// load (every request a connection of its own, so every hop one too).
	HandshakesPerSecond float64 `json:"handshakes_per_s"`
	// NoAccessLog is the HTTP case through the mesh with every access logger removed: what the
	// access log costs.
	NoAccessLog caseReport `json:"http1_without_access_log"`
	// WithAccessPolicy is the HTTP case through the mesh with benchPolicy governing the server's
	// HTTP port (ten rules, the client admitted by the last), WithoutAccessPolicy the same
	// without it, measured in alternating rounds (medians of the rounds' figures): what
	// authorization costs, its AddedP99 over WithoutAccessPolicy's.
	WithAccessPolicy    caseReport `json:"http1_with_access_policy"`
	WithoutAccessPolicy caseReport `json:"http1_without_access_policy"`
	// Memory is Envoy's memory as the mesh grows (measureMemory).
	Memory memoryReport `json:"memory"`
}

// BenchmarkDataplane measures every case once (run it with -benchtime 1x) and writes the report.
func BenchmarkDataplane(b *testing.B) {
	seconds := 60
	if v := os.Getenv(benchSecondsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a whole number of seconds, e.g. 60", benchSecondsEnv, v)
		}
		seconds = n
	}
	out := os.Getenv(benchOutEnv)
	if out == "" {
		out = filepath.Join("..", "..", "bin", "bench", "dataplane.json")
	}
	d := time.Duration(seconds) * time.Second
	als := accesslog.New(accesslog.Options{NodeID: xdstest.ThisNode, Log: logr.Discard(), Registerer: prometheus.NewRegistry()})
	scenario, opts := benchScenario(), meshOptions{fortio: []string{xds.PodKey(benchNamespace, "server-0")}, accessLog: als}
	if benchHop(b) {
		scenario.HopHTTP3, opts.svidDNS = true, hopDNSNames
	}
	lm := startMeshWith(b, scenario, opts)
	e := lm.nodes[xdstest.ThisNode].envoy
	client := lm.fabric.pods[xds.PodKey(benchNamespace, "client-0")]
	report := dataplaneReport{Seconds: seconds, Cases: map[string]caseReport{}, Hop: "http2"}
	if scenario.HopHTTP3 {
		report.Hop = "http3"
	}
	b.ResetTimer()
	switch v := os.Getenv(benchMemoryEnv); v {
	case "", "on":
		report.Memory = measureMemory(b)
	case "off":
		b.Logf("%s=off: the memory runs are left out", benchMemoryEnv)
	default:
		b.Fatalf("%s=%q: want on (the default) or off", benchMemoryEnv, v)
	}
	for _, c := range benchCases {
		direct := measure(b, e, client, c.spec(false, 1000, d))
		mesh := measure(b, e, client, c.spec(true, 1000, d))
		if mesh.Requests == 0 || mesh.Errors > mesh.Requests/100 {
			b.Fatalf("%s through the mesh: %d requests, %d errors", c.name, mesh.Requests, mesh.Errors)
		}
		r := caseReport{
			DirectP50: direct.P50, DirectP99: direct.P99,
			MeshP50: mesh.P50, MeshP90: mesh.P90, MeshP99: mesh.P99, MeshP999: mesh.P999,
			AddedP90: mesh.P90 - direct.P90, AddedP99: mesh.P99 - direct.P99,
			EnvoyCPUPer1k: mesh.EnvoyCPU / (float64(mesh.Requests) / 1000), EnvoyVCPU: mesh.EnvoyCPU / d.Seconds(),
			EnvoyRSS: mesh.EnvoyRSS, AgentCPUPer1k: mesh.AgentCPU / (float64(mesh.Requests) / 1000),
			MeshQPS: mesh.ActualQPS, Requests: mesh.Requests, Errors: mesh.Errors,
			HandshakeShare: float64(mesh.Handshakes) / float64(mesh.Requests),
		}
		r.MaxDirectQPS = maxRate(b, e, client, c, false)
		r.MaxMeshQPS = maxRate(b, e, client, c, true)
		report.Cases[c.name] = r
	}
	if h3 := statSum(b, e, regexp.MustCompile(`^cluster\..*\.upstream_cx_http3_total$`)); scenario.HopHTTP3 && h3 == 0 {
		b.Fatalf("%s=http3: no HTTP/3 connection crossed the hop: the figures would be HTTP/2's", benchHopEnv)
	}
	// What the access log costs: the HTTP case again through the mesh, every logger removed.
	res := lm.nodes[xdstest.ThisNode].res
	quiet := xds.Resources{Clusters: res.Clusters, Endpoints: res.Endpoints, Routes: res.Routes, Runtimes: res.Runtimes}
	for _, l := range res.Listeners {
		quiet.Listeners = append(quiet.Listeners, proto.Clone(l).(*listenerv3.Listener))
	}
	withoutAccessLogs(b, quiet)
	republish(b, lm, quiet)
	noLog := measure(b, e, client, benchCases[0].spec(true, 1000, d))
	report.NoAccessLog = caseReport{MeshP50: noLog.P50, MeshP90: noLog.P90, MeshP99: noLog.P99, MeshP999: noLog.P999,
		EnvoyCPUPer1k: noLog.EnvoyCPU / (float64(noLog.Requests) / 1000), EnvoyVCPU: noLog.EnvoyCPU / d.Seconds(),
		EnvoyRSS: noLog.EnvoyRSS, AgentCPUPer1k: noLog.AgentCPU / (float64(noLog.Requests) / 1000), MeshQPS: noLog.ActualQPS,
		Requests: noLog.Requests, Errors: noLog.Errors}
	// What authorization costs: the HTTP case with and without benchPolicy governing the
	// server's port, alternating in rounds so that the machine's noise falls on both alike.
	// The node's own mesh (its pods' network namespaces are the fabric's), each pod's access
	// read from the policy as the agent reads it.
	governed := lm.nodes[xdstest.ThisNode].mesh
	governed.Pods = slices.Clone(governed.Pods)
	for i := range governed.Pods {
		governed.Pods[i].Access = model.PodAccess(xdstest.Domain, governed.Pods[i], benchPolicy())
	}
	withPolicy, err := lm.builds[xdstest.ThisNode](governed)
	if err != nil {
		b.Fatal(err)
	}
	allowed := regexp.MustCompile(`^http\.` + regexp.QuoteMeta(xds.InboundHTTPChain(benchHTTPPort)) + `\.rbac\.allowed$`)
	var with, without []run
	for round := range authzRounds {
		for _, policy := range []bool{false, true} {
			built := res
			if policy {
				built = withPolicy
			}
			republish(b, lm, built)
			settleAuthz(b, e, client, allowed, policy)
			before := statSum(b, e, allowed)
			r := measure(b, e, client, benchCases[0].spec(true, 1000, authzRound(d)))
			if r.Errors > r.Requests/100 {
				b.Fatalf("http1, policy %v, round %d: %d requests, %d errors", policy, round, r.Requests, r.Errors)
			}
			// With the policy every request passed the RBAC filter and was admitted (the run
			// fails above on errors, so it denied none); without it, none met one.
			n := statSum(b, e, allowed) - before
			switch {
			case policy && n < uint64(r.Requests):
				b.Fatalf("http1 with an AccessPolicy, round %d: %d requests, %d counted as admitted by the RBAC filter (%s)", round, r.Requests, n, allowed)
			case !policy && n != 0:
				b.Fatalf("http1 without an AccessPolicy, round %d: %d requests passed an RBAC filter", round, n)
			}
			if policy {
				with = append(with, r)
			} else {
				without = append(without, r)
			}
		}
	}
	report.WithoutAccessPolicy = medianCase(without, d)
	report.WithAccessPolicy = medianCase(with, d)
	report.WithAccessPolicy.AddedP99 = report.WithAccessPolicy.MeshP99 - report.WithoutAccessPolicy.MeshP99
	republish(b, lm, res)
	// Every request a connection of its own: every hop one too, so the inbound handshakes as
	// fast as the load goes.
	churn := benchCases[0].spec(true, -1, 10*time.Second)
	churn.NoKeepAlive = true
	hs := measure(b, e, client, churn)
	report.HandshakesPerSecond = float64(hs.Handshakes) / churn.Duration.Seconds()
	b.StopTimer()

	writeDataplaneReport(b, out, report)
	http1 := report.Cases["http1"]
	b.ReportMetric(http1.AddedP90, "http-added-p90-ms")
	b.ReportMetric(http1.AddedP99, "http-added-p99-ms")
	b.ReportMetric(http1.EnvoyVCPU, "http-envoy-vcpu")
	b.ReportMetric(report.Cases["tcp"].AddedP99, "tcp-added-p99-ms")
}

// measure runs spec from ns and reads what Envoy and the agent (this process) spent on it.
func measure(b *testing.B, e *envoytest.Envoy, ns *nstest.NS, spec loadSpec) run {
	b.Helper()
	envoyBefore, agentBefore := cpuSeconds(b, e.Pid()), cpuSeconds(b, os.Getpid())
	handshakes := inboundHandshakes(b, e)
	r := run{loadResult: runLoad(b, ns, spec)}
	r.EnvoyCPU = cpuSeconds(b, e.Pid()) - envoyBefore
	r.AgentCPU = cpuSeconds(b, os.Getpid()) - agentBefore
	r.EnvoyRSS = rssMB(b, e.Pid())
	r.Handshakes = inboundHandshakes(b, e) - handshakes
	b.Logf("%s %s qps %.0f: %d requests (%d errors) at %.0f/s, p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f ms; Envoy %.2f s CPU, %.0f MB; agent %.2f s CPU; %d handshakes",
		spec.Kind, spec.Target, spec.QPS, r.Requests, r.Errors, r.ActualQPS, r.P50, r.P90, r.P99, r.P999, r.EnvoyCPU, r.EnvoyRSS, r.AgentCPU, r.Handshakes)
	return r
}

// maxRate is the highest rate of c that holds p99 under 10 ms and at least 95 % of the rate
// asked, doubling from 1 000 a second, 5 s a step.
func maxRate(b *testing.B, e *envoytest.Envoy, ns *nstest.NS, c benchCase, mesh bool) float64 {
	best := 0.0
	for qps := 1000.0; qps <= 64000; qps *= 2 {
		r := measure(b, e, ns, c.spec(mesh, qps, 5*time.Second))
		if r.P99 >= 10 || r.ActualQPS < 0.95*qps || r.Errors > 0 {
			break
		}
		best = r.ActualQPS
	}
	return best
}

// inboundHandshakes are the TLS handshakes Envoy's inbound listeners (0.0.0.0:18008 in every
// pod's namespace) have completed.
var inboundHandshakeStat = regexp.MustCompile(`^listener\.0\.0\.0\.0_18008\.ssl\.handshake$`)

func inboundHandshakes(b *testing.B, e *envoytest.Envoy) uint64 {
	return statSum(b, e, inboundHandshakeStat)
}

// cpuSeconds is the user and system CPU time process pid has used (its threads', and its
// children's that it waited for: none here), from /proc/<pid>/stat.
func cpuSeconds(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after the command and state.
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	return (utime + stime) / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on Linux.
const clockTicks = 100

// rssMB is process pid's resident memory in MB (VmRSS).
func rssMB(b testing.TB, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatalf("/proc/%d/status: %q", pid, line)
			}
			return kb / 1024
		}
	}
	b.Fatalf("/proc/%d/status has no VmRSS", pid)
	return 0
}

// writeDataplaneReport writes report as JSON to path and a table to standard output.
func writeDataplaneReport(b *testing.B, path string, report dataplaneReport) {
	encoded, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, append(encoded, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "case\tdirect p50\tdirect p99\tmesh p50\tmesh p90\tmesh p99\tadded p90\tadded p99\tEnvoy s/1k\tEnvoy vCPU\tEnvoy MB\tagent s/1k\thandshake share\tmax direct/s\tmax mesh/s\t")
	for _, c := range benchCases {
		r := report.Cases[c.name]
		fmt.Fprintf(w, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.0f\t%.3f\t%.4f\t%.0f\t%.0f\t\n", c.name,
			r.DirectP50, r.DirectP99, r.MeshP50, r.MeshP90, r.MeshP99, r.AddedP90, r.AddedP99,
			r.EnvoyCPUPer1k, r.EnvoyVCPU, r.EnvoyRSS, r.AgentCPUPer1k, r.HandshakeShare, r.MaxDirectQPS, r.MaxMeshQPS)
	}
	n := report.NoAccessLog
	fmt.Fprintf(w, "http1, no access log\t\t\t%.3f\t%.3f\t%.3f\t\t\t%.3f\t%.3f\t%.0f\t%.3f\t\t\t\t\n", n.MeshP50, n.MeshP90, n.MeshP99, n.EnvoyCPUPer1k, n.EnvoyVCPU, n.EnvoyRSS, n.AgentCPUPer1k)
	for _, row := range []struct {
		name string
		c    caseReport
	}{
		{fmt.Sprintf("http1, no AccessPolicy (median of %d rounds)", authzRounds), report.WithoutAccessPolicy},
		{"http1, AccessPolicy of 10 rules (added p99: over the rounds without)", report.WithAccessPolicy},
	} {
		a := row.c
		fmt.Fprintf(w, "%s\t\t\t%.3f\t%.3f\t%.3f\t\t%.3f\t%.3f\t%.3f\t%.0f\t%.3f\t\t\t\t\n", row.name, a.MeshP50, a.MeshP90, a.MeshP99, a.AddedP99, a.EnvoyCPUPer1k, a.EnvoyVCPU, a.EnvoyRSS, a.AgentCPUPer1k)
	}
	_ = w.Flush()
	if len(report.Memory.Runs) == 0 {
		fmt.Printf("memory runs left out (%s=off)\n", benchMemoryEnv)
	} else {
		printMemory(report.Memory)
	}
	fmt.Printf("latencies in ms; mTLS handshakes the inbound completed under connection-per-request load: %.0f/s; report: %s\n", report.HandshakesPerSecond, path)
}

// printMemory prints the memory runs' table and slopes.
func printMemory(m memoryReport) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "mode\tlocal pods\tservices\tEnvoy MB\tconfig dump bytes\tlisteners\tchains\tclusters\tload assignments\tendpoints\t")
	for _, r := range m.Runs {
		fmt.Fprintf(w, "%s\t%d\t%d\t%.1f\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.Mode, r.LocalPods, r.Services, r.RSS, r.ConfigBytes, r.Listeners, r.FilterChains, r.Clusters, r.LoadAssignments, r.EndpointsHeld)
	}
	_ = w.Flush()
	for _, mode := range []model.UpstreamsMode{model.UpstreamsDeclared, model.UpstreamsAll} {
		fmt.Printf("%s: %.2f MB per local pod, %.3f MB per service of 10 endpoints\n", mode, m.PerPodMB[string(mode)], m.PerServiceMB[string(mode)])
	}
}

// memoryRun is one size of the mesh as the node's Envoy holds it, settled.
type memoryRun struct {
	Mode        string  `json:"mode"`
	LocalPods   int     `json:"local_pods"`
	Services    int     `json:"services"`
	Endpoints   int     `json:"endpoints_per_service"`
	RSS         float64 `json:"envoy_rss_mb"`
	ConfigBytes int     `json:"config_dump_bytes"`
	Listeners   int     `json:"listeners"`
	// FilterChains are the listeners' chains: a capture listener holds the chains of every
	// service its identity may dial (several per service), so they grow with local pods times
	// services.
	FilterChains int `json:"filter_chains"`
	Clusters     int `json:"clusters"`
	// LoadAssignments are the snapshot's; EndpointsHeld the endpoints they hold.
	LoadAssignments int `json:"load_assignments"`
	EndpointsHeld   int `json:"endpoints"`
	// SettledSeconds is how long Envoy took from its start to hold the whole snapshot.
	SettledSeconds float64 `json:"settled_s"`
}

// adminGetSlow is Envoy's admin answer to path, waited for as long as it takes (a configuration
// dump of a large mesh takes longer than the admin client's timeout). Envoy runs in this
// process's namespace here.
func adminGetSlow(b testing.TB, e *envoytest.Envoy, path string) []byte {
	resp, err := http.Get("http://" + e.Admin + path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s %v", path, resp.Status, err)
	}
	return body
}

// memoryReport is the report's memory section: the runs, and what a local pod and a service
// cost, each from two runs that differ in it alone.
type memoryReport struct {
	Runs []memoryRun `json:"runs"`
	// PerPodMB and PerServiceMB are Envoy's RSS per local pod (at 1 000 services) and per service
	// of 10 endpoints (with the fewer local pods), by mode.
	PerPodMB     map[string]float64 `json:"per_local_pod_mb"`
	PerServiceMB map[string]float64 `json:"per_service_mb"`
}

// measureMemory serves DeclaringFleet's mesh (each local pod declaring 5 upstreams) at three
// sizes per mode to a fresh Envoy each, and reads its memory once it holds the whole snapshot.
// Declared: 30 and 10 local pods of 1 000 services, and 10 of 500. All: every local identity
// holds a cluster per port of every service (1 000 services of 4 ports: 4 000 clusters a pod), so
// 30 local pods would be 120 000 clusters; it is measured at 3 and 1 local pods of 1 000
// services, and 1 of 500, and its slopes say what 30 would hold. A local pod's cost is the
// difference of the first two over the pods between them; a service's, of the last two.
func measureMemory(b *testing.B) memoryReport {
	report := memoryReport{PerPodMB: map[string]float64{}, PerServiceMB: map[string]float64{}}
	const endpoints, declared = 10, 5
	for _, size := range []struct {
		mode              model.UpstreamsMode
		pods, fewerPods   int
		services, fewerSv int
	}{
		{model.UpstreamsDeclared, 30, 10, 1000, 500},
		{model.UpstreamsAll, 3, 1, 1000, 500},
	} {
		full := memoryAt(b, size.mode, size.pods, size.services, endpoints, declared)
		fewerPods := memoryAt(b, size.mode, size.fewerPods, size.services, endpoints, declared)
		fewerServices := memoryAt(b, size.mode, size.fewerPods, size.fewerSv, endpoints, declared)
		report.Runs = append(report.Runs, full, fewerPods, fewerServices)
		report.PerPodMB[string(size.mode)] = (full.RSS - fewerPods.RSS) / float64(full.LocalPods-fewerPods.LocalPods)
		report.PerServiceMB[string(size.mode)] = (fewerPods.RSS - fewerServices.RSS) / float64(fewerPods.Services-fewerServices.Services)
	}
	return report
}

// memoryAt is one memoryRun: pods local pods, each in a network namespace of its own (their
// listeners bind there), services services of endpoints pods.
func memoryAt(b testing.TB, mode model.UpstreamsMode, pods, services, endpoints, declared int) memoryRun {
	m := xdstest.DeclaringFleet(services, endpoints, pods, declared, mode).MeshOn(xdstest.ThisNode)
	namespaces := map[string]*nstest.NS{}
	for _, p := range m.Pods {
		namespaces[xds.PodKey(p.Namespace, p.Name)] = nstest.NewNamed(b, "aemem")
	}
	started := time.Now()
	n := startNodeOn(b, m, nodeOptions{pods: namespaces, xds: serveXDS(b), delta: mode == model.UpstreamsDeclared, adminWithin: 5 * time.Minute})
	defer n.envoy.Stop()
	// Settled when Envoy's own counts are the snapshot's: its admin answers stats at once, where
	// a configuration dump of a mesh this size takes longer than a poll may wait.
	want := map[string]uint64{
		"listener_manager.total_listeners_active":  uint64(len(n.res.Listeners)),
		"listener_manager.total_listeners_warming": 0,
		"cluster_manager.warming_clusters":         0,
	}
	n.envoy.WaitFor(b, 8*time.Minute, "Envoy holds every listener and cluster of the snapshot", func() (bool, string) {
		stats, err := n.envoy.Stats()
		if err != nil {
			return false, err.Error()
		}
		// The bootstrap's static cluster (the agent's socket) is active besides the snapshot's.
		if got := stats["cluster_manager.active_clusters"]; got < uint64(len(n.res.Clusters)) {
			return false, fmt.Sprintf("%d of %d clusters active", got, len(n.res.Clusters))
		}
		for name, v := range want {
			if stats[name] != v {
				return false, fmt.Sprintf("%s is %d, want %d", name, stats[name], v)
			}
		}
		return true, ""
	})
	settled := time.Since(started)
	rss := rssMB(b, n.envoy.Pid()) // before the dump, which Envoy builds in memory of its own
	dump := adminGetSlow(b, n.envoy, "/config_dump?include_eds")
	r := memoryRun{Mode: string(mode), LocalPods: len(m.Pods), Services: services, Endpoints: endpoints,
		RSS: rss, ConfigBytes: len(dump),
		Listeners: len(n.res.Listeners), Clusters: len(n.res.Clusters), LoadAssignments: len(n.res.Endpoints)}
	for _, l := range n.res.Listeners {
		r.FilterChains += len(l.GetFilterChains())
	}
	for _, la := range n.res.Endpoints {
		for _, l := range la.GetEndpoints() {
			r.EndpointsHeld += len(l.GetLbEndpoints())
		}
	}
	r.SettledSeconds = settled.Seconds()
	b.Logf("memory, %s: %d local pods, %d services × %d: Envoy %.1f MB, config dump %d bytes, %d listeners (%d chains), %d clusters, %d load assignments (%d endpoints), settled in %s",
		mode, r.LocalPods, services, endpoints, r.RSS, r.ConfigBytes, r.Listeners, r.FilterChains, r.Clusters, r.LoadAssignments, r.EndpointsHeld, settled.Round(time.Second))
	return r
}

// withoutAccessLogs strips the access loggers from every connection manager and tcp_proxy of
// res's listeners (in place): the benchmark's measure of what the access log costs a request.
func withoutAccessLogs(b *testing.B, res xds.Resources) {
	for _, l := range res.Listeners {
		for _, fc := range append(slices.Clone(l.GetFilterChains()), l.GetDefaultFilterChain()) {
			for _, f := range fc.GetFilters() {
				a := f.GetTypedConfig()
				var m proto.Message
				hcm, tcp := &hcmv3.HttpConnectionManager{}, &tcpproxyv3.TcpProxy{}
				switch {
				case a.MessageIs(hcm):
					m = hcm
				case a.MessageIs(tcp):
					m = tcp
				default:
					continue
				}
				if err := a.UnmarshalTo(m); err != nil {
					b.Fatal(err)
				}
				hcm.AccessLog, tcp.AccessLog = nil, nil
				packed, err := anypb.New(m)
				if err != nil {
					b.Fatal(err)
				}
				f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: packed}
			}
		}
	}
}

// republish serves res to n's Envoy in place of what it holds, and returns once Envoy has taken
// a listener update (the access logs are on the listeners).
func republish(b *testing.B, lm *liveMesh, res xds.Resources) {
	n := lm.nodes[xdstest.ThisNode]
	updates := regexp.MustCompile(`^listener_manager\.lds\.update_success$`)
	before := statSum(b, n.envoy, updates)
	if _, err := lm.srv.Publish(xdstest.ThisNode, res); err != nil {
		b.Fatal(err)
	}
	n.envoy.WaitFor(b, 30*time.Second, "Envoy takes the listeners without access logs", func() (bool, string) {
		got := statSum(b, n.envoy, updates)
		return got > before, fmt.Sprintf("listener updates %d", got)
	})
}

// authzRounds is how many times the HTTP case runs with and without the access policy.
const authzRounds = 3

// authzRound is how long each of those runs lasts: together they take a case's duration d, as a
// single run with the policy did.
func authzRound(d time.Duration) time.Duration { return d / (2 * authzRounds) }

// settleAuthz loads the HTTP case briefly until the node's Envoy serves it by the configuration
// just published: Envoy keeps an updated listener's old chains, and the connections on them,
// until they drain, so the hop's pooled HTTP/2 connections keep the old rules until a GOAWAY
// closes them (a run measured at once after the policy came had 8 718 of 10 000 requests pass
// its RBAC filter). Settled is a short load counted whole by the RBAC filter (policy) or not at
// all (no policy).
func settleAuthz(b *testing.B, e *envoytest.Envoy, client *nstest.NS, allowed *regexp.Regexp, policy bool) {
	b.Helper()
	for try := 1; ; try++ {
		before := statSum(b, e, allowed)
		warm := measure(b, e, client, benchCases[0].spec(true, 1000, 2*time.Second))
		n := statSum(b, e, allowed) - before
		if (policy && n >= uint64(warm.Requests)) || (!policy && n == 0) {
			return
		}
		b.Logf("http1, policy %v, settling: %d of %d requests passed the RBAC filter", policy, n, warm.Requests)
		if try == 10 {
			b.Fatalf("http1, policy %v: after %d short loads, the connections still hold the previous rules", policy, try)
		}
	}
}

// medianCase is the median of each figure of runs, each authzRound(d) long.
func medianCase(runs []run, d time.Duration) caseReport {
	med := func(f func(run) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	seconds := authzRound(d).Seconds()
	var requests, errors int64
	for _, r := range runs {
		requests, errors = requests+r.Requests, errors+r.Errors
	}
	return caseReport{
		MeshP50: med(func(r run) float64 { return r.P50 }), MeshP90: med(func(r run) float64 { return r.P90 }),
		MeshP99: med(func(r run) float64 { return r.P99 }), MeshP999: med(func(r run) float64 { return r.P999 }),
		EnvoyCPUPer1k: med(func(r run) float64 { return r.EnvoyCPU / (float64(r.Requests) / 1000) }),
		EnvoyVCPU:     med(func(r run) float64 { return r.EnvoyCPU / seconds }),
		EnvoyRSS:      med(func(r run) float64 { return r.EnvoyRSS }),
		AgentCPUPer1k: med(func(r run) float64 { return r.AgentCPU / (float64(r.Requests) / 1000) }),
		MeshQPS:       med(func(r run) float64 { return r.ActualQPS }),
		Requests:      requests, Errors: errors,
	}
}
