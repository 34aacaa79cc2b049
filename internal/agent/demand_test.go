// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The on-demand record (DESIGN section 8, Distribution; the workload page, "Declaring
// upstreams"): every on-demand request for an undeclared service is a miss, counted by service
// and logged once per (identity, service) with the pods that asked; the service then stays
// carried while used, and goes after an hour idle. The mesh is the declared-upstreams scenario:
// frontend (web) declares payments.shop, not catalog.shop.
func TestDemandsCountLogAndExpire(t *testing.T) {
	const (
		catalogHTTP = "catalog.shop.aether.internal:8080|web/frontend"
		catalogTCP  = "tcp:catalog.shop.aether.internal:5432|web/frontend"
		payments    = "payments.shop.aether.internal:8080|web/frontend"
		noService   = "nosuch.shop.aether.internal:8080"
	)
	m := xdstest.DeclaredUpstreams()
	frontend := xdstest.Identity("web", "frontend")
	var logged []string
	pokes := 0
	d := newDemands(time.Hour, funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}), func() { pokes++ })
	ask := d.ask(m.Node.Name)
	misses := func() float64 { return testutil.ToFloat64(upstreamMisses.WithLabelValues("catalog.shop")) }
	paymentsMisses := func() float64 { return testutil.ToFloat64(upstreamMisses.WithLabelValues("payments.shop")) }
	demanded := func(got model.Mesh) []string { return got.Demanded[frontend] }
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	ask("another-node", []string{catalogHTTP})
	if got := d.apply(m, t0); len(got.Demanded) != 0 {
		t.Fatalf("another node's request was taken: %v", got.Demanded)
	}
	before, beforePayments := misses(), paymentsMisses()
	ask(m.Node.Name, []string{catalogHTTP, catalogTCP, payments, noService})
	if pokes != 1 {
		t.Errorf("%d rebuilds asked for, want one for this node's request, none for another's", pokes)
	}
	got := d.apply(m, t0)
	if !slices.Equal(demanded(got), []string{"catalog.shop"}) || len(got.Demanded) != 1 {
		t.Errorf("demanded %v, want frontend's catalog.shop only", got.Demanded)
	}
	if n := misses() - before; n != 2 {
		t.Errorf("catalog.shop misses +%v, want +2 (one per on-demand request)", n)
	}
	if n := paymentsMisses() - beforePayments; n != 0 {
		t.Errorf("payments.shop misses +%v, want 0: it is declared", n)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], `"service"="catalog.shop"`) || !strings.Contains(logged[0], frontend) ||
		!strings.Contains(logged[0], "web/frontend-0") {
		t.Errorf("logged %q, want one line naming catalog.shop, frontend's identity and its pod web/frontend-0", logged)
	}

	// Asked again: counted again, not logged again.
	ask(m.Node.Name, []string{catalogHTTP})
	if got := d.apply(m, t0.Add(30*time.Minute)); !slices.Equal(demanded(got), []string{"catalog.shop"}) || misses()-before != 3 || len(logged) != 1 {
		t.Errorf("asked again: demanded %v, misses +%v, %d lines; want catalog.shop, +3, 1 line", got.Demanded, misses()-before, len(logged))
	}
	// Used at 0:50 (an access-log entry): it stays an hour from then, not from 0:30.
	d.touch(catalogHTTP, t0.Add(50*time.Minute))
	if got := d.apply(m, t0.Add(100*time.Minute)); !slices.Equal(demanded(got), []string{"catalog.shop"}) {
		t.Errorf("used 50 minutes ago: demanded %v, want catalog.shop still", got.Demanded)
	}
	if next := d.next(); !next.Equal(t0.Add(110 * time.Minute)) {
		t.Errorf("next expiry %s, want 1:50", next)
	}
	if got := d.apply(m, t0.Add(110*time.Minute)); len(got.Demanded) != 0 {
		t.Errorf("idle an hour: demanded %v, want nothing", got.Demanded)
	}
	// Gone, it is a miss again, logged again.
	ask(m.Node.Name, []string{catalogHTTP})
	if got := d.apply(m, t0.Add(2*time.Hour)); !slices.Equal(demanded(got), []string{"catalog.shop"}) || len(logged) != 2 {
		t.Errorf("after expiry: demanded %v, %d lines; want catalog.shop and a second line", got.Demanded, len(logged))
	}
}

// TestDemandsAllEager: a node that carries every service fetches nothing: the record neither
// changes the mesh nor counts.
func TestDemandsAllEager(t *testing.T) {
	m := xdstest.DeclaredUpstreams()
	m.Upstreams = model.UpstreamsAll
	d := newDemands(time.Hour, funcr.New(func(_, _ string) {}, funcr.Options{}), func() {})
	d.ask(m.Node.Name)(m.Node.Name, []string{"catalog.shop.aether.internal:8080|web/frontend"})
	before := testutil.ToFloat64(upstreamMisses.WithLabelValues("catalog.shop"))
	got := d.apply(m, time.Now())
	if got.Demanded != nil || testutil.ToFloat64(upstreamMisses.WithLabelValues("catalog.shop")) != before {
		t.Errorf("all eager: demanded %v, misses changed", slices.Collect(maps.Keys(got.Demanded)))
	}
}
