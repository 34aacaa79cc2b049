// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	"strconv"
	"strings"
)

// Protocol is the protocol a port is declared with: the L4/L7 class the mesh carries it as. It is
// the mesh's one protocol type: the parser (internal/portspec), the resolution rule, route status
// and the agent all speak it.
// +kubebuilder:validation:Enum=HTTP;HTTP2;TCP;UDP
// +kubebuilder:validation:MaxLength=5
type Protocol string

const (
	// ProtocolHTTP is HTTP/1.1 (annotation suffix h1, or no suffix on an http pod).
	ProtocolHTTP Protocol = "HTTP"
	// ProtocolHTTP2 is HTTP/2 over cleartext or TLS, gRPC included (suffixes h2, http2, grpc).
	ProtocolHTTP2 Protocol = "HTTP2"
	// ProtocolTCP is a raw TCP byte stream (suffix tcp, or no suffix on a tcp pod).
	ProtocolTCP Protocol = "TCP"
	// ProtocolUDP is plaintext UDP datagrams (suffix udp, or no suffix on a udp pod). A port
	// number carries one transport: a port declared UDP is reached by UDP only (a TCP dial of it
	// reaches nothing), and no TCP or HTTP port of the same number exists beside it.
	ProtocolUDP Protocol = "UDP"
)

// IsHTTP reports whether p is of the HTTP class (HTTP or HTTP2): routed by the Host header, and
// reachable by an HTTPRoute.
func (p Protocol) IsHTTP() bool { return p == ProtocolHTTP || p == ProtocolHTTP2 }

// IsUDP reports whether p is UDP: carried as datagrams, not as a TCP connection. Everything of the
// mesh that is built on TCP (capture's TCP rules, the proxy's TCP and HTTP listeners and
// clusters, the agent's TCP and HTTP health probes) leaves such a port alone.
func (p Protocol) IsUDP() bool { return p == ProtocolUDP }

// Size limits. Each equals a limit of the CRDs (their markers are literals; the contract test in
// this package reads the generated CRDs and fails when one drifts from its constant).
const (
	// MaxPorts is the most ports one endpoint (one pod) may declare: MeshEndpoint spec.ports'
	// MaxItems. internal/portspec refuses more at admission with a clear error, so the API
	// server's limit is never the first to say so.
	MaxPorts = 64
	// MaxServicePorts is the most ports a MeshService lists: status.ports' MaxItems. Admission
	// judges each pod alone, so the union over a service's endpoints is not bounded by it; when
	// more ports are declared, the ports declared by the most endpoints are kept (the primary
	// first, ties to the lower number), the rest are left out of the status, the dial surface and
	// the generated Service, and condition PortsComplete says so.
	MaxServicePorts = 256
	// MaxPortsSummary is the length limit of every portsSummary field (MeshEndpoint spec and
	// MeshService status). FormatPorts never returns more.
	MaxPortsSummary = 1024
	// MaxDialSurface is status.dialSurface's MaxItems: a service's surface has 2 × its ports + 10
	// rows (internal/resolve.SurfaceLen), 522 at MaxServicePorts.
	MaxDialSurface = 2*MaxServicePorts + 10
	// MaxDialAddress is the length limit of a dial surface row's address. Addresses are written
	// with the placeholder <name>; the longest are "Host: <name>:65535" and "<name>:65535/udp".
	MaxDialAddress = 64
	// MaxDialReason is the length limit of a dial surface row's reason.
	MaxDialReason = 1024
	// MaxNames is status.names' MaxItems: the mesh name and the generated Service's two names.
	MaxNames = 3
	// MaxNameLength is the length limit of one of status.names: a ServiceAccount name (253), a
	// namespace (63) and a mesh domain (253, a DNS subdomain) joined by two dots.
	MaxNameLength = 253 + 1 + 63 + 1 + 253
	// MaxLocalNameLength is the length limit of status.localName: a ServiceAccount name.
	MaxLocalNameLength = 253
)

