// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package demand is a node's record of the services its local identities fetched on demand
// (DESIGN section 8, Distribution): what the node's Envoy asked for that its identities do not
// declare, carried while used and dropped after an idle hour. The agent keeps one (Record.Apply
// adds it to each build's model), and so does the live Envoy tier, which answers Envoy as the
// agent does.
//
// With a state file the record outlives the agent: a restarted agent's first build carries what
// the node fetched before, so the node's Envoy, reconnecting, loses none of it (without it, the
// first configuration the new agent serves removes those clusters, and a connection that needs
// one waits for the on-demand fetch again, or fails).
package demand

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// IdleTTL is how long a service fetched on demand stays carried for an identity after its last
// use (DESIGN section 8: the cold path stays warm while used, 1 h idle). Envoy keeps an
// on-demand cluster until the control plane removes it (it has no per-cluster idle expiry), so
// the record expires it: a build after the TTL leaves the cluster out, and the delta stream
// removes it.
const IdleTTL = time.Hour

// maxPending bounds the cluster names waiting for the next rebuild, and the clusters used since
// the last: a burst beyond it is dropped (each such request fails after Envoy's on-demand
// timeout), so a stream cannot make the record hold an unbounded list.
const maxPending = 4096

// saveEvery is how often, at most, the state file is written for uses alone (a service asked
// for, or dropped, is written at once): a restarted agent reads each service's last use at most
// this late, well within IdleTTL.
const saveEvery = time.Minute

// Options configure a Record.
type Options struct {
	// TTL is how long an unused service stays; IdleTTL if zero.
	TTL time.Duration
	Log logr.Logger
	// Miss is told the service (<name>.<namespace>) of each on-demand request Apply takes (the
	// agent counts them); nil: not told.
	Miss func(service string)
	// File is the state file; empty: the record lives in memory only.
	File string
}

// key is one identity's demand of one service (xds.ServiceKey).
type key struct{ identity, service string }

// Record is the node's record of the services its local identities asked for on demand: the
// cluster names the node's Envoy asked for since the last rebuild (from the xDS server's
// stream), and, per (identity, service), when it was last asked for or used (from the access
// log). Each rebuild resolves the names against the full model (xds.Demand), reports and logs
// each miss, expires what went idle, and hands the rest to the build (model.Mesh.Demanded).
type Record struct {
	o Options

	mu      sync.Mutex
	pending map[string]bool
	// used are, per cluster name, when an access-log entry last named it (Touch).
	used map[string]time.Time
	// last is when each demand was last asked for or used; logged the demands logged as a miss.
	last   map[key]time.Time
	logged map[key]bool
	// saved is the record as the state file holds it, and when it was written.
	saved   map[key]time.Time
	savedAt time.Time
	// saveFailed says the last write failed (logged once until one succeeds).
	saveFailed bool
}

// Open returns a Record; with o.File, holding what the file holds (none if it does not exist).
// A demand whose identity has left the node, or that went idle while no agent ran, is dropped by
// the first Apply.
func Open(o Options) (*Record, error) {
	if o.TTL == 0 {
		o.TTL = IdleTTL
	}
	r := &Record{o: o, pending: map[string]bool{}, used: map[string]time.Time{}, last: map[key]time.Time{},
		logged: map[key]bool{}, saved: map[key]time.Time{}}
	if o.File == "" {
		return r, nil
	}
	data, err := os.ReadFile(o.File)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the on-demand record: %w", err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("the on-demand record %s does not parse (%w): remove it (the node's Envoy fetches again what it uses)", o.File, err)
	}
	for _, d := range st.Demands {
		k := key{d.Identity, d.Service}
		r.last[k], r.saved[k] = d.LastUsed, d.LastUsed
		r.logged[k] = true // logged by the agent that fetched it
	}
	return r, nil
}

// state is the state file's content.
type state struct {
	Demands []savedDemand `json:"demands"`
}

type savedDemand struct {
	Identity string    `json:"identity"`
	Service  string    `json:"service"`
	LastUsed time.Time `json:"lastUsed"`
}

// Ask is what the xDS server is given (OnClusterDemand): it records the clusters nodeID's Envoy
// asked for on demand and asks for a rebuild with poke, which must not block; names of another
// node are not this one's.
func (r *Record) Ask(node string, poke func()) func(nodeID string, clusters []string) {
	return func(nodeID string, clusters []string) {
		if nodeID != node {
			return
		}
		r.mu.Lock()
		for _, c := range clusters {
			if len(r.pending) < maxPending {
				r.pending[c] = true
			}
		}
		r.mu.Unlock()
		poke()
	}
}

