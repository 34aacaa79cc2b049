// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package xdstest is a real ADS client for tests: a gRPC state-of-the-world stream that behaves
// as Envoy does on it. It subscribes to every cluster and listener, then to the load assignments
// its clusters name (EDS), the route configurations its listeners name (RDS) and the secrets the
// TLS contexts of both name (SDS, one request naming them all, as Envoy asks over ADS); it ACKs each
// response with the version and nonce it answers, or NACKs one on request, and keeps every
// response it received, in order, so a test can say what was (and was not) sent.
//
// It is test support, linked by tests only (internal/xdsserver, internal/agent, test/e2e).
package xdstest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The types the client follows, in the order Envoy asks for them.
const (
	Clusters  = resourcev3.ClusterType
	Endpoints = resourcev3.EndpointType
	Listeners = resourcev3.ListenerType
	Routes    = resourcev3.RouteType
	Secrets   = resourcev3.SecretType
)

// Response is one response the client received.
type Response struct {
	TypeURL string
	Version string
	Nonce   string
	// Names are the resources it carried, sorted.
	Names []string
	// NACKed is true when the client rejected it.
	NACKed bool
	// Resources are what it carried, by name.
	Resources map[string]proto.Message
}

// State is what the client holds: per type URL, the accepted version and resources, and every
// response received so far.
type State struct {
	Versions  map[string]string
	Resources map[string]map[string]proto.Message
	History   []Response
	// Requested are, per type URL, the names the client asks for now (none: every resource).
	Requested map[string][]string
}

// Received are the responses of typeURL in History, in order.
func (s State) Received(typeURL string) []Response {
	var out []Response
	for _, r := range s.History {
		if r.TypeURL == typeURL {
			out = append(out, r)
		}
	}
	return out
}

// Secret is the accepted secret name, or nil.
func (s State) Secret(name string) *tlsv3.Secret {
	secret, _ := s.Resources[Secrets][name].(*tlsv3.Secret)
	return secret
}

// LoadAssignment is the accepted load assignment name, or nil.
func (s State) LoadAssignment(name string) *endpointv3.ClusterLoadAssignment {
	cla, _ := s.Resources[Endpoints][name].(*endpointv3.ClusterLoadAssignment)
	return cla
}

// LbEndpoint is the endpoint at ip in cla, or nil.
func LbEndpoint(cla *endpointv3.ClusterLoadAssignment, ip string) *endpointv3.LbEndpoint {
	for _, locality := range cla.GetEndpoints() {
		for _, lb := range locality.GetLbEndpoints() {
			if lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress() == ip {
				return lb
			}
		}
	}
	return nil
}

// Client is one ADS stream.
type Client struct {
	node   *corev3.Node
	conn   *grpc.ClientConn
	stream grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	cancel context.CancelFunc
	done   chan struct{}

	sendMu sync.Mutex // one Send at a time

	mu      sync.Mutex
	types   map[string]*typeState
	history []Response
	nack    map[string]string // type URL → the reason to reject its next response with
	err     error
	changed chan struct{} // closed and replaced on every change
}

type typeState struct {
	version   string // accepted
	nonce     string // last received
	names     []string
	resources map[string]proto.Message
}

// Target is the gRPC target of an xdsserver address: unix:///path as it is, tcp://host:port as
// passthrough:///host:port (no resolver: an IP and a port).
func Target(address string) string {
	if hostPort, ok := strings.CutPrefix(address, "tcp://"); ok {
		return "passthrough:///" + hostPort
	}
	return address
}

// Dial opens an ADS stream to address (unix:///path or tcp://127.0.0.1:port) as node, subscribes
// to every cluster and listener, and follows the stream until ctx ends or Close.
func Dial(ctx context.Context, address, node string) (*Client, error) {
	return DialNode(ctx, address, &corev3.Node{Id: node})
}

// DialNode is Dial as node, its ID and metadata (a proxyless client's announcement).
func DialNode(ctx context.Context, address string, node *corev3.Node) (*Client, error) {
	conn, err := grpc.NewClient(Target(address), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	// WaitForReady: the server may not listen yet (an agent starting); the stream waits for it.
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx, grpc.WaitForReady(true))
	if err != nil {
		cancel()
		_ = conn.Close()
		return nil, err
	}
	c := &Client{node: node, conn: conn, stream: stream, cancel: cancel, done: make(chan struct{}),
		types: map[string]*typeState{}, nack: map[string]string{}, changed: make(chan struct{})}
	for _, t := range []string{Clusters, Listeners} {
		c.types[t] = &typeState{}
		if err := c.send(&discoveryv3.DiscoveryRequest{TypeUrl: t}); err != nil {
			if errors.Is(err, io.EOF) { // the server ended the stream (refused it): Recv says how
				if _, recvErr := stream.Recv(); recvErr != nil {
					err = recvErr
				}
			}
			// Not Close: it waits for follow, which has not started.
			cancel()
			_ = conn.Close()
			return nil, err
		}
	}
	go c.follow()
	return c, nil
}

