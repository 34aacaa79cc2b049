// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package meshdns

import (
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// MeshTTL is the TTL of every answer for a mesh name, positive or negative: short, so that a
// client's cache follows a VIP that changes (the server itself answers from the Table at once).
const MeshTTL = 5

// Table is what the mesh names answer: each service's VIPs by its name
// <service>.<namespace>.<domain>. Safe for concurrent use; a change is seen by the next query.
type Table struct {
	domain string // canonical: lower case, with the final dot

	mu         sync.RWMutex
	names      map[string][]netip.Addr // canonical name → VIPs, sorted
	namespaces map[string]int          // canonical <namespace>.<domain> → services in it
}

// NewTable is an empty table of mesh domain domain (e.g. "aether.internal").
func NewTable(domain string) *Table {
	return &Table{domain: canonical(domain), names: map[string][]netip.Addr{}, namespaces: map[string]int{}}
}

// Domain is the table's mesh domain, canonical (lower case, final dot).
func (t *Table) Domain() string { return t.domain }

// canonical is name in lower case with its final dot.
func canonical(name string) string { return dns.CanonicalName(name) }

// Set makes service name in namespace answer vips (those that are IP addresses; none: the name
// answers NXDOMAIN, as a service without a VIP cannot be dialled).
func (t *Table) Set(namespace, name string, vips []string) {
	var addrs []netip.Addr
	for _, v := range vips {
		if a, err := netip.ParseAddr(v); err == nil && a.Zone() == "" {
			addrs = append(addrs, a.Unmap())
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	if len(addrs) == 0 {
		t.Delete(namespace, name)
		return
	}
	key, ns := t.keys(namespace, name)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, had := t.names[key]; !had {
		t.namespaces[ns]++
	}
	t.names[key] = addrs
}

// Delete makes service name in namespace answer NXDOMAIN.
func (t *Table) Delete(namespace, name string) {
	key, ns := t.keys(namespace, name)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, had := t.names[key]; !had {
		return
	}
	delete(t.names, key)
	if t.namespaces[ns]--; t.namespaces[ns] <= 0 {
		delete(t.namespaces, ns)
	}
}

func (t *Table) keys(namespace, name string) (key, ns string) {
	ns = strings.ToLower(namespace) + "." + t.domain
	return strings.ToLower(name) + "." + ns, ns
}

// Answer is what the table says of one name.
type Answer int

const (
	// NotMesh is a name not under the mesh domain (forward it).
	NotMesh Answer = iota
	// Service is a service's name: its VIPs answer.
	Service
	// Empty is the domain itself or a namespace of services (an empty non-terminal): NOERROR, no
	// records.
	Empty
	// NoSuchName is a name under the mesh domain that is no service's: NXDOMAIN.
	NoSuchName
)

// Lookup is what name (any case, with or without its final dot) is, and a service's VIPs.
func (t *Table) Lookup(name string) (Answer, []netip.Addr) {
	name = canonical(name)
	if !dns.IsSubDomain(t.domain, name) {
		return NotMesh, nil
	}
	if name == t.domain {
		return Empty, nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if addrs, ok := t.names[name]; ok {
		return Service, addrs
	}
	if t.namespaces[name] > 0 {
		return Empty, nil
	}
	return NoSuchName, nil
}
