// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"context"
	"errors"
	"slices"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
)

// maxLoggedNames bounds the resource names one NACK line lists (a snapshot may hold thousands).
const maxLoggedNames = 20

// streams are the server's go-control-plane callbacks: they remember, per stream, which node it
// serves and the last response of each type, so that a NACK is logged with the resources it
// rejected and the rejected version is not sent again.
//
// go-control-plane runs the callbacks synchronously on the stream's goroutine; their state is
// shared by all streams, hence the lock. State-of-the-world and delta streams are numbered
// apart, so each has its own maps.
type streams struct {
	s *Server
	// resendRejected turns off the parking of a NACKed version (tests show the loop it prevents).
	resendRejected bool
	// proxylessOnly refuses every stream but a proxyless client's (the proxyless socket's).
	proxylessOnly bool

	mu    sync.Mutex
	sotw  map[int64]*streamState
	delta map[int64]*streamState
}

// streamState is what one stream has told and been told.
type streamState struct {
	node string
	// proxyless is set when the stream registered a proxyless client (Server.proxyless).
	proxyless bool
	// sent is, per type URL, the last response sent.
	sent map[string]sentResponse
}

type sentResponse struct {
	nonce, version string
	// names are the resources a delta response carried (a state-of-the-world response's are
	// the served snapshot's, looked up by version when needed).
	names []string
}

var _ serverv3.Callbacks = (*streams)(nil)

func newStreams(s *Server) *streams {
	return &streams{s: s, sotw: map[int64]*streamState{}, delta: map[int64]*streamState{}}
}

// state is stream id's state in m, created on first use; it learns the node from the first
// request that names one (only the first request of a stream must). On the proxyless socket, a
// proxyless client is registered then (after, called once c.mu is released, tells the server's
// OnProxylessChange), and a stream whose first request is not a proxyless client's is refused.
func (c *streams) state(m map[int64]*streamState, id int64, node *corev3.Node) (st *streamState, after func(), refused error) {
	st, ok := m[id]
	if !ok {
		st = &streamState{sent: map[string]sentResponse{}}
		m[id] = st
	}
	learned := st.node == "" && node.GetId() != ""
	if learned {
		st.node = node.GetId()
	}
	if !c.proxylessOnly {
		if learned {
			c.s.log.Info("xDS client connected", "node", st.node, "stream", id)
		}
		return st, nil, nil
	}
	isProxyless, sni := announcedProxyless(node)
	switch {
	case !st.proxyless && (!learned || !isProxyless):
		c.s.log.Info("Refusing an xDS stream on the proxyless socket: not a proxyless gRPC client", "client", describeProxyless(node), "stream", id)
		return st, nil, errNotProxyless
	case learned:
		st.proxyless = true
		f, changed := c.s.proxylessStreamOpened(st.node, sni)
		c.s.log.Info("Proxyless gRPC client connected", "node", st.node, "sni", sni, "stream", id)
		return st, func() { notify(f, changed) }, nil
	}
	return st, nil, nil
}

// closed forgets stream id of m, and a proxyless client with its last stream.
func (c *streams) closed(m map[int64]*streamState, id int64) {
	c.mu.Lock()
	st := m[id]
	delete(m, id)
	c.mu.Unlock()
	if st != nil && st.proxyless {
		f, gone := c.s.proxylessStreamClosed(st.node)
		notify(f, gone)
	}
}

// after calls f, if any.
func after(f func()) {
	if f != nil {
		f()
	}
}

// OnStreamOpen accepts every state-of-the-world stream.
func (c *streams) OnStreamOpen(context.Context, int64, string) error { return nil }

// OnStreamClosed forgets the stream.
func (c *streams) OnStreamClosed(id int64, node *corev3.Node) {
	c.closed(c.sotw, id)
	c.s.log.Info("xDS client disconnected", "node", node.GetId(), "stream", id)
}

