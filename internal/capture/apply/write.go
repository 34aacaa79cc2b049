// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"slices"

	"github.com/google/nftables"

	"github.com/aether-mesh/aether-operator/internal/capture"
)

// maxElementsPerMessage bounds the elements of one netlink message: a message's element list is
// one attribute, whose length is 16 bits (64 KiB), and an IPv6 pair takes 32 bytes of it.
const maxElementsPerMessage = 1024

// write queues b on conn in the order the kernel needs: the table, new chains and sets, element
// changes, rule deletions, then rule additions (a new rule may look up a new set), and last the
// chains and sets no longer wanted (after the rules that used them). Nothing is sent until Flush:
// the kernel applies the whole batch as one transaction, so no packet ever sees half of it.
func write(conn *nftables.Conn, b *batch) error {
	if b.replace {
		conn.DelTable(table)
	}
	if b.create {
		conn.AddTable(table)
	}
	chains := map[string]*nftables.Chain{}
	for _, c := range b.addChains {
		ch, err := nftChain(c)
		if err != nil {
			return err
		}
		chains[c.Name] = conn.AddChain(ch)
	}
	for _, s := range b.addSets {
		if err := conn.AddSet(nftSet(s), nil); err != nil {
			return fmt.Errorf("capture/apply: set %s: %w", s.Name, err)
		}
		if err := addElements(conn, s, s.Elements); err != nil {
			return err
		}
	}
	for _, e := range b.delElements {
		for chunk := range slices.Chunk(e.elements, maxElementsPerMessage) {
			if err := conn.SetDeleteElements(nftSet(e.set), nftElements(chunk)); err != nil {
				return fmt.Errorf("capture/apply: set %s: %w", e.set.Name, err)
			}
		}
	}
	for _, e := range b.addElements {
		if err := addElements(conn, e.set, e.elements); err != nil {
			return err
		}
	}
	for _, r := range b.delRules {
		if err := conn.DelRule(&nftables.Rule{Table: table, Chain: &nftables.Chain{Name: r.chain, Table: table}, Handle: r.handle}); err != nil {
			return fmt.Errorf("capture/apply: deleting rule %d of chain %s: %w", r.handle, r.chain, err)
		}
	}
	if err := addRules(conn, b.addRules, chains); err != nil {
		return err
	}
	for _, name := range b.delChains {
		ch := &nftables.Chain{Name: name, Table: table}
		conn.FlushChain(ch)
		conn.DelChain(ch)
	}
	for _, name := range b.delSets {
		conn.DelSet(&nftables.Set{Table: table, Name: name})
	}
	return nil
}

// addElements queues es into set s, in messages of at most maxElementsPerMessage.
func addElements(conn *nftables.Conn, s capture.Set, es []capture.Element) error {
	for chunk := range slices.Chunk(es, maxElementsPerMessage) {
		if err := conn.SetAddElements(nftSet(s), nftElements(chunk)); err != nil {
			return fmt.Errorf("capture/apply: set %s: %w", s.Name, err)
		}
	}
	return nil
}

// addRules queues each rule: appended in order to a chain this batch creates; else right after
// its anchor (or first in its chain), the rules of one anchor in reverse, as each lands right
// after the anchor and pushes the ones before it down.
func addRules(conn *nftables.Conn, adds []ruleAdd, created map[string]*nftables.Chain) error {
	for _, a := range adds {
		if ch, ok := created[a.chain.Name]; ok {
			rule, err := nftRule(ch, a.rule)
			if err != nil {
				return err
			}
			conn.AddRule(rule)
		}
	}
	for _, a := range slices.Backward(adds) {
		if _, ok := created[a.chain.Name]; ok {
			continue
		}
		rule, err := nftRule(&nftables.Chain{Name: a.chain.Name, Table: table}, a.rule)
		if err != nil {
			return err
		}
		if a.after == 0 {
			conn.InsertRule(rule)
			continue
		}
		rule.Position = a.after
		conn.AddRule(rule)
	}
	return nil
}

// batchSize is about how many bytes b takes on the wire, to size the socket's send buffer.
func batchSize(b *batch) int {
	const perElement, perObject = 40, 1024
	s := b.stats()
	return 64*1024 + perObject*(s.RulesAdded+s.RulesDeleted+s.Structure) + perElement*(s.ElementsAdded+s.ElementsDeleted)
}
