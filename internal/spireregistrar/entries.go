// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spireregistrar

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// EntryIDPrefix starts the ID of every entry the registrar creates: its ownership mark. The rest
// of the ID is derived from the entry's SPIFFE ID (EntryID), so a create retried after a lost
// answer finds the entry it made instead of making a second one.
const EntryIDPrefix = "aether-operator."

// DefaultNodeSelectors select the node agents' alias by default: the SPIRE agents that k8s_psat
// attested in cluster "aether" (config/spire's cluster name).
const DefaultNodeSelectors = "k8s_psat:cluster:aether"

// DefaultDelegateServiceAccount is the node agent's ServiceAccount as config/ deploys it
// (config/agent's "agent" with config/base's name prefix "aether-operator-").
const DefaultDelegateServiceAccount = "aether-operator-agent"

// Config is what the desired entries depend on besides the MeshServices.
type Config struct {
	TrustDomain spiffeid.TrustDomain
	// NodeSelectors select the node agents' alias entry; empty: the registrar leaves the alias to
	// the user's SPIRE (and deletes an alias entry of its own).
	NodeSelectors []workloadidentity.Selector
	// DelegateNamespace and DelegateServiceAccount are the node agent's ServiceAccount, whose SPIFFE
	// ID the SPIRE agents' authorized_delegates lists.
	DelegateNamespace, DelegateServiceAccount string
	// NodeAgentPath is the path of a node's SPIRE agent ID (ParseNodeAgentPath): the parent of
	// that node's entries of its pods' identities.
	NodeAgentPath string
}

// DefaultNodeAgentPath is a node's SPIRE agent ID as SPIRE's k8s_psat node attestor makes it for
// config/spire's cluster "aether": /spire/agent/k8s_psat/<cluster>/<the node's UID>.
const DefaultNodeAgentPath = "/spire/agent/k8s_psat/aether/" + NodeUIDPlaceholder

// The placeholders of a node agent path, replaced by each node's own.
const (
	NodeNamePlaceholder = "{node-name}"
	NodeUIDPlaceholder  = "{node-uid}"
)

// agentPathPrefix starts every SPIRE agent's ID: SPIRE makes agent IDs under it, whatever the
// attestor.
const agentPathPrefix = "/spire/agent/"

// ParseNodeAgentPath checks path, the path of a node's SPIRE agent ID with {node-name} or
// {node-uid} standing for the node's: under /spire/agent/ and naming the node, or every node
// would share one parent and hold every identity.
func ParseNodeAgentPath(path string) (string, error) {
	if !strings.HasPrefix(path, agentPathPrefix) {
		return "", fmt.Errorf("%q is not under %s, where SPIRE names its agents; for k8s_psat write %s", path, agentPathPrefix, DefaultNodeAgentPath)
	}
	if !strings.Contains(path, NodeNamePlaceholder) && !strings.Contains(path, NodeUIDPlaceholder) {
		return "", fmt.Errorf("%q names no node: put %s or %s where the node's agent ID has it (for k8s_psat: %s)",
			path, NodeUIDPlaceholder, NodeNamePlaceholder, DefaultNodeAgentPath)
	}
	if err := spiffeid.ValidatePath(nodeAgentPath(path, Node{Name: "node-a", UID: "0b7e2a43-8f5d-4c55-b1ad-7a7bd2cf8e11"})); err != nil {
		return "", fmt.Errorf("%q is not a SPIFFE ID path once a node is put in: %w", path, err)
	}
	return path, nil
}

func nodeAgentPath(path string, n Node) string {
	return strings.NewReplacer(NodeNamePlaceholder, n.Name, NodeUIDPlaceholder, n.UID).Replace(path)
}

// NodeAgent is the SPIFFE ID of node n's SPIRE agent. The node's name and UID must each be one
// path segment: one holding a '/' would name another agent.
func (c Config) NodeAgent(n Node) (spiffeid.ID, error) {
	for _, v := range []string{n.Name, n.UID} {
		if err := spiffeid.ValidatePathSegment(v); err != nil {
			return spiffeid.ID{}, fmt.Errorf("%q is not one path segment: %w", v, err)
		}
	}
	return spiffeid.FromPath(c.TrustDomain, nodeAgentPath(c.NodeAgentPath, n))
}

