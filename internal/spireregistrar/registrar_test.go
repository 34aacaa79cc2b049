// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spireregistrar

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	delegatedv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/agent/delegatedidentity/v1"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/aether-operator/internal/spiretest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// TestRegistration: the alias's and the delegate's entries; a MeshService identity gets one
// entry per node that runs a mesh pod of its ServiceAccount, parented to that node's SPIRE agent
// (k8s_psat's ID, of the node's UID), and none on any other node: a pod not yet bound and a pod
// outside the mesh add none, a bound pod adds its node's, a node keeps it while one of its pods
// of it runs and loses it when the last finishes or goes, or when the node goes; deleting the
// MeshService deletes the rest.
func TestRegistration(t *testing.T) {
	r := newRig(t, DefaultResync, "")
	alias := Entry{ID: EntryID(r.spire.NodeAlias), SPIFFEID: r.spire.NodeAlias, Parent: ServerID(r.spire.TrustDomain),
		Selectors: []workloadidentity.Selector{{Type: "k8s_psat", Value: "cluster:aether"}}}
	delegateID := spiffeid.RequireFromPath(r.spire.TrustDomain, "/ns/"+delegateNamespace+"/sa/"+DefaultDelegateServiceAccount)
	delegate := Entry{ID: EntryID(delegateID), SPIFFEID: delegateID, Parent: r.spire.NodeAlias,
		Selectors: workloadidentity.PodSelectors(delegateNamespace, DefaultDelegateServiceAccount)}
	r.waitEntry(t, alias)
	r.waitEntry(t, delegate)

	a, b, c := node(t), node(t), node(t)
	ms, onA := r.service(t, "payments", a)
	onB, onC := r.entryOn(t, onA.SPIFFEID, "payments", b), r.entryOn(t, onA.SPIFFEID, "payments", c)
	r.meshPod(t, "pending", "payments", nil)     // not scheduled: no node holds it for this pod
	pod(t, r.ns, "outsider", "payments", c, nil) // not the mesh's: c gets nothing
	first := r.meshPod(t, "payments-1", "payments", a)
	r.waitOnly(t, onA.SPIFFEID, onA)

	second := r.meshPod(t, "payments-2", "payments", a)
	onBPod := r.meshPod(t, "payments-3", "payments", b)
	r.waitOnly(t, onA.SPIFFEID, onA, onB)

	// The pod on b finishes: b loses the identity.
	onBPod.Status.Phase = corev1.PodSucceeded
	if err := env.Client.Status().Update(testContext(t), onBPod); err != nil {
		t.Fatal(err)
	}
	r.waitOnly(t, onA.SPIFFEID, onA)

	// One of a's two pods goes: a keeps it. The pod informer delivers events in order, so once
	// the registrar has written c's entry for a pod created after the deletion, it has seen the
	// deletion too.
	deletePod(t, first)
	r.meshPod(t, "payments-4", "payments", c)
	r.waitOnly(t, onA.SPIFFEID, onA, onC)
	// a's last pod goes: a loses it.
	deletePod(t, second)
	r.waitOnly(t, onA.SPIFFEID, onC)
	// Node c goes (its pods with it, in a cluster): its agent's entry goes.
	if err := env.Client.Delete(testContext(t), c); err != nil {
		t.Fatal(err)
	}
	r.waitOnly(t, onA.SPIFFEID)

	r.meshPod(t, "payments-5", "payments", b)
	r.waitOnly(t, onA.SPIFFEID, onB)
	r.deleteService(t, ms)
	r.waitOnly(t, onA.SPIFFEID)
	r.waitEntry(t, alias) // the others stay
	r.waitEntry(t, delegate)
}

