// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	// perPod counts the proxyless socket's open streams per caller's pod UID ("" for callers of
	// no pod): at most maxPerPod each.
	perPod map[string]int
}

// streamState is what one stream has told and been told.
type streamState struct {
	node string
	// proxyless is set when the stream registered a proxyless client (Server.proxyless).
	proxyless bool
	// On the proxyless socket: caller is who opened the stream (its connection's), own the node ID
	// of its pod, or ownErr why there is none; counted is set while it counts in perPod.
	caller  Caller
	own     string
	ownErr  error
	counted bool
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
	return &streams{s: s, sotw: map[int64]*streamState{}, delta: map[int64]*streamState{}, perPod: map[string]int{}}
}

// opened registers stream id of m. On the proxyless socket it learns the stream's caller from its
// connection and the node ID of the caller's pod from the agent (outside c.mu: the agent reads its
// cache), and refuses the stream when the caller's pod holds maxPerPod streams already.
func (c *streams) opened(ctx context.Context, m map[int64]*streamState, id int64) error {
	if !c.proxylessOnly {
		return nil
	}
	st := &streamState{sent: map[string]sentResponse{}, caller: callerOfStream(ctx)}
	if st.caller.Err == nil {
		st.own, st.ownErr = c.s.podNodeID(ctx, st.caller.PodUID)
	}
	key := st.caller.PodUID
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.perPod[key] >= maxPerPod {
		proxylessRefused.WithLabelValues(refusedStreams).Inc()
		c.s.log.V(1).Info("Refusing a proxyless xDS stream: its pod holds as many as it may", "caller", st.caller.String(), "max", maxPerPod, "stream", id)
		return status.Errorf(codes.ResourceExhausted, "%s holds %d xDS streams on the proxyless socket already, the most one pod may", st.caller, maxPerPod)
	}
	c.perPod[key]++
	st.counted = true
	m[id] = st
	return nil
}

// open is how many streams pod podUID holds on the proxyless socket.
func (c *streams) open(podUID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.perPod[podUID]
}

// state is stream id's state in m, created on first use; it learns the node from the first
// request that names one (only the first request of a stream must). On the proxyless socket, a
// proxyless client is registered then (after, called once c.mu is released, tells the server's
// OnProxylessChange); a stream whose first request is not a proxyless client's, or announces a
// node ID that is not its caller's pod's, is refused, and so is one that announces another node
// ID later (one node per stream). A refused request never reaches go-control-plane's cache, which
// keeps a status entry per node ID it is asked for.
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
	case st.proxyless:
		if announced := node.GetId(); announced != "" && announced != st.node {
			proxylessRefused.WithLabelValues(refusedNodeChange).Inc()
			c.s.log.Info("Closing a proxyless xDS stream that announced a second node ID", "node", st.node, "announced", clipID(announced), "stream", id)
			return st, nil, status.Errorf(codes.InvalidArgument, "this stream serves node %q, and announced %q: one node per stream (open another stream for another node)",
				st.node, clipID(announced))
		}
		return st, nil, nil
	case !learned || !isProxyless:
		proxylessRefused.WithLabelValues(refusedNotProxyless).Inc()
		c.s.log.Info("Refusing an xDS stream on the proxyless socket: not a proxyless gRPC client", "client", describeProxyless(node), "stream", id)
		return st, nil, errNotProxyless
	}
	if err := c.mayAnnounce(st, id); err != nil {
		return st, nil, err
	}
	st.proxyless = true
	f, changed := c.s.proxylessStreamOpened(st.node, sni)
	c.s.log.Info("Proxyless gRPC client connected", "node", st.node, "sni", sni, "podUID", st.caller.PodUID, "pid", st.caller.PID, "stream", id)
	return st, func() { notify(f, changed) }, nil
}

