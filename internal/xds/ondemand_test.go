// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// onDemandFetcher is xdswalk.FetchAsTheAgent, a failed build failing t.
func onDemandFetcher(t testing.TB, m model.Mesh, build func(model.Mesh) (xds.Resources, error)) xdssim.Fetcher {
	return xdswalk.FetchAsTheAgent(m, build, func(err error) { t.Errorf("%v", err) })
}

// TestOnDemand walks the design's distribution (DESIGN section 8; the workload page, "Declaring
// upstreams") through the simulator on the declared-upstreams scenario: frontend declares
// payments.shop. The expectations are the page's sentences: a declared upstream is warm (the
// request flows, nothing is fetched); an undeclared one still works, its first request pausing
// while the cluster is fetched on demand (ODCDS) and later ones finding it; a name under the mesh
// domain that is no service fails after the on-demand timeout, 2 s; a name outside the domain is
// answered at once. Clusters are spelled from names.go's documented shapes.
func TestOnDemand(t *testing.T) {
	m := xdstest.DeclaredUpstreams()
	client := xds.PodKey("web", "frontend-0")
	const (
		payments = "payments.shop.aether.internal"
		catalog  = "catalog.shop.aether.internal"
		vip      = "10.96.0.11" // catalog's
	)
	proxy := func(host string) xdssim.Conn {
		return xdssim.Conn{Listener: xds.CaptureListener(client), DstIP: vip, DstPort: 18081, HTTP: &xdssim.Request{Host: host, Path: "/"}}
	}
	tcp := xdssim.Conn{Listener: xds.CaptureListener(client), DstIP: vip, DstPort: 5432}
	type want struct {
		verdict  xdssim.Verdict
		cluster  string   // the target, when forwarded
		status   int      // the answer, when answered
		fetched  []string // asked for on demand, in order
		waited   time.Duration
		describe string
	}
	steps := []struct {
		conn xdssim.Conn
		want want
	}{
		{proxy(payments + ":8080"), want{verdict: xdssim.Forwarded, cluster: payments + ":8080|web/frontend",
			describe: "a declared upstream is warm: no fetch"}},
		{proxy(catalog + ":8080"), want{verdict: xdssim.Forwarded, cluster: catalog + ":8080|web/frontend",
			fetched: []string{catalog + ":8080|web/frontend"}, describe: "an undeclared service: fetched on demand, then it flows"}},
		{proxy(catalog + ":8080"), want{verdict: xdssim.Forwarded, cluster: catalog + ":8080|web/frontend",
			describe: "the fetched cluster stays: the next request flows at once"}},
		{tcp, want{verdict: xdssim.Forwarded, cluster: "tcp:" + catalog + ":5432|web/frontend",
			fetched: []string{"tcp:" + catalog + ":5432|web/frontend"}, describe: "raw TCP to an undeclared service: tcp_proxy fetches on demand"}},
		{proxy("nosuch.shop.aether.internal:8080"), want{verdict: xdssim.Answered, status: 404,
			describe: "a name under the mesh domain that is no service: 404 not-mesh-name at once, nothing fetched"}},
		{proxy("example.com"), want{verdict: xdssim.Answered, status: 404, describe: "a name outside the domain: 404 at once"}},
	}
	sim := xdssim.New(build(t, m))
	if err := sim.Check(); err != nil {
		t.Fatalf("Envoy would reject the configuration: %v", err)
	}
	sim.FetchOnDemand(onDemandFetcher(t, m, xds.Build))
	for _, s := range steps {
		out := sim.Dial(s.conn)
		w := s.want
		ok := out.Verdict == w.verdict && slices.Equal(out.OnDemand, w.fetched) && out.OnDemandWaited == w.waited
		switch w.verdict {
		case xdssim.Forwarded:
			// The first target (payments' HTTPRoute splits 9:1 with its canary).
			ok = ok && len(out.Targets) > 0 && out.Targets[0].Cluster == w.cluster
		case xdssim.Answered:
			ok = ok && out.Response.Status == w.status
		}
		if !ok {
			t.Errorf("%s: %s; fetched on demand %q after waiting %s; want %s (cluster %q, status %d), fetched %q after %s",
				w.describe, out, out.OnDemand, out.OnDemandWaited, w.verdict, w.cluster, w.status, w.fetched, w.waited)
		}
	}
}

