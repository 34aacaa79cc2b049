// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// HealthOptions tune delegated liveness.
type HealthOptions struct {
	// Interval between probes of one endpoint.
	Interval time.Duration
	// Timeout of one probe.
	Timeout time.Duration
	// FailureThreshold consecutive failures make an endpoint Unhealthy (from Pending or Healthy).
	FailureThreshold int
	// SuccessThreshold consecutive successes make an endpoint Healthy (from Pending or Unhealthy).
	SuccessThreshold int
}

// DefaultHealthOptions are what the agent runs with unless told otherwise: a new endpoint is
// routable on its first answer, and a healthy one is pulled after three missed probes (6 s).
var DefaultHealthOptions = HealthOptions{Interval: 2 * time.Second, Timeout: time.Second, FailureThreshold: 3, SuccessThreshold: 1}

// probeState is one endpoint's run of results.
type probeState struct {
	successes, failures int
}

// nextHealth is the health after one more probe result. One health per pod: it is decided by
// the primary port alone, so a mixed pod is never healthy for one protocol and not another.
func nextHealth(current meshv1alpha1.Health, st *probeState, ok bool, o HealthOptions) meshv1alpha1.Health {
	if ok {
		st.successes, st.failures = st.successes+1, 0
	} else {
		st.successes, st.failures = 0, st.failures+1
	}
	switch {
	case current == meshv1alpha1.HealthDraining:
		return current
	case ok && current != meshv1alpha1.HealthHealthy && st.successes >= o.SuccessThreshold:
		return meshv1alpha1.HealthHealthy
	case !ok && current != meshv1alpha1.HealthUnhealthy && st.failures >= o.FailureThreshold:
		return meshv1alpha1.HealthUnhealthy
	case current == "":
		return meshv1alpha1.HealthPending
	}
	return current
}

// Prober probes every MeshEndpoint of its node and writes status.health when it changes. It is
// a manager Runnable.
type Prober struct {
	Client   client.Client
	NodeName string
	Options  HealthOptions

	states map[types.UID]*probeState
	// times, when set, records when each endpoint turned Healthy.
	times *EndpointTimes
	// uds says which pods serve on a Unix socket, probed there; nil: every pod over TCP.
	uds *udsResolver
}

// Start probes until ctx ends.
func (p *Prober) Start(ctx context.Context) error {
	p.states = map[types.UID]*probeState{}
	ticker := time.NewTicker(p.Options.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			p.round(ctx)
		}
	}
}

// round probes every endpoint of the node once, concurrently, and writes the changes.
func (p *Prober) round(ctx context.Context) {
	var list meshv1alpha1.MeshEndpointList
	if err := p.Client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing this node's MeshEndpoints")
		return
	}
	// The manager's cache holds only this node's MeshEndpoints (CacheOptions), but the filter is
	// explicit: a client with a wider view (the cluster-wide View, a direct client) must never
	// make this agent probe, or write the health of, another node's endpoint.
	endpoints := ownEndpoints(list.Items, p.NodeName)
	results := make([]bool, len(endpoints))
	answered := make([]time.Time, len(endpoints))
	var wg sync.WaitGroup
	for i := range endpoints {
		ep := &endpoints[i]
		if inDrain(ep) {
			continue
		}
		socket := p.uds.endpointPath(ctx, ep)
		wg.Go(func() { results[i] = probeEndpoint(ctx, ep, p.Options.Timeout, socket); answered[i] = time.Now() })
	}
	wg.Wait()

	seen := map[types.UID]bool{}
	for i := range endpoints {
		ep := &endpoints[i]
		seen[ep.UID] = true
		if inDrain(ep) {
			continue
		}
		st := p.states[ep.UID]
		if st == nil {
			st = &probeState{}
			p.states[ep.UID] = st
		}
		next := nextHealth(ep.Status.Health, st, results[i], p.Options)
		if next == ep.Status.Health {
			continue
		}
		patch := client.MergeFromWithOptions(ep.DeepCopy(), client.MergeFromWithOptimisticLock{})
		ep.Status.Health = next
		if err := p.Client.Status().Patch(ctx, ep, patch); err != nil {
			// A conflict means someone (draining) changed it first: the next round sees that.
			log.FromContext(ctx).V(1).Info("health not written", "endpoint", client.ObjectKeyFromObject(ep), "error", err.Error())
		} else if next == meshv1alpha1.HealthHealthy {
			p.times.healthy(ep.Namespace+"/"+ep.Name, answered[i])
		}
	}
	for uid := range p.states {
		if !seen[uid] {
			delete(p.states, uid)
		}
	}
}

