// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// EndpointTimesPath is where the agent's metrics server answers, per endpoint, when this agent
// saw it turn Healthy (its own endpoints) and when its node's published snapshot first held it
// Healthy or dropped it: what an endpoint's programming latency is measured from, without
// polling the API server (hack/bench's latency run reads every agent's).
const EndpointTimesPath = "/debug/endpoint-times"

// endpointTimesRetention is how long an endpoint's times are kept after the snapshot dropped it
// (or, for a probe time alone, after it was recorded): long enough for a reader to collect them,
// bounded so that a node's churn over days holds no memory.
const endpointTimesRetention = 15 * time.Minute

// EndpointTimes records, per MeshEndpoint ("namespace/name"), when it turned Healthy under this
// agent's prober, and when this node's published xDS snapshot first held it Healthy and last
// dropped it (unhealthy or gone). Safe for concurrent use; it serves them as JSON (ServeHTTP).
type EndpointTimes struct {
	mu   sync.Mutex
	byEP map[string]*EndpointTime
	// heldBy are the endpoints (key → address) each load assignment of the last snapshot held
	// Healthy, by message: the xDS builder reuses an unchanged service's message from build to
	// build, so a publish reads only the messages that changed (at a thousand services, reading
	// every one on every publish was a fifth of the agent's rebuild). An endpoint is held while
	// any message holds it (EndpointTime.holders).
	heldBy map[*endpointv3.ClusterLoadAssignment]*heldEntry
	// last are the last snapshot's load assignments, in order: a publish of as many compares its
	// messages with these by position, and updates heldBy for the positions that changed only
	// (patchHeld), rather than building it again from every message.
	last []*endpointv3.ClusterLoadAssignment
	// alwaysReplace makes every publish build heldBy again (replaceHeld): what tests compare
	// patchHeld with.
	alwaysReplace bool
	// members names the addresses of the new messages, following the services from publish to
	// publish (memberIndex): a publish reads the members of the services that changed, not all.
	members memberIndex
	// pruned is when prune last ran.
	pruned time.Time
}

// heldEntry is what one load assignment message holds Healthy (key → address), and at how many
// positions of the last snapshot's list it is.
type heldEntry struct {
	held map[string]string
	n    int
}

// EndpointTime is one endpoint's times; a zero time is not (yet) seen.
type EndpointTime struct {
	// Healthy is when this agent's probe made it Healthy (its own node's endpoints only).
	Healthy time.Time `json:"healthy,omitzero"`
	// Held is when the first published snapshot holding it Healthy was set; Dropped when the
	// first one without it, after that, was.
	Held    time.Time `json:"held,omitzero"`
	Dropped time.Time `json:"dropped,omitzero"`
	// Address is the endpoint's address in the snapshot.
	Address string `json:"address,omitempty"`

	holders int // the snapshot's load assignments holding it Healthy now
}

// NewEndpointTimes returns an empty record.
func NewEndpointTimes() *EndpointTimes {
	return &EndpointTimes{byEP: map[string]*EndpointTime{}, heldBy: map[*endpointv3.ClusterLoadAssignment]*heldEntry{}}
}

// entry is key's record, made if missing. Callers hold mu.
func (t *EndpointTimes) entry(key string) *EndpointTime {
	e := t.byEP[key]
	if e == nil {
		e = &EndpointTime{}
		t.byEP[key] = e
	}
	return e
}

// healthy records that this agent's probe made key Healthy at at.
func (t *EndpointTimes) healthy(key string, at time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entry(key).Healthy = at
}

// published records a snapshot set at at: the endpoints its load assignments hold Healthy,
// named through the services' members by address. An endpoint held before and missing now is
// dropped at at; one new is held at at. A load assignment published before (the same message)
// is not read again: what it held stands.
func (t *EndpointTimes) published(at time.Time, services []model.Service, loadAssignments []*endpointv3.ClusterLoadAssignment) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var fresh []*endpointv3.ClusterLoadAssignment
	var gone []map[string]string
	if len(loadAssignments) == len(t.last) && !t.alwaysReplace {
		fresh, gone = t.patchHeld(loadAssignments)
	} else {
		fresh, gone = t.replaceHeld(loadAssignments)
	}
	// What the new messages hold counts before what the gone ones held is let go, so that an
	// endpoint moving from one message to another is never dropped in between.
	t.members.update(services)
	for cla, held := range readHeld(fresh, t.members.key) {
		t.heldBy[cla].held = held
		for key, address := range held {
			e := t.entry(key)
			if e.holders++; e.holders == 1 {
				e.Held, e.Dropped, e.Address = at, time.Time{}, address
			}
		}
	}
	for _, held := range gone {
		for key := range held {
			if e := t.byEP[key]; e != nil {
				if e.holders--; e.holders == 0 {
					e.Dropped = at
				}
			}
		}
	}
	if at.Sub(t.pruned) >= time.Minute {
		t.prune(at)
		t.pruned = at
	}
}

