// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// Names are the names that reach service in namespace from anywhere, each resolving the same
// way: the mesh name first, then the Kubernetes names of the generated Service. The bare name
// reaches it too, from its own namespace only (LocalName, NamesFrom).
func Names(service, namespace, meshDomain string) []string {
	return []string{
		service + "." + namespace + "." + meshDomain,
		service + "." + namespace + ".svc.cluster.local",
		service + "." + namespace,
	}
}

// LocalName is the service's name without a namespace, its bare name (Host: payments:8080). The
// workload page: "a name without a namespace is my-svc in the caller's own namespace, as the
// cluster's DNS search makes it". So from a client in the service's own namespace it reaches the
// service, resolving as Names do (the same dial surface, row for row); from any other namespace it
// is that namespace's service of the name, or no mesh service at all.
func LocalName(service string) string { return service }

// NamesFrom are the names that reach service in namespace from a client in callerNamespace, each
// resolving the same way: Names, then LocalName when the client is in the service's namespace.
func NamesFrom(service, namespace, callerNamespace, meshDomain string) []string {
	names := Names(service, namespace, meshDomain)
	if callerNamespace == namespace {
		names = append(names, LocalName(service))
	}
	return names
}

// The notation of a surface row's Address (see the package comment).
const (
	// NamePlaceholder stands for any of a service's Names in a row's Address, Reason and Body.
	NamePlaceholder = "<name>"
	// HostRowPrefix starts the Address of a row that is an HTTP request with that Host header
	// (sent to the mesh's HTTP proxy port, or on any captured HTTP connection).
	HostRowPrefix = "Host: "
	// AnyOtherPort stands for every port no other row names.
	AnyOtherPort = "*"
	// UDPSuffix ends the Address of a row that is UDP datagrams, not a TCP connection:
	// "<name>:18082/udp", "<name>:5353/udp". A row without it is TCP (or HTTP over TCP).
	UDPSuffix = "/udp"
)

// The URL schemes of the surface's spellings.
const (
	httpScheme  = "http://"
	httpsScheme = "https://"
)

// Dial is one row of a dial surface: a spelling, relative to any of the service's names, and
// what it reaches.
type Dial struct {
	Address string `json:"address"`
	Result  `json:",inline"`
}

// For writes the row for one of the service's names: NamePlaceholder replaced by name in the
// address, the reason and the body. For a Host row the result is then HTTPRequest's for that
// authority, word for word.
func (d Dial) For(name string) Dial {
	d.Address = strings.ReplaceAll(d.Address, NamePlaceholder, name)
	d.Reason = strings.ReplaceAll(d.Reason, NamePlaceholder, name)
	d.Body = strings.ReplaceAll(d.Body, NamePlaceholder, name)
	return d
}

// surfaceFixedRows is how many rows a surface has whatever its ports: http://, :18081, Host with
// no port, Host :18081, Host :18082, Host :*, https://, :18082, :18082/udp and :*.
const surfaceFixedRows = 10

// SurfaceLen is how many rows DialSurface has for a service with ports declared ports:
// 2×ports + 10 (each declared port has a Host row and a dial row). Size list limits with it.
func SurfaceLen(ports int) int { return 2*ports + surfaceFixedRows }

// DialSurface is the dial surface of the service whose ports are s in a mesh whose workload
// identities issuer issues (see refusedWithoutIdentity), each spelling once, in the order of
// DESIGN section 5's table:
//
//	http://<name>/, <name>:18081,
//	Host: <name>, Host: <name>:<p> for each declared p, Host: <name>:18081, Host: <name>:18082, Host: <name>:*,
//	https://<name>/, <name>:18082, <name>:18082/udp, <name>:<p> for each declared p, <name>:*
//
// A declared UDP port's dial row is <name>:<p>/udp: datagrams, not a connection. A TCP dial of
// it, like a datagram to a port declared TCP or HTTP, is no row's spelling and so falls to
// <name>:*: one port number carries one transport. Declared ports ascend. It has SurfaceLen(len(s.Ports)) rows, whatever the issuer: only a row's
// outcome and reason depend on it.
func DialSurface(s portspec.PortSet, issuer workloadidentity.Issuer) []Dial {
	rows := surfaceRows(s, issuer)
	out := make([]Dial, len(rows))
	for i, r := range rows {
		out[i] = r.Dial
	}
	return out
}

