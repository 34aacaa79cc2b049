// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"strconv"
	"strings"
)

// The names of what Build generates: one home, read by the builders, the simulator and the
// tests. (Proposal 037 design (a): clusters are keyed by identity, never by a bare service key.)
//
// Source qualification. One Envoy serves every meshed pod of its node, and an upstream cluster
// carries the client certificate of the pod that dials (the source identity). So every upstream
// cluster name is qualified by the source: "<base>|<ns>/<sa>" where <ns>/<sa> is the source
// SPIFFE ID's path without "/ns/" and "/sa/" (SourceKey). Load assignments are not qualified:
// the membership of <fqdn>:<p> is the same whoever dials.

// FQDN is a service's mesh name: <svc>.<ns>.<mesh-domain>.
func FQDN(service, namespace, domain string) string {
	return service + "." + namespace + "." + domain
}

// HTTPCluster is the base name of the cluster for HTTP-class port p: <fqdn>:<p>.
func HTTPCluster(fqdn string, port int32) string { return fqdn + ":" + itoa(port) }

// TCPDefaultCluster is the base name of the cluster <fqdn>:18082 reaches (the default TCP port):
// tcp:<fqdn>.
func TCPDefaultCluster(fqdn string) string { return "tcp:" + fqdn }

// TCPCluster is the base name of the cluster for TCP port p: tcp:<fqdn>:<p>.
func TCPCluster(fqdn string, port int32) string { return "tcp:" + fqdn + ":" + itoa(port) }

// LoadAssignment is the EDS name of port p's membership: <fqdn>:<p>, the endpoints declaring p
// with the protocol p is routed as. One owner per name; HTTP and TCP clusters of p share it.
func LoadAssignment(fqdn string, port int32) string { return fqdn + ":" + itoa(port) }

// SourceKey is the <ns>/<sa> of a SPIFFE ID spiffe://<domain>/ns/<ns>/sa/<sa>; an ID of another
// shape is kept whole after the scheme (no two identities share a key).
func SourceKey(identity string) string {
	rest := strings.TrimPrefix(identity, "spiffe://")
	_, path, _ := strings.Cut(rest, "/")
	if ns, sa, ok := strings.Cut(strings.TrimPrefix(path, "ns/"), "/sa/"); ok && strings.HasPrefix(path, "ns/") && !strings.Contains(sa, "/") {
		return ns + "/" + sa
	}
	return rest
}

// meshIdentity reports whether identity is of the mesh's shape in its trust domain,
// spiffe://<domain>/ns/<ns>/sa/<sa>: SourceKey is then one-to-one, so no two identities share a
// route configuration or a cluster name.
func meshIdentity(domain, identity string) bool {
	path, inDomain := strings.CutPrefix(identity, TrustBundleSecret(domain)+"/")
	ns, sa, shaped := strings.Cut(strings.TrimPrefix(path, "ns/"), "/sa/")
	return inDomain && strings.HasPrefix(path, "ns/") && shaped && ns != "" && sa != "" && !strings.Contains(ns+sa, "/")
}

// SourceCluster qualifies a cluster's base name by the identity that dials through it.
func SourceCluster(base, sourceIdentity string) string {
	return qualifiedBySourceKey(base, SourceKey(sourceIdentity))
}

// qualifiedBySourceKey is SourceCluster for a source identity whose SourceKey is key.
func qualifiedBySourceKey(base, key string) string { return base + "|" + key }

// TrustBundleSecret is the SDS name of the mesh's trust bundle (the validation context every
// mesh TLS context pins): the trust domain's SPIFFE ID, spiffe://<domain>.
func TrustBundleSecret(domain string) string { return "spiffe://" + domain }

// CertificateSecret is the SDS name of an identity's certificate and key: the SPIFFE ID itself.
func CertificateSecret(identity string) string { return identity }

// Per-pod names. <pod> is "<ns>/<name>" (PodKey), unique on the node.