// Close ends the stream.
func (c *Client) Close() {
	c.cancel()
	<-c.done
	_ = c.conn.Close()
}

// NACKNext makes the client reject the next response of typeURL with reason.
func (c *Client) NACKNext(typeURL, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nack[typeURL] = reason
}

// State is a copy of what the client holds now.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateLocked()
}

func (c *Client) stateLocked() State {
	s := State{Versions: map[string]string{}, Resources: map[string]map[string]proto.Message{}, History: slices.Clone(c.history),
		Requested: map[string][]string{}}
	for t, ts := range c.types {
		s.Versions[t] = ts.version
		// Both replaced, never modified: a shallow copy is a copy.
		s.Requested[t] = ts.names
		s.Resources[t] = maps.Clone(ts.resources)
	}
	return s
}

// Await waits until check accepts the client's state, re-checking on every response; it returns
// check's last error when ctx ends, or the stream's error.
func (c *Client) Await(ctx context.Context, check func(State) error) error {
	for {
		c.mu.Lock()
		s, changed, streamErr := c.stateLocked(), c.changed, c.err
		c.mu.Unlock()
		err := check(s)
		if err == nil {
			return nil
		}
		if streamErr != nil {
			return fmt.Errorf("%w (the stream ended: %v)", err, streamErr)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		}
	}
}

func (c *Client) send(req *discoveryv3.DiscoveryRequest) error {
	req.Node = c.node
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.stream.Send(req)
}

// follow receives, records and answers responses until the stream ends.
func (c *Client) follow() {
	defer close(c.done)
	for {
		resp, err := c.stream.Recv()
		if err == nil {
			err = c.handle(resp)
		}
		if err != nil {
			c.mu.Lock()
			c.err = err
			c.notifyLocked()
			c.mu.Unlock()
			return
		}
	}
}

// handle records resp, then ACKs or NACKs it, then follows the names it adds (EDS after CDS,
// RDS after LDS).
func (c *Client) handle(resp *discoveryv3.DiscoveryResponse) error {
	resources, err := unpack(resp)
	if err != nil {
		return err
	}
	typeURL := resp.GetTypeUrl()
	c.mu.Lock()
	ts := c.types[typeURL]
	if ts == nil {
		c.mu.Unlock()
		return fmt.Errorf("a response of type %s, which the client never asked for", typeURL)
	}
	reason, reject := c.nack[typeURL]
	delete(c.nack, typeURL)
	c.history = append(c.history, Response{TypeURL: typeURL, Version: resp.GetVersionInfo(), Nonce: resp.GetNonce(),
		Names: slices.Sorted(maps.Keys(resources)), NACKed: reject, Resources: resources})
	ts.nonce = resp.GetNonce()
	answer := &discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResponseNonce: resp.GetNonce(), ResourceNames: ts.names}
	if reject {
		answer.VersionInfo = ts.version // the last accepted version, as Envoy sends
		answer.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: reason}
	} else {
		ts.version, ts.resources = resp.GetVersionInfo(), resources
		answer.VersionInfo = ts.version
	}
	follow := c.followLocked(typeURL)
	c.notifyLocked()
	c.mu.Unlock()

	if err := c.send(answer); err != nil {
		return err
	}
	for _, req := range follow {
		if err := c.send(req); err != nil {
			return err
		}
	}
	return nil
}

// followLocked are the subscription changes the accepted resources of typeURL call for: the
// load assignments its clusters name, or the route configurations its listeners name; and, after
// either, the secrets the TLS contexts of both name.
func (c *Client) followLocked(typeURL string) []*discoveryv3.DiscoveryRequest {
	var next string
	var names []string
	switch typeURL {
	case Clusters:
		next, names = Endpoints, edsNames(c.types[Clusters].resources)
	case Listeners:
		next, names = Routes, rdsNames(c.types[Listeners].resources)
	default:
		return nil
	}
	var out []*discoveryv3.DiscoveryRequest
	if req := c.subscribeLocked(next, names); req != nil {
		out = append(out, req)
	}
	secrets := sdsNames(c.types[Clusters].resources, c.types[Listeners].resources)
	if req := c.subscribeLocked(Secrets, secrets); req != nil {
		out = append(out, req)
	}
	return out
}

