// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package svid_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether-operator/internal/agent/svid"
	"github.com/aether-mesh/aether-operator/internal/spiretest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/testlog"
	"github.com/aether-mesh/aether-operator/internal/testrun"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// domain is the tests' trust domain (the mesh's domain in the agent's tests).
const domain = "aether.internal"

// startSource runs a source of socket until the test ends, wanting ids; its lines go to logs.
func startSource(t *testing.T, socket string, logs *testlog.Lines, ids ...svid.Identity) *svid.Source {
	t.Helper()
	src, err := svid.New(svid.Options{Socket: socket, TrustDomain: spiffeid.RequireTrustDomainFromString(domain),
		Log: logs.Logger(1), RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	src.Want(ids)
	testrun.UntilCleanup(t, "the source", src.Start)
	return src
}

// serviceAccount is the identity of ServiceAccount shop/sa, with its entry's selectors.
func serviceAccount(t *testing.T, sa string) (svid.Identity, spiffeid.ID) {
	t.Helper()
	id, err := workloadidentity.ServiceAccountID(spiffeid.RequireTrustDomainFromString(domain), "shop", sa)
	if err != nil {
		t.Fatal(err)
	}
	return svid.Identity{ID: id.String(), Namespace: "shop", ServiceAccount: sa}, id
}

// register creates id's entry in env: its pod selectors, parented to the node agents' alias.
func register(t *testing.T, env *spiretest.Env, id svid.Identity) {
	t.Helper()
	parsed := spiffeid.RequireFromString(id.ID)
	var selectors []string
	for _, s := range workloadidentity.PodSelectors(id.Namespace, id.ServiceAccount) {
		selectors = append(selectors, s.String())
	}
	env.CreateEntry(t, parsed, env.NodeAlias, selectors...)
}

// waitFor polls check until it returns nil, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, after %s: %v", what, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// svidOf is id's SVID in s, if any.
func svidOf(s svid.Secrets, id string) (svid.SVID, bool) {
	i := slices.IndexFunc(s.SVIDs, func(v svid.SVID) bool { return v.ID == id })
	if i < 0 {
		return svid.SVID{}, false
	}
	return s.SVIDs[i], true
}

// verify parses sv with go-spiffe and checks that its one URI SAN is want and that it chains to
// the trust bundle bundlePEM.
func verify(t *testing.T, sv svid.SVID, want spiffeid.ID, bundlePEM []byte) {
	t.Helper()
	parsed, err := x509svid.Parse(sv.ChainPEM, sv.KeyPEM)
	if err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	if uris := parsed.Certificates[0].URIs; len(uris) != 1 || uris[0].String() != want.String() {
		t.Errorf("the SVID served as %s has URI SANs %v, want [%s]", sv.ID, uris, want)
	}
	bundle, err := x509bundle.Parse(want.TrustDomain(), bundlePEM)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := x509svid.Verify(parsed.Certificates, bundle)
	if err != nil || id != want {
		t.Errorf("the SVID of %s verifies against the bundle as %v, %v; want %s", want, id, err, want)
	}
}

// TestSourceFollowsSPIRE, against a real SPIRE server and agent (SVIDs of 1 minute: the agent
// rotates them at half-life): two identities with entries get their SVIDs, each with the identity
// as its one URI SAN and chaining to the bundle; an entry of another ID that their selectors also
// match (a namespace-wide one) is never served under their names, and an identity whose selectors
// match that entry alone gets nothing (the negative control of the filter: SPIRE did return an
// SVID for its selectors); one stream per identity; a rotation is picked up; an identity no
// longer wanted is unsubscribed and its SVID dropped.
func TestSourceFollowsSPIRE(t *testing.T) {
	env := spiretest.Start(t, spiretest.Options{TrustDomain: domain, SVIDTTL: time.Minute})
	web, webID := serviceAccount(t, "web")
	db, dbID := serviceAccount(t, "db")
	orphan, _ := serviceAccount(t, "orphan") // no entry of its own
	register(t, env, web)
	created := time.Now()
	register(t, env, db)
	namespaceWide := spiffeid.RequireFromPath(webID.TrustDomain(), "/ns/shop/any-workload")
	env.CreateEntry(t, namespaceWide, env.NodeAlias, "k8s:ns:shop")

	logs := &testlog.Lines{}
	src := startSource(t, env.AdminSocket, logs, web, db, orphan, web) // web twice: one subscription
	var got svid.Secrets
	waitFor(t, time.Minute, "the SVIDs of web and db and the bundle", func() error {
		got = src.Secrets()
		_, hasWeb := svidOf(got, web.ID)
		_, hasDB := svidOf(got, db.ID)
		if !hasWeb || !hasDB || got.BundlePEM == nil {
			return fmt.Errorf("SVIDs %q (pending %q), bundle of %d bytes", ids(got.SVIDs), got.Pending, len(got.BundlePEM))
		}
		return nil
	})
	t.Logf("entries to SVIDs held: %s", time.Since(created).Round(time.Millisecond))
	if held := ids(got.SVIDs); !slices.Equal(held, []string{db.ID, web.ID}) {
		t.Errorf("SVIDs held %q, want web's and db's alone (SPIRE also returns %s for every pod of the namespace)", held, namespaceWide)
	}
	for _, want := range []spiffeid.ID{webID, dbID} {
		sv, ok := svidOf(got, want.String())
		if !ok {
			t.Fatalf("no SVID of %s among %d", want, len(got.SVIDs))
		}
		verify(t, sv, want, got.BundlePEM)
	}
	if !slices.Equal(got.Pending, []string{orphan.ID}) {
		t.Errorf("pending %q, want [%s]: its selectors match only %s's entry", got.Pending, orphan.ID, namespaceWide)
	}
	waitFor(t, 30*time.Second, "SPIRE returning the namespace-wide SVID for the orphan's selectors", func() error {
		if lines := logs.With("none of the identity itself", orphan.ID, namespaceWide.String()); len(lines) != 1 {
			return fmt.Errorf("%d lines say SPIRE returned %s for %s: %q", len(lines), namespaceWide, orphan.ID, logs.With("none of the identity"))
		}
		return nil
	})
	if n := src.Subscriptions(); n != 3 {
		t.Errorf("%d SVID streams for 3 distinct identities (web asked twice), want 3", n)
	}
	for state, want := range map[string]float64{svid.StateIssued: 2, svid.StatePending: 1} {
		if n, err := testenv.Gauge("aether_agent_identities", "state", state); err != nil || n != want {
			t.Errorf("aether_agent_identities{state=%q} = %v (%v), want %v", state, n, err, want)
		}
	}

	// Rotation: SPIRE re-issues web's SVID at half its minute; the source follows.
	before, _ := svidOf(got, web.ID)
	rotated := time.Now()
	var after svid.SVID
	waitFor(t, 2*time.Minute, "web's SVID rotated", func() error {
		after, _ = svidOf(src.Secrets(), web.ID)
		if after.Serial == before.Serial {
			return fmt.Errorf("web's SVID is still serial %s", before.Serial)
		}
		return nil
	})
	t.Logf("rotation: serial %s (until %s) became %s (until %s) after %s", before.Serial, before.NotAfter.Format(time.TimeOnly),
		after.Serial, after.NotAfter.Format(time.TimeOnly), time.Since(rotated).Round(time.Second))
	if !after.NotAfter.After(before.NotAfter) {
		t.Errorf("the rotated SVID expires at %s, not after the previous one's %s", after.NotAfter, before.NotAfter)
	}
	verify(t, after, webID, src.Secrets().BundlePEM)
	if len(logs.With("SVID rotated", web.ID, after.Serial)) != 1 {
		t.Errorf("no line says web's SVID rotated to %s: %q", after.Serial, logs.With("SVID"))
	}

	// db's and the orphan's pods go: their streams end and db's SVID is dropped.
	changed := src.Changed()
	src.Want([]svid.Identity{web})
	select {
	case <-changed:
	default:
		t.Error("Want dropped two identities and Changed was not closed")
	}
	if got := src.Secrets(); len(got.SVIDs) != 1 || got.SVIDs[0].ID != web.ID || len(got.Pending) != 0 {
		t.Errorf("after db's and the orphan's pods went: SVIDs %v, pending %q; want web's alone", ids(got.SVIDs), got.Pending)
	}
	waitFor(t, 10*time.Second, "db's and the orphan's streams closed", func() error {
		if n := src.Subscriptions(); n != 1 {
			return fmt.Errorf("%d SVID streams, want 1 (web's)", n)
		}
		return nil
	})
	for _, line := range logs.With("PRIVATE KEY") {
		t.Errorf("a log line carries a private key: %q", line)
	}
}

func ids(svids []svid.SVID) []string {
	var out []string
	for _, v := range svids {
		out = append(out, v.ID)
	}
	return out
}

// TestSourceReopensStreams: the source reaches the real SPIRE agent's admin socket through a unix
// socket proxy in the test; while the proxy is down, the streams fail and are retried with
// backoff, each outage logged once per stream however many retries, and the SVIDs and the bundle
// already held stay; once it is back, the streams re-open (logged once each) and still serve.
func TestSourceReopensStreams(t *testing.T) {
	env := spiretest.Start(t, spiretest.Options{TrustDomain: domain})
	web, webID := serviceAccount(t, "web")
	register(t, env, web)
	p := &socketProxy{path: env.Dir + "/proxy.sock", target: env.AdminSocket}
	p.start(t)
	logs := &testlog.Lines{}
	src := startSource(t, p.path, logs, web)
	waitFor(t, time.Minute, "web's SVID and the bundle", func() error {
		if s := src.Secrets(); len(s.SVIDs) != 1 || s.BundlePEM == nil {
			return fmt.Errorf("%d SVIDs, bundle of %d bytes", len(s.SVIDs), len(s.BundlePEM))
		}
		return nil
	})
	held := src.Secrets()

	failures := func() float64 {
		total := 0.0
		for _, stream := range []string{"svid", "bundle"} {
			n, err := testenv.Counter("aether_agent_identity_stream_failures_total", "stream", stream)
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
		return total
	}
	before := failures()
	p.stop()
	// Two streams (web's and the bundle's), each retried several times.
	waitFor(t, 30*time.Second, "the streams retried while the socket is gone", func() error {
		if n := failures() - before; n < 6 {
			return fmt.Errorf("%v stream failures so far", n)
		}
		return nil
	})
	if lines := logs.With("Delegated Identity API stream failed"); len(lines) != 2 {
		t.Errorf("%d lines report the outage after %v failures, want 2 (one per stream): %q", len(lines), failures()-before, lines)
	}
	if s := src.Secrets(); len(s.SVIDs) != 1 || string(s.SVIDs[0].ChainPEM) != string(held.SVIDs[0].ChainPEM) || string(s.BundlePEM) != string(held.BundlePEM) {
		t.Errorf("during the outage the source holds %v and a bundle of %d bytes, want what it held before", ids(s.SVIDs), len(s.BundlePEM))
	}

	p.start(t)
	waitFor(t, 30*time.Second, "both streams re-opened", func() error {
		if lines := logs.With("Delegated Identity API stream re-opened"); len(lines) != 2 {
			return fmt.Errorf("%d lines say a stream re-opened: %q", len(lines), lines)
		}
		return nil
	})
	if lines := logs.With("Delegated Identity API stream failed"); len(lines) != 2 {
		t.Errorf("%d lines report an outage, want 2: %q", len(lines), lines)
	}
	s := src.Secrets()
	if len(s.SVIDs) != 1 {
		t.Fatalf("after the outage the source holds %v", ids(s.SVIDs))
	}
	verify(t, s.SVIDs[0], webID, s.BundlePEM)
}

// socketProxy forwards a unix socket to another, until stopped: a SPIRE agent's admin socket
// that goes away and comes back, with SPIRE running all along. The SPIRE agent sees this process
// as the caller (the authorized delegate), as it would without the proxy.
type socketProxy struct {
	path, target string
	mu           sync.Mutex
	listener     net.Listener
	conns        []net.Conn
}

func (p *socketProxy) start(t *testing.T) {
	t.Helper()
	l, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.listener = l
	p.mu.Unlock()
	t.Cleanup(p.stop)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			upstream, err := net.Dial("unix", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, upstream)
			p.mu.Unlock()
			go pipe(c, upstream)
			go pipe(upstream, c)
		}
	}()
}

// stop closes the listener and every connection, and removes the socket.
func (p *socketProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener != nil {
		_ = p.listener.Close()
		p.listener = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	if err := os.Remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		panic(err)
	}
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
}

// TestSourceRefusesASPIREOfAnotherTrustDomain: given a SPIRE of trust domain other.example, a
// source for the mesh's aether.internal stops, naming both domains and the fix, rather than
// serving on without a bundle (every handshake of the node would fail, and nothing would say
// why).
func TestSourceRefusesASPIREOfAnotherTrustDomain(t *testing.T) {
	const other = "other.example"
	env := spiretest.Start(t, spiretest.Options{TrustDomain: other})
	logs := &testlog.Lines{}
	src, err := svid.New(svid.Options{Socket: env.AdminSocket, TrustDomain: spiffeid.RequireTrustDomainFromString(domain),
		Log: logs.Logger(1), RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- src.Start(t.Context()) }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("the source still runs after a minute against a SPIRE of %s (want it stopped); its log: %q", other, logs.With(""))
	}
	t.Logf("Start: %v", err)
	if !errors.Is(err, svid.ErrOtherTrustDomain) {
		t.Fatalf("Start returned %v, want ErrOtherTrustDomain", err)
	}
	for _, want := range []string{other, domain, "--mesh-domain", "meshDomain"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
}