// Ports of the mesh itself: the one home of these numbers. No workload may declare them
// (internal/portspec.Reserved is keyed by them); internal/resolve and the generated Service dial
// them. The CEL rule on PortProtocol.Port spells them as literals (a marker cannot name a
// constant); TestAPIAgreesWithPortspec pins it to these.
const (
	// MeshHTTPPort is the mesh's HTTP proxy port: the Host header decides the destination.
	MeshHTTPPort int32 = 18081
	// MeshTCPPort is the TCP mesh port: it reaches a service's default TCP port.
	MeshTCPPort int32 = 18082
	// ProxyCapturePort is where the mesh proxy receives captured outbound traffic in every pod.
	ProxyCapturePort int32 = 18001
	// ProxyInboundPort is where the mesh proxy receives mTLS traffic for the pod's own ports.
	ProxyInboundPort int32 = 18008
	// MeshDNSPort is where the mesh DNS answers a pod's DNS queries (capture redirects them
	// there) inside every pod.
	MeshDNSPort int32 = 18054
)

// AppProtocol names what a port speaks within its protocol, when the mesh must know more than
// the protocol: grpc (annotation suffix =grpc), only on an HTTP2 port.
// +kubebuilder:validation:Enum=grpc
// +kubebuilder:validation:MaxLength=4
type AppProtocol string

// AppProtocolGRPC is gRPC. The port is HTTP2 in everything the mesh derives (resolution, routes,
// the generated Service, status); the node agent health-checks a gRPC primary with the gRPC
// health protocol (grpc.health.v1) instead of an HTTP GET.
const AppProtocolGRPC AppProtocol = "grpc"

// PortProtocol is one declared port and its protocol.
// +kubebuilder:validation:XValidation:rule="!has(self.appProtocol) || self.protocol == 'HTTP2'",message="appProtocol grpc is valid only on an HTTP2 port: set protocol HTTP2 or remove appProtocol",fieldPath=".appProtocol"
type PortProtocol struct {
	// port is the application port, 1..65535. The mesh's own ports (18001, 18008, 18054,
	// 18081, 18082) are refused.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:validation:XValidation:rule="!(self in [18001, 18008, 18054, 18081, 18082])",message="ports 18001, 18008, 18054, 18081 and 18082 are the mesh's own and cannot be declared by a workload"
	// +required
	Port int32 `json:"port"`

	// protocol is the protocol the port is served with.
	// +required
	Protocol Protocol `json:"protocol"`

	// appProtocol is grpc for a port declared =grpc (always HTTP2), omitted otherwise. The node
	// agent probes a gRPC primary with grpc.health.v1/Check.
	// +optional
	AppProtocol AppProtocol `json:"appProtocol,omitempty"`
}

// FormatPorts renders ports the way the PORTS printer columns show them: "8080/HTTP,9000/TCP".
// Every writer of a portsSummary field uses it, so a column never disagrees with its list. When
// the whole list would exceed MaxPortsSummary it names the first ports that fit and counts the
// rest: "8080/HTTP,9000/TCP,… +90 more". An endpoint's 64 ports always fit whole.
func FormatPorts(ports []PortProtocol) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = FormatPort(p.Port, p.Protocol)
	}
	if all := strings.Join(parts, ","); len(all) <= MaxPortsSummary {
		return all
	}
	// Keep the longest prefix of ports that fits with its "… +N more" tail. The whole list does
	// not fit, so the loop stops before the last port.
	length := 0 // of the kept ports, each followed by a comma
	kept := 0
	for kept < len(parts) && length+len(parts[kept])+1+len(moreTail(len(parts)-kept-1)) <= MaxPortsSummary {
		length += len(parts[kept]) + 1
		kept++
	}
	return strings.Join(parts[:kept], ",") + separator(kept) + moreTail(len(parts)-kept)
}

// FormatPort spells one port as the PORTS printer columns do: "8080/HTTP". Messages that list a
// service's ports (route status) use it too, so a port reads the same wherever it is named.
func FormatPort(port int32, protocol Protocol) string {
	return strconv.Itoa(int(port)) + "/" + string(protocol)
}

// moreTail counts the ports a portsSummary leaves out: "… +90 more".
func moreTail(n int) string { return "… +" + strconv.Itoa(n) + " more" }

func separator(kept int) string {
	if kept == 0 {
		return ""
	}
	return ","
}