// Service is what the registrar reads of a MeshService.
type Service struct {
	Namespace, Name string
	// Identity is status.identity: spiffe://<td>/ns/<namespace>/sa/<serviceaccount>, or empty.
	Identity string
}

// Pod is what the registrar reads of a mesh pod: its identity's selectors and its node.
type Pod struct {
	Namespace, ServiceAccount string
	// Node is spec.nodeName: empty until the pod is scheduled.
	Node string
}

// Node is what the registrar reads of a node: what its agent's ID may be made of.
type Node struct{ Name, UID string }

// Inputs are what the desired entries are made of besides the configuration.
type Inputs struct {
	Services []Service
	// Pods are the mesh's pods that are scheduled and not finished.
	Pods []Pod
	// Nodes are the cluster's nodes.
	Nodes []Node
}

// Entry is a registration entry as the registrar compares it.
type Entry struct {
	// ID is SPIRE's entry ID: EntryID(SPIFFEID) for a desired entry.
	ID       string
	SPIFFEID spiffeid.ID
	Parent   spiffeid.ID
	// Selectors are sorted (SPIRE stores a set).
	Selectors []workloadidentity.Selector
	// The fields a desired entry leaves at their zero value, compared so that an entry of ours
	// changed by hand to give more (an admin, a downstream CA, an expiry, other names, federation)
	// is put back. TTLs and the hint are SPIRE's defaults and left alone.
	Admin, Downstream, StoreSVID bool
	ExpiresAt                    int64
	DNSNames, FederatesWith      []string
}

// EntryID is the ID of the registrar's entry for SPIFFE ID id: EntryIDPrefix and 128 bits of the
// ID's SHA-256, within SPIRE's 255 characters of [A-Za-z0-9._-] whatever the ID's length.
func EntryID(id spiffeid.ID) string {
	sum := sha256.Sum256([]byte(id.String()))
	return EntryIDPrefix + hex.EncodeToString(sum[:16])
}

// NodeEntryID is the ID of the registrar's entry for SPIFFE ID id under node agent parent: one
// identity has one entry per node that runs its pods.
func NodeEntryID(id, parent spiffeid.ID) string {
	sum := sha256.Sum256([]byte(id.String() + " " + parent.String()))
	return EntryIDPrefix + hex.EncodeToString(sum[:16])
}

// Owned reports whether e carries the registrar's mark.
func Owned(e Entry) bool { return strings.HasPrefix(e.ID, EntryIDPrefix) }

// ServerID is the SPIRE server's own SPIFFE ID, the parent of node alias entries.
func ServerID(td spiffeid.TrustDomain) spiffeid.ID {
	return spiffeid.RequireFromPath(td, "/spire/server")
}

// ParseSelectors reads comma-separated type:value selectors (k8s_psat:cluster:aether); empty gives
// none. The result is sorted.
func ParseSelectors(list string) ([]workloadidentity.Selector, error) {
	var out []workloadidentity.Selector
	for field := range strings.SplitSeq(list, ",") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		typ, value, ok := strings.Cut(field, ":")
		if !ok || typ == "" || value == "" {
			return nil, fmt.Errorf("selector %q is not type:value; write each as SPIRE prints it, for example %s", field, DefaultNodeSelectors)
		}
		out = append(out, workloadidentity.Selector{Type: typ, Value: value})
	}
	sortSelectors(out)
	return slices.Compact(out), nil
}

func sortSelectors(s []workloadidentity.Selector) {
	slices.SortFunc(s, func(a, b workloadidentity.Selector) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Value, b.Value))
	})
}

