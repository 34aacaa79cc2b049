// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// DemandIdleTTL is how long a service fetched on demand stays carried for an identity after its
// last use (DESIGN section 8: the cold path stays warm while used, 1 h idle). Envoy keeps an
// on-demand cluster until the control plane removes it (it has no per-cluster idle expiry), so the
// agent expires it: a build after the TTL leaves the cluster out, and the delta stream removes it.
const DemandIdleTTL = time.Hour

// maxPendingDemands bounds the cluster names waiting for the next rebuild: a burst beyond it is
// dropped (each such request fails after Envoy's on-demand timeout), so a stream cannot make the
// agent hold an unbounded list.
const maxPendingDemands = 4096

// demandKey is one identity's demand of one service (xds.ServiceKey).
type demandKey struct{ identity, service string }

// demands is the node's record of the services its local identities asked for on demand: the
// cluster names the node's Envoy asked for since the last rebuild (from the xDS server's
// stream), and, per (identity, service), when it was last asked for or used (from the access
// log). Each rebuild resolves the names against the full model (xds.Demand), counts and logs each
// miss, expires what went idle, and hands the rest to the build (model.Mesh.Demanded).
type demands struct {
	ttl time.Duration
	log logr.Logger
	// poke asks for a rebuild.
	poke func()

	mu      sync.Mutex
	pending map[string]bool
	// used are, per cluster name, when an access-log entry last named it (touch).
	used map[string]time.Time
	// last is when each demand was last asked for or used; logged the demands logged as a miss.
	last   map[demandKey]time.Time
	logged map[demandKey]bool
}

func newDemands(ttl time.Duration, log logr.Logger, poke func()) *demands {
	return &demands{ttl: ttl, log: log, poke: poke, pending: map[string]bool{}, used: map[string]time.Time{},
		last: map[demandKey]time.Time{}, logged: map[demandKey]bool{}}
}

// ask records the clusters nodeID's Envoy asked for on demand and asks for a rebuild; names of
// another node are not this agent's.
func (d *demands) ask(node string) func(nodeID string, clusters []string) {
	return func(nodeID string, clusters []string) {
		if nodeID != node {
			return
		}
		d.mu.Lock()
		for _, c := range clusters {
			if len(d.pending) < maxPendingDemands {
				d.pending[c] = true
			}
		}
		d.mu.Unlock()
		d.poke()
	}
}

// touch records that a request or connection went through the cluster at t (an access-log
// entry): a service carried on demand stays while it is used. The next rebuild reads it (apply).
func (d *demands) touch(cluster string, t time.Time) {
	if target, mesh := xds.ParseCluster(cluster); !mesh || target.Inbound {
		return // a pod's own app, the passthrough, the blackhole: nothing on demand
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, seen := d.used[cluster]; seen || len(d.used) < maxPendingDemands {
		d.used[cluster] = t
	}
}

// apply resolves the pending names against m (xds.Demand), counts and logs each miss, drops what
// has been idle for the TTL at now, and returns m with what stays demanded. A mesh that carries
// every service (UpstreamsAll) fetches nothing: it is returned as it is.
func (d *demands) apply(m model.Mesh, now time.Time) model.Mesh {
	if !m.Upstreams.OnDemand() {
		return m
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	m.Demanded = nil // the record's, below: what is carried up front is read without it
	warm := xds.WarmServices(m, m.Pods)
	for _, name := range slices.Sorted(maps.Keys(d.pending)) {
		identity, service, ok := xds.Demand(m, name)
		if !ok {
			// A Host under the mesh domain that names no service, or an identity that left: no
			// answer, and Envoy fails the request after its on-demand timeout.
			d.log.V(1).Info("On-demand request for a cluster no service of the node's model has", "node", m.Node.Name, "cluster", name)
			continue
		}
		if warm[identity][service] {
			continue // carried up front: a request that crossed a rebuild
		}
		k := demandKey{identity, service}
		d.last[k] = now
		upstreamMisses.WithLabelValues(service).Inc()
		if !d.logged[k] {
			d.logged[k] = true
			d.log.Info("A pod called a service it does not declare: fetched on demand; declare it in "+
				"config.aether.io/upstreams to keep it warm", "node", m.Node.Name, "service", service, "identity", identity,
				"pods", podsOf(m, identity), "cluster", name)
		}
	}
	clear(d.pending)
	for cluster, t := range d.used {
		identity, service, ok := xds.Demand(m, cluster)
		k := demandKey{identity, service}
		if last, demanded := d.last[k]; ok && demanded && t.After(last) {
			d.last[k] = t
		}
	}
	clear(d.used)
	demanded := map[string][]string{}
	for k, t := range d.last {
		_, local := warm[k.identity]
		if !local || now.Sub(t) >= d.ttl {
			delete(d.last, k) // idle, or no pod of the identity is on the node any more
			delete(d.logged, k)
			continue
		}
		demanded[k.identity] = append(demanded[k.identity], k.service)
	}
	for _, keys := range demanded {
		slices.Sort(keys)
	}
	m.Demanded = demanded
	return m
}

// next is when the earliest demand goes idle, for the rebuild that drops it; zero when none.
func (d *demands) next() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	var first time.Time
	for _, t := range d.last {
		if expiry := t.Add(d.ttl); first.IsZero() || expiry.Before(first) {
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