// ownEndpoints are the endpoints of node among all, in their order.
func ownEndpoints(all []meshv1alpha1.MeshEndpoint, node string) []meshv1alpha1.MeshEndpoint {
	own := make([]meshv1alpha1.MeshEndpoint, 0, len(all))
	for i := range all {
		if all[i].Spec.NodeName == node {
			own = append(own, all[i])
		}
	}
	return own
}

// probeEndpoint checks the primary port within timeout: a TCP connect for a TCP primary, the
// gRPC health protocol for a gRPC one (declared =grpc), an HTTP GET of the health path for
// another HTTP primary (cleartext HTTP/2 for an HTTP2 one; 2xx and 3xx are healthy). A pod that
// serves on a Unix socket (socket, its node path, as the proxy delivers to it) is probed the same
// way over its socket instead of its address.
//
// A UDP primary is not probed, and is healthy: a datagram has no handshake, so nothing tells a
// silent server from an absent one without speaking the application's protocol. The endpoint is
// then healthy while its pod is registered; a workload that wants the agent's probe declares a TCP
// or HTTP primary and its UDP port beside it.
func probeEndpoint(ctx context.Context, ep *meshv1alpha1.MeshEndpoint, timeout time.Duration, socket string) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(ep.Spec.Address, strconv.Itoa(int(ep.Spec.PrimaryPort)))
	var primary meshv1alpha1.PortProtocol
	for _, port := range ep.Spec.Ports {
		if port.Port == ep.Spec.PrimaryPort {
			primary = port
		}
	}
	dial := dialFor(socket)
	switch {
	case primary.Protocol.IsUDP():
		return true
	case primary.Protocol == meshv1alpha1.ProtocolTCP:
		return probeTCP(ctx, addr, dial)
	case primary.AppProtocol == meshv1alpha1.AppProtocolGRPC:
		return probeGRPCVia(ctx, addr, dial)
	}
	return probeHTTPVia(ctx, addr, ep.Spec.HealthCheck.Path, primary.Protocol == meshv1alpha1.ProtocolHTTP2, dial)
}

// dialFunc opens a probe's connection.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dialFor is how a probe reaches the pod: its address over TCP, or, when socket is set, its Unix
// socket whatever the address (which then only names the pod in the request: HTTP's Host).
func dialFor(socket string) dialFunc {
	d := &net.Dialer{}
	if socket == "" {
		return d.DialContext
	}
	return func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", socket) }
}

// probeUserAgent is the User-Agent of every HTTP and gRPC probe, so an application's logs can
// tell the mesh's probes from its clients.
const probeUserAgent = "aether-agent/health"

// probeTCP reports whether a connection to addr (through dial) opens.
func probeTCP(ctx context.Context, addr string, dial dialFunc) bool {
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// probeHTTP GETs path from addr, over HTTP/1.1, or cleartext HTTP/2 with prior knowledge when
// h2c; a connection per probe, no proxy, redirects not followed. 2xx and 3xx are healthy.
func probeHTTP(ctx context.Context, addr, path string, h2c bool) bool {
	return probeHTTPVia(ctx, addr, path, h2c, dialFor(""))
}

// probeHTTPVia is probeHTTP with its connection opened by dial.
func probeHTTPVia(ctx context.Context, addr, path string, h2c bool, dial dialFunc) bool {
	transport := &http.Transport{DisableKeepAlives: true, Proxy: nil, DialContext: dial}
	if h2c {
		transport.Protocols = new(http.Protocols)
		transport.Protocols.SetUnencryptedHTTP2(true)
	}
	defer transport.CloseIdleConnections()
	if path == "" {
		path = "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return false
	}
	req.Header.Set("User-Agent", probeUserAgent)
	resp, err := (&http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// NeedLeaderElection is false: every node's agent probes its own endpoints.
func (p *Prober) NeedLeaderElection() bool { return false }