// Touch records that a request or connection went through the cluster at t (an access-log
// entry): a service carried on demand stays while it is used. The next Apply reads it.
func (r *Record) Touch(cluster string, t time.Time) {
	if target, mesh := xds.ParseCluster(cluster); !mesh || target.Inbound {
		return // a pod's own app, the passthrough, the blackhole: nothing on demand
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.used[cluster]; seen || len(r.used) < maxPending {
		r.used[cluster] = t
	}
}

// Apply resolves the pending names against m (xds.Demand), reports and logs each miss, drops
// what has been idle for the TTL at now, saves the record when it changed, and returns m with
// what stays demanded. A mesh that carries every service (UpstreamsAll) fetches nothing: it is
// returned as it is.
func (r *Record) Apply(m model.Mesh, now time.Time) model.Mesh {
	if !m.Upstreams.OnDemand() {
		return m
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m.Demanded = nil // the record's, below: what is carried up front is read without it
	warm := xds.WarmServices(m, m.Pods)
	for _, name := range slices.Sorted(maps.Keys(r.pending)) {
		identity, service, ok := xds.Demand(m, name)
		if !ok {
			// A service deleted since the configuration named it, or an identity that left: no
			// answer, and Envoy fails the request after its on-demand timeout.
			r.o.Log.V(1).Info("On-demand request for a cluster no service of the node's model has", "node", m.Node.Name, "cluster", name)
			continue
		}
		if warm[identity][service] {
			continue // carried up front: a request that crossed a rebuild
		}
		k := key{identity, service}
		r.last[k] = now
		if r.o.Miss != nil {
			r.o.Miss(service)
		}
		if !r.logged[k] {
			r.logged[k] = true
			r.o.Log.Info("A pod called a service it does not declare: fetched on demand; declare it in "+
				"config.aether.io/upstreams to keep it warm", "node", m.Node.Name, "service", service, "identity", identity,
				"pods", podsOf(m, identity), "cluster", name)
		}
	}
	clear(r.pending)
	for cluster, t := range r.used {
		identity, service, ok := xds.Demand(m, cluster)
		k := key{identity, service}
		if last, demanded := r.last[k]; ok && demanded && t.After(last) {
			r.last[k] = t
		}
	}
	clear(r.used)
	demanded := map[string][]string{}
	for k, t := range r.last {
		_, local := warm[k.identity]
		if !local || now.Sub(t) >= r.o.TTL {
			delete(r.last, k) // idle, or no pod of the identity is on the node any more
			delete(r.logged, k)
			continue
		}
		demanded[k.identity] = append(demanded[k.identity], k.service)
	}
	for _, keys := range demanded {
		slices.Sort(keys)
	}
	m.Demanded = demanded
	r.save(now)
	return m
}

// save writes the state file (called with the lock held) when a demand came or went, or when a
// use is newer than the file says and the file is saveEvery old. A failed write is logged once;
// the next change writes the whole record again.
func (r *Record) save(now time.Time) {
	if r.o.File == "" {
		return
	}
	changed := len(r.last) != len(r.saved)
	fresher := false
	for k, t := range r.last {
		saved, ok := r.saved[k]
		changed = changed || !ok
		fresher = fresher || t.After(saved)
	}
	if due := fresher && now.Sub(r.savedAt) >= saveEvery; !changed && !due {
		return
	}
	st := state{Demands: []savedDemand{}}
	for _, k := range slices.SortedFunc(maps.Keys(r.last), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.identity, b.identity), cmp.Compare(a.service, b.service))
	}) {
		st.Demands = append(st.Demands, savedDemand{Identity: k.identity, Service: k.service, LastUsed: r.last[k].UTC()})
	}
	data, err := json.Marshal(st)
	if err == nil {
		err = cni.WriteFileAtomic(r.o.File, data, 0o600)
	}
	if err != nil {
		if !r.saveFailed {
			r.o.Log.Error(err, "Could not write the on-demand record; a restarted agent will not carry what the node fetched until it is asked again", "file", r.o.File)
		}
		r.saveFailed = true
		return
	}
	r.saveFailed = false
	r.saved, r.savedAt = maps.Clone(r.last), now
}

// Next is when the earliest demand goes idle, for the rebuild that drops it; zero when none.
func (r *Record) Next() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first time.Time
	for _, t := range r.last {
		if expiry := t.Add(r.o.TTL); first.IsZero() || expiry.Before(first) {
			first = expiry
		}
	}
	return first
}

// podsOf are the "namespace/name" of m's local pods of identity, sorted: who asked.
func podsOf(m model.Mesh, identity string) []string {
	var out []string
	for _, p := range m.Pods {
		if p.Identity == identity {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	slices.Sort(out)
	return out
}