// replaceHeld makes heldBy the messages of loadAssignments, from every one: those it did not
// hold are fresh (to read), and what those it no longer holds held is gone. Callers hold mu.
func (t *EndpointTimes) replaceHeld(loadAssignments []*endpointv3.ClusterLoadAssignment) (fresh []*endpointv3.ClusterLoadAssignment, gone []map[string]string) {
	next := make(map[*endpointv3.ClusterLoadAssignment]*heldEntry, len(loadAssignments))
	for _, cla := range loadAssignments {
		if e := next[cla]; e != nil {
			e.n++
		} else if e := t.heldBy[cla]; e != nil {
			e.n, next[cla] = 1, e
		} else {
			next[cla] = &heldEntry{n: 1}
			fresh = append(fresh, cla)
		}
	}
	for cla, e := range t.heldBy {
		if next[cla] == nil {
			gone = append(gone, e.held)
		}
	}
	t.heldBy, t.last = next, slices.Clone(loadAssignments)
	return fresh, gone
}

// patchHeld is replaceHeld for as many load assignments as last, from the positions whose
// message changed only: each message counts the positions it is at, so one that moves, or is at
// two, stays. Callers hold mu.
func (t *EndpointTimes) patchHeld(loadAssignments []*endpointv3.ClusterLoadAssignment) (fresh []*endpointv3.ClusterLoadAssignment, gone []map[string]string) {
	var changed []int
	for j, cla := range loadAssignments {
		if cla == t.last[j] {
			continue
		}
		changed = append(changed, j)
		if e := t.heldBy[cla]; e != nil {
			e.n++
		} else {
			t.heldBy[cla] = &heldEntry{n: 1}
			fresh = append(fresh, cla)
		}
	}
	// Counted down after every count up: a message that moved is never gone in between.
	for _, j := range changed {
		old := t.last[j]
		e := t.heldBy[old]
		if e.n--; e.n == 0 {
			gone = append(gone, e.held)
			delete(t.heldBy, old)
		}
		t.last[j] = loadAssignments[j]
	}
	return fresh, gone
}

// readHeld is, for each load assignment, the endpoints it holds Healthy (key → address), named
// by keyOf (the key of the member at an address; empty: none).
func readHeld(loadAssignments []*endpointv3.ClusterLoadAssignment, keyOf func(address string) string) map[*endpointv3.ClusterLoadAssignment]map[string]string {
	if len(loadAssignments) == 0 {
		return nil
	}
	out := make(map[*endpointv3.ClusterLoadAssignment]map[string]string, len(loadAssignments))
	for _, cla := range loadAssignments {
		held := map[string]string{}
		eachHealthy(cla, func(address string) {
			if key := keyOf(address); key != "" {
				held[key] = address
			}
		})
		out[cla] = held
	}
	return out
}

// memberIndex is where the services' members are, by address: the positions of the services
// with a member there, ascending. It follows the services from publish to publish and reads again
// only those whose ports are not the same slice as before: a model.ServiceBuilder reuses an
// unchanged service's, and the model's slices are read only. At a thousand services of ten
// endpoints, reading every member on every publish was most of a publish's record.
type memberIndex struct {
	services []model.Service // as indexed (a copy of the list: the caller's may be reused)
	at       map[string][]int
}

// update makes the index the services'.
func (x *memberIndex) update(services []model.Service) {
	if x.at == nil || len(services) != len(x.services) {
		x.at = map[string][]int{}
		for i := range services {
			x.add(i, &services[i])
		}
		x.services = slices.Clone(services)
		return
	}
	for i := range services {
		if !samePorts(services[i].Ports, x.services[i].Ports) {
			x.remove(i, &x.services[i])
			x.add(i, &services[i])
			x.services[i] = services[i]
		}
	}
}

