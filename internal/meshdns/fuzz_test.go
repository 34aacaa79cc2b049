// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns

import (
	"context"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzQuery sends any packet through the query path, over UDP and TCP: it never panics, a query
// for a name under the mesh domain is never forwarded, and an answer it makes itself parses.
func FuzzQuery(f *testing.F) {
	for _, name := range []string{"payments.shop.aether.internal.", "nosuch.shop.aether.internal.", "www.example.test.",
		strings.Repeat("a.", 120) + "aether.internal."} {
		_, packed := query(f, name, dns.TypeA)
		f.Add(packed)
	}
	f.Add([]byte{0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1}) // compression loop
	f.Add([]byte{0x12, 0x34, 0x01})                                                             // shorter than a header
	f.Add(append([]byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 63}, make([]byte, 300)...))         // an oversized label run
	f.Fuzz(func(t *testing.T, packet []byte) {
		for _, tcp := range []bool{false, true} {
			up := &echo{}
			h := newHandler(Config{Table: testTable(), CacheSize: 4}, up)
			out, outcome := h.answer(context.Background(), packet, tcp, resolverAt)
			q := new(dns.Msg)
			parsed := q.Unpack(packet) == nil && !q.Response && q.Opcode == dns.OpcodeQuery && len(q.Question) == 1
			if parsed && dns.IsSubDomain("aether.internal.", dns.CanonicalName(q.Question[0].Name)) && up.calls.Load() != 0 {
				t.Fatalf("a mesh-domain query (%s) was forwarded", q.Question[0].Name)
			}
			if outcome != OutcomeForwarded && out != nil {
				if err := new(dns.Msg).Unpack(out); err != nil && len(out) > 12 {
					t.Fatalf("the server's own answer (%s) does not parse: %v", outcome, err)
				}
			}
		}
	})
}