// PodKey is how per-pod names spell a pod.
func PodKey(namespace, name string) string { return namespace + "/" + name }

// CaptureListener is the name of a pod's capture listener (127.0.0.1:18001 in its netns).
func CaptureListener(podKey string) string { return "capture_" + podKey }

// ProxyListener is the name of a pod's proxy listener (127.0.0.1:18081 in its netns: the mesh's
// HTTP proxy port, what the pod's applications set as HTTP_PROXY).
func ProxyListener(podKey string) string { return "proxy_" + podKey }

// InboundListener is the name of a pod's inbound listener (0.0.0.0:18008 in its netns).
func InboundListener(podKey string) string { return "inbound_" + podKey }

// InboundQUICListener is the name of a pod's inbound QUIC listener (UDP 0.0.0.0:18008 in its
// netns), beside its inbound listener when the hop prefers HTTP/3 (model.Mesh.HopHTTP3).
func InboundQUICListener(podKey string) string { return "inbound_quic_" + podKey }

// CaptureRoutes is the RDS name of the capture HCM's route configuration. It depends on the
// source identity only (the clusters it names are qualified by it), so pods of one identity
// share it.
func CaptureRoutes(sourceIdentity string) string { return "capture|" + SourceKey(sourceIdentity) }

// ProxyRoutes is the RDS name of the route configuration of the mesh's HTTP proxy port (18081):
// the capture one's virtual hosts, and a 404 for a Host that names no mesh service. Per source
// identity, as CaptureRoutes.
func ProxyRoutes(sourceIdentity string) string { return "proxy|" + SourceKey(sourceIdentity) }

// Capture filter chains. <svc> is "<name>.<ns>".

// ServiceKey is how chain names spell a service.
func ServiceKey(name, namespace string) string { return name + "." + namespace }

// TCPPortStatPrefix is the tcp_proxy stat prefix of a local pod's raw-TCP port p on its inbound
// (in_<p>, and the floor when p is the primary): tcp_<ns>/<svc>_<p>, so Envoy counts each
// service's TCP port apart (tcp.tcp_<ns>/<svc>_<p>.downstream_cx_total, ..._rx_bytes_total,
// summed over the node's pods of the service). Envoy splits stat names at dots, and its tag
// extractor takes a tcp_proxy prefix up to the first one, so a dot of the service's name (a
// ServiceAccount name may hold dots) is spelled '_', which such a name never holds otherwise;
// '/' is an ordinary character of a stat name (a namespace holds no dot).
func TCPPortStatPrefix(namespace, service string, p int32) string {
	return "tcp_" + namespace + "/" + strings.ReplaceAll(service, ".", "_") + "_" + itoa(p)
}

// CaptureTCPChain is the chain for <VIP>:18082: cap_tcp_<svc>.
func CaptureTCPChain(svcKey string) string { return "cap_tcp_" + svcKey }

// CaptureTCPPortChain is the chain for <VIP>:<p>, p a TCP port: cap_tcp_<svc>_<p>.
func CaptureTCPPortChain(svcKey string, port int32) string {
	return "cap_tcp_" + svcKey + "_" + itoa(port)
}

// CaptureHTTPPortChain is the HCM chain for destination port p, any IP: cap_http_<p>. Envoy picks
// a chain by destination port first and never falls back to the port-less chains once a port
// matched (see captureChains), so every port a cap_tcp chain claims gets one: HTTP to another
// service on that port still reaches the HCM.
func CaptureHTTPPortChain(port int32) string { return "cap_http_" + itoa(port) }

// CaptureHTTPServicePortChain is the HCM chain for <VIP>:<p>: every cleartext byte when p is an
// HTTP-class port of the service, or 80 undeclared (http://<name>/ is answered there); HTTP bytes
// when p is a TCP port an HTTP dial of which has an HTTP answer (port 80: http://<name>/ is 421
// when 80 is TCP): cap_http_<svc>_<p>.
func CaptureHTTPServicePortChain(svcKey string, port int32) string {
	return "cap_http_" + svcKey + "_" + itoa(port)
}