// samePorts reports whether a and b are the same slice.
func samePorts(a, b []model.Port) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// eachMember calls f with each of s's members, in order, until f returns false, in the services' order.
func eachMember(s *model.Service, f func(m *model.Member) bool) {
	for _, p := range s.Ports {
		for _, pair := range p.Pairs {
			for i := range pair.Members {
				if !f(&pair.Members[i]) {
					return
				}
			}
		}
	}
}

// add indexes the members of s, at position i.
func (x *memberIndex) add(i int, s *model.Service) {
	eachMember(s, func(m *model.Member) bool {
		at := x.at[m.Address]
		if j, found := slices.BinarySearch(at, i); !found {
			x.at[m.Address] = slices.Insert(at, j, i)
		}
		return true
	})
}

// remove unindexes the members of s, at position i.
func (x *memberIndex) remove(i int, s *model.Service) {
	eachMember(s, func(m *model.Member) bool {
		at := x.at[m.Address]
		if j, found := slices.BinarySearch(at, i); found {
			if at = slices.Delete(at, j, j+1); len(at) == 0 {
				delete(x.at, m.Address)
			} else {
				x.at[m.Address] = at
			}
		}
		return true
	})
}

// key is the key ("namespace/name") of the first member at address, in the services' order;
// empty when none is there.
func (x *memberIndex) key(address string) string {
	at := x.at[address]
	if len(at) == 0 {
		return ""
	}
	var key string
	eachMember(&x.services[at[0]], func(m *model.Member) bool {
		if m.Address == address {
			key = m.Namespace + "/" + m.Name
			return false
		}
		return true
	})
	return key
}

// eachHealthy calls f with the address of each of cla's Healthy endpoints.
func eachHealthy(cla *endpointv3.ClusterLoadAssignment, f func(address string)) {
	for _, locality := range cla.GetEndpoints() {
		for _, lb := range locality.GetLbEndpoints() {
			if lb.GetHealthStatus() == corev3.HealthStatus_HEALTHY {
				f(lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
			}
		}
	}
}

// prune forgets what is no longer held and older than the retention. Callers hold mu.
func (t *EndpointTimes) prune(now time.Time) {
	maps.DeleteFunc(t.byEP, func(_ string, e *EndpointTime) bool {
		last := e.Dropped
		if last.IsZero() && e.Held.IsZero() {
			last = e.Healthy
		}
		return e.holders == 0 && !last.IsZero() && now.Sub(last) > endpointTimesRetention
	})
}

// Snapshot is a copy of the record, by endpoint.
func (t *EndpointTimes) Snapshot() map[string]EndpointTime {
	_, all := t.since(time.Time{})
	return all
}

// ServeHTTP answers the record as JSON: {"held": <endpoints held now>, "endpoints": {"ns/name":
// {healthy, held, dropped, address}}}, times in RFC 3339 with nanoseconds. With ?since=<RFC 3339
// time> only the endpoints with a time at or after it are listed: a reader that waits on a few
// changes, or on the count alone, does not make the agent encode (and itself decode) all of them
// on every poll (at 10 000 endpoints a whole answer is 0.75 MB and about 50 ms of CPU).
func (t *EndpointTimes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		var err error
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			http.Error(w, fmt.Sprintf("since=%q: %v; want an RFC 3339 time, e.g. 2026-12-01T10:00:00.5Z", v, err), http.StatusBadRequest)
			return
		}
	}
	held, endpoints := t.since(since)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(EndpointTimesAnswer{Held: held, Endpoints: endpoints})
}

// EndpointTimesAnswer is what ServeHTTP answers.
type EndpointTimesAnswer struct {
	// Held is how many endpoints the node's snapshot holds Healthy now (held, not dropped since).
	Held int `json:"held"`
	// Endpoints are the endpoints' times, by "namespace/name": all, or those since the time asked.
	Endpoints map[string]EndpointTime `json:"endpoints"`
}

// since counts the endpoints held now and copies those with a time at or after from (all of
// them for a zero from).
func (t *EndpointTimes) since(from time.Time) (int, map[string]EndpointTime) {
	t.mu.Lock()
	defer t.mu.Unlock()
	held, out := 0, map[string]EndpointTime{}
	for k, e := range t.byEP {
		if !e.Held.IsZero() && e.Dropped.IsZero() {
			held++
		}
		if from.IsZero() || !e.Healthy.Before(from) || !e.Held.Before(from) || !e.Dropped.Before(from) {
			out[k] = *e
		}
	}
	return held, out
}