// mayAnnounce refuses st's node ID unless it is the node ID of its caller's pod, with a
// PermissionDenied that says why (the claimed ID and the caller's real pod) and a log line naming
// both.
func (c *streams) mayAnnounce(st *streamState, id int64) error {
	claimed := st.node
	var reason error
	switch {
	case st.caller.Err != nil:
		reason = fmt.Errorf("node ID %q refused: the connection's caller, %s, is no pod's", claimed, st.caller)
	case st.ownErr != nil:
		reason = fmt.Errorf("node ID %q refused: the agent could not read the pod of %s: %w", claimed, st.caller, st.ownErr)
	case st.own == "":
		reason = fmt.Errorf("node ID %q refused: the connection's caller, %s, is no pod of this node the agent knows (a pod it has not seen yet: its client retries)",
			claimed, st.caller)
	case claimed != st.own:
		proxylessRefused.WithLabelValues(refusedClaim).Inc()
		c.s.log.Info("Refusing a proxyless gRPC client that claims another pod's node ID",
			"claimed", claimed, "pod", st.own, "podUID", st.caller.PodUID, "pid", st.caller.PID, "stream", id)
		return status.Errorf(codes.PermissionDenied, "node ID %q is not the caller's: the connection comes from pod %s (UID %s, process %d), which may announce %q only",
			claimed, st.own, st.caller.PodUID, st.caller.PID, st.own)
	default:
		return nil
	}
	proxylessRefused.WithLabelValues(refusedNoPod).Inc()
	c.s.log.Info("Refusing a proxyless gRPC client: its caller is no pod of this node", "claimed", claimed, "reason", reason.Error(), "stream", id)
	return status.Error(codes.PermissionDenied, reason.Error())
}

// closed forgets stream id of m, and a proxyless client with its last stream.
func (c *streams) closed(m map[int64]*streamState, id int64) {
	c.mu.Lock()
	st := m[id]
	delete(m, id)
	if st != nil && st.counted {
		key := st.caller.PodUID
		if c.perPod[key]--; c.perPod[key] <= 0 {
			delete(c.perPod, key)
		}
	}
	c.mu.Unlock()
	if st != nil && st.proxyless {
		f, gone := c.s.proxylessStreamClosed(st.node)
		notify(f, gone)
	}
}

// request is what a request of typeURL on stream id of m needs to know: the last response of
// that type the stream sent (known: one was), the stream's node, and its refusal (state).
func (c *streams) request(m map[int64]*streamState, id int64, node *corev3.Node, typeURL string) (last sentResponse, known bool, nodeID string, refused error) {
	c.mu.Lock()
	st, then, refused := c.state(m, id, node)
	last, known = st.sent[typeURL]
	nodeID = st.node
	c.mu.Unlock()
	after(then)
	return last, known, nodeID, refused
}

// after calls f, if any.
func after(f func()) {
	if f != nil {
		f()
	}
}

// OnStreamOpen accepts every state-of-the-world stream, but one of a pod over its bound on the
// proxyless socket (opened).
func (c *streams) OnStreamOpen(ctx context.Context, id int64, _ string) error {
	return c.opened(ctx, c.sotw, id)
}

// OnStreamClosed forgets the stream.
func (c *streams) OnStreamClosed(id int64, node *corev3.Node) {
	c.closed(c.sotw, id)
	c.s.log.Info("xDS client disconnected", "node", clipID(node.GetId()), "stream", id)
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
	last, known, node, refused := c.request(c.sotw, id, req.GetNode(), req.GetTypeUrl())
	if refused != nil || req.GetErrorDetail() == nil {
		return refused
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

// OnDeltaStreamOpen is OnStreamOpen for a delta stream.
func (c *streams) OnDeltaStreamOpen(ctx context.Context, id int64, _ string) error {
	return c.opened(ctx, c.delta, id)
}

// OnDeltaStreamClosed forgets the stream.
func (c *streams) OnDeltaStreamClosed(id int64, node *corev3.Node) {
	c.closed(c.delta, id)
	c.s.log.Info("xDS client disconnected", "node", clipID(node.GetId()), "stream", id, "delta", true)
}

// OnStreamDeltaRequest hands the clusters the node's Envoy subscribes to by name to the agent
// (on-demand discovery, ondemand.go), and logs and counts a NACK. Nothing needs parking: the
// delta server counts a sent resource as the client's, so it sends a rejected one again only when
// it changes.
func (c *streams) OnStreamDeltaRequest(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
	last, known, node, refused := c.request(c.delta, id, req.GetNode(), req.GetTypeUrl())
	if refused != nil {
		return refused
	}
	if !c.proxylessOnly {
		c.s.clusterDemand(node, req.GetTypeUrl(), req.GetResourceNamesSubscribe())
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