// CaptureTCPPortTLSChain is cap_tcp_<svc>_<p>'s twin for TLS bytes, where the port also has a
// cap_http_<svc>_<p> chain (which makes cap_tcp_<svc>_<p> cleartext only): cap_tcp_<svc>_<p>_tls.
func CaptureTCPPortTLSChain(svcKey string, port int32) string {
	return CaptureTCPPortChain(svcKey, port) + "_tls"
}

// CaptureTLSRouteChain is the chain of a TLSRoute's SNI names on the (VIP, port) whose TCP chain
// is base (CaptureTCPChain or CaptureTCPPortChain): <base>_tlsroute_<name>.<ns>. Service, route
// and namespace names are DNS names (no "_"), so no two chains of a listener share a name.
func CaptureTLSRouteChain(base, routeNamespace, routeName string) string {
	return base + "_tlsroute_" + routeName + "." + routeNamespace
}

// CaptureVirtualHost is the name of a capture virtual host: its first domain (a domain is in one
// virtual host of a route configuration, so the names are unique).
func CaptureVirtualHost(firstDomain string) string { return firstDomain }

// Other capture chains.
const (
	// CaptureHTTPChain is the HCM chain: captured HTTP, routed by its Host header.
	CaptureHTTPChain = "cap_http"
	// CaptureBlackholeChain closes :18082 connections no service claims (scoped mode).
	CaptureBlackholeChain = "cap_tcp_blackhole"
	// CaptureSelfChain closes a connection whose original destination is the capture listener
	// itself (a pod that dials 127.0.0.1:18001): passed through, it would come back, and again.
	CaptureSelfChain = "cap_self"
	// CapturePassthroughChain is the default chain: the original destination, untouched.
	CapturePassthroughChain = "cap_passthrough"
	// CaptureCatchAllVirtualHost is the capture route configuration's virtual host for a Host that
	// names no mesh service: the request goes to its original destination, untouched.
	CaptureCatchAllVirtualHost = "cap_catch_all"
	// ProxyNotMeshVirtualHost is the proxy route configuration's virtual host for a Host that
	// names no mesh service: 404 not-mesh-name.
	ProxyNotMeshVirtualHost = "proxy_not_mesh"
)

// Gateway API routes in a capture virtual host (route_gateway.go).

// GatewayRoute is the name of the Envoy route for match m of rule r of a Gateway API route of
// kind in namespace/name (m is 0 for a rule without matches, which matches every request):
// <kind>/<ns>/<name>/<r>.<m>, kind lower-cased. Access logs and stats name the rule by it.
func GatewayRoute(kind, namespace, name string, rule, match int) string {
	return strings.ToLower(kind) + "/" + namespace + "/" + name + "/" + strconv.Itoa(rule) + "." + strconv.Itoa(match)
}

// GatewayNoMatchRoute is the last route of a virtual host whose port carries Gateway API routes:
// a request no rule matches gets 404 (GEP-1294, GEP-1686).
const GatewayNoMatchRoute = "gateway_no_match"

// Inbound filter chains.

// InboundHTTPChain is the HCM chain for HTTP-class port p (server_names [p]): in_<p>.
func InboundHTTPChain(port int32) string { return "in_" + itoa(port) }

// InboundHTTP3Chain is the HTTP/3 chain of the inbound QUIC listener for HTTP-class port p
// (server_names [p]): in_h3_<p>, the same HCM as InboundHTTPChain's but for its codec.
func InboundHTTP3Chain(port int32) string { return "in_h3_" + itoa(port) }

// InboundTCPChain is the tcp_proxy chain for TCP port p (server_names [p]): in_tcp_<p>.
func InboundTCPChain(port int32) string { return "in_tcp_" + itoa(port) }

// InboundFloorChain is the default chain, for a peer that sends no SNI: the pod's own primary
// port (see listener_inbound.go for who sends none).
const InboundFloorChain = "in_floor"

