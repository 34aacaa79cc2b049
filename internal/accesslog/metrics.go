// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package accesslog

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MaxCallers is how many distinct callers each family that has a caller label
// (aether_agent_requests_total, aether_agent_tcp_connections_total) names; the callers seen after
// it is full count as Other. A caller keeps its label value once it has one.
const MaxCallers = 100

// Other is the caller label value of the callers beyond MaxCallers.
const Other = "other"

// Why a stream was refused, the values of the label reason of aether_agent_access_log_rejected_total.
const (
	// RejectedNoIdentifier: the stream's first message names no node.
	RejectedNoIdentifier = "no_identifier"
	// RejectedWrongNode: the stream names a node this agent does not serve.
	RejectedWrongNode = "wrong_node"
	// RejectedOversized: a message over MaxMessageBytes (or the gRPC server's own limit).
	RejectedOversized = "oversized"
	// RejectedTooManyEntries: a message with more than MaxEntries entries.
	RejectedTooManyEntries = "too_many_entries"
	// RejectedMalformed: a message that does not decode, or holds no entries of either kind.
	RejectedMalformed = "malformed"
)

// rejectReasons are every reason, exported at zero.
var rejectReasons = []string{RejectedNoIdentifier, RejectedWrongNode, RejectedOversized, RejectedTooManyEntries, RejectedMalformed}

// None is the value of the label code_class when no response was sent (the stream was reset);
// otherwise it is the response's status class, 1xx to 5xx.
const None = "none"

// The families' label names.
const (
	labelDirection = "direction"
	labelService   = "service"
	labelPort      = "port"
	labelCaller    = "caller"
)

// metrics are the server's counters, and the callers each family names.
type metrics struct {
	requests, connections             *prometheus.CounterVec
	duration                          *prometheus.HistogramVec
	outcomes, sent, received, refused *prometheus.CounterVec
	denied                            *prometheus.CounterVec
	requestCallers, tcpCallers        callers

	mu sync.Mutex
	// services are the service label values that have series, to drop when the view forgets them.
	services map[string]bool
}

// newMetrics are the counters, registered on reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_agent_requests_total",
			Help: "HTTP requests the node's Envoy logged, by direction (inbound: a local pod served it; outbound: a local pod sent it), service (<namespace>/<name>, or unknown), port, caller (a SPIFFE ID of the trust domain, unknown, or other beyond the cap of callers) and code_class (1xx..5xx, or none: no response).",
		}, []string{labelDirection, labelService, labelPort, labelCaller, "code_class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aether_agent_request_duration_seconds",
			Help:    "Duration of the HTTP requests the node's Envoy logged, from the first byte received to the last byte sent, by direction, service and port.",
			Buckets: prometheus.DefBuckets,
		}, []string{labelDirection, labelService, labelPort}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_agent_request_outcomes_total",
			Help: "Inbound HTTP requests by the row of the retry table the destination's proxy answered in x-aether-outcome: unreachable, app-503, app-reset, refused-stream, proxy, app (any other status of the application), or other; by service and port.",
		}, []string{labelService, labelPort, "outcome"}),
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_agent_tcp_connections_total",
			Help: "TCP connections the node's Envoy logged when they closed, by direction, service, port and caller (as aether_agent_requests_total).",
		}, []string{labelDirection, labelService, labelPort, labelCaller}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_agent_received_bytes_total",
			Help: "Bytes the node's Envoy received from the side that opened the connection or sent the request (HTTP: request headers and body; TCP: the connection's), by direction, service and port.",
		}, []string{labelDirection, labelService, labelPort}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_agent_sent_bytes_total",
			Help: "Bytes the node's Envoy sent back to the side that opened the connection or sent the request (HTTP: response headers and body; TCP: the connection's), by direction, service and port.",
		}, []string{labelDirection, labelService, labelPort}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_agent_access_denied_total",
			Help: "Inbound calls an AccessPolicy denied (no rule admits them: an HTTP request answered 403 access-denied, a TCP connection refused in its TLS handshake, before the application is connected), by service, port, caller (as aether_agent_requests_total) and protocol (http or tcp).",
		}, []string{labelService, labelPort, labelCaller, "protocol"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_agent_access_log_rejected_total",
			Help: "Access-log streams the node agent refused, by reason: no_identifier (no node named), wrong_node (a node the agent does not serve), oversized, too_many_entries, malformed. Each ends its stream only.",
		}, []string{"reason"}),
		requestCallers: callers{seen: map[string]bool{}},
		tcpCallers:     callers{seen: map[string]bool{}},
		services:       map[string]bool{},
	}
	reg.MustRegister(m.requests, m.duration, m.outcomes, m.connections, m.received, m.sent, m.refused, m.denied)
	for _, reason := range rejectReasons {
		m.refused.WithLabelValues(reason)
	}
	return m
}

// agentMetrics are the agent's: one set per process, on controller-runtime's registry (what the
// agent's metrics endpoint serves), shared by every Server without Options.Registerer.
var agentMetrics = sync.OnceValue(func() *metrics { return newMetrics(ctrlmetrics.Registry) })

// callers bounds a family's caller label values.
type callers struct {
	mu   sync.Mutex
	seen map[string]bool
}

// label is caller's label value: Unknown for none, itself while the family names fewer than
// MaxCallers (or already names it), else Other.
func (c *callers) label(caller string) string {
	if caller == "" {
		return Unknown
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[caller] {
		return caller
	}
	if len(c.seen) >= MaxCallers {
		return Other
	}
	c.seen[caller] = true
	return caller
}

// codeClass is the label value of an HTTP response code.
func codeClass(code uint32) string {
	if code < 100 || code > 599 {
		return None
	}
	return strconv.Itoa(int(code/100)) + "xx"
}

// seen records that service has series.
func (m *metrics) seen(service string) {
	if service == Unknown {
		return
	}
	m.mu.Lock()
	m.services[service] = true
	m.mu.Unlock()
}

// forget drops the series of the services d does not know (a service deleted from the mesh):
// the families' label values stay within what the view holds.
func (m *metrics) forget(d *directory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for service := range m.services {
		if d.knows(service) {
			continue
		}
		delete(m.services, service)
		match := prometheus.Labels{labelService: service}
		for _, vec := range []*prometheus.CounterVec{m.requests, m.outcomes, m.connections, m.received, m.sent, m.denied} {
			vec.DeletePartialMatch(match)
		}
		m.duration.DeletePartialMatch(match)
	}
}
