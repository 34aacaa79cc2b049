// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// Active health checking: a service whose endpoints ask for it (health-check-mode: active,
// model.ActiveCheck) has every one of its upstream clusters probe every host itself, through the
// mesh hop, as the node agent probes its own pods: the primary port, in its protocol (an HTTP GET
// of the health path, 2xx and 3xx healthy; grpc.health.v1 for a gRPC primary; a connection for a
// TCP primary). A host is then used only while both its agent's verdict (EDS) and the client's
// own probes say healthy; a host that joins later takes traffic after its first passing probe.
// Outlier detection comes with it: a host that fails requests is ejected between probes.
//
// A cluster of another port than the primary probes the primary all the same: its probes take a
// transport socket of their own (transport_socket_matches, chosen by activeCheckCriteria), the
// hop with the primary's SNI, as the endpoint's health is its primary's for every port.

const (
	// activeCheckInterval is how often each cluster probes each host, traffic or none: an idle
	// client's first request must not find a host that died a minute ago (Envoy's default
	// no_traffic_interval is 60 s).
	activeCheckInterval = 5 * time.Second
	// activeCheckTimeout bounds one probe, connection and mTLS handshake included: the agent's.
	activeCheckTimeout = time.Second
	// activeCheckUnhealthyInterval is how often a host that failed is probed again: a host is
	// back within a second of its recovery, and a cluster whose first probes failed (a new
	// cluster's probes through their own transport socket can run before its certificate is
	// loaded, and fail) serves within a second, not an interval.
	activeCheckUnhealthyInterval = time.Second
	// activeCheckUnhealthyAfter failed probes (timeouts, refused connections) take a host out;
	// an HTTP answer outside 2xx–3xx takes it out at once (Envoy's rule). One passing probe
	// brings it back.
	activeCheckUnhealthyAfter = 3
	// activeCheckMatch names the transport socket a probe of another port than the primary uses.
	activeCheckMatch = "aether.io/health-check"
)

// activeChecking gives c, the cluster of u's port dialled by source, u's probes and outlier
// detection when u's endpoints ask for them. A primary whose protocol the node does not carry
// (raw TCP without a workload-identity issuer) cannot be probed over the mesh: nothing is set.
func (b *builder) activeChecking(what about, c *clusterv3.Cluster, u upstream, source string, port int32) {
	if !u.svc.ActiveCheck.On() {
		return
	}
	primary, ok := primaryPort(u.svc)
	if !ok || !b.carries(primary.Protocol) {
		return
	}
	via := port != primary.Number
	c.HealthChecks = []*corev3.HealthCheck{b.activeCheck(what, u, primary, via)}
	c.OutlierDetection = b.outlierDetection(what)
	if via {
		m := &clusterv3.Cluster_TransportSocketMatch{Name: activeCheckMatch, Match: activeCheckCriteria()}
		b.checkAbout(what.part("probe transport socket match"), m)
		m.TransportSocket = b.upstreamTLS(what, hop{source: source, destination: u.svc.Identity,
			sni: ServerName(primary.Number), http: primary.Protocol.IsHTTP()})
		c.TransportSocketMatches = []*clusterv3.Cluster_TransportSocketMatch{m}
	}
}

// primaryPort is svc's primary among its listed ports.
func primaryPort(svc *model.Service) (model.Port, bool) {
	for _, p := range svc.Ports {
		if p.Number == svc.Primary {
			return p, true
		}
	}
	return model.Port{}, false
}

// isGRPC reports whether port p speaks gRPC: its winning declaration says =grpc.
func isGRPC(p model.Port) bool {
	return len(p.Pairs) > 0 && len(p.Pairs[0].Members) > 0 && p.Pairs[0].Members[0].AppProtocol == meshv1alpha1.AppProtocolGRPC
}

// probesGRPC reports whether svc's clusters probe with grpc.health.v1.
func probesGRPC(svc *model.Service) bool {
	primary, ok := primaryPort(svc)
	return svc.ActiveCheck.On() && ok && isGRPC(primary)
}

// activeCheckCriteria selects the probes' transport socket: {aether.io/health-check: primary}.
func activeCheckCriteria() *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{activeCheckMatch: structpb.NewStringValue("primary")}}
}

// activeCheckKey is what a service's probe derives from: the service, and whether it goes
// through the probe's own transport socket (via, from a cluster of another port).
type activeCheckKey struct {
	fqdn string
	via  bool
}

// activeCheck is u's probe of its primary, shared by every source's clusters of u (validated
// once).
func (b *builder) activeCheck(what about, u upstream, primary model.Port, via bool) *corev3.HealthCheck {
	k := activeCheckKey{u.fqdn, via}
	if hc, ok := b.shared.activeChecks[k]; ok {
		return hc
	}
	hc := &corev3.HealthCheck{
		Timeout:           durationpb.New(activeCheckTimeout),
		Interval:          durationpb.New(activeCheckInterval),
		UnhealthyInterval: durationpb.New(activeCheckUnhealthyInterval),
		// Without traffic Envoy uses these instead (its no_traffic_interval, 60 s by default,
		// would leave an idle client's view a minute old): a healthy host every interval, a
		// failing one every second, as with traffic.
		NoTrafficHealthyInterval: durationpb.New(activeCheckInterval),
		NoTrafficInterval:        durationpb.New(activeCheckUnhealthyInterval),
		UnhealthyThreshold:       wrapperspb.UInt32(activeCheckUnhealthyAfter),
		HealthyThreshold:         wrapperspb.UInt32(1),
		// A little spread, so that a node's clusters do not probe a host all at once.
		IntervalJitterPercent: 10,
	}
	switch {
	case primary.Protocol == meshv1alpha1.ProtocolTCP:
		// A connection through the hop: the pod's proxy took it with the service's identity.
		hc.HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}}
	case isGRPC(primary):
		hc.HealthChecker = &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{Authority: u.fqdn}}
	default:
		// HTTP/2 on the hop, as every HTTP request of the mesh; the destination's inbound speaks
		// the port's own protocol to the application.
		hc.HealthChecker = &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{
			Host: u.fqdn, Path: u.svc.ActiveCheck.Path, CodecClientType: typev3.CodecClientType_HTTP2,
			ExpectedStatuses: []*typev3.Int64Range{{Start: 200, End: 400}},
		}}
	}
	if via {
		hc.TransportSocketMatchCriteria = activeCheckCriteria()
	}
	b.checkAbout(what.part("health check"), hc)
	b.shared.activeChecks = store(b.shared.activeChecks, k, hc)
	return hc
}

// outlierDetection ejects a host after 5 consecutive failures (5xx answers, or, on a TCP
// cluster, failed connections) for 30 s at first, longer each time again; never more than half
// of a cluster's hosts on this evidence alone. Shared by every actively checked cluster.
func (b *builder) outlierDetection(what about) *clusterv3.OutlierDetection {
	if b.shared.outliers == nil {
		b.shared.outliers = &clusterv3.OutlierDetection{
			Consecutive_5Xx:    wrapperspb.UInt32(5),
			Interval:           durationpb.New(activeCheckInterval),
			BaseEjectionTime:   durationpb.New(30 * time.Second),
			MaxEjectionPercent: wrapperspb.UInt32(50),
		}
		b.checkAbout(what.part("outlier detection"), b.shared.outliers)
	}
	return b.shared.outliers
}
