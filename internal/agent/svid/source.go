// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package svid keeps the X.509 SVIDs of the identities the node's meshed pods hold, and their
// trust domain's bundle, from the SPIRE agent's Delegated Identity API (its admin socket; the
// node agent is its authorized delegate). One job: the agent tells it which identities its pods
// hold (Want), it keeps one SubscribeToX509SVIDs stream per distinct identity, asking by the
// identity's pod selectors (workloadidentity.PodSelectors: k8s:ns:<ns>, k8s:sa:<sa>), and one
// SubscribeToX509Bundles stream; SPIRE pushes every rotation down them. An identity no pod holds
// any more is unsubscribed and its SVID dropped. What it holds now is Secrets; Changed says when
// that changes. The agent serves them to the node's Envoy by SDS (internal/xdsserver).
//
// Of the SVIDs SPIRE returns for an identity's selectors, only one whose SPIFFE ID is that
// identity is kept (of several, the one expiring last). Others are entries of other IDs whose
// selectors the pods also match (an entry selecting a whole namespace, say): they are not this
// mesh identity's, so they are not served under its name (the name is the ID the peers pin), and
// they are logged when no SVID of the identity came with them.
//
// A stream that breaks is re-opened with backoff (RetryMin doubling up to RetryMax); the outage
// is logged once when it starts and once when it ends, never per retry. Meanwhile the SVIDs and
// the bundle last received stay: a SPIRE agent restarting must not take the mesh's certificates
// away (they expire on their own clock). Private keys are never logged.
//
// It must not import internal/controller: depguard rule agent-not-controller.
package svid

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	delegatedv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/agent/delegatedidentity/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// Identity is one SPIFFE ID the node's pods hold, and the selectors its SVID is asked for by.
type Identity struct {
	// ID is the SPIFFE ID (a MeshService's status.identity): the only SVID kept for it.
	ID string
	// Namespace and ServiceAccount are its pods': the selectors k8s:ns:<ns>, k8s:sa:<sa>.
	Namespace, ServiceAccount string
}

// SVID is an identity's X.509 SVID, PEM.
type SVID struct {
	ID string
	// ChainPEM is the certificate chain, leaf first; KeyPEM its private key (PKCS#8).
	ChainPEM, KeyPEM []byte
	// Serial and NotAfter are the leaf's, for log lines and tests.
	Serial   string
	NotAfter time.Time
}

// Secrets are what the source holds now.
type Secrets struct {
	// SVIDs are the wanted identities' SVIDs SPIRE has issued, sorted by ID.
	SVIDs []SVID
	// Pending are the wanted identities SPIRE has not issued an SVID for (yet), sorted.
	Pending []string
	// BundlePEM is the trust domain's X.509 authorities, PEM; nil until SPIRE sent them.
	BundlePEM []byte
}

// Default backoff bounds of a broken stream's re-opening.
const (
	DefaultRetryMin = 200 * time.Millisecond
	DefaultRetryMax = 10 * time.Second
)

// Options configure a Source.
type Options struct {
	// Socket is the path of the SPIRE agent's admin socket (workloadidentity.NodeAdminSocketDir/
	// workloadidentity.AdminSocketName on a node).
	Socket string
	// TrustDomain is the mesh's: its bundle is the one kept, its IDs the only ones subscribed.
	TrustDomain spiffeid.TrustDomain
	// Log receives the source's lines.
	Log logr.Logger
	// RetryMin and RetryMax bound the backoff of a broken stream's re-opening; the defaults if zero.
	RetryMin, RetryMax time.Duration
}