// subscribeLocked is the request that subscribes to names of typeURL, or nil when it names
// nothing yet or nothing new. (An empty list would mean "all" to the server.)
func (c *Client) subscribeLocked(typeURL string, names []string) *discoveryv3.DiscoveryRequest {
	ts := c.types[typeURL]
	if len(names) == 0 || (ts != nil && slices.Equal(ts.names, names)) {
		return nil
	}
	if ts == nil {
		ts = &typeState{}
		c.types[typeURL] = ts
	}
	ts.names = names
	return &discoveryv3.DiscoveryRequest{TypeUrl: typeURL, VersionInfo: ts.version, ResponseNonce: ts.nonce, ResourceNames: names}
}

func (c *Client) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// unpack decodes a response's resources by name.
func unpack(resp *discoveryv3.DiscoveryResponse) (map[string]proto.Message, error) {
	out := make(map[string]proto.Message, len(resp.GetResources()))
	for _, a := range resp.GetResources() {
		m, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{})
		if err != nil {
			return nil, fmt.Errorf("decoding a %s resource: %w", resp.GetTypeUrl(), err)
		}
		name := ""
		switch r := m.(type) {
		case *clusterv3.Cluster:
			name = r.GetName()
		case *endpointv3.ClusterLoadAssignment:
			name = r.GetClusterName()
		case *listenerv3.Listener:
			name = r.GetName()
		case *routev3.RouteConfiguration:
			name = r.GetName()
		case *tlsv3.Secret:
			name = r.GetName()
		default:
			return nil, fmt.Errorf("a resource of type %T in a %s response", m, resp.GetTypeUrl())
		}
		if _, twice := out[name]; twice {
			return nil, fmt.Errorf("two %s resources named %q in one response", resp.GetTypeUrl(), name)
		}
		out[name] = m
	}
	return out, nil
}

// edsNames are the load assignments EDS clusters name (the service name, else the cluster's),
// sorted, as Envoy asks for them.
func edsNames(clusters map[string]proto.Message) []string {
	set := map[string]bool{}
	for _, m := range clusters {
		c := m.(*clusterv3.Cluster)
		if c.GetType() != clusterv3.Cluster_EDS {
			continue
		}
		if n := c.GetEdsClusterConfig().GetServiceName(); n != "" {
			set[n] = true
		} else {
			set[c.GetName()] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// rdsNames are the route configurations the listeners' HTTP connection managers fetch by RDS,
// in every filter chain and the default one, sorted.
func rdsNames(listeners map[string]proto.Message) []string {
	set := map[string]bool{}
	for _, m := range listeners {
		l := m.(*listenerv3.Listener)
		chains := append(slices.Clone(l.GetFilterChains()), l.GetDefaultFilterChain())
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				config, hcm := f.GetTypedConfig(), &hcmv3.HttpConnectionManager{}
				if config == nil || !config.MessageIs(hcm) || config.UnmarshalTo(hcm) != nil {
					continue
				}
				if n := hcm.GetRds().GetRouteConfigName(); n != "" {
					set[n] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// sdsNames are the secrets the TLS contexts of the clusters and of the listeners' filter chains
// name (certificates and validation contexts), sorted, as Envoy asks for them. Read here, apart
// from internal/xds's own reading, so that the server and its test client do not share a mistake.
func sdsNames(clusters, listeners map[string]proto.Message) []string {
	set := map[string]bool{}
	add := func(config *anypb.Any) {
		up, down := &tlsv3.UpstreamTlsContext{}, &tlsv3.DownstreamTlsContext{}
		var common *tlsv3.CommonTlsContext
		switch {
		case config == nil:
			return
		case config.MessageIs(up) && config.UnmarshalTo(up) == nil:
			common = up.GetCommonTlsContext()
		case config.MessageIs(down) && config.UnmarshalTo(down) == nil:
			common = down.GetCommonTlsContext()
		default:
			return
		}
		for _, s := range common.GetTlsCertificateSdsSecretConfigs() {
			set[s.GetName()] = true
		}
		set[common.GetValidationContextSdsSecretConfig().GetName()] = true
		set[common.GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName()] = true
	}
	for _, m := range clusters {
		add(m.(*clusterv3.Cluster).GetTransportSocket().GetTypedConfig())
	}
	for _, m := range listeners {
		l := m.(*listenerv3.Listener)
		for _, fc := range append(slices.Clone(l.GetFilterChains()), l.GetDefaultFilterChain()) {
			add(fc.GetTransportSocket().GetTypedConfig())
		}
	}
	delete(set, "")
	return slices.Sorted(maps.Keys(set))
}