// DialPorts are the ports a connection to the service's address must be taken by the mesh on for
// its dial surface to hold: the port of each row that dials one over TCP (http://, https://,
// :18081, :18082 and each declared TCP or HTTP port; not the Host rows, which ride on a
// connection to one of these, nor <name>:*, nor the UDP rows: UDPDialPorts) unless its outcome
// is Refused. So 18081 (the Host decides) and 80 (reached, or
// answered 421 by the mesh) always; 443 and 18082 when they reach a port; every declared port.
// Ascending, each once. Capture (internal/capture) redirects exactly these on the service's VIP.
// Without an issuer the raw-TCP rows are refused, so their ports are not among these.
func DialPorts(s portspec.PortSet, issuer workloadidentity.Issuer) []int32 {
	key := dialPortsKey(s, issuer)
	dialPortsMemo.Lock()
	ports, ok := dialPortsMemo.byKey[string(key)]
	dialPortsMemo.Unlock()
	if ok {
		return slices.Clone(ports)
	}
	ports = dialPorts(s, issuer)
	dialPortsMemo.Lock()
	if len(dialPortsMemo.byKey) >= maxDialPortsMemo {
		clear(dialPortsMemo.byKey)
	}
	dialPortsMemo.byKey[string(key)] = ports
	dialPortsMemo.Unlock()
	return slices.Clone(ports)
}