// InboundVirtualHost is the one virtual host of an inbound HCM chain's inline route configuration
// (which is named after its chain): every request goes to the chain's port.
const InboundVirtualHost = "in"

// AppCluster is the cluster the inbound proxy forwards port p of pod to: app|<pod>:<p>.
func AppCluster(podKey string, port int32) string { return "app|" + podKey + ":" + itoa(port) }

// Clusters every node's snapshot carries.
const (
	// PassthroughCluster sends a connection to its original destination.
	PassthroughCluster = "passthrough"
	// BlackholeCluster has no endpoints: a connection sent to it is closed.
	BlackholeCluster = "blackhole"
)

// XDSCluster is the bootstrap's static cluster: the agent's xDS server on its unix socket, the
// one cluster the node's Envoy knows before ADS tells it the rest (Bootstrap).
const XDSCluster = "aether-xds"

// ServerName is the SNI that selects port p's chain on an inbound listener (server_names [p]):
// the port's number. Every mesh hop sends it, for every port, the service's primary too (DESIGN
// section 8, superseding proposal 037 (c)'s empty SNI for the primary): a cluster is built from
// the service's voted primary, and a pod's own primary, what the floor serves, may differ from it
// (a rollout that moves the primary, or pods that disagree), so only the port's own name lands a
// hop on the port its cluster is for.
func ServerName(port int32) string { return itoa(port) }

// HopServerName is the SNI of an HTTP hop that prefers HTTP/3 (model.Mesh.HopHTTP3) to port p of
// the service whose mesh name is fqdn: <p>.<fqdn>, e.g. 8080.payments.shop.aether.internal. A QUIC
// client sends no SNI that is not a dotted name (QUICHE's IsValidSNI: "8080" would reach no
// chain), and Envoy's QUIC client accepts a server certificate only if a DNS SAN of it matches
// the SNI (beside the SPIFFE ID pin): the destination's SVID must carry *.<fqdn>. Both legs of
// the hop send it (one TLS context), so the inbound's TCP chain of p takes it too.
func HopServerName(port int32, fqdn string) string { return itoa(port) + "." + fqdn }

