// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spireregistrar

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

var testTD = spiffeid.RequireTrustDomainFromString("aether.internal")

func testConfig() Config {
	return Config{TrustDomain: testTD, NodeSelectors: []workloadidentity.Selector{{Type: "k8s_psat", Value: "cluster:aether"}},
		DelegateNamespace: "aether-operator-system", DelegateServiceAccount: DefaultDelegateServiceAccount,
		NodeAgentPath: DefaultNodeAgentPath}
}

func id(path string) spiffeid.ID { return spiffeid.RequireFromPath(testTD, path) }

func TestParseSelectors(t *testing.T) {
	cases := map[string]struct {
		in   string
		want []workloadidentity.Selector
		err  string
	}{
		"default":        {in: DefaultNodeSelectors, want: []workloadidentity.Selector{{Type: "k8s_psat", Value: "cluster:aether"}}},
		"empty":          {in: ""},
		"sorted, spaces": {in: " k8s_psat:cluster:b , k8s_psat:agent_ns:spire", want: []workloadidentity.Selector{{Type: "k8s_psat", Value: "agent_ns:spire"}, {Type: "k8s_psat", Value: "cluster:b"}}},
		"duplicates":     {in: "a:b,a:b", want: []workloadidentity.Selector{{Type: "a", Value: "b"}}},
		"no value":       {in: "k8s_psat", err: `selector "k8s_psat" is not type:value`},
		"empty type":     {in: ":cluster", err: `selector ":cluster" is not type:value`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSelectors(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestEntryID: an ID SPIRE accepts (its datastore's rule: at most 255 of [A-Za-z0-9._-]),
// marked, the same for the same SPIFFE ID and different for different ones, however long.
func TestEntryID(t *testing.T) {
	spireRule := regexp.MustCompile(`^[A-Za-z0-9._-]{1,255}$`)
	long := id("/ns/" + strings.Repeat("n", 63) + "/sa/" + strings.Repeat("s", 253))
	a, b := EntryID(id("/ns/shop/sa/payments")), EntryID(long)
	for _, got := range []string{a, b} {
		if !spireRule.MatchString(got) || !Owned(Entry{ID: got}) {
			t.Errorf("EntryID = %q: not a marked ID SPIRE accepts", got)
		}
	}
	if a == b || a != EntryID(id("/ns/shop/sa/payments")) {
		t.Errorf("EntryID is not a function of the SPIFFE ID alone: %q, %q", a, b)
	}
	if Owned(Entry{ID: "6a1f6cbe-2b62-4d5e-9c1a-2f1e0e6f7a10"}) {
		t.Error("a SPIRE-generated UUID counts as the registrar's")
	}
}

// TestDesired: the alias and the delegate once; each identity once per node that runs a pod of
// its ServiceAccount, parented to that node's agent (k8s_psat's ID: the node's UID), and on no
// other node; nothing for a node not known yet; a bad identity or agent path named.
func TestDesired(t *testing.T) {
	alias := workloadidentity.NodeAlias(testTD)
	delegate := id("/ns/aether-operator-system/sa/aether-operator-agent")
	aliasEntry := Entry{SPIFFEID: alias, Parent: ServerID(testTD), Selectors: []workloadidentity.Selector{{Type: "k8s_psat", Value: "cluster:aether"}}}
	delegateEntry := Entry{SPIFFEID: delegate, Parent: alias, Selectors: workloadidentity.PodSelectors("aether-operator-system", "aether-operator-agent")}
	nodes := []Node{{Name: "node-a", UID: "uid-a"}, {Name: "node-b", UID: "uid-b"}, {Name: "node-c", UID: "uid-c"}}
	agentA, agentB := id("/spire/agent/k8s_psat/aether/uid-a"), id("/spire/agent/k8s_psat/aether/uid-b")
	payments := "spiffe://aether.internal/ns/shop/sa/payments"
	cases := map[string]struct {
		cfg  func(*Config)
		in   Inputs
		want []Entry // IDs filled in by the test
		errs []string
	}{
		"alias, delegate, and a service's identity on the nodes of its pods only": {
			in: Inputs{
				Services: []Service{{Namespace: "shop", Name: "payments", Identity: payments}, {Namespace: "shop", Name: "pending"}},
				Pods: []Pod{
					{Namespace: "shop", ServiceAccount: "payments", Node: "node-b"},
					{Namespace: "shop", ServiceAccount: "payments", Node: "node-a"},
					{Namespace: "shop", ServiceAccount: "payments", Node: "node-a"}, // a second pod: still one entry
					{Namespace: "shop", ServiceAccount: "web", Node: "node-c"},      // another identity's node
					{Namespace: "bank", ServiceAccount: "payments", Node: "node-c"}, // another namespace's
					{Namespace: "shop", ServiceAccount: "payments"},                 // not scheduled yet
				},
				Nodes: nodes,
			},
			want: []Entry{
				aliasEntry, delegateEntry,
				{SPIFFEID: id("/ns/shop/sa/payments"), Parent: agentA, Selectors: workloadidentity.PodSelectors("shop", "payments")},
				{SPIFFEID: id("/ns/shop/sa/payments"), Parent: agentB, Selectors: workloadidentity.PodSelectors("shop", "payments")},
			},
		},
		"a pod on a node not known yet, or no pod: no entry": {
			in: Inputs{
				Services: []Service{{Namespace: "shop", Name: "payments", Identity: payments}, {Namespace: "shop", Name: "idle", Identity: "spiffe://aether.internal/ns/shop/sa/idle"}},
				Pods:     []Pod{{Namespace: "shop", ServiceAccount: "payments", Node: "node-new"}},
				Nodes:    nodes,
			},
			want: []Entry{aliasEntry, delegateEntry},
		},
		"agents named by node name": {
			cfg: func(c *Config) { c.NodeSelectors, c.NodeAgentPath = nil, "/spire/agent/x509pop/{node-name}" },
			in: Inputs{
				Services: []Service{{Namespace: "shop", Name: "payments", Identity: payments}},
				Pods:     []Pod{{Namespace: "shop", ServiceAccount: "payments", Node: "node-b"}},
				Nodes:    nodes,
			},
			want: []Entry{delegateEntry, {SPIFFEID: id("/ns/shop/sa/payments"), Parent: id("/spire/agent/x509pop/node-b"), Selectors: workloadidentity.PodSelectors("shop", "payments")}},
		},
		"no node selectors: the alias is the user's": {
			cfg:  func(c *Config) { c.NodeSelectors = nil },
			want: []Entry{delegateEntry},
		},
		"a node whose agent ID cannot be formed is named, the others kept": {
			in: Inputs{
				Services: []Service{{Namespace: "shop", Name: "payments", Identity: payments}},
				Pods:     []Pod{{Namespace: "shop", ServiceAccount: "payments", Node: "node-a"}, {Namespace: "shop", ServiceAccount: "payments", Node: "bad"}},
				Nodes:    append(slices.Clone(nodes), Node{Name: "bad", UID: "Not/Valid"}),
			},
			want: []Entry{aliasEntry, delegateEntry, {SPIFFEID: id("/ns/shop/sa/payments"), Parent: agentA, Selectors: workloadidentity.PodSelectors("shop", "payments")}},
			errs: []string{`node bad: its SPIRE agent's ID (--spire-node-agent-path /spire/agent/k8s_psat/aether/{node-uid}): "Not/Valid" is not one path segment`},
		},
		"identities that cannot be registered are named, the others kept": {
			cfg: func(c *Config) { c.NodeSelectors = nil },
			in: Inputs{
				Services: []Service{
					{Namespace: "shop", Name: "a", Identity: "not a spiffe id"},
					{Namespace: "shop", Name: "b", Identity: "spiffe://other.domain/ns/shop/sa/b"},
					{Namespace: "shop", Name: "c", Identity: "spiffe://aether.internal/ns/bank/sa/c"},
					{Namespace: "shop", Name: "d", Identity: "spiffe://aether.internal/ns/shop/sa/d/extra"},
					{Namespace: "shop", Name: "e", Identity: "spiffe://aether.internal/ns/shop/sa/e"},
				},
				Pods:  []Pod{{Namespace: "shop", ServiceAccount: "e", Node: "node-a"}},
				Nodes: nodes,
			},
			want: []Entry{delegateEntry, {SPIFFEID: id("/ns/shop/sa/e"), Parent: agentA, Selectors: workloadidentity.PodSelectors("shop", "e")}},
			errs: []string{
				`MeshService shop/a: status.identity "not a spiffe id" is not a SPIFFE ID`,
				`MeshService shop/b: status.identity "spiffe://other.domain/ns/shop/sa/b" is in trust domain "other.domain", not the mesh's "aether.internal"`,
				`MeshService shop/c: status.identity "spiffe://aether.internal/ns/bank/sa/c" is not spiffe://aether.internal/ns/shop/sa/<serviceaccount>`,
				`MeshService shop/d: status.identity "spiffe://aether.internal/ns/shop/sa/d/extra" is not spiffe://aether.internal/ns/shop/sa/<serviceaccount>`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			got, errs := Desired(cfg, tc.in)
			for i, w := range tc.want {
				if w.Parent == alias || w.Parent == ServerID(testTD) {
					tc.want[i].ID = EntryID(w.SPIFFEID)
				} else {
					tc.want[i].ID = NodeEntryID(w.SPIFFEID, w.Parent)
				}
			}
			if !slices.EqualFunc(got, tc.want, Entry.equal) || !slices.EqualFunc(got, tc.want, func(a, b Entry) bool { return a.ID == b.ID }) {
				t.Errorf("entries:\n got %v\nwant %v", got, tc.want)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("errors %v, want %d", errs, len(tc.errs))
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tc.errs[i]) {
					t.Errorf("error %d: %q does not contain %q", i, err, tc.errs[i])
				}
			}
		})
	}
}

// TestNodeEntryID: one identity's entries on two nodes have two IDs, both marked; the same
// (identity, node) always the same.
func TestNodeEntryID(t *testing.T) {
	x, a, b := id("/ns/shop/sa/x"), id("/spire/agent/k8s_psat/aether/uid-a"), id("/spire/agent/k8s_psat/aether/uid-b")
	again := id("/ns/shop/sa/x")
	if NodeEntryID(x, a) == NodeEntryID(x, b) || NodeEntryID(x, a) != NodeEntryID(again, a) || NodeEntryID(x, a) == EntryID(x) {
		t.Errorf("NodeEntryID is not a function of the identity and the node: %s %s %s", NodeEntryID(x, a), NodeEntryID(x, b), EntryID(x))
	}
	if !Owned(Entry{ID: NodeEntryID(x, a)}) {
		t.Errorf("%s is not marked", NodeEntryID(x, a))
	}
}

// TestDiff: the plan touches only marked entries, writes nothing when SPIRE already holds the
// desired entries, and leaves to an unmarked entry a desired identity it already provides.
func TestDiff(t *testing.T) {
	alias := workloadidentity.NodeAlias(testTD)
	web := Entry{ID: EntryID(id("/ns/shop/sa/web")), SPIFFEID: id("/ns/shop/sa/web"), Parent: alias, Selectors: workloadidentity.PodSelectors("shop", "web")}
	db := Entry{ID: EntryID(id("/ns/shop/sa/db")), SPIFFEID: id("/ns/shop/sa/db"), Parent: alias, Selectors: workloadidentity.PodSelectors("shop", "db")}
	handMade := Entry{ID: "6a1f6cbe-2b62-4d5e-9c1a-2f1e0e6f7a10", SPIFFEID: id("/ns/shop/sa/tool"), Parent: alias, Selectors: workloadidentity.PodSelectors("shop", "tool")}
	userWeb := web
	userWeb.ID = "0b7e2a43-8f5d-4c55-b1ad-7a7bd2cf8e11" // the same identity, registered by hand
	stale := Entry{ID: EntryID(id("/ns/shop/sa/gone")), SPIFFEID: id("/ns/shop/sa/gone"), Parent: alias, Selectors: workloadidentity.PodSelectors("shop", "gone")}
	drifted := web
	drifted.Selectors = workloadidentity.PodSelectors("shop", "other")
	admin := db
	admin.Admin = true

	cases := map[string]struct {
		desired, existing []Entry
		owned             func(Entry) bool
		create, update    []Entry
		delete            []string
		provided, kept    int
	}{
		"nothing differs: no write": {desired: []Entry{web, db}, existing: []Entry{db, web, handMade}, kept: 2},
		"missing ones are created":  {desired: []Entry{web, db}, existing: []Entry{handMade}, create: []Entry{web, db}},
		"ours not desired are deleted, others not": {
			desired: []Entry{web}, existing: []Entry{web, stale, handMade}, delete: []string{stale.ID}, kept: 1,
		},
		"drift of ours is put back": {
			desired: []Entry{web, db}, existing: []Entry{drifted, admin}, update: []Entry{web, db},
		},
		"an identity provided by an entry not ours is left to it": {
			desired: []Entry{web}, existing: []Entry{userWeb}, provided: 1,
		},
		// Negative control: without the mark's check, the hand-made entry and the user's own
		// registration are deleted. The ownership test of registrar_test.go shows the same
		// against a real SPIRE.
		"without the mark every entry is the registrar's": {
			desired: []Entry{web}, existing: []Entry{web, handMade, userWeb}, owned: func(Entry) bool { return true },
			delete: []string{userWeb.ID, handMade.ID}, kept: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			owned := tc.owned
			if owned == nil {
				owned = Owned
			}
			p := Diff(tc.desired, tc.existing, owned)
			if !slices.EqualFunc(p.Create, tc.create, Entry.equal) || !slices.EqualFunc(p.Update, tc.update, Entry.equal) ||
				!slices.Equal(p.Delete, tc.delete) || len(p.Provided) != tc.provided || p.Kept != tc.kept {
				t.Errorf("plan: create %v, update %v, delete %v, provided %d, kept %d\nwant create %v, update %v, delete %v, provided %d, kept %d",
					p.Create, p.Update, p.Delete, len(p.Provided), p.Kept, tc.create, tc.update, tc.delete, tc.provided, tc.kept)
			}
			if (p.Writes() == 0) != (len(tc.create)+len(tc.update)+len(tc.delete) == 0) {
				t.Errorf("Writes() = %d", p.Writes())
			}
		})
	}
}
