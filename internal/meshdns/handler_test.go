// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// echo is an upstream that answers every query with itself as a reply (QR set), or fails when
// fail is set; it counts what it was sent, and keeps the last query's bytes.
type echo struct {
	calls atomic.Int32
	last  []byte
	fail  bool
}

func (e *echo) exchange(_ context.Context, query []byte, _ netip.AddrPort, _ bool) ([]byte, error) {
	e.calls.Add(1)
	e.last = append([]byte(nil), query...)
	if e.fail || len(query) < 12 {
		return nil, errors.New("no answer")
	}
	reply := append([]byte(nil), query...)
	reply[2] |= 0x80
	return reply, nil
}

var resolverAt = func() (netip.AddrPort, error) { return netip.MustParseAddrPort("192.0.2.53:53"), nil }

func testTable() *Table {
	t := NewTable("aether.internal")
	t.Set("shop", "payments", []string{"10.96.0.10"})
	t.Set("shop", "ledger", []string{"fd00:10:96::11", "10.96.0.11"})
	return t
}

func query(t testing.TB, name string, qtype uint16) (*dns.Msg, []byte) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	packed, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return q, packed
}

func ask(t *testing.T, h *handler, name string, qtype uint16) (*dns.Msg, string) {
	t.Helper()
	_, packed := query(t, name, qtype)
	out, outcome := h.answer(context.Background(), packed, false, resolverAt)
	reply := new(dns.Msg)
	if err := reply.Unpack(out); err != nil {
		t.Fatalf("%s: the reply does not parse: %v", name, err)
	}
	return reply, outcome
}

// TestMeshAnswers: a service's name answers its VIPs of the asked family, authoritative, TTL
// MeshTTL, in any case; a type it has no record of, a namespace and the domain are empty answers;
// another name under the domain is NXDOMAIN; none of them is forwarded.
func TestMeshAnswers(t *testing.T) {
	up := &echo{}
	h := newHandler(Config{Table: testTable()}, up)
	for name, c := range map[string]struct {
		qname   string
		qtype   uint16
		rcode   int
		answers []string
		outcome string
	}{
		"A":                 {"payments.shop.aether.internal.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.10"}, OutcomeMesh},
		"any case":          {"PayMents.Shop.Aether.Internal.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.10"}, OutcomeMesh},
		"AAAA of an IPv4":   {"payments.shop.aether.internal.", dns.TypeAAAA, dns.RcodeSuccess, nil, OutcomeMesh},
		"dual-stack A":      {"ledger.shop.aether.internal.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.11"}, OutcomeMesh},
		"dual-stack AAAA":   {"ledger.shop.aether.internal.", dns.TypeAAAA, dns.RcodeSuccess, []string{"fd00:10:96::11"}, OutcomeMesh},
		"MX":                {"payments.shop.aether.internal.", dns.TypeMX, dns.RcodeSuccess, nil, OutcomeMesh},
		"namespace":         {"shop.aether.internal.", dns.TypeA, dns.RcodeSuccess, nil, OutcomeMesh},
		"domain":            {"aether.internal.", dns.TypeA, dns.RcodeSuccess, nil, OutcomeMesh},
		"no such service":   {"nosuch.shop.aether.internal.", dns.TypeA, dns.RcodeNameError, nil, OutcomeNXDomain},
		"no such namespace": {"payments.nosuch.aether.internal.", dns.TypeA, dns.RcodeNameError, nil, OutcomeNXDomain},
		"below a service":   {"x.payments.shop.aether.internal.", dns.TypeA, dns.RcodeNameError, nil, OutcomeNXDomain},
		"no such, AAAA":     {"nosuch.aether.internal.", dns.TypeAAAA, dns.RcodeNameError, nil, OutcomeNXDomain},
	} {
		t.Run(name, func(t *testing.T) {
			reply, outcome := ask(t, h, c.qname, c.qtype)
			if outcome != c.outcome || reply.Rcode != c.rcode || !reply.Authoritative {
				t.Fatalf("outcome %s, rcode %s, aa %v; want %s, %s, authoritative", outcome, dns.RcodeToString[reply.Rcode],
					reply.Authoritative, c.outcome, dns.RcodeToString[c.rcode])
			}
			var got []string
			for _, rr := range reply.Answer {
				switch a := rr.(type) {
				case *dns.A:
					got = append(got, a.A.String())
				case *dns.AAAA:
					got = append(got, a.AAAA.String())
				}
				if rr.Header().Ttl != MeshTTL || rr.Header().Name != c.qname {
					t.Errorf("record %v: want TTL %d and the asked name", rr, MeshTTL)
				}
			}
			if len(got) != len(c.answers) || (len(got) > 0 && got[0] != c.answers[0]) {
				t.Errorf("answers %v; want %v", got, c.answers)
			}
			if len(c.answers) == 0 && (len(reply.Ns) != 1 || reply.Ns[0].Header().Rrtype != dns.TypeSOA) {
				t.Errorf("a negative answer without the domain's SOA: %v", reply.Ns)
			}
		})
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("%d mesh-domain queries were forwarded; want none", n)
	}
}