// dialPorts is DialPorts, worked out.
func dialPorts(s portspec.PortSet, issuer workloadidentity.Issuer) []int32 {
	var ports []int32
	for _, r := range surfaceRows(s, issuer) {
		if r.dialed != 0 && !r.udp && r.Outcome != Refused {
			ports = append(ports, r.dialed)
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// UDPDialPorts are the ports datagrams to the service's address must be taken by the mesh on for
// its dial surface to hold: the port of each UDP row that is not refused (18082 when the primary
// is UDP, and each declared UDP port). Ascending, each once. No identity issuer changes them:
// the mesh carries UDP as plaintext. Capture of UDP (the data plane's) is to redirect exactly
// these on the service's VIP.
func UDPDialPorts(s portspec.PortSet) []int32 {
	var ports []int32
	for _, r := range surfaceRows(s, workloadidentity.SPIRE) {
		if r.udp && r.Outcome != Refused {
			ports = append(ports, r.dialed)
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// ConnectionAddress is the Address of the surface's row for a connection (udp false) or for
// datagrams (udp true) to port of the service whose ports are s: <name>:<port> (<name>:<port>/udp)
// when a row names that port in that transport, else <name>:*. Tools that answer one dial (kubectl
// aether dial) find its row by it, so they read the surface's words.
func ConnectionAddress(s portspec.PortSet, port int32, udp bool) string {
	p, declared := s.Lookup(port)
	switch {
	case udp && (port == meshv1alpha1.MeshTCPPort || declared && p.IsUDP()):
		return hostPort(NamePlaceholder, port) + UDPSuffix
	case !udp && (port == meshv1alpha1.MeshHTTPPort || port == meshv1alpha1.MeshTCPPort || declared && !p.IsUDP()):
		return hostPort(NamePlaceholder, port)
	}
	return NamePlaceholder + ":" + AnyOtherPort
}

// dialPortsMemo holds DialPorts' answer for each port set and issuer it was asked about. The node
// agent asks for every service's on every sync of every pod's capture, and a mesh's services
// share a few shapes of port set: the surface is worked out once per shape. At most
// maxDialPortsMemo shapes are kept; beyond, the memory starts again.
var dialPortsMemo = struct {
	sync.Mutex
	byKey map[string][]int32
}{byKey: map[string][]int32{}}

const maxDialPortsMemo = 4096

// dialPortsKey spells everything DialPorts reads: the issuer, the primary port and each port's
// number, protocol and app protocol.
func dialPortsKey(s portspec.PortSet, issuer workloadidentity.Issuer) []byte {
	key := make([]byte, 0, 16+16*len(s.Ports))
	key = append(key, issuer...)
	key = strconv.AppendInt(append(key, ' '), int64(s.Primary), 10)
	for _, p := range s.Ports {
		key = strconv.AppendInt(append(key, ' '), int64(p.Port), 10)
		key = append(append(append(append(key, '/'), p.Protocol...), '/'), p.AppProtocol...)
	}
	return key
}

// surfaceRow is a row of the surface and the port it dials: 0 for a Host row (an HTTP request on
// a connection some other row made) and for <name>:* (no one port). udp marks a row of UDP
// datagrams, whose port TCP capture leaves alone.
type surfaceRow struct {
	Dial
	dialed int32
	udp    bool
}

// surfaceRows are DialSurface's rows, each with the port it dials.
func surfaceRows(s portspec.PortSet, issuer workloadidentity.Issuer) []surfaceRow {
	const name = NamePlaceholder
	rows := make([]surfaceRow, 0, SurfaceLen(len(s.Ports)))
	add := func(address string, dialed int32, r Result) {
		r = refusedWithoutIdentity(r, issuer)
		rows = append(rows, surfaceRow{Dial: Dial{Address: address, Result: r}, dialed: dialed})
	}

	add(httpScheme+name+"/", HTTPPort, answerHTTP(s, authority{host: name, portless: true}))
	add(hostPort(name, meshv1alpha1.MeshHTTPPort), meshv1alpha1.MeshHTTPPort, Result{Protocol: meshv1alpha1.ProtocolHTTP, Outcome: HostDecides,
		Reason: "the mesh's HTTP proxy port, not a port of the service: the port in each request's Host header decides, as the Host rows say"})

	add(HostRowPrefix+name, 0, answerHTTP(s, authority{host: name, portless: true}))
	for _, p := range s.Ports {
		add(HostRowPrefix+hostPort(name, p.Port), 0, answerHTTP(s, authority{host: name, port: p.Port}))
	}
	for _, port := range []int32{meshv1alpha1.MeshHTTPPort, meshv1alpha1.MeshTCPPort} {
		add(HostRowPrefix+hostPort(name, port), 0, answerHTTP(s, authority{host: name, port: port}))
	}
	add(HostRowPrefix+name+":"+AnyOtherPort, 0, misdirected(s, name, PortNotDeclared, "the port is not one the service declares"))

	add(httpsScheme+name+"/", HTTPSPort, dialHTTPS(s))
	add(hostPort(name, meshv1alpha1.MeshTCPPort), meshv1alpha1.MeshTCPPort, dialMeshTCP(s))
	addUDP := func(address string, dialed int32, r Result) {
		rows = append(rows, surfaceRow{Dial: Dial{Address: address + UDPSuffix, Result: r}, dialed: dialed, udp: true})
	}
	addUDP(hostPort(name, meshv1alpha1.MeshTCPPort), meshv1alpha1.MeshTCPPort, dialMeshUDP(s))
	for _, p := range s.Ports {
		r := Result{Port: p.Port, Protocol: p.Protocol, Outcome: Reaches, Reason: fmt.Sprintf("port %d is declared %s", p.Port, p.Protocol)}
		if p.Protocol.IsUDP() {
			r.Reason += ": plaintext datagrams, never a TCP connection"
			addUDP(hostPort(name, p.Port), p.Port, r)
			continue
		}
		add(hostPort(name, p.Port), p.Port, r)
	}
	add(name+":"+AnyOtherPort, 0, Result{Outcome: Refused,
		Reason: "nothing claims a port the service does not declare in the dial's transport: the connection is refused " +
			"(a TCP connection never reaches a port declared UDP, nor a datagram a port declared TCP or HTTP)"})
	return rows
}

// dialMeshUDP is <name>:18082/udp: the primary when it is UDP (DefaultUDPPort), as plaintext UDP.
func dialMeshUDP(s portspec.PortSet) Result {
	port, ok := DefaultUDPPort(s)
	if !ok {
		why := "the service declares no UDP port"
		if udp := udpPorts(s); len(udp) > 0 {
			why = fmt.Sprintf("send datagrams to a declared UDP port instead (%s)", listSpellings(udp))
		}
		problem := "the service has no primary port"
		if primary, declared := s.Lookup(s.Primary); declared {
			problem = fmt.Sprintf("the primary port %d is %s, not UDP", s.Primary, primary)
		}
		return Result{Protocol: meshv1alpha1.ProtocolUDP, Outcome: Refused,
			Reason: problem + ": :18082/udp reaches the primary only when it is declared udp; " + why}
	}
	return Result{Port: port, Protocol: meshv1alpha1.ProtocolUDP, Outcome: Reaches,
		Reason: fmt.Sprintf("the primary port %d is UDP: plaintext datagrams", port)}
}

// udpPorts are the service's declared UDP ports, ascending.
func udpPorts(s portspec.PortSet) []int32 {
	var out []int32
	for _, p := range s.Ports {
		if p.Protocol.IsUDP() {
			out = append(out, p.Port)
		}
	}
	return out
}

// listSpellings spells UDP ports as their rows do, at most maxSpelled of them: "<name>:5353/udp".
func listSpellings(ports []int32) string {
	words := make([]string, 0, maxSpelled+1)
	for _, p := range ports[:min(len(ports), maxSpelled)] {
		words = append(words, hostPort(NamePlaceholder, p)+UDPSuffix)
	}
	if more := len(ports) - maxSpelled; more > 0 {
		words = append(words, fmt.Sprintf("%d more", more))
	}
	return strings.Join(words, ", ")
}

// refusedWithoutIdentity is r, what a row reaches, in a mesh whose identities issuer issues. With
// an issuer, or for a row that is not raw TCP reaching a port, it is r. Without one, a raw-TCP
// row (https://, :18082, :<p> for a TCP port p) that would reach a port is refused: raw TCP rides
// mTLS between workload identities only, and the reason says what the row would reach, why it is
// refused and the fix (workloadidentity.NoIssuerTCP). A row refused already keeps its own reason, which
// comes first. The HTTP rows are left as they are: the workload requirements page promises mTLS
// on every hop and documents no plaintext fallback for HTTP either (issue 14 lets HTTP fall back
// only where the docs allow), so their answers stand and, without certificates, an HTTP hop fails
// closed in the proxy.
func refusedWithoutIdentity(r Result, issuer workloadidentity.Issuer) Result {
	if issuer.Issues() || r.Protocol != meshv1alpha1.ProtocolTCP || r.Outcome != Reaches {
		return r
	}
	return Result{Protocol: r.Protocol, Outcome: Refused,
		Reason: "no workload identity, so the connection is refused: " + r.Reason + "; " + workloadidentity.NoIssuerTCP}
}

// dialHTTPS is https://<name>/: port 443 when declared TCP, the application's own TLS.
func dialHTTPS(s portspec.PortSet) Result {
	switch p, declared := s.Lookup(HTTPSPort); {
	case !declared:
		return Result{Protocol: meshv1alpha1.ProtocolTCP, Outcome: Refused,
			Reason: "port 443 is not declared: https:// reaches port 443 only when it is declared tcp (TLS the application terminates)"}
	case p != meshv1alpha1.ProtocolTCP:
		return Result{Protocol: meshv1alpha1.ProtocolTCP, Outcome: Refused,
			Reason: fmt.Sprintf("port 443 is declared %s, not TCP: https:// is the application's own TLS, carried as TCP; declare 443=tcp", p)}
	}
	return Result{Port: HTTPSPort, Protocol: meshv1alpha1.ProtocolTCP, Outcome: Reaches,
		Reason: "port 443 is declared TCP: TLS the application terminates"}
}

// dialMeshTCP is <name>:18082: the default TCP port.
func dialMeshTCP(s portspec.PortSet) Result {
	port, ok := DefaultTCPPort(s)
	if !ok {
		return Result{Protocol: meshv1alpha1.ProtocolTCP, Outcome: Refused,
			Reason: "the service has no TCP port: :18082 reaches the default TCP port, and none is declared"}
	}
	why := fmt.Sprintf("port %d is the lowest TCP port (the primary is not TCP)", port)
	if port == s.Primary {
		why = fmt.Sprintf("the primary port %d is TCP", port)
	}
	return Result{Port: port, Protocol: meshv1alpha1.ProtocolTCP, Outcome: Reaches, Reason: "the default TCP port: " + why}
}

// DeclaredService is the service that upstream, one element of a pod's config.aether.io/upstreams
// as internal/portspec parsed it (<name> or <name>.<namespace>), names for a pod in
// callerNamespace. Of the names that reach a service from there (NamesFrom), those are the two a
// declaration can spell: <name>.<namespace>, and the bare <name> for the caller's own
// namespace's service, as it is when dialled. Compared case-insensitively, as a Host is. A
// declaration is looked up by it, not tried against every service: a node's pods may declare
// hundreds each, among thousands of services.
func DeclaredService(upstream, callerNamespace string) (service, namespace string) {
	upstream = strings.ToLower(upstream)
	if name, ns, qualified := strings.Cut(upstream, "."); qualified {
		return name, ns
	}
	return upstream, callerNamespace
}