// TestOnDemandUnanswered: without the control plane's answer (a simulator that fetches nothing),
// the undeclared service's request waits the whole timeout and fails: the answer from the full
// model is what makes it flow in TestOnDemand.
func TestOnDemandUnanswered(t *testing.T) {
	sim := xdssim.New(build(t, xdstest.DeclaredUpstreams()))
	out := sim.Dial(xdssim.Conn{Listener: xds.CaptureListener(xds.PodKey("web", "frontend-0")), DstIP: "10.96.0.11", DstPort: 18081,
		HTTP: &xdssim.Request{Host: "catalog.shop.aether.internal:8080", Path: "/"}})
	if out.Verdict != xdssim.Answered || out.Response.Status != 503 || out.OnDemandWaited != xds.OnDemandTimeout {
		t.Errorf("catalog unanswered: %s after %s; want 503 after %s", out, out.OnDemandWaited, xds.OnDemandTimeout)
	}
}

// TestAllEagerFetchesNothing: the same mesh rendered with every service up front
// (model.UpstreamsAll) carries catalog for frontend, runs no on-demand filter and sends a name
// under the mesh domain that is no service to the catch-all's own answer, at once.
func TestAllEagerFetchesNothing(t *testing.T) {
	m := xdstest.DeclaredUpstreams()
	m.Upstreams = model.UpstreamsAll
	sim := xdssim.New(build(t, m))
	dial := func(host string) xdssim.Outcome {
		return sim.Dial(xdssim.Conn{Listener: xds.CaptureListener(xds.PodKey("web", "frontend-0")), DstIP: "10.96.0.11", DstPort: 18081,
			HTTP: &xdssim.Request{Host: host, Path: "/"}})
	}
	if out := dial("catalog.shop.aether.internal:8080"); out.Verdict != xdssim.Forwarded || len(out.OnDemand) != 0 {
		t.Errorf("catalog, all eager: %s, fetched %q; want forwarded with nothing fetched", out, out.OnDemand)
	}
	if out := dial("nosuch.shop.aether.internal:8080"); out.Verdict != xdssim.Answered || out.Response.Status != 404 || out.OnDemandWaited != 0 {
		t.Errorf("a name of no service, all eager: %s after %s; want 404 at once", out, out.OnDemandWaited)
	}
}

// TestDeclaredUpstreamsAreExactlyWarm: per local identity, the clusters carried up front are
// exactly those of its own service, its pods' declared upstreams and their routes' backends
// (DESIGN section 8), read from the built clusters' names (names.go: <base>|<ns>/<sa>).
func TestDeclaredUpstreamsAreExactlyWarm(t *testing.T) {
	res := build(t, xdstest.DeclaredUpstreams())
	carried := map[string][]string{}
	for _, c := range res.Clusters {
		if target, ok := xds.ParseCluster(c.GetName()); ok && !target.Inbound {
			carried[target.SourceKey] = append(carried[target.SourceKey], target.FQDN)
		}
	}
	for key := range carried {
		slices.Sort(carried[key])
		carried[key] = slices.Compact(carried[key])
	}
	want := map[string][]string{
		// frontend: its own service, payments (declared) and payments-canary (a backend of
		// payments' routes). Not catalog.
		"web/frontend": {"frontend.web.aether.internal", "payments-canary.shop.aether.internal", "payments.shop.aether.internal"},
		// payments (its pod on this node declares nothing): its own service and its routes' backend.
		"shop/payments": {"payments-canary.shop.aether.internal", "payments.shop.aether.internal"},
	}
	for key, fqdns := range want {
		if !slices.Equal(carried[key], fqdns) {
			t.Errorf("%s carries %q up front; want %q", key, carried[key], fqdns)
		}
	}
	if len(carried) != len(want) {
		t.Errorf("carried by %d identities, want %d: %v", len(carried), len(want), carried)
	}
}
