// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/envoytest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// TestHostsThatNameNoServiceSubscribeNothing: on a node that fetches on demand, 100 000 distinct
// Hosts under the mesh domain that name no service, sent to the proxy port by a client pod, are
// each answered at once, 404 not-mesh-name, and none becomes an on-demand request: the agent is
// handed no name, the node's Envoy adds no cluster and none of its fetches times out, and both
// memories stay bounded. (Each was an on-demand subscription the node's Envoy kept, a rebuild of
// the agent's, and a 503 after the 2 s timeout.) A few such Hosts through the capture listener
// subscribe nothing either. Then catalog, an undeclared service, is still fetched and reached as
// the walk expects.
func TestHostsThatNameNoServiceSubscribeNothing(t *testing.T) {
	lm := startMesh(t, xdstest.Scenarios()["declared-upstreams"], nil)
	var handed atomic.Int64
	lm.srv.OnClusterDemand(func(node string, names []string) {
		if node == xdstest.ThisNode {
			handed.Add(int64(len(names)))
		}
	})
	toCatalog := func(lc liveCase) bool {
		return lc.Client.Name == "frontend-0" && lc.Service.Name == "catalog"
	}
	toCatalogHTTP, ok := firstHTTPCase(t, lm, toCatalog)
	if !ok {
		t.Fatal("frontend has no HTTP/1.1 case to catalog: the test proves nothing")
	}
	frontend := lm.fabric.pods[xds.PodKey(toCatalogHTTP.Client.Namespace, toCatalogHTTP.Client.Name)]
	here := lm.nodes[xdstest.ThisNode]
	const clusterAdded, envoyMemory = "cluster_manager.cluster_added", "server.memory_allocated"
	watched := regexp.MustCompile(`^cluster_manager\.cluster_added$|on_demand_cluster_(timeout|missing)$|^server\.memory_allocated$`)
	read := func() map[string]uint64 {
		stats, err := here.envoy.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return envoytest.Matching(stats, watched)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before, heapBefore := read(), heap()

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: hostsConns,
		DialContext: func(ctx context.Context, network, address string) (c net.Conn, err error) {
			if doErr := frontend.Do(func() { c, err = (&net.Dialer{}).DialContext(ctx, network, address) }); doErr != nil {
				return nil, doErr
			}
			return c, err
		},
	}}
	defer client.CloseIdleConnections()
	proxyPort := "http://" + net.JoinHostPort(toCatalogHTTP.conn.DstIP, "18081") + "/"
	const hosts = 100_000
	start := time.Now()
	var wrong atomic.Int64
	var firstWrong atomic.Value
	var wg sync.WaitGroup
	for w := range hostsConns {
		wg.Go(func() {
			for i := w; i < hosts; i += hostsConns {
				host := fmt.Sprintf("h%d.shop.%s:8080", i, xdstest.Domain)
				if got := get(client, proxyPort, host); got != "404 not-mesh-name" {
					if wrong.Add(1) == 1 {
						firstWrong.Store(host + ": " + got)
					}
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if n := wrong.Load(); n > 0 {
		t.Errorf("%d of %d Hosts naming no service were not answered 404 not-mesh-name at the proxy port; the first: %v", n, hosts, firstWrong.Load())
	}
	// Through the capture listener: the passthrough, whatever the original destination answers.
	capture := "http://" + net.JoinHostPort(toCatalogHTTP.conn.DstIP, strconv.Itoa(int(toCatalogHTTP.conn.DstPort))) + "/"
	for i := range 20 {
		_ = get(client, capture, fmt.Sprintf("c%d.shop.%s:8080", i, xdstest.Domain))
	}
	after, heapAfter := read(), heap()
	t.Logf("%d Hosts answered in %s; the agent was handed %d names; the node Envoy added %d clusters, allocated %d KiB before, %d KiB after; the agent's heap %d KiB before, %d KiB after",
		hosts, took.Round(time.Millisecond), handed.Load(), after[clusterAdded]-before[clusterAdded],
		before[envoyMemory]>>10, after[envoyMemory]>>10, heapBefore>>10, heapAfter>>10)
	if n := handed.Load(); n != 0 {
		t.Errorf("the agent was handed %d on-demand names for Hosts that name no service, want none", n)
	}
	for stat, v := range after {
		if stat == envoyMemory {
			continue
		}
		if v != before[stat] {
			t.Errorf("%s: %d before the Hosts, %d after", stat, before[stat], v)
		}
	}
	// Bounded, not equal: both processes allocate as they serve. 100 000 subscriptions would be
	// tens of MiB in either.
	const bound = 16 << 20
	if grew := int64(after[envoyMemory]) - int64(before[envoyMemory]); grew > bound {
		t.Errorf("the node Envoy's allocated memory grew %d KiB over the Hosts, want at most %d KiB", grew>>10, bound>>10)
	}
	if grew := int64(heapAfter) - int64(heapBefore); grew > bound {
		t.Errorf("the agent's heap grew %d KiB over the Hosts, want at most %d KiB", grew>>10, bound>>10)
	}

	start = time.Now()
	r := lm.walk(t, toCatalog)
	t.Logf("then %s, in %s", r, time.Since(start).Round(time.Millisecond))
	if r.cases == 0 {
		t.Fatal("no connection was walked: the test proves nothing")
	}
}

// hostsConns is how many keep-alive connections TestHostsThatNameNoServiceSubscribeNothing sends
// its Hosts over, each from its own goroutine.
const hostsConns = 8

// get sends GET url with Host host and returns "<status> <x-aether-error>", or the error.
func get(client *http.Client, url, host string) string {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return strconv.Itoa(resp.StatusCode) + " " + resp.Header.Get(resolve.ErrorHeader)
}

// firstHTTPCase is the first HTTP/1.1 case to port 8080 of those keep selects, its request a copy.
func firstHTTPCase(t testing.TB, lm *liveMesh, keep func(liveCase) bool) (liveCase, bool) {
	for _, lc := range lm.cases(t, keep) {
		if lc.shape == xdswalk.ShapeHTTP11 && lc.conn.DstPort == 8080 && lc.conn.HTTP != nil {
			r := *lc.conn.HTTP
			lc.conn.HTTP = &r
			return lc, true
		}
	}
	return liveCase{}, false
}

// TestWhatWasFetchedOnDemandSurvivesARestart: an agent that restarts starts with no record of
// what its node fetched on demand, and publishes the node's configuration without it; its Envoy
// reconnects, saying which clusters it subscribed to by name and which versions it holds. What
// it fetched must stay in service: not removed and fetched again (a connection that needs it in
// between waits for the on-demand timeout, or fails), but carried on, and the agent told.
func TestWhatWasFetchedOnDemandSurvivesARestart(t *testing.T) {
	lm := startMesh(t, xdstest.Scenarios()["declared-upstreams"], nil)
	toCatalog := func(lc liveCase) bool {
		return lc.Client.Name == "frontend-0" && lc.Service.Name == "catalog"
	}
	if r := lm.walk(t, toCatalog); r.cases == 0 {
		t.Fatal("no connection was walked: the test proves nothing")
	}
	here := lm.nodes[xdstest.ThisNode]
	before := odcdsStats(t, here)

	srv := lm.srv.restart(t)
	asked := make(chan []string, 1)
	srv.OnClusterDemand(func(node string, names []string) {
		if node == xdstest.ThisNode {
			select {
			case asked <- names:
			default:
			}
		}
	})
	for _, name := range slices.Sorted(maps.Keys(lm.nodes)) {
		// As a restarted agent does: its first build reads its record (answerDemand's first
		// answer), then it answers its node's Envoy.
		n := lm.nodes[name]
		if _, err := srv.PublishSecrets(name, n.issued); err != nil {
			t.Fatal(err)
		}
		if n.mesh.Upstreams != model.UpstreamsDeclared {
			if _, err := srv.Publish(name, n.res); err != nil {
				t.Fatal(err)
			}
			continue
		}
		poke := answerDemand(t, srv, lm.demandsFile(name), n.mesh, lm.builds[name])
		poke()
	}
	select {
	case names := <-asked:
		t.Logf("reconnected, subscribed by name to %v", names)
	case <-time.After(30 * time.Second):
		t.Fatal("Envoy did not reconnect and name what it fetched on demand within 30 s")
	}
	r := lm.walk(t, toCatalog)
	t.Logf("after the restart: %s", r)
	after := odcdsStats(t, here)
	for _, stat := range slices.Sorted(maps.Keys(after)) {
		if after[stat] != before[stat] {
			t.Errorf("%s: %d before the restart, %d after: what was fetched on demand was dropped and fetched again", stat, before[stat], after[stat])
		}
	}
}

// odcdsStats are the node Envoy's counters of clusters removed and of on-demand fetches that
// timed out or found nothing.
func odcdsStats(t testing.TB, n *node) map[string]uint64 {
	t.Helper()
	stats, err := n.envoy.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return envoytest.Matching(stats, regexp.MustCompile(`^cluster_manager\.cluster_removed$|on_demand_cluster_(timeout|missing)$|odcds\.update_rejected$`))
}