// OnStreamRequest logs and counts a NACK, then parks it: go-control-plane answers a request
// whose version differs from the snapshot's at once, and a NACK carries the last version the
// client accepted, so the rejected version would go out again, be rejected again, and so on
// while nothing changes. Setting the request's version to the rejected one makes the cache wait
// for the next change of that type instead. The request is the one go-control-plane creates its
// watch from, right after this callback returns (sotw/v3 xds.go and ads.go).
//
// It returns an error (which closes the stream) only to refuse a stream on the proxyless socket
// (state): a NACK is no reason to close one.
func (c *streams) OnStreamRequest(id int64, req *discoveryv3.DiscoveryRequest) error {
	c.mu.Lock()
	st, then, refused := c.state(c.sotw, id, req.GetNode())
	last, known := st.sent[req.GetTypeUrl()]
	node := st.node
	c.mu.Unlock()
	after(then)
	if refused != nil {
		return refused
	}
	if req.GetErrorDetail() == nil {
		return nil
	}

	rejected := ""
	if known && last.nonce == req.GetResponseNonce() {
		rejected = last.version
		if !c.resendRejected {
			req.VersionInfo = rejected
		}
	}
	names := c.s.servedNames(node, req.GetTypeUrl(), rejected)
	c.nack(node, req.GetTypeUrl(), rejected, req.GetResponseNonce(), names, req.GetErrorDetail().GetMessage())
	return nil
}

// OnStreamResponse remembers the response: a NACK of it names its nonce.
func (c *streams) OnStreamResponse(_ context.Context, id int64, req *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.sotw[id]
	if st == nil {
		return // refused, or closed
	}
	st.sent[resp.GetTypeUrl()] = sentResponse{nonce: resp.GetNonce(), version: resp.GetVersionInfo()}
}

// OnDeltaStreamOpen accepts every delta stream.
func (c *streams) OnDeltaStreamOpen(context.Context, int64, string) error { return nil }

// OnDeltaStreamClosed forgets the stream.
func (c *streams) OnDeltaStreamClosed(id int64, node *corev3.Node) {
	c.closed(c.delta, id)
	c.s.log.Info("xDS client disconnected", "node", node.GetId(), "stream", id, "delta", true)
}

// OnStreamDeltaRequest logs and counts a NACK. Nothing needs parking: the delta server counts a
// sent resource as the client's, so it sends a rejected one again only when it changes.
func (c *streams) OnStreamDeltaRequest(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
	c.mu.Lock()
	st, then, refused := c.state(c.delta, id, req.GetNode())
	last, known := st.sent[req.GetTypeUrl()]
	node := st.node
	c.mu.Unlock()
	after(then)
	if refused != nil {
		return refused
	}
	if req.GetErrorDetail() == nil {
		return nil
	}
	var names []string
	if known && last.nonce == req.GetResponseNonce() {
		names = last.names
	}
	c.nack(node, req.GetTypeUrl(), "", req.GetResponseNonce(), names, req.GetErrorDetail().GetMessage())
	return nil
}

// OnStreamDeltaResponse remembers the names the response carried.
func (c *streams) OnStreamDeltaResponse(id int64, req *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
	names := make([]string, 0, len(resp.GetResources()))
	for _, r := range resp.GetResources() {
		names = append(names, r.GetName())
	}
	slices.Sort(names)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.delta[id]
	if st == nil {
		return // refused, or closed
	}
	st.sent[resp.GetTypeUrl()] = sentResponse{nonce: resp.GetNonce(), version: resp.GetSystemVersionInfo(), names: names}
}

// OnFetchRequest accepts REST fetches (the server registers none).
func (c *streams) OnFetchRequest(context.Context, *discoveryv3.DiscoveryRequest) error { return nil }

// OnFetchResponse does nothing.
func (c *streams) OnFetchResponse(*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse) {}

// nack logs a rejection (a bug in what we generate, or a gap between the protos and the Envoy
// running) with everything needed to find it, and counts it.
func (c *streams) nack(node, typeURL, version, nonce string, names []string, reason string) {
	nacks.WithLabelValues(shortType(typeURL)).Inc()
	logged, more := names, 0
	if len(names) > maxLoggedNames {
		logged, more = names[:maxLoggedNames], len(names)-maxLoggedNames
	}
	c.s.log.Error(errors.New(reason), "xDS client rejected a response (NACK): the configuration we generated is wrong",
		"node", node, "type", typeURL, "version", version, "nonce", nonce,
		"resources", logged, "moreResources", more, "reason", reason)
}
