// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package accesslog

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Unknown is the label value of what the agent's view does not know: a service or port an entry
// names that is none of the mesh's (the passthrough, a local reply that reached no cluster, a
// name of no shape), and a caller without a mesh identity.
const Unknown = "unknown"

// Directions, the values of the label direction.
const (
	// Inbound: the destination's side, an entry of a pod's inbound listener (the caller is the
	// peer's verified certificate).
	Inbound = "inbound"
	// Outbound: the caller's side, an entry of a pod's capture or proxy listener (the caller is
	// the local identity whose client certificate the cluster presents).
	Outbound = "outbound"
)

// target is what an entry is about, as label values.
type target struct {
	direction, service, port string
	// caller is the local identity that dialled (outbound); empty on the inbound side, where the
	// peer's certificate says it.
	caller string
}

// directory is what the agent's view knows, from the last mesh it built: the services and their
// ports, the node's pods and their services, the local identities.
type directory struct {
	domain string
	// ports are the listed ports of each service, by "<ns>/<name>"; defaultTCP its default TCP
	// port (what tcp:<fqdn> reaches), when it has one.
	ports      map[string]map[int32]bool
	defaultTCP map[string]int32
	// pods are the node's pods' services ("<ns>/<name>") and ports, by pod key.
	pods map[string]localPod
	// identities are the local pods' identities.
	identities map[string]bool
	// at are the node's pods by address (their MeshEndpoint's), where their inbound listener
	// takes the mesh's connections.
	at map[string]localPod
}

type localPod struct {
	service string
	ports   map[int32]bool
	primary int32
}

// serviceLabel is a service's label value: <ns>/<name>.
func serviceLabel(namespace, name string) string { return namespace + "/" + name }

// newDirectory is what m holds.
func newDirectory(m model.Mesh) *directory {
	d := &directory{domain: m.Domain, ports: map[string]map[int32]bool{}, defaultTCP: map[string]int32{},
		pods: map[string]localPod{}, identities: map[string]bool{}, at: map[string]localPod{}}
	for _, s := range m.Services {
		key := serviceLabel(s.Namespace, s.Name)
		ports := make(map[int32]bool, len(s.Ports))
		for _, p := range s.Ports {
			ports[p.Number] = true
		}
		d.ports[key] = ports
		if p, ok := resolve.DefaultTCPPort(s.PortSet()); ok {
			d.defaultTCP[key] = p
		}
	}
	for _, p := range m.Pods {
		ports := make(map[int32]bool, len(p.Ports))
		for _, pp := range p.Ports {
			ports[pp.Port] = true
		}
		lp := localPod{service: serviceLabel(p.Namespace, p.Service), ports: ports, primary: p.Primary}
		d.pods[xds.PodKey(p.Namespace, p.Name)] = lp
		d.at[p.Address] = lp
		d.identities[p.Identity] = true
	}
	return d
}

// target reads an entry's upstream cluster (xds.ParseCluster): the direction, and the service
// and port when the view knows them, else Unknown. A nil directory (no mesh built yet) knows
// nothing.
func (d *directory) target(cluster string) target {
	t, ok := xds.ParseCluster(cluster)
	unknown := target{direction: Outbound, service: Unknown, port: Unknown}
	if !ok || d == nil {
		return unknown
	}
	if t.Inbound {
		unknown.direction = Inbound
		pod, known := d.pods[t.Pod]
		if !known || !pod.ports[t.Port] {
			return unknown
		}
		return target{direction: Inbound, service: pod.service, port: strconv.Itoa(int(t.Port))}
	}
	if id, ok := xds.SourceIdentity(d.domain, t.SourceKey); ok && d.identities[id] {
		unknown.caller = id
	}
	name, namespace, ok := xds.ParseFQDN(t.FQDN, d.domain)
	if !ok {
		return unknown
	}
	service := serviceLabel(namespace, name)
	port := t.Port
	if t.TCP && port == 0 {
		port = d.defaultTCP[service]
	}
	if !d.ports[service][port] {
		return unknown
	}
	return target{direction: Outbound, service: service, port: strconv.Itoa(int(port)), caller: unknown.caller}
}

// inboundAt is what an inbound entry that names no cluster is about (a request the proxy
// answered before routing it: an AccessPolicy's denial): the pod whose inbound listener took it
// (the connection's local address) and the port its SNI names, the primary's when it names
// none (the floor). ok is false for any other entry, or one the view cannot place.
func (d *directory) inboundAt(local *corev3.Address, sni string) (t target, ok bool) {
	sa := local.GetSocketAddress()
	if d == nil || sa.GetPortValue() != uint32(meshv1alpha1.ProxyInboundPort) {
		return target{}, false
	}
	pod, known := d.at[sa.GetAddress()]
	if !known {
		return target{}, false
	}
	port := pod.primary
	if sni != "" {
		// The port's name, or the HTTP/3 hop's <port>.<service's mesh name> (both legs).
		p, named := xds.ServerNamePort(sni)
		if !named {
			return target{}, false
		}
		port = p
	}
	if !pod.ports[port] {
		return target{}, false
	}
	return target{direction: Inbound, service: pod.service, port: strconv.Itoa(int(port))}, true
}

// knows reports whether service (a label value) is one of the view's.
func (d *directory) knows(service string) bool {
	_, ok := d.ports[service]
	return ok
}
