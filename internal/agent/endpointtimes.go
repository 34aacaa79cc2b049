// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"encoding/json"
	"maps"
	"net/http"
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
	heldBy map[*endpointv3.ClusterLoadAssignment]map[string]string
	// pruned is when prune last ran.
	pruned time.Time
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
	return &EndpointTimes{byEP: map[string]*EndpointTime{}, heldBy: map[*endpointv3.ClusterLoadAssignment]map[string]string{}}
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
	gone, next := t.heldBy, make(map[*endpointv3.ClusterLoadAssignment]map[string]string, len(loadAssignments))
	var fresh []*endpointv3.ClusterLoadAssignment
	for _, cla := range loadAssignments {
		if held, ok := gone[cla]; ok {
			next[cla] = held
			delete(gone, cla)
		} else if _, dup := next[cla]; !dup {
			next[cla] = nil
			fresh = append(fresh, cla)
		}
	}
	// What the new messages hold counts before what the gone ones held is let go, so that an
	// endpoint moving from one message to another is never dropped in between.
	for cla, held := range readHeld(fresh, services) {
		next[cla] = held
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
	t.heldBy = next
	if at.Sub(t.pruned) >= time.Minute {
		t.prune(at)
		t.pruned = at
	}
}

// readHeld is, for each load assignment, the endpoints it holds Healthy (key → address), named
// through the services' members by address.
func readHeld(loadAssignments []*endpointv3.ClusterLoadAssignment, services []model.Service) map[*endpointv3.ClusterLoadAssignment]map[string]string {
	if len(loadAssignments) == 0 {
		return nil
	}
	keyOf := map[string]string{} // address → key, for the addresses held
	for _, cla := range loadAssignments {
		eachHealthy(cla, func(address string) { keyOf[address] = "" })
	}
	for _, s := range services {
		for _, p := range s.Ports {
			for _, pair := range p.Pairs {
				for _, m := range pair.Members {
					if key, ok := keyOf[m.Address]; ok && key == "" {
						keyOf[m.Address] = m.Namespace + "/" + m.Name
					}
				}
			}
		}
	}
	out := make(map[*endpointv3.ClusterLoadAssignment]map[string]string, len(loadAssignments))
	for _, cla := range loadAssignments {
		held := map[string]string{}
		eachHealthy(cla, func(address string) {
			if key := keyOf[address]; key != "" {
				held[key] = address
			}
		})
		out[cla] = held
	}
	return out
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
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]EndpointTime, len(t.byEP))
	for k, e := range t.byEP {
		out[k] = *e
	}
	return out
}

// ServeHTTP answers the record as JSON: {"endpoints": {"ns/name": {healthy, held, dropped,
// address}}}, times in RFC 3339 with nanoseconds.
func (t *EndpointTimes) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Endpoints map[string]EndpointTime `json:"endpoints"`
	}{t.Snapshot()})
}