// Source keeps the SVIDs of the identities it is told to want, and the trust bundle. Its Start
// runs the streams (a manager Runnable); Want may be called before.
type Source struct {
	opts   Options
	conn   *grpc.ClientConn
	client delegatedv1.DelegatedIdentityClient
	// streams counts the SVID streams being followed now (Subscriptions).
	streams atomic.Int32

	mu sync.Mutex
	// ctx is Start's, nil before: subscriptions start under it.
	ctx context.Context
	wg  sync.WaitGroup
	// subs are the wanted identities' subscriptions, by ID.
	subs map[string]*subscription
	// refused are the IDs Want was given that are not of the trust domain (each logged once).
	refused   map[string]bool
	bundlePEM []byte
	// changed is closed, and replaced, when Secrets changes.
	changed chan struct{}
	// stop ends Start with its cause (a SPIRE of another trust domain); set by Start.
	stop context.CancelCauseFunc
}

// ErrOtherTrustDomain is what Start returns when the SPIRE agent serves trust domains and the
// mesh's is not among them: every identity it would issue fails the mesh's pinning, so serving
// on would only make every connection of the node fail its handshake, without a word.
var ErrOtherTrustDomain = errors.New("svid: the SPIRE agent is of another trust domain")

// subscription is one wanted identity's stream and its current SVID.
type subscription struct {
	identity Identity
	cancel   context.CancelFunc // nil until started
	svid     *SVID
	// ignored are the other IDs SPIRE last returned for its selectors, without one of the
	// identity's (logged when they change).
	ignored []string
}

// New is a source of o.Socket. It connects when Start runs.
func New(o Options) (*Source, error) {
	if o.Socket == "" {
		return nil, errors.New("svid: the SPIRE agent's admin socket path is empty: set the Delegated Identity API's socket (--spire-admin-socket)")
	}
	if o.TrustDomain.IsZero() {
		return nil, errors.New("svid: the trust domain is empty: set the mesh's domain")
	}
	o.RetryMin = cmp.Or(o.RetryMin, DefaultRetryMin)
	o.RetryMax = max(cmp.Or(o.RetryMax, DefaultRetryMax), o.RetryMin)
	conn, err := grpc.NewClient("unix://"+o.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		// gRPC's own reconnection waits up to 2 minutes by default: a re-opened stream would fail
		// fast until then, long after the SPIRE agent is back. Bound it like the streams'.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: o.RetryMin, Multiplier: 1.6, Jitter: 0.2, MaxDelay: o.RetryMax,
		}, MinConnectTimeout: 5 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("svid: the Delegated Identity API at %s: %w", o.Socket, err)
	}
	return &Source{opts: o, conn: conn, client: delegatedv1.NewDelegatedIdentityClient(conn),
		subs: map[string]*subscription{}, refused: map[string]bool{}, changed: make(chan struct{})}, nil
}

// TrustDomain is the trust domain whose identities and bundle the source holds.
func (s *Source) TrustDomain() spiffeid.TrustDomain { return s.opts.TrustDomain }

// NeedLeaderElection is false: every node's agent holds its own pods' identities.
func (s *Source) NeedLeaderElection() bool { return false }

// Start follows the bundle and every wanted identity until ctx ends, then closes the connection.
func (s *Source) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.ctx != nil {
		s.mu.Unlock()
		return errors.New("svid: the source was started twice")
	}
	ctx, s.stop = context.WithCancelCause(ctx)
	s.ctx = ctx
	for _, sub := range s.subs {
		s.launchLocked(sub)
	}
	s.wg.Add(1)
	s.mu.Unlock()
	s.opts.Log.Info("Fetching workload identities from the SPIRE agent's Delegated Identity API", "socket", s.opts.Socket,
		"trustDomain", s.opts.TrustDomain.Name())
	go s.followBundle(ctx)
	<-ctx.Done()
	s.wg.Wait()
	closed := s.conn.Close()
	if cause := context.Cause(ctx); errors.Is(cause, ErrOtherTrustDomain) {
		return cause
	}
	return closed
}

