// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package demand

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

const (
	catalogHTTP = "catalog.shop.aether.internal:8080|web/frontend"
	catalogTCP  = "tcp:catalog.shop.aether.internal:5432|web/frontend"
	payments    = "payments.shop.aether.internal:8080|web/frontend"
	noService   = "nosuch.shop.aether.internal:8080"
)

// open is Open with the misses counted in misses.
func open(t *testing.T, o Options, misses map[string]int) *Record {
	t.Helper()
	o.Miss = func(service string) { misses[service]++ }
	r, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The on-demand record (DESIGN section 8, Distribution; the workload page, "Declaring
// upstreams"): every on-demand request for an undeclared service is a miss, reported by service
// and logged once per (identity, service) with the pods that asked; the service then stays
// carried while used, and goes after an hour idle. The mesh is the declared-upstreams scenario:
// frontend (web) declares payments.shop, not catalog.shop.
func TestRecordCountLogAndExpire(t *testing.T) {
	m := xdstest.DeclaredUpstreams()
	frontend := xdstest.Identity("web", "frontend")
	var logged []string
	pokes := 0
	misses := map[string]int{}
	r := open(t, Options{TTL: time.Hour, Log: funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})}, misses)
	ask := r.Ask(m.Node.Name, func() { pokes++ })
	demanded := func(got model.Mesh) []string { return got.Demanded[frontend] }
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	ask("another-node", []string{catalogHTTP})
	if got := r.Apply(m, t0); len(got.Demanded) != 0 {
		t.Fatalf("another node's request was taken: %v", got.Demanded)
	}
	ask(m.Node.Name, []string{catalogHTTP, catalogTCP, payments, noService})
	if pokes != 1 {
		t.Errorf("%d rebuilds asked for, want one for this node's request, none for another's", pokes)
	}
	got := r.Apply(m, t0)
	if !slices.Equal(demanded(got), []string{"catalog.shop"}) || len(got.Demanded) != 1 {
		t.Errorf("demanded %v, want frontend's catalog.shop only", got.Demanded)
	}
	if misses["catalog.shop"] != 2 || misses["payments.shop"] != 0 {
		t.Errorf("misses %v, want catalog.shop 2 (one per on-demand request), payments.shop none: it is declared", misses)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], `"service"="catalog.shop"`) || !strings.Contains(logged[0], frontend) ||
		!strings.Contains(logged[0], "web/frontend-0") {
		t.Errorf("logged %q, want one line naming catalog.shop, frontend's identity and its pod web/frontend-0", logged)
	}

	// Asked again: counted again, not logged again.
	ask(m.Node.Name, []string{catalogHTTP})
	if got := r.Apply(m, t0.Add(30*time.Minute)); !slices.Equal(demanded(got), []string{"catalog.shop"}) || misses["catalog.shop"] != 3 || len(logged) != 1 {
		t.Errorf("asked again: demanded %v, misses %v, %d lines; want catalog.shop, 3, 1 line", got.Demanded, misses, len(logged))
	}
	// Used at 0:50 (an access-log entry): it stays an hour from then, not from 0:30.
	r.Touch(catalogHTTP, t0.Add(50*time.Minute))
	if got := r.Apply(m, t0.Add(100*time.Minute)); !slices.Equal(demanded(got), []string{"catalog.shop"}) {
		t.Errorf("used 50 minutes ago: demanded %v, want catalog.shop still", got.Demanded)
	}
	if next := r.Next(); !next.Equal(t0.Add(110 * time.Minute)) {
		t.Errorf("next expiry %s, want 1:50", next)
	}
	if got := r.Apply(m, t0.Add(110*time.Minute)); len(got.Demanded) != 0 {
		t.Errorf("idle an hour: demanded %v, want nothing", got.Demanded)
	}
	// Gone, it is a miss again, logged again.
	ask(m.Node.Name, []string{catalogHTTP})
	if got := r.Apply(m, t0.Add(2*time.Hour)); !slices.Equal(demanded(got), []string{"catalog.shop"}) || len(logged) != 2 {
		t.Errorf("after expiry: demanded %v, %d lines; want catalog.shop and a second line", got.Demanded, len(logged))
	}
}

// TestRecordAllEager: a node that carries every service fetches nothing: the record neither
// changes the mesh nor reports a miss.
func TestRecordAllEager(t *testing.T) {
	m := xdstest.DeclaredUpstreams()
	m.Upstreams = model.UpstreamsAll
	misses := map[string]int{}
	r := open(t, Options{Log: logr.Discard()}, misses)
	r.Ask(m.Node.Name, func() {})(m.Node.Name, []string{catalogHTTP})
	got := r.Apply(m, time.Now())
	if got.Demanded != nil || len(misses) != 0 {
		t.Errorf("all eager: demanded %v, misses %v", got.Demanded, misses)
	}
}

// TestRecordOutlivesTheAgent: with a state file, a record opened again (a restarted agent)
// carries what was fetched before from its first Apply, with its last use, so it goes idle
// when it would have; a demand whose identity left the node while no agent ran is dropped, and
// the file says so. A file that does not parse is an error naming it and the fix.
func TestRecordOutlivesTheAgent(t *testing.T) {
	m := xdstest.DeclaredUpstreams()
	frontend := xdstest.Identity("web", "frontend")
	file := filepath.Join(t.TempDir(), "demands.json")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	first := open(t, Options{Log: logr.Discard(), File: file}, map[string]int{})
	first.Ask(m.Node.Name, func() {})(m.Node.Name, []string{catalogHTTP})
	first.Apply(m, t0)
	first.Touch(catalogHTTP, t0.Add(10*time.Minute))
	first.Apply(m, t0.Add(10*time.Minute)) // a use, written once the file is a minute old

	misses := map[string]int{}
	again := open(t, Options{Log: logr.Discard(), File: file}, misses)
	if got := again.Apply(m, t0.Add(20*time.Minute)); !slices.Equal(got.Demanded[frontend], []string{"catalog.shop"}) {
		t.Errorf("restarted: demanded %v, want frontend's catalog.shop from the first build", got.Demanded)
	}
	if len(misses) != 0 {
		t.Errorf("restarted: misses %v, want none: nothing was asked", misses)
	}
	if next := again.Next(); !next.Equal(t0.Add(70 * time.Minute)) {
		t.Errorf("restarted: next expiry %s, want 1:10 (an hour after the last use)", next)
	}

	left := m
	left.Pods = slices.DeleteFunc(slices.Clone(m.Pods), func(p model.LocalPod) bool { return p.Identity == frontend })
	third := open(t, Options{Log: logr.Discard(), File: file}, map[string]int{})
	if got := third.Apply(left, t0.Add(30*time.Minute)); len(got.Demanded) != 0 {
		t.Errorf("frontend left the node: demanded %v, want nothing", got.Demanded)
	}
	if data, err := os.ReadFile(file); err != nil || strings.Contains(string(data), "catalog") {
		t.Errorf("frontend left the node: the file holds %q (%v), want no demand", data, err)
	}

	if err := os.WriteFile(file, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{File: file}); err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("a file that does not parse: %v, want an error naming it and the fix", err)
	}
}