// Desired is the entries the registrar keeps for cfg and in, sorted by SPIFFE ID and parent:
//
//   - the node agents' alias (unless cfg.NodeSelectors is empty) and the node agent's delegate
//     entry under it, on every node;
//   - for each MeshService identity spiffe://<td>/ns/<ns>/sa/<sa>, one entry per node that runs
//     a pod of ServiceAccount <ns>/<sa>, parented to that node's SPIRE agent (cfg.NodeAgent):
//     no other node's agent is given it, so none can hand it out through the Delegated Identity
//     API.
//
// A service whose identity the registrar cannot register is left out and named in one of the
// errors, as is a node whose agent ID cannot be formed; the others are still returned. A pod
// on a node not (yet) in in.Nodes gets no entry there until the node is.
func Desired(cfg Config, in Inputs) ([]Entry, []error) {
	alias := workloadidentity.NodeAlias(cfg.TrustDomain)
	byID := map[string]Entry{}
	add := func(entryID string, id, parent spiffeid.ID, selectors []workloadidentity.Selector) {
		sortSelectors(selectors)
		byID[entryID] = Entry{ID: entryID, SPIFFEID: id, Parent: parent, Selectors: selectors}
	}
	if len(cfg.NodeSelectors) > 0 {
		add(EntryID(alias), alias, ServerID(cfg.TrustDomain), slices.Clone(cfg.NodeSelectors))
	}
	var errs []error
	delegate, err := workloadidentity.ServiceAccountID(cfg.TrustDomain, cfg.DelegateNamespace, cfg.DelegateServiceAccount)
	if err != nil {
		errs = append(errs, fmt.Errorf("the node agent's delegate entry: %w", err))
	} else {
		add(EntryID(delegate), delegate, alias, workloadidentity.PodSelectors(cfg.DelegateNamespace, cfg.DelegateServiceAccount))
	}
	agents, agentErrs := nodeAgents(cfg, in)
	errs = append(errs, agentErrs...)
	for _, svc := range in.Services {
		if svc.Identity == "" {
			continue // not computed yet: nothing to register
		}
		id, sa, err := serviceIdentity(cfg.TrustDomain, svc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, parent := range agents[serviceAccount{svc.Namespace, sa}] {
			add(NodeEntryID(id, parent), id, parent, workloadidentity.PodSelectors(svc.Namespace, sa))
		}
	}
	out := make([]Entry, 0, len(byID))
	for _, e := range byID {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.SPIFFEID.String(), b.SPIFFEID.String()), cmp.Compare(a.Parent.String(), b.Parent.String()))
	})
	return out, errs
}

type serviceAccount struct{ namespace, name string }

// nodeAgents maps each ServiceAccount of in.Pods to the agent IDs of the nodes that run its
// pods.
func nodeAgents(cfg Config, in Inputs) (map[serviceAccount][]spiffeid.ID, []error) {
	nodes := make(map[string]Node, len(in.Nodes))
	for _, n := range in.Nodes {
		nodes[n.Name] = n
	}
	agentOf := map[string]spiffeid.ID{}
	var errs []error
	out := map[serviceAccount][]spiffeid.ID{}
	for _, p := range in.Pods {
		node, known := nodes[p.Node]
		if p.Node == "" || !known {
			continue
		}
		agent, ok := agentOf[node.Name]
		if !ok {
			var err error
			if agent, err = cfg.NodeAgent(node); err != nil {
				errs = append(errs, fmt.Errorf("node %s: its SPIRE agent's ID (--spire-node-agent-path %s): %w", node.Name, cfg.NodeAgentPath, err))
			}
			agentOf[node.Name] = agent
		}
		if agent.IsZero() {
			continue
		}
		sa := serviceAccount{p.Namespace, p.ServiceAccount}
		if !slices.Contains(out[sa], agent) {
			out[sa] = append(out[sa], agent)
		}
	}
	return out, errs
}

