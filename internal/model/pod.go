// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package model

import (
	"fmt"
	"path/filepath"
	"slices"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/authz"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// CaptureMode says which outbound TCP a pod's netns redirects to its proxy (DESIGN section 8).
type CaptureMode string

const (
	// CaptureScoped redirects only the mesh ports 18081 and 18082.
	CaptureScoped CaptureMode = "scoped"
	// CaptureSurface redirects exactly the (VIP, port) pairs of every mesh dial surface; the default.
	CaptureSurface CaptureMode = "surface"
	// CaptureAll redirects outbound TCP to every port of the mesh's addresses (every VIP and every
	// meshed pod address), not only the dial surface's ports; other destinations leave the pod directly.
	CaptureAll CaptureMode = "all"
)

// AnnotationCaptureMode overrides, for one pod, the agent's capture mode (its --capture-mode).
const AnnotationCaptureMode = "aether.io/capture-mode"

// CaptureModes are the capture modes, in the order their messages list them.
var CaptureModes = []CaptureMode{CaptureScoped, CaptureSurface, CaptureAll}

// ProxySocketMark is the mark (SO_MARK) the node's proxy sets on every socket it opens in a pod's
// network namespace on the pod's behalf: the pod's capture rules return it first, so that the
// proxy's own upstream connection, leaving from the pod, is never redirected back to the proxy.
// Setting SO_MARK needs CAP_NET_ADMIN, which no workload container of a meshed pod should hold
// (a container that holds it can also flush the pod's capture table).
const ProxySocketMark uint32 = 0xae7

// ParseCaptureMode reads a capture mode as the flag and the annotation spell it.
func ParseCaptureMode(s string) (CaptureMode, error) {
	for _, m := range CaptureModes {
		if s == string(m) {
			return m, nil
		}
	}
	return "", fmt.Errorf("capture mode %q is none of %q, %q, %q", s, CaptureScoped, CaptureSurface, CaptureAll)
}

// LocalPod is a meshed pod on the agent's node, as its data plane needs it: where its proxy
// listens (its netns), whose certificate it presents (its identity), which ports it serves (its
// own MeshEndpoint's) and how its outbound traffic is captured.
type LocalPod struct {
	Namespace string
	Name      string
	UID       string
	// Service is the name of the pod's MeshService (its ServiceAccount's name).
	Service string
	// Address is the pod's IP, where the inbound proxy forwards to the application's ports.
	Address string
	// UDSPath, when set, is the node path of the Unix socket the pod serves on: the inbound proxy
	// delivers every declared port there instead of to Address (the ports still demux inbound).
	UDSPath string `json:"udsPath,omitempty"`
	// Primary and Ports are the pod's own declaration (its MeshEndpoint's spec).
	Primary int32
	Ports   []meshv1alpha1.PortProtocol
	// NetNS is the path of the pod's network namespace, as the CNI plugin hands it over.
	NetNS string
	// NoIPv6 is true when IPv6 loopback cannot be bound in the pod's namespace (its IPv6 is turned
	// off): its listeners bind IPv4 only, even in a mesh that uses IPv6.
	NoIPv6 bool `json:"noIPv6,omitempty"`
	// Identity is the pod's SPIFFE ID (its ServiceAccount's MeshService identity).
	Identity string
	// Capture is the pod's capture mode.
	Capture CaptureMode
	// ExcludeOutboundPorts are the destination ports its capture leaves alone (its
	// aether.io/exclude-outbound-ports annotation, parsed by internal/portspec), ascending.
	ExcludeOutboundPorts []int32
	// Upstreams are the services the pod calls (config.aether.io/upstreams: <name> in its own
	// namespace, or <name>.<namespace>), sorted; none means it may call any.
	Upstreams []string
	// MeshDNS is true when capture redirects the pod's DNS queries (UDP and TCP to port 53) to
	// the mesh DNS: the agent's --mesh-dns is on, the pod's dnsPolicy is not None and it does
	// not opt out (aether.io/mesh-dns: "false").
	MeshDNS bool `json:"meshDNS,omitempty"`
	// Access is what the AccessPolicies make of each of Ports, in Ports' order
	// (authz.Ports over the pod's own ports: its inbound chains serve them): which are governed,
	// and the rules that admit their calls. None, or a port not Governed, is open.
	Access []authz.Port `json:"access,omitempty"`
}

// Validate names the first field a data plane could not use.
func (p LocalPod) Validate() error {
	switch {
	case p.Namespace == "" || p.Name == "":
		return fmt.Errorf("local pod %q/%q: namespace and name must both be set", p.Namespace, p.Name)
	case !filepath.IsAbs(p.NetNS):
		return fmt.Errorf("local pod %s/%s: netNS %q is not an absolute path; set the path the CNI plugin reported", p.Namespace, p.Name, p.NetNS)
	case p.Identity == "":
		return fmt.Errorf("local pod %s/%s: identity is empty; set its MeshService's SPIFFE ID", p.Namespace, p.Name)
	case p.UDSPath != "" && (!filepath.IsAbs(p.UDSPath) || len(p.UDSPath) > portspec.MaxUnixPath):
		return fmt.Errorf("local pod %s/%s: udsPath %q is not an absolute path of at most %d bytes (a Unix socket address); set "+
			"the socket's node path, or none for TCP delivery", p.Namespace, p.Name, p.UDSPath, portspec.MaxUnixPath)
	}
	if _, err := ParseCaptureMode(string(p.Capture)); err != nil {
		return fmt.Errorf("local pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// PodAccess is what policies make of pod p's ports, for LocalPod.Access: authz.Ports read against
// the pod's own ports, not its service's (the inbound chains serve the pod's ports), for the
// mesh's trust domain. Nil when none is governed, so that a pod no policy touches is as it was.
// The problems are the controller's to report.
func PodAccess(trustDomain string, p LocalPod, policies []configv1.AccessPolicy) []authz.Port {
	if len(policies) == 0 {
		return nil
	}
	ports, _ := authz.Ports(trustDomain, authz.Service{Namespace: p.Namespace, Name: p.Service, Ports: p.Ports}, policies)
	if !slices.ContainsFunc(ports, func(a authz.Port) bool { return a.Governed }) {
		return nil
	}
	return ports
}

// AccessOf is what the AccessPolicies make of the pod's port: open (not Governed) unless Access
// says otherwise.
func (p LocalPod) AccessOf(port int32) authz.Port {
	for _, a := range p.Access {
		if a.Port == port {
			return a
		}
	}
	return authz.Port{Port: port}
}

// WithoutUDP is p as a renderer of TCP sees it: its UDP ports, and what the AccessPolicies make of
// them, left out (the Primary stays, so a UDP primary is then among no port, and the inbound
// listener has no floor chain: no TCP port is the primary). p itself when it has no UDP port.
func (p LocalPod) WithoutUDP() LocalPod {
	udp := map[int32]bool{}
	for _, pp := range p.Ports {
		if pp.Protocol.IsUDP() {
			udp[pp.Port] = true
		}
	}
	if len(udp) == 0 {
		return p
	}
	p.Ports = slices.DeleteFunc(slices.Clone(p.Ports), func(pp meshv1alpha1.PortProtocol) bool { return udp[pp.Port] })
	p.Access = slices.DeleteFunc(slices.Clone(p.Access), func(a authz.Port) bool { return udp[a.Port] })
	return p
}
