// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/testrun"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// hostileRequests is how many hostile requests one iteration of BenchmarkProxylessHostile sends.
const hostileRequests = 10_000

// warmUpRequests are sent before the memory is first measured.
const warmUpRequests = 500

// BenchmarkProxylessHostile: one pod of the node sends hostileRequests requests to the proxyless
// socket, from as many concurrent connections as it may hold, each on a stream of its own, in
// turn: a random node ID (another pod's, or one longer than any pod's), a message over
// maxProxylessMessage, and its own node ID followed by a random one on the same stream. Every one
// is refused. It reports the process's heap in use and RSS (client and server: one process)
// before (after a warm-up of warmUpRequests, so that the connections and gRPC's buffer pools
// exist), at their peak while it runs (sampled every 500 requests) and after (all streams closed,
// after a GC), and the status entries go-control-plane holds afterwards: bounded means the peak
// does not grow with the requests and nothing stays.
//
//	go test ./internal/xdsserver/ -run '^$' -bench BenchmarkProxylessHostile -benchtime 1x
func BenchmarkProxylessHostile(b *testing.B) {
	dir := b.TempDir()
	envoyAddr, _ := ParseAddress("unix://" + filepath.Join(dir, "envoy", "xds.sock"))
	podsAddr, _ := ParseAddress("unix://" + filepath.Join(dir, "proxyless", "xds.sock"))
	envoy, err := Listen(envoyAddr)
	if err != nil {
		b.Fatal(err)
	}
	socket, err := ListenForPods(podsAddr)
	if err != nil {
		b.Fatal(err)
	}
	s := New(Options{Listener: envoy, ProxylessListener: socket, PodOfProcess: thisProcessIs(testPodUID), NodeEnvoy: testNodeEnvoy, Log: logr.Discard()})
	s.ResolvePodsWith(podsOf(testPods))
	testrun.UntilCleanup(b, "the server", s.Start)

	conns := make([]*grpc.ClientConn, maxPerPod)
	for i := range conns {
		if conns[i], err = grpc.NewClient(xdstest.Target(s.ProxylessAddress()), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = conns[i].Close() }()
	}

	var before, peak, after memory
	refused := map[codes.Code]int{}
	for b.Loop() {
		hostile(b, conns, warmUpRequests, &memory{})
		before = measure()
		peak = before
		refused = hostile(b, conns, hostileRequests, &peak)
		deadline := time.Now().Add(30 * time.Second)
		for s.proxylessStreams.open(testPodUID) > 0 || len(s.ProxylessNodes()) > 0 {
			if time.Now().After(deadline) {
				b.Fatalf("streams still open: %d", s.proxylessStreams.open(testPodUID))
			}
			time.Sleep(10 * time.Millisecond) // a benchmark, not a test: waiting out the last closes
		}
		after = measure()
	}
	statusEntries := len(s.proxylessCache.GetStatusKeys())
	b.ReportMetric(before.heapMiB, "heap-before-MiB")
	b.ReportMetric(peak.heapMiB, "heap-peak-MiB")
	b.ReportMetric(after.heapMiB, "heap-after-MiB")
	b.ReportMetric(before.rssMiB, "rss-before-MiB")
	b.ReportMetric(peak.rssMiB, "rss-peak-MiB")
	b.ReportMetric(after.rssMiB, "rss-after-MiB")
	b.ReportMetric(float64(statusEntries), "status-entries")
	b.Logf("%d hostile requests, answered %v; go-control-plane status entries after: %d", hostileRequests, refused, statusEntries)
	if statusEntries != 0 || refused[codes.OK] != 0 {
		b.Errorf("%d status entries remain, %d hostile requests were served", statusEntries, refused[codes.OK])
	}
}

// hostile sends requests hostile requests over conns, one worker per connection, sampling memory
// into peak; it returns how many were answered with each code.
func hostile(b *testing.B, conns []*grpc.ClientConn, requests int, peak *memory) map[codes.Code]int {
	var mu sync.Mutex
	codesSeen := map[codes.Code]int{}
	var sent int
	next := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if sent == requests {
			return 0, false
		}
		sent++
		if sent%500 == 0 {
			peak.max(measure())
		}
		return sent, true
	}
	oversize := make([]string, 0, 2*maxProxylessMessage/64)
	for i := range cap(oversize) {
		oversize = append(oversize, fmt.Sprintf("payments-%d.shop.aether.internal:%054d", i, 9090))
	}
	var wg sync.WaitGroup
	for _, conn := range conns {
		wg.Go(func() {
			ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
			for {
				n, ok := next()
				if !ok {
					return
				}
				code := hostileRequest(b, ads, n, oversize)
				mu.Lock()
				codesSeen[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return codesSeen
}

// hostileRequest sends the nth hostile request on a stream of its own and returns its answer's
// code.
func hostileRequest(b *testing.B, ads discoveryv3.AggregatedDiscoveryServiceClient, n int, oversize []string) codes.Code {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := ads.StreamAggregatedResources(ctx, grpc.WaitForReady(true))
	if err != nil {
		b.Fatalf("request %d: %v", n, err)
	}
	req := &discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Listeners}
	switch n % 3 {
	case 0: // a random node ID: another pod's, or longer than any pod's
		req.Node = proxylessNode(randomNodeID(), true)
	case 1: // a message over the bound
		req.Node, req.ResourceNames = proxylessNode(testPodID, true), oversize
	case 2: // its own node ID, then another on the same stream
		req.Node = proxylessNode(testPodID, true)
		if err := stream.Send(req); err != nil {
			b.Fatalf("request %d: %v", n, err)
		}
		req = &discoveryv3.DiscoveryRequest{TypeUrl: xdstest.Clusters, Node: proxylessNode(randomNodeID(), true)}
	}
	_ = stream.Send(req) // an oversize request may fail here or on Recv
	_, err = stream.Recv()
	return status.Code(err)
}

// randomNodeID is a node ID of a random pod; one in ten longer than any pod's.
func randomNodeID() string {
	name := "pod-" + strconv.FormatUint(rand.Uint64(), 36)
	if rand.IntN(10) == 0 {
		name += strings.Repeat("x", proxyless.MaxNodeIDLength)
	}
	return proxyless.NodeID("ns-"+strconv.Itoa(rand.IntN(1000)), name)
}

// memory is the process's heap in use (after a GC) and resident set, in MiB.
type memory struct{ heapMiB, rssMiB float64 }

func (m *memory) max(o memory) {
	m.heapMiB, m.rssMiB = max(m.heapMiB, o.heapMiB), max(m.rssMiB, o.rssMiB)
}

// measure reads the process's memory after a GC.
func measure() memory {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memory{heapMiB: float64(ms.HeapInuse) / (1 << 20), rssMiB: rssMiB()}
}

// rssMiB is the process's resident set (VmRSS), in MiB.
func rssMiB() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