// Want makes ids the identities the source holds SVIDs of: a new one is subscribed, one no longer
// in ids unsubscribed and its SVID dropped. An ID twice is one subscription (the first's
// selectors); an ID outside the trust domain is left out (logged once).
func (s *Source) Want(ids []Identity) {
	want := make(map[string]Identity, len(ids))
	for _, id := range ids {
		if _, seen := want[id.ID]; !seen {
			want[id.ID] = id
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for id, sub := range s.subs {
		if _, ok := want[id]; !ok {
			if sub.cancel != nil {
				sub.cancel()
			}
			delete(s.subs, id)
			changed = true
			s.opts.Log.Info("No local pod holds the identity any more: unsubscribed, its SVID dropped", "identity", id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if s.subs[id] != nil || !s.acceptLocked(id) {
			continue
		}
		sub := &subscription{identity: want[id]}
		s.subs[id] = sub
		changed = true
		if s.ctx != nil {
			s.launchLocked(sub)
		}
	}
	if changed {
		s.notifyLocked()
	}
}

// acceptLocked reports whether id is a SPIFFE ID of the trust domain, logging one that is not once.
func (s *Source) acceptLocked(id string) bool {
	parsed, err := spiffeid.FromString(id)
	if err == nil && parsed.MemberOf(s.opts.TrustDomain) {
		return true
	}
	if !s.refused[id] {
		s.refused[id] = true
		s.opts.Log.Info("Not fetching an SVID for an identity outside the mesh's trust domain", "identity", id,
			"trustDomain", s.opts.TrustDomain.Name(), "error", err)
	}
	return false
}

// launchLocked starts following sub under the source's context.
func (s *Source) launchLocked(sub *subscription) {
	ctx, cancel := context.WithCancel(s.ctx)
	sub.cancel = cancel
	s.wg.Add(1)
	go s.followSVIDs(ctx, sub)
}

// Secrets are the SVIDs and the bundle held now.
func (s *Source) Secrets() Secrets {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Secrets{BundlePEM: s.bundlePEM}
	for _, id := range slices.Sorted(maps.Keys(s.subs)) {
		if sv := s.subs[id].svid; sv != nil {
			out.SVIDs = append(out.SVIDs, *sv)
		} else {
			out.Pending = append(out.Pending, id)
		}
	}
	return out
}

// Changed is closed when Secrets next changes (take it before reading Secrets, to miss nothing).
func (s *Source) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Subscriptions is how many SVID streams the source follows now: one per wanted identity once
// started.
func (s *Source) Subscriptions() int { return int(s.streams.Load()) }

// notifyLocked tells the waiters of Changed, and sets the gauges.
func (s *Source) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
	issued := 0
	for _, sub := range s.subs {
		if sub.svid != nil {
			issued++
		}
	}
	identities.WithLabelValues(StateIssued).Set(float64(issued))
	identities.WithLabelValues(StatePending).Set(float64(len(s.subs) - issued))
}

// followSVIDs follows sub's stream until ctx ends (the identity is unwanted, or the source stops),
// re-opening it with backoff when it breaks.
func (s *Source) followSVIDs(ctx context.Context, sub *subscription) {
	defer s.wg.Done()
	s.streams.Add(1)
	defer s.streams.Add(-1)
	var selectors []*types.Selector
	for _, sel := range workloadidentity.PodSelectors(sub.identity.Namespace, sub.identity.ServiceAccount) {
		selectors = append(selectors, &types.Selector{Type: sel.Type, Value: sel.Value})
	}
	r := s.retrier(streamSVID, sub.identity.ID)
	for {
		err := func() error {
			stream, err := s.client.SubscribeToX509SVIDs(ctx, &delegatedv1.SubscribeToX509SVIDsRequest{Selectors: selectors})
			if err != nil {
				return err
			}
			for {
				resp, err := stream.Recv()
				if err != nil {
					return err
				}
				r.received()
				s.updateSVID(sub, resp.GetX509Svids())
			}
		}()
		if ctx.Err() != nil || !r.failed(ctx, err) {
			return
		}
	}
}

// followBundle follows the bundle stream until ctx ends, re-opening it with backoff.
func (s *Source) followBundle(ctx context.Context) {
	defer s.wg.Done()
	r := s.retrier(streamBundle, s.opts.TrustDomain.IDString())
	for {
		err := func() error {
			stream, err := s.client.SubscribeToX509Bundles(ctx, &delegatedv1.SubscribeToX509BundlesRequest{})
			if err != nil {
				return err
			}
			for {
				resp, err := stream.Recv()
				if err != nil {
					return err
				}
				r.received()
				if err := s.checkTrustDomain(resp.GetCaCertificates()); err != nil {
					s.opts.Log.Error(err, "Refusing to serve identities")
					s.stop(err)
					return nil
				}
				s.updateBundle(resp.GetCaCertificates())
			}
		}()
		if ctx.Err() != nil || !r.failed(ctx, err) {
			return
		}
	}
}

// updateSVID makes sub's SVID the one of its identity among svids (none: it has none now).
func (s *Source) updateSVID(sub *subscription, svids []*delegatedv1.X509SVIDWithKey) {
	var picked *SVID
	var others []string
	for _, got := range svids {
		id := idString(got.GetX509Svid().GetId())
		if id != sub.identity.ID {
			others = append(others, id)
			continue
		}
		sv, err := parseSVID(id, got)
		if err != nil {
			s.opts.Log.Error(err, "SPIRE returned an SVID the source cannot use; not served", "identity", id)
			continue
		}
		if picked == nil || sv.NotAfter.After(picked.NotAfter) {
			picked = sv
		}
	}
	slices.Sort(others)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs[sub.identity.ID] != sub {
		return // unwanted meanwhile
	}
	if picked == nil && len(others) > 0 && !slices.Equal(others, sub.ignored) {
		s.opts.Log.Info("SPIRE returned SVIDs for the identity's selectors, none of the identity itself: none is served",
			"identity", sub.identity.ID, "returned", others)
	}
	sub.ignored = others
	prev := sub.svid
	if sameSVID(prev, picked) {
		return
	}
	sub.svid = picked
	switch {
	case picked == nil:
		s.opts.Log.Info("SPIRE withdrew the identity's SVID (its entry is gone?); not served until it issues one", "identity", sub.identity.ID)
	case prev == nil:
		s.opts.Log.Info("SVID issued", "identity", picked.ID, "serial", picked.Serial, "notAfter", picked.NotAfter)
	default:
		s.opts.Log.Info("SVID rotated", "identity", picked.ID, "serial", picked.Serial, "notAfter", picked.NotAfter, "previousSerial", prev.Serial)
	}
	s.notifyLocked()
}

// checkTrustDomain refuses bundles (keyed by trust domain) that name trust domains, none of them
// the mesh's: the SPIRE agent is of another trust domain than the one the agent was given
// (--mesh-domain), and says which.
func (s *Source) checkTrustDomain(bundles map[string][]byte) error {
	td := s.opts.TrustDomain
	if len(bundles) == 0 {
		return nil // nothing said yet
	}
	if _, ok := bundles[td.IDString()]; ok {
		return nil
	}
	if _, ok := bundles[td.Name()]; ok {
		return nil
	}
	return fmt.Errorf("%w: it serves %q, and the mesh's domain is %q (--mesh-domain): the mesh's domain is its SPIFFE trust domain; "+
		"give the mesh and SPIRE the same one (the chart's meshDomain)", ErrOtherTrustDomain, slices.Sorted(maps.Keys(bundles)), td.Name())
}

// updateBundle keeps the trust domain's authorities from bundles (keyed by trust domain, as
// spiffe://<td> or <td>); federated trust domains' bundles are not kept (the mesh has one).
func (s *Source) updateBundle(bundles map[string][]byte) {
	der, ok := bundles[s.opts.TrustDomain.IDString()]
	if !ok {
		der, ok = bundles[s.opts.TrustDomain.Name()]
	}
	var certs []*x509.Certificate
	err := fmt.Errorf("no bundle for the trust domain among %q", slices.Sorted(maps.Keys(bundles)))
	if ok {
		certs, err = x509.ParseCertificates(der)
	}
	if err == nil && len(certs) == 0 {
		err = errors.New("the trust domain's bundle holds no X.509 authority")
	}
	if err != nil {
		s.opts.Log.Error(err, "SPIRE sent a trust bundle the source cannot use; the previous one stays", "trustDomain", s.opts.TrustDomain.Name())
		return
	}
	var bundlePEM []byte
	for _, c := range certs {
		bundlePEM = append(bundlePEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if string(bundlePEM) == string(s.bundlePEM) {
		return
	}
	s.bundlePEM = bundlePEM
	s.opts.Log.Info("Trust bundle updated", "trustDomain", s.opts.TrustDomain.Name(), "authorities", len(certs))
	s.notifyLocked()
}

// parseSVID checks got with go-spiffe's parser (one URI SAN, a leaf that is no CA, the key
// matching it) and that it is id's, and encodes it as PEM.
func parseSVID(id string, got *delegatedv1.X509SVIDWithKey) (*SVID, error) {
	var chain []byte
	for _, der := range got.GetX509Svid().GetCertChain() {
		chain = append(chain, der...)
	}
	parsed, err := x509svid.ParseRaw(chain, got.GetX509SvidKey())
	if err != nil {
		return nil, err
	}
	if parsed.ID.String() != id {
		return nil, fmt.Errorf("the SVID's certificate names %s, not %s", parsed.ID, id)
	}
	chainPEM, keyPEM, err := parsed.Marshal()
	if err != nil {
		return nil, err
	}
	leaf := parsed.Certificates[0]
	return &SVID{ID: id, ChainPEM: chainPEM, KeyPEM: keyPEM, Serial: leaf.SerialNumber.Text(16), NotAfter: leaf.NotAfter}, nil
}

// sameSVID reports whether a and b are the same SVID (or both none).
func sameSVID(a, b *SVID) bool {
	if a == nil || b == nil {
		return a == b
	}
	return string(a.ChainPEM) == string(b.ChainPEM) && string(a.KeyPEM) == string(b.KeyPEM)
}

// idString spells an API SPIFFE ID: spiffe://<trust domain><path>.
func idString(id *types.SPIFFEID) string {
	return "spiffe://" + id.GetTrustDomain() + id.GetPath()
}

// retrier re-opens one stream with backoff and logs its outages once each.
type retrier struct {
	log      logr.Logger
	kind     string // streamSVID or streamBundle: the metric's label
	name     string // what the lines name: the identity, or the trust domain
	min, max time.Duration
	delay    time.Duration
	// down is when the current outage began; zero while the stream is up.
	down     time.Time
	attempts int
}

func (s *Source) retrier(kind, name string) *retrier {
	return &retrier{log: s.opts.Log.WithValues("stream", kind, "for", name, "socket", s.opts.Socket),
		kind: kind, name: name, min: s.opts.RetryMin, max: s.opts.RetryMax}
}

// received marks the stream up: an outage ends (logged), the backoff starts over.
func (r *retrier) received() {
	if !r.down.IsZero() {
		r.log.Info("Delegated Identity API stream re-opened", "outage", time.Since(r.down).Round(time.Millisecond), "attempts", r.attempts)
		r.down = time.Time{}
	}
	r.delay = 0
}

// failed counts err, logs it if it begins an outage, and waits the next backoff delay; false if
// ctx ended meanwhile.
func (r *retrier) failed(ctx context.Context, err error) bool {
	streamFailures.WithLabelValues(r.kind).Inc()
	if r.down.IsZero() {
		r.down, r.attempts = time.Now(), 0
		r.log.Error(err, "Delegated Identity API stream failed; re-opening it with backoff (logged again when it is back)",
			"retryMin", r.min, "retryMax", r.max)
	}
	r.attempts++
	r.delay = min(max(2*r.delay, r.min), r.max)
	// ±20 %: the streams that broke together do not all come back at the same instant.
	wait := time.Duration(float64(r.delay) * (0.8 + 0.4*rand.Float64()))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