// serviceIdentity checks svc's identity is spiffe://<td>/ns/<its namespace>/sa/<sa> and returns
// it and sa: a service only ever holds an identity of its own namespace.
func serviceIdentity(td spiffeid.TrustDomain, svc Service) (spiffeid.ID, string, error) {
	want := fmt.Sprintf("spiffe://%s/ns/%s/sa/<serviceaccount>", td.Name(), svc.Namespace)
	id, err := spiffeid.FromString(svc.Identity)
	if err != nil {
		return spiffeid.ID{}, "", fmt.Errorf("MeshService %s/%s: status.identity %q is not a SPIFFE ID (%v); the registrar registers %s",
			svc.Namespace, svc.Name, svc.Identity, err, want)
	}
	if id.TrustDomain() != td {
		return spiffeid.ID{}, "", fmt.Errorf("MeshService %s/%s: status.identity %q is in trust domain %q, not the mesh's %q; give the manager and the registrar the same --mesh-domain",
			svc.Namespace, svc.Name, svc.Identity, id.TrustDomain().Name(), td.Name())
	}
	segments := strings.Split(strings.TrimPrefix(id.Path(), "/"), "/")
	if len(segments) != 4 || segments[0] != "ns" || segments[1] != svc.Namespace || segments[2] != "sa" {
		return spiffeid.ID{}, "", fmt.Errorf("MeshService %s/%s: status.identity %q is not %s; it is not registered",
			svc.Namespace, svc.Name, svc.Identity, want)
	}
	return id, segments[3], nil
}

// Plan is what a reconcile writes to SPIRE.
type Plan struct {
	// Create and Update are desired entries missing from SPIRE and entries of ours that differ
	// from their desired form.
	Create, Update []Entry
	// Delete is the IDs of entries of ours that are not desired.
	Delete []string
	// Provided are desired entries that an entry not ours already provides: left to it.
	Provided []Entry
	// Kept counts the entries of ours that are already as desired.
	Kept int
}

// Writes is the number of entries the plan writes.
func (p Plan) Writes() int { return len(p.Create) + len(p.Update) + len(p.Delete) }

// Diff plans how the existing entries become the desired ones, touching only the entries owned
// reports as the registrar's (Owned; a test disables the check to prove it matters).
func Diff(desired, existing []Entry, owned func(Entry) bool) Plan {
	ours := map[string]Entry{}
	foreign := map[string]bool{}
	for _, e := range existing {
		if owned(e) {
			ours[e.ID] = e
		} else {
			foreign[e.identityKey()] = true
		}
	}
	var p Plan
	for _, want := range desired {
		got, ok := ours[want.ID]
		delete(ours, want.ID)
		switch {
		case ok && got.equal(want):
			p.Kept++
		case ok:
			p.Update = append(p.Update, want)
		case foreign[want.identityKey()]:
			p.Provided = append(p.Provided, want)
		default:
			p.Create = append(p.Create, want)
		}
	}
	for id := range ours {
		p.Delete = append(p.Delete, id)
	}
	slices.Sort(p.Delete)
	return p
}

// sameIdentity reports whether o issues e's SPIFFE ID to the same workloads: the same parent and
// exactly the same selectors (SPIRE's own test for a similar entry).
func (e Entry) sameIdentity(o Entry) bool {
	return e.SPIFFEID == o.SPIFFEID && e.Parent == o.Parent && slices.Equal(e.Selectors, o.Selectors)
}

// identityKey is equal for two entries exactly when sameIdentity holds: selectors are sorted,
// and each part is quoted, so no two lists of parts read alike.
func (e Entry) identityKey() string {
	parts := []string{strconv.Quote(e.SPIFFEID.String()), strconv.Quote(e.Parent.String())}
	for _, s := range e.Selectors {
		parts = append(parts, strconv.Quote(s.Type), strconv.Quote(s.Value))
	}
	return strings.Join(parts, " ")
}

func (e Entry) equal(o Entry) bool {
	return e.sameIdentity(o) && e.Admin == o.Admin && e.Downstream == o.Downstream && e.StoreSVID == o.StoreSVID &&
		e.ExpiresAt == o.ExpiresAt && slices.Equal(e.DNSNames, o.DNSNames) && slices.Equal(e.FederatesWith, o.FederatesWith)
}