// TestTableChangeAnsweredAtOnce: the next query after a Set or Delete answers the new state.
func TestTableChangeAnsweredAtOnce(t *testing.T) {
	table := testTable()
	h := newHandler(Config{Table: table}, &echo{})
	const name = "payments.shop.aether.internal."
	table.Set("shop", "payments", []string{"10.96.0.99"})
	if reply, _ := ask(t, h, name, dns.TypeA); len(reply.Answer) != 1 || reply.Answer[0].(*dns.A).A.String() != "10.96.0.99" {
		t.Fatalf("after the VIP changed: %v", reply.Answer)
	}
	table.Set("shop", "payments", []string{""}) // the VIP went: no address to answer
	if reply, _ := ask(t, h, name, dns.TypeA); reply.Rcode != dns.RcodeNameError {
		t.Fatalf("after the VIP went: %s", dns.RcodeToString[reply.Rcode])
	}
	table.Set("shop", "payments", []string{"10.96.0.10"})
	table.Delete("shop", "payments")
	if reply, _ := ask(t, h, name, dns.TypeA); reply.Rcode != dns.RcodeNameError {
		t.Fatalf("after the service went: %s", dns.RcodeToString[reply.Rcode])
	}
	if reply, _ := ask(t, h, "shop.aether.internal.", dns.TypeA); reply.Rcode != dns.RcodeSuccess {
		t.Fatalf("the namespace with ledger left: %s", dns.RcodeToString[reply.Rcode])
	}
	table.Delete("shop", "ledger")
	if reply, _ := ask(t, h, "shop.aether.internal.", dns.TypeA); reply.Rcode != dns.RcodeNameError {
		t.Fatalf("the namespace without services: %s", dns.RcodeToString[reply.Rcode])
	}
}

// TestRateRefused: over the pod's bucket, a query is REFUSED (and not forwarded).
func TestRateRefused(t *testing.T) {
	up := &echo{}
	h := newHandler(Config{Table: testTable(), Rate: 1e-9, Burst: 2}, up)
	var outcomes []string
	for range 3 {
		_, outcome := ask(t, h, "www.example.test.", dns.TypeA)
		outcomes = append(outcomes, outcome)
	}
	reply, outcome := ask(t, h, "payments.shop.aether.internal.", dns.TypeA)
	if outcomes[0] != OutcomeForwarded || outcomes[1] != OutcomeForwarded || outcomes[2] != OutcomeRefused ||
		outcome != OutcomeRefused || reply.Rcode != dns.RcodeRefused {
		t.Fatalf("outcomes %v then %s (%s); want two forwarded, then refused", outcomes, outcome, dns.RcodeToString[reply.Rcode])
	}
	if n := up.calls.Load(); n != 2 {
		t.Errorf("forwarded %d; want 2 (an answer without records is not cached)", n)
	}
}

// TestMalformedForwardedUnchanged: what does not parse as a query goes to the resolver as it came.
func TestMalformedForwardedUnchanged(t *testing.T) {
	up := &echo{}
	h := newHandler(Config{Table: testTable()}, up)
	packet := []byte{0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1} // a name pointing at itself
	_, outcome := h.answer(context.Background(), packet, false, resolverAt)
	if outcome != OutcomeForwarded || !bytes.Equal(up.last, packet) {
		t.Fatalf("outcome %s, the resolver got %x; want forwarded, %x", outcome, up.last, packet)
	}
}

// TestUpstreamFailure: a resolver that does not answer gives SERVFAIL with the query's ID.
func TestUpstreamFailure(t *testing.T) {
	h := newHandler(Config{Table: testTable()}, &echo{fail: true})
	q, packed := query(t, "www.example.test.", dns.TypeA)
	out, outcome := h.answer(context.Background(), packed, false, resolverAt)
	reply := new(dns.Msg)
	if err := reply.Unpack(out); err != nil || outcome != OutcomeUpstreamFailure || reply.Rcode != dns.RcodeServerFailure || reply.Id != q.Id || !reply.Response {
		t.Fatalf("reply %v (%v), outcome %s; want SERVFAIL to ID %d", reply, err, outcome, q.Id)
	}
}

// TestCacheBound: the cache holds at most its size, and an entry expires with its TTL.
func TestCacheBound(t *testing.T) {
	c := newCache(2)
	now := time.Now()
	for _, name := range []string{"a.test.", "b.test.", "c.test."} {
		q, _ := query(t, name, dns.TypeA)
		a := new(dns.Msg)
		a.SetReply(q)
		a.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 10}, A: []byte{192, 0, 2, 1}}}
		packed, _ := a.Pack()
		c.put(cacheKey("r", q), q, packed, now)
	}
	if n := c.len(); n != 2 {
		t.Fatalf("the cache holds %d answers; want its size, 2", n)
	}
	q, _ := query(t, "c.test.", dns.TypeA)
	if c.get(cacheKey("r", q), q, now.Add(9*time.Second), dns.MaxMsgSize) == nil {
		t.Error("the last answer is not served within its TTL")
	}
	if c.get(cacheKey("r", q), q, now.Add(10*time.Second), dns.MaxMsgSize) != nil {
		t.Error("an answer is served after its TTL")
	}
}
