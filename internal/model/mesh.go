// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model

import (
	"fmt"
	"net/netip"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// Mesh is everything one node's data plane is built from (internal/xds, internal/capture): the
// services of the whole cluster, the routes the controller accepted, and the meshed pods on the
// node. The agent's lister builds it from its caches; everything after it is pure.
type Mesh struct {
	// Domain is the mesh's DNS domain and SPIFFE trust domain (aether.internal by default).
	Domain string
	// Issuer is who issues the workload identities (the agent's --identity-issuer): without one
	// (workloadidentity.NoIssuer) the dial surface refuses raw TCP, and no raw-TCP cluster is built. The zero
	// value is the default, SPIRE.
	Issuer workloadidentity.Issuer
	// Node is the node whose data plane this is.
	Node Node
	// Services are every MeshService of the cluster, sorted by namespace and name.
	Services []Service
	// Pods are the node's meshed pods, sorted by namespace and name.
	Pods []LocalPod
	// Routes are the Gateway API routes whose status the controller set ResolvedRefs=True,
	// sorted by kind, namespace and name.
	Routes []Route
	// Upstreams says which services each local identity has clusters for up front: every one
	// (UpstreamsAll, the zero value), or its declared ones (UpstreamsDeclared) and the rest on
	// demand (DESIGN section 8, Distribution).
	Upstreams UpstreamsMode `json:"upstreams,omitempty"`
	// Demanded are, per local identity (its SPIFFE ID), the services its pods asked for on
	// demand and still use, as "<name>.<namespace>" (UpstreamsDeclared only): built up front
	// beside the declared ones until they go idle. The agent keeps the record.
	Demanded map[string][]string `json:"demanded,omitempty"`
	// HopHTTP3 makes the hop between node proxies prefer HTTP/3 over QUIC (the agent's
	// --hop-http3): every local pod's inbound also listens on UDP 18008, and every HTTP upstream
	// cluster tries HTTP/3 first and falls back to HTTP/2 over TLS. Off (the default), the hop is
	// HTTP/2 over TLS alone.
	HopHTTP3 bool `json:"hopHTTP3,omitempty"`
}

// UpstreamsMode says which services a node carries clusters for before anyone dials them.
type UpstreamsMode string

const (
	// UpstreamsAll carries every service for every local identity: the node's clusters grow as
	// services × ports × local identities.
	UpstreamsAll UpstreamsMode = "all"
	// UpstreamsDeclared carries, per local identity, its own services, the services its pods
	// declare (config.aether.io/upstreams), the backends of the routes of those, and what it
	// asked for on demand (Demanded); Envoy asks for any other service when a request first
	// names it (on-demand cluster discovery).
	UpstreamsDeclared UpstreamsMode = "declared"
)

// ParseUpstreamsMode reads a distribution mode as the agent's --upstreams flag spells it.
func ParseUpstreamsMode(s string) (UpstreamsMode, error) {
	switch m := UpstreamsMode(s); m {
	case UpstreamsAll, UpstreamsDeclared:
		return m, nil
	}
	return "", fmt.Errorf("upstreams mode %q is neither %q nor %q: set %q to carry each identity's declared upstreams "+
		"and fetch the rest on demand, or %q to carry every service up front", s, UpstreamsDeclared, UpstreamsAll,
		UpstreamsDeclared, UpstreamsAll)
}

// OnDemand reports whether services a node does not carry up front are fetched on demand.
func (m UpstreamsMode) OnDemand() bool { return m == UpstreamsDeclared }

// Node is the node the data plane runs on; its locality orders the endpoints' priorities.
type Node struct {
	Name     string
	Locality meshv1alpha1.Locality
	// Addrs are the node's own addresses as the agent knows them (internal/nodeaddrs: its Node's
	// InternalIP and ExternalIP, and its own interfaces'), sorted: what capture never redirects,
	// and where the agent's health probes of the node's pods come from.
	Addrs []netip.Addr
}

// PortSet is the service's ports as internal/resolve reads them: the primary and each listed
// port with the protocol it is routed as (a conflicted port's vote winner).
func (s Service) PortSet() portspec.PortSet {
	ports := make([]portspec.Port, 0, len(s.Ports))
	for _, p := range s.Ports {
		app := meshv1alpha1.AppProtocol("")
		if len(p.Pairs) > 0 && len(p.Pairs[0].Members) > 0 {
			app = p.Pairs[0].Members[0].AppProtocol
		}
		ports = append(ports, portspec.Port{Port: p.Number, Protocol: p.Protocol, AppProtocol: app})
	}
	return portspec.NewPortSet(s.Primary, ports)
}
