// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdsserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Proxyless gRPC clients, served on Options.ProxylessListener from a cache of their own (not in
// ADS mode, see New). A client that announces itself proxyless (node metadata AETHER_PROXYLESS
// "true") with a pod's node ID (proxyless.NodeID, "<namespace>/<pod>") is registered while one of
// its streams is open; the agent is told when the set changes
// (OnProxylessChange), builds that pod's rendering and publishes it (PublishProxyless). Its
// snapshot is built on demand: go-control-plane holds the client's requests until the first
// snapshot for its node ID is set, and the snapshot is cleared when its last stream closes.
//
// The proxyless socket is the one pods reach (a hostPath they mount): it serves proxyless node IDs
// only and refuses every other stream, so no pod can pass for the node's Envoy, whose
// stream will carry every local pod's certificate by SDS. The xDS configuration itself is no
// secret (a client's identity is proven by its certificate files, never by its node ID), but a
// node ID chooses what a pod is served (its namespace's routes, its SNI mode): a stream may
// announce the node ID of its caller's pod only, learned from its connection (peer.go), and one
// node ID only. What one pod can make the agent hold is bounded: its connections and streams
// (maxPerPod), a message's size (maxProxylessMessage), a node ID's length
// (proxyless.MaxNodeIDLength); a refused stream never reaches go-control-plane's cache.

// ProxylessNode is a connected proxyless gRPC client.
type ProxylessNode struct {
	// ID is its node ID, proxyless.NodeID of its pod.
	ID string
	// SNI is true when it announced proxyless.MetadataSNI: it sends the SNI its clusters name.
	SNI bool
}

// proxylessClient is a registered client: what it announced, and how many streams it holds.
type proxylessClient struct {
	sni     bool
	streams int
}

// errNotProxyless is the proxyless socket's answer to a stream of another client.
var errNotProxyless = status.Error(codes.InvalidArgument, "this socket serves proxyless gRPC clients only: announce node metadata "+
	proxyless.MetadataProxyless+`: "`+proxyless.MetadataTrue+`" with node ID <pod namespace>/<pod name> (at most `+
	strconv.Itoa(proxyless.MaxNodeIDLength)+" bytes)")

// announcedProxyless reads node's announcement: a proxyless client with a pod's node ID, and
// whether it sends SNI.
func announcedProxyless(node *corev3.Node) (isProxyless, sni bool) {
	fields := node.GetMetadata().GetFields()
	if fields[proxyless.MetadataProxyless].GetStringValue() != proxyless.MetadataTrue {
		return false, false
	}
	if _, _, ok := proxyless.ParseNodeID(node.GetId()); !ok {
		return false, false
	}
	return true, fields[proxyless.MetadataSNI].GetStringValue() == proxyless.MetadataTrue
}

// OnProxylessChange makes the server call f whenever a proxyless client connects (its first
// stream) or goes (its last), or changes what it announces: f is called without the server's
// locks held, and must not block. Each call adds one more f.
func (s *Server) OnProxylessChange(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onProxyless = append(s.onProxyless, f)
}

// proxylessChanged calls every OnProxylessChange function of fs.
func proxylessChanged(fs []func()) func() {
	return func() {
		for _, f := range fs {
			f()
		}
	}
}

// ProxylessNodes are the proxyless clients connected now, sorted by node ID.
func (s *Server) ProxylessNodes() []ProxylessNode {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ProxylessNode, 0, len(s.proxyless))
	for _, id := range slices.Sorted(maps.Keys(s.proxyless)) {
		out = append(out, ProxylessNode{ID: id, SNI: s.proxyless[id].sni})
	}
	return out
}

// PublishProxyless is Publish for a proxyless client: it publishes only while the client is
// connected, so that a snapshot never outlives its client (one that went away between the build
// and now is skipped, reported unpublished without an error).
func (s *Server) PublishProxyless(nodeID string, res xds.Resources) (bool, error) {
	return s.publish(nodeID, res, true)
}

// proxylessStreamOpened registers one more stream of a proxyless client, and reports whether the
// client is new.
func (s *Server) proxylessStreamOpened(id string, sni bool) (func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.proxyless[id]
	if c == nil {
		c = &proxylessClient{}
		s.proxyless[id] = c
	}
	c.streams++
	// The last stream's announcement counts (a restarted client may turn SNI on).
	changed := c.streams == 1 || c.sni != sni
	c.sni = sni
	proxylessClients.Set(float64(len(s.proxyless)))
	return proxylessChanged(s.onProxyless), changed
}

// proxylessStreamClosed forgets one stream of a proxyless client; with its last stream, the
// client and its snapshot go. It reports whether the client went.
func (s *Server) proxylessStreamClosed(id string) (func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.proxyless[id]
	if c == nil {
		return nil, false
	}
	if c.streams--; c.streams > 0 {
		return nil, false
	}
	delete(s.proxyless, id)
	delete(s.served, id)
	s.proxylessCache.ClearSnapshot(id)
	proxylessClients.Set(float64(len(s.proxyless)))
	return proxylessChanged(s.onProxyless), true
}

// notify calls f, if any.
func notify(f func(), changed bool) {
	if f != nil && changed {
		f()
	}
}

// ProxylessAddress is where the server serves proxyless clients, as ParseAddress spells it; empty
// when it does not.
func (s *Server) ProxylessAddress() string {
	if s.proxylessListener == nil {
		return ""
	}
	return addressOf(s.proxylessListener)
}

// describeProxyless names a stream's client for a log line.
func describeProxyless(node *corev3.Node) string {
	return fmt.Sprintf("node %q, metadata %s=%q", clipID(node.GetId()), proxyless.MetadataProxyless,
		clipID(cmp.Or(node.GetMetadata().GetFields()[proxyless.MetadataProxyless].GetStringValue(), "<unset>")))
}

// clipID is id cut to proxyless.MaxNodeIDLength bytes for a log line or a refusal: a hostile
// client's ID may be as long as a message.
func clipID(id string) string {
	if len(id) <= proxyless.MaxNodeIDLength {
		return id
	}
	return strings.ToValidUTF8(id[:proxyless.MaxNodeIDLength], "") + fmt.Sprintf("...(%d bytes)", len(id))
}

// ResolvePodsWith makes f the server's reading of a caller's pod UID as the pod (the agent's view
// of its node's pods): until it is called, every proxyless stream is refused, and so is every
// stream on the node's socket of a caller in a pod.
func (s *Server) ResolvePodsWith(f NodePods) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodePods = f
}

// nodePod is the pod of this node with UID podUID; ok is false when the agent knows none.
func (s *Server) nodePod(ctx context.Context, podUID string) (pod Pod, ok bool, err error) {
	s.mu.Lock()
	f := s.nodePods
	s.mu.Unlock()
	if f == nil {
		return Pod{}, false, errors.New("the agent does not read its node's pods yet")
	}
	return f(ctx, podUID)
}

// podNodeID is the node ID of the pod with UID podUID ("" when the agent knows none).
func (s *Server) podNodeID(ctx context.Context, podUID string) (string, error) {
	pod, ok, err := s.nodePod(ctx, podUID)
	if !ok || err != nil {
		return "", err
	}
	return pod.String(), nil
}