// ServerNamePort is the port an inbound SNI names, ServerName's or HopServerName's (its first
// label); ok is false for any other SNI.
func ServerNamePort(sni string) (port int32, ok bool) {
	label, _, _ := strings.Cut(sni, ".")
	p, err := strconv.ParseInt(label, 10, 32)
	if err != nil || p < 1 || p > 65535 {
		return 0, false
	}
	return int32(p), true
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

// Proxyless gRPC clients (proxyless.go). grpc-go asks for the API listener named after the
// target it dials: xds:///<name>:<p> asks for <name>:<p>. Its clusters are the Envoy rendering's
// names (SourceCluster of HTTPCluster, qualified by the client's identity) on the same load
// assignments (LoadAssignment), and BlackholeCluster, an EDS cluster without endpoints there.

// ProxylessListener is the API listener of name (one of resolve.Names) and port p: <name>:<p>.
func ProxylessListener(name string, port int32) string { return name + ":" + itoa(port) }

// ProxylessRoutes is the RDS name of port p's route configuration for a proxyless client, and
// its one virtual host's name: proxyless|<fqdn>:<p>.
func ProxylessRoutes(fqdn string, port int32) string { return "proxyless|" + fqdn + ":" + itoa(port) }

// ProxylessRDSChain is the one filter chain of a proxyless API listener, holding the same HCM:
// go-control-plane's Consistent() finds RDS names in filter chains, not in api_listener, and
// grpc-go ignores a client listener's filter chains.
const ProxylessRDSChain = "proxyless_rds"

// Reading the names back. The node agent's access-log server (internal/accesslog) learns from
// each entry's upstream cluster which service port a request or connection reached and, on the
// caller's side, which local identity dialled it: the builder's names are the one vocabulary, so
// their inverses live here, beside them, and are tested as exact inverses (names_test.go).

// ClusterTarget is what an upstream cluster's name says.
type ClusterTarget struct {
	// Inbound is set for a pod's app cluster (AppCluster): Pod and Port are then the pod's key
	// (PodKey) and its port.
	Inbound bool
	Pod     string
	// FQDN is, for a mesh cluster (HTTPCluster, TCPCluster, TCPDefaultCluster qualified by
	// SourceCluster), the destination's mesh name; Port its port, 0 for TCPDefaultCluster (what
	// :18082 reaches: the service's default TCP port); TCP whether it is a raw-TCP cluster.
	FQDN string
	Port int32
	TCP  bool
	// SourceKey is a mesh cluster's source qualification (SourceKey of the identity that dials).
	SourceKey string
}

// ParseCluster reads a cluster name the builder wrote: AppCluster, or SourceCluster of
// HTTPCluster, TCPCluster or TCPDefaultCluster. Any other name (PassthroughCluster,
// BlackholeCluster, a name of no shape) is not a target: ok is false.
func ParseCluster(name string) (t ClusterTarget, ok bool) {
	if rest, isApp := strings.CutPrefix(name, "app|"); isApp {
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			return ClusterTarget{}, false
		}
		port, ok := parsePort(rest[i+1:])
		ns, pod, shaped := strings.Cut(rest[:i], "/")
		if !ok || !shaped || ns == "" || pod == "" || strings.Contains(pod, "/") {
			return ClusterTarget{}, false
		}
		return ClusterTarget{Inbound: true, Pod: rest[:i], Port: port}, true
	}
	i := strings.LastIndexByte(name, '|')
	if i < 0 {
		return ClusterTarget{}, false
	}
	base, key := name[:i], name[i+1:]
	if ns, sa, shaped := strings.Cut(key, "/"); !shaped || ns == "" || sa == "" || strings.Contains(sa, "/") {
		return ClusterTarget{}, false
	}
	t = ClusterTarget{SourceKey: key}
	base, t.TCP = strings.CutPrefix(base, "tcp:")
	j := strings.LastIndexByte(base, ':')
	if j < 0 {
		if !t.TCP || base == "" {
			return ClusterTarget{}, false // an HTTP cluster always names its port
		}
		t.FQDN = base // TCPDefaultCluster
		return t, true
	}
	if t.Port, ok = parsePort(base[j+1:]); !ok || j == 0 {
		return ClusterTarget{}, false
	}
	t.FQDN = base[:j]
	return t, true
}

// ParseFQDN reads FQDN's <svc>.<ns>.<domain> back: a namespace holds no dot, a service's name
// may, so the namespace is the label before the domain and the service everything before it.
func ParseFQDN(fqdn, domain string) (service, namespace string, ok bool) {
	rest, inDomain := strings.CutSuffix(fqdn, "."+domain)
	i := strings.LastIndexByte(rest, '.')
	if !inDomain || i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// SourceIdentity is the mesh identity whose SourceKey is key, spiffe://<domain>/ns/<ns>/sa/<sa>;
// ok is false for a key no mesh identity of domain has.
func SourceIdentity(domain, key string) (identity string, ok bool) {
	ns, sa, shaped := strings.Cut(key, "/")
	if !shaped {
		return "", false
	}
	identity = TrustBundleSecret(domain) + "/ns/" + ns + "/sa/" + sa
	if !meshIdentity(domain, identity) || SourceKey(identity) != key {
		return "", false
	}
	return identity, true
}

// MeshIdentity reports whether identity is a workload identity of the mesh's shape in trust
// domain domain: spiffe://<domain>/ns/<ns>/sa/<sa>.
func MeshIdentity(domain, identity string) bool { return meshIdentity(domain, identity) }

// parsePort reads a port number as itoa writes it: 1..65535, no sign, no leading zero.
func parsePort(s string) (int32, bool) {
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil || p == 0 || strconv.FormatUint(p, 10) != s {
		return 0, false
	}
	return int32(p), true
}