// waitOnly polls until SPIRE's entries for SPIFFE ID id are exactly want.
func (r *rig) waitOnly(t *testing.T, id spiffeid.ID, want ...Entry) {
	t.Helper()
	var parents []string
	for _, w := range want {
		parents = append(parents, w.Parent.String())
	}
	testenv.Eventually(t, fmt.Sprintf("the entries of %s exactly under %v", id, parents), func() error {
		var got []Entry
		for _, e := range r.entries(t) {
			if e.SPIFFEID == id {
				got = append(got, e)
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d entries: %v", len(got), got)
		}
		for _, w := range want {
			if !slices.ContainsFunc(got, func(e Entry) bool { return e.ID == w.ID && e.equal(w) }) {
				return fmt.Errorf("no entry %+v among %v", w, got)
			}
		}
		return nil
	})
}

// waitSVID asks the Delegated Identity API on admin, as the node agent does (this process is
// the authorized delegate), for the X.509 SVID of selectors, until it holds one for want, and
// returns its leaf after checking it chains to the agent's bundle.
func waitSVID(t *testing.T, spire *spiretest.Env, admin string, want spiffeid.ID, selectors []workloadidentity.Selector) *x509.Certificate {
	t.Helper()
	client := spiretest.DelegatedClient(t, admin)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sels []*types.Selector
	for _, s := range selectors {
		sels = append(sels, &types.Selector{Type: s.Type, Value: s.Value})
	}
	svid := spiretest.WaitX509SVID(ctx, t, client, want, sels)
	chain, err := parseChain(svid.X509Svid.CertChain)
	if err != nil {
		t.Fatal(err)
	}
	verifyChain(t, ctx, client, spire, chain)
	return chain[0]
}

func parseChain(ders [][]byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for _, der := range ders {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// verifyChain checks chain's leaf chains to the trust domain's bundle the agent serves.
func verifyChain(t *testing.T, ctx context.Context, client delegatedv1.DelegatedIdentityClient, spire *spiretest.Env, chain []*x509.Certificate) {
	t.Helper()
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range spiretest.X509Bundle(ctx, t, client, spire.TrustDomain) {
		roots.AddCert(c)
	}
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("the SVID does not chain to the agent's bundle: %v", err)
	}
}

// TestOwnership: entries the registrar did not create — under another parent, under the alias
// without the mark, the harness's own delegate entry, the join token's entry for the alias, and a
// user's registration of an identity the registrar wants — survive every reconcile, unchanged; the user's registration provides
// its identity (no second entry). A reconcile with nothing to do lists twice and writes nothing.
// Negative control: a registrar whose mark check is off deletes them, and the same survival
// check then fails.
func TestOwnership(t *testing.T) {
	start := writes(t)
	r := newRig(t, time.Second, "")
	td := r.spire.TrustDomain
	a := node(t)
	ms, payments := r.service(t, "payments", a)
	_, billing := r.service(t, "billing", a)
	r.meshPod(t, "payments", "payments", a)
	r.meshPod(t, "billing", "billing", a)
	foreign := []Entry{
		// The same SPIFFE ID as the registrar's, under another parent.
		r.handMade(t, Entry{SPIFFEID: payments.SPIFFEID, Parent: spiffeid.RequireFromPath(td, "/other-agents"), Selectors: payments.Selectors}),
		// Under the alias and under a's agent, without the mark.
		r.handMade(t, Entry{SPIFFEID: spiffeid.RequireFromPath(td, "/ns/"+r.ns+"/sa/tool"), Parent: r.spire.NodeAlias, Selectors: workloadidentity.PodSelectors(r.ns, "tool")}),
		r.handMade(t, Entry{SPIFFEID: spiffeid.RequireFromPath(td, "/ns/"+r.ns+"/sa/tool"), Parent: r.agentOf(t, a), Selectors: workloadidentity.PodSelectors(r.ns, "tool")}),
		// The user's own registration of billing's identity, exactly as the registrar's would be.
		r.handMade(t, Entry{SPIFFEID: billing.SPIFFEID, Parent: billing.Parent, Selectors: billing.Selectors}),
	}
	foreign = append(foreign,
		r.findBySPIFFEID(t, r.spire.Delegate), // spiretest's delegate entry, under the alias
		r.joinTokenAlias(t),                   // the alias's own SPIFFE ID, under the join token's agent
	)

	r.waitEntry(t, payments)
	waitReconciles(t, 3) // resyncs, each a full diff
	r.deleteService(t, ms)
	r.waitGone(t, payments.ID)
	waitReconciles(t, 3)
	if err := survived(r.entries(t), foreign); err != nil {
		t.Fatal(err)
	}
	for _, e := range r.entries(t) {
		if e.ID == billing.ID {
			t.Errorf("the registrar created %s for %s, which the user's entry %s already provides", e.ID, e.SPIFFEID, foreign[3].ID)
		}
	}

	// The manager's own resyncs write nothing more (it did count its writes so far).
	written := writes(t)
	if written-start < 4 { // the alias, the delegate, payments, then payments' deletion
		t.Fatalf("aether_spire_registrar_writes_total rose by %v, want at least 4", written-start)
	}
	waitReconciles(t, 2)
	if now := writes(t); now != written {
		t.Errorf("aether_spire_registrar_writes_total went from %v to %v over resyncs with nothing to do", written, now)
	}

	// Nothing differs now: a reconcile reads the server's trust domain, lists every entry (two
	// pages, as SPIRE ends a paged listing with an empty page) and writes nothing; the user's
	// entry provides billing.
	quiet, counter := r.counted(t)
	plan, err := quiet.Sync(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := counter.snapshot(); plan.Writes() != 0 || len(got) != 2 || got["GetBundle"] != 1 || got["ListEntries"] != 2 {
		t.Errorf("a reconcile with nothing to do made the calls %v (plan: %d writes), want only GetBundle once and ListEntries twice", got, plan.Writes())
	}
	if len(plan.Provided) != 1 || plan.Provided[0].SPIFFEID != billing.SPIFFEID {
		t.Errorf("provided by others: %v, want billing's identity", plan.Provided)
	}

	// Negative control: without the mark check, the registrar takes every candidate entry for
	// its own and deletes what it does not want; the survival check sees it.
	careless, _ := r.counted(t)
	careless.owned = func(Entry) bool { return true }
	if _, err := careless.Sync(testContext(t)); err != nil {
		t.Fatal(err)
	}
	err = survived(r.entries(t), foreign)
	if err == nil {
		t.Fatal("negative control: a registrar ignoring the mark left every hand-made entry in place; the survival check proves nothing")
	}
	t.Logf("negative control, as expected: %v", err)
}

// findBySPIFFEID returns SPIRE's only entry for id.
func (r *rig) findBySPIFFEID(t *testing.T, id spiffeid.ID) Entry {
	t.Helper()
	var found []Entry
	for _, e := range r.entries(t) {
		if e.SPIFFEID == id {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("entries for %s: %v, want one", id, found)
	}
	return found[0]
}

// writes sums aether_spire_registrar_writes_total over its operations.
func writes(t *testing.T) float64 {
	t.Helper()
	total := 0.0
	for _, op := range []string{"create", "update", "delete"} {
		n, err := testenv.Counter("aether_spire_registrar_writes_total", "op", op)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// joinTokenAlias is the entry spiretest's join token made for the alias: the alias's SPIFFE ID,
// parented to the agent the token attested.
func (r *rig) joinTokenAlias(t *testing.T) Entry {
	t.Helper()
	for _, e := range r.entries(t) {
		if e.SPIFFEID == r.spire.NodeAlias && strings.HasPrefix(e.Parent.Path(), "/spire/agent/join_token/") {
			return e
		}
	}
	t.Fatalf("no join token entry for %s", r.spire.NodeAlias)
	return Entry{}
}

// survived reports each of want that is no longer in entries exactly as it was.
func survived(entries, want []Entry) error {
	var errs []error
	for _, w := range want {
		i := slices.IndexFunc(entries, func(e Entry) bool { return e.ID == w.ID })
		switch {
		case i < 0:
			errs = append(errs, fmt.Errorf("entry %s (%s, parent %s), not the registrar's, was deleted", w.ID, w.SPIFFEID, w.Parent))
		case !entries[i].equal(w):
			errs = append(errs, fmt.Errorf("entry %s (%s), not the registrar's, was changed: %+v, was %+v", w.ID, w.SPIFFEID, entries[i], w))
		}
	}
	return errors.Join(errs...)
}

// TestResync: an entry of the registrar's deleted behind its back comes back, and one changed
// behind its back is put back, by the periodic resync alone (no MeshService changes).
func TestResync(t *testing.T) {
	r := newRig(t, time.Second, "")
	a := node(t)
	_, web := r.service(t, "web", a)
	r.meshPod(t, "web", "web", a)
	r.waitEntry(t, web)

	ctx := testContext(t)
	if _, err := r.api.BatchDeleteEntry(ctx, &entryv1.BatchDeleteEntryRequest{Ids: []string{web.ID}}); err != nil {
		t.Fatal(err)
	}
	r.waitEntry(t, web)

	changed := toAPI(web)
	changed.Selectors = []*types.Selector{{Type: "k8s", Value: "ns:" + r.ns}} // any ServiceAccount of the namespace
	changed.Admin = true
	if _, err := r.api.BatchUpdateEntry(ctx, &entryv1.BatchUpdateEntryRequest{Entries: []*types.Entry{changed}, InputMask: updateMask}); err != nil {
		t.Fatal(err)
	}
	r.waitEntry(t, web)
}

// TestUnreachable: with no SPIRE server on the socket, the registrar keeps running, fails each
// reconcile with an error naming the socket, counts it, and retries with backoff; once the
// server answers there, its entries appear.
func TestUnreachable(t *testing.T) {
	dir, err := os.MkdirTemp("", "reg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "api.sock") // nothing listens here yet

	r := newRig(t, DefaultResync, socket)
	before, err := testenv.Counter("aether_spire_registrar_errors_total", "reason", reasonUnreachable)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "two failed reconciles, retried", func() error {
		failed, err := testenv.Counter("controller_runtime_reconcile_errors_total", "controller", controllerNameOf(t))
		if err != nil || failed < 2 {
			return fmt.Errorf("%v failed reconciles: %v", failed, err)
		}
		return nil
	})
	after, err := testenv.Counter("aether_spire_registrar_errors_total", "reason", reasonUnreachable)
	if err != nil || after-before < 2 {
		t.Errorf("aether_spire_registrar_errors_total{reason=unreachable} rose by %v, want at least 2 (%v)", after-before, err)
	}
	if up := testutil.ToFloat64(reachableGauge); up != 0 {
		t.Errorf("aether_spire_registrar_server_reachable = %v, want 0", up)
	}
	_, err = r.manager.Sync(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "SPIRE server API at unix://"+socket) || !strings.Contains(err.Error(), "retrying with backoff") {
		t.Errorf("the error %q does not name the socket and the retry", err)
	}
	t.Logf("as expected: %v", err)

	// The server comes up on the registrar's socket.
	if err := os.Symlink(r.spire.ServerSocket, socket); err != nil {
		t.Fatal(err)
	}
	r.waitEntry(t, Entry{ID: EntryID(r.spire.NodeAlias), SPIFFEID: r.spire.NodeAlias, Parent: ServerID(r.spire.TrustDomain),
		Selectors: []workloadidentity.Selector{{Type: "k8s_psat", Value: "cluster:aether"}}})
	testenv.Eventually(t, "aether_spire_registrar_server_reachable back to 1", func() error {
		if up := testutil.ToFloat64(reachableGauge); up != 1 {
			return fmt.Errorf("it is %v", up)
		}
		return nil
	})
}

// TestTrustDomainMismatch: a registrar whose --mesh-domain is not SPIRE's trust domain is refused
// by SPIRE; the error says so and names the flag, and SPIRE counts as reachable.
func TestTrustDomainMismatch(t *testing.T) {
	r := newRig(t, DefaultResync, "")
	a := node(t)
	_, web := r.service(t, "web", a)
	r.meshPod(t, "web", "web", a)
	r.waitEntry(t, web)
	wrong, _ := r.counted(t)
	wrong.Config.TrustDomain = spiffeid.RequireTrustDomainFromString("other.domain")
	before := testutil.ToFloat64(errorsCounter.WithLabelValues(reasonRefused))
	_, err := wrong.Sync(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "InvalidArgument") || !strings.Contains(err.Error(), "check that --mesh-domain (other.domain) is the SPIRE server's trust_domain") {
		t.Fatalf("Sync in the wrong trust domain: %v; want SPIRE's refusal and the flag to check", err)
	}
	t.Logf("as expected: %v", err)
	if got := testutil.ToFloat64(errorsCounter.WithLabelValues(reasonRefused)) - before; got != 1 {
		t.Errorf("aether_spire_registrar_errors_total{reason=refused} rose by %v, want 1", got)
	}
	if up := testutil.ToFloat64(reachableGauge); up != 1 {
		t.Errorf("aether_spire_registrar_server_reachable = %v, want 1: SPIRE answered", up)
	}
	r.waitEntry(t, web) // nothing of the right registrar's was touched
}
