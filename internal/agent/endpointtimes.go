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

	held bool // in the snapshot now
}

// NewEndpointTimes returns an empty record.
func NewEndpointTimes() *EndpointTimes {
	return &EndpointTimes{byEP: map[string]*EndpointTime{}}
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
// dropped at at; one new is held at at.
func (t *EndpointTimes) published(at time.Time, services []model.Service, loadAssignments []*endpointv3.ClusterLoadAssignment) {
	if t == nil {
		return
	}
	keyOf := map[string]string{}
	for _, s := range services {
		for _, p := range s.Ports {
			for _, pair := range p.Pairs {
				for _, m := range pair.Members {
					keyOf[m.Address] = m.Namespace + "/" + m.Name
				}
			}
		}
	}
	held := map[string]string{}
	for _, cla := range loadAssignments {
		for _, locality := range cla.GetEndpoints() {
			for _, lb := range locality.GetLbEndpoints() {
				if lb.GetHealthStatus() != corev3.HealthStatus_HEALTHY {
					continue
				}
				address := lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
				if key, ok := keyOf[address]; ok {
					held[key] = address
				}
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, address := range held {
		e := t.entry(key)
		if !e.held {
			e.held, e.Held, e.Dropped, e.Address = true, at, time.Time{}, address
		}
	}
	for key, e := range t.byEP {
		if e.held && held[key] == "" {
			e.held, e.Dropped = false, at
		}
	}
	t.prune(at)
}

// prune forgets what is no longer held and older than the retention. Callers hold mu.
func (t *EndpointTimes) prune(now time.Time) {
	maps.DeleteFunc(t.byEP, func(_ string, e *EndpointTime) bool {
		last := e.Dropped
		if last.IsZero() && e.Held.IsZero() {
			last = e.Healthy
		}
		return !e.held && !last.IsZero() && now.Sub(last) > endpointTimesRetention
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
