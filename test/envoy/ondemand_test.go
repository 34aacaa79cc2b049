// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/envoytest"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// TestAMeshNameNoServiceHasLeavesOnDemandWorking: on a node that fetches on demand, the first
// name a capture chain asks for is a Host under the mesh domain that names no service (a typo),
// which the agent cannot answer. Envoy's on-demand discovery of that chain must still fetch
// what comes next: catalog, an undeclared service, through the same chain, must be reached as
// the walk expects.
func TestAMeshNameNoServiceHasLeavesOnDemandWorking(t *testing.T) {
	lm := startMesh(t, xdstest.Scenarios()["declared-upstreams"], nil)
	toCatalog := func(lc liveCase) bool {
		return lc.Client.Name == "frontend-0" && lc.Service.Name == "catalog"
	}
	typo, ok := firstHTTPCase(t, lm, toCatalog)
	if !ok {
		t.Fatal("frontend has no HTTP/1.1 case to catalog: the test proves nothing")
	}
	typo.conn.HTTP.Host = "catalgo.shop.svc." + xdstest.Domain
	c := client{ns: lm.fabric.pods[xds.PodKey(typo.Client.Namespace, typo.Client.Name)], podOf: lm.fabric.pod,
		window: lm.filtersTimeout + 2*time.Second}
	start := time.Now()
	seen := c.send(typo.conn, typo.shape)
	t.Logf("%s (no such service): %s, after %s", typo.conn.HTTP.Host, seen, time.Since(start).Round(time.Millisecond))
	if seen.Kind != xdswalk.SawAnswer || seen.Status != 503 {
		t.Errorf("%s: saw %s, want Envoy's 503", typo.conn.HTTP.Host, seen)
	}
	start = time.Now()
	r := lm.walk(t, toCatalog)
	t.Logf("then %s, in %s", r, time.Since(start).Round(time.Millisecond))
	if r.cases == 0 {
		t.Fatal("no connection was walked: the test proves nothing")
	}
}

// firstHTTPCase is the first HTTP/1.1 case to port 8080 of those keep selects, its request a copy.
func firstHTTPCase(t *testing.T, lm *liveMesh, keep func(liveCase) bool) (liveCase, bool) {
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
func odcdsStats(t *testing.T, n *node) map[string]uint64 {
	t.Helper()
	stats, err := n.envoy.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return envoytest.Matching(stats, regexp.MustCompile(`^cluster_manager\.cluster_removed$|on_demand_cluster_(timeout|missing)$|odcds\.update_rejected$`))
}
