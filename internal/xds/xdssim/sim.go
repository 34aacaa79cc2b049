// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdssim

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Sim reads one node's resources as that node's Envoy would.
type Sim struct {
	listeners map[string]*listenerv3.Listener
	clusters  map[string]*clusterv3.Cluster
	endpoints map[string]*endpointv3.ClusterLoadAssignment
	routes    map[string]*routev3.RouteConfiguration
	// fetch answers on-demand cluster discovery (ondemand.go); nil answers nothing.
	fetch Fetcher
}

// New indexes res by name. It keeps the first of two resources with one name (snapshot
// consistency is another gate's business).
func New(res xds.Resources) *Sim {
	s := &Sim{
		listeners: map[string]*listenerv3.Listener{},
		clusters:  map[string]*clusterv3.Cluster{},
		endpoints: map[string]*endpointv3.ClusterLoadAssignment{},
		routes:    map[string]*routev3.RouteConfiguration{},
	}
	for _, l := range res.Listeners {
		if _, dup := s.listeners[l.GetName()]; !dup {
			s.listeners[l.GetName()] = l
		}
	}
	for _, c := range res.Clusters {
		if _, dup := s.clusters[c.GetName()]; !dup {
			s.clusters[c.GetName()] = c
		}
	}
	for _, e := range res.Endpoints {
		if _, dup := s.endpoints[e.GetClusterName()]; !dup {
			s.endpoints[e.GetClusterName()] = e
		}
	}
	for _, r := range res.Routes {
		if _, dup := s.routes[r.GetName()]; !dup {
			s.routes[r.GetName()] = r
		}
	}
	return s
}

// Check runs every check Envoy applies when it accepts a listener or a route configuration, over
// all of them: nil when Envoy would accept everything.
func (s *Sim) Check() error {
	var errs []error
	for _, name := range sortedKeys(s.listeners) {
		errs = append(errs, Check(s.listeners[name]))
	}
	for _, name := range sortedKeys(s.routes) {
		errs = append(errs, CheckRoutes(s.routes[name]))
	}
	return errors.Join(errs...)
}

// Conn is a connection a client opens, captured by the listener named Listener (a pod's capture
// listener, or any listener the connection reaches).
type Conn struct {
	// Listener is the listener that accepts the connection.
	Listener string
	// DstIP and DstPort are what the client dialled (the original destination).
	DstIP   string
	DstPort uint32
	// SrcIP and SrcPort are the client's address. An empty SrcIP stands for an address no
	// configured source range holds (Envoy's stand-in for a peer without an IP, 255.255.255.255).
	SrcIP   string
	SrcPort uint32
	// TLS says the client starts with a TLS ClientHello carrying SNI and ALPN.
	TLS  bool
	SNI  string
	ALPN []string
	// HTTP is the request the client sends (inside TLS when TLS is set); nil for other bytes.
	HTTP *Request
	// ClientCertURI is the URI SAN of the certificate the client presents on a TLS connection
	// (a mesh peer's SPIFFE ID), what a network RBAC filter reads; "" when it presents none.
	ClientCertURI string
	// ServerFirst says the client sends nothing until the server speaks (MySQL, SMTP, ...).
	ServerFirst bool
	// FirstBytesAfter is how long after connecting the client sends its first bytes (0: at
	// once): a pooled HTTP client whose first request comes later, say. The listener filters
	// wait for them up to listener_filters_timeout.
	FirstBytesAfter time.Duration
}

// Request is an HTTP request.
type Request struct {
	// Host is the Host header (HTTP/1.1) or :authority (HTTP/2), as sent: host[:port].
	Host string
	// Path is the request target, query included; "/" when empty.
	Path string
	// Method is "GET" when empty.
	Method string
	// Headers are the other request headers (names case-insensitive).
	Headers map[string]string
	// HTTP2 says the client speaks HTTP/2 (with prior knowledge when cleartext).
	HTTP2 bool
	// HTTP10 says the client speaks HTTP/1.0 (its request line says so, as ab's does); HTTP2
	// wins when both are set.
	HTTP10 bool
	// Upgrade is the protocol the client asks to switch to ("websocket", "h2c"): over HTTP/1.x
	// the Upgrade header (with Connection: upgrade); over HTTP/2 an extended CONNECT (RFC 8441)
	// whose :protocol it is. "" for a plain request.
	Upgrade string
	// ClientCertURI is the URI SAN of the certificate the client presented on a TLS connection
	// (a mesh peer's SPIFFE ID); "" when it presented none.
	ClientCertURI string
}

func (r *Request) path() string {
	if r.Path == "" {
		return "/"
	}
	return r.Path
}

func (r *Request) method() string {
	if r.Method == "" {
		return "GET"
	}
	return r.Method
}

// Verdict is what the client sees.
type Verdict string

const (
	// Forwarded means the connection or request goes to the receiving endpoints of Targets.
	Forwarded Verdict = "Forwarded"
	// Passthrough means it goes, untouched, to the original destination (an ORIGINAL_DST cluster).
	Passthrough Verdict = "Passthrough"
	// Answered means Envoy answered the HTTP request itself: Response. Err is nil when the
	// configuration asked for the answer (direct_response, redirect) and says why otherwise.
	Answered Verdict = "Answered"
	// Closed means Envoy closed the connection, or never accepted it: Err says why.
	Closed Verdict = "Closed"
	// Stalled means Envoy waits for bytes a server-first client never sends: forever in the
	// listener filters (listener_filters_timeout 0), or in the HTTP connection manager until an
	// idle timeout closes the connection.
	Stalled Verdict = "Stalled"
	// Unmodelled means the path uses what this simulator does not model: Err (ErrUnsupported or
	// ErrHandoff) names it.
	Unmodelled Verdict = "Unmodelled"
)

// Protocol is what the matched chain's terminal filter does with the bytes.
type Protocol string

const (
	// TCP is tcp_proxy: the bytes are forwarded as they are.
	TCP Protocol = "TCP"
	// HTTP is the HTTP connection manager: requests are routed.
	HTTP Protocol = "HTTP"
)

// The reasons a connection does not reach an upstream; Outcome.Err wraps one (errors.Is).
var (
	ErrNoListener        = errors.New("no such listener")
	ErrRejected          = errors.New("rejected: Envoy refuses this configuration, so it is never active")
	ErrNoChain           = errors.New("no filter chain matches and the listener has no default chain: Envoy closes the connection")
	ErrListenerFilters   = errors.New("the listener filters wait for bytes the client does not send")
	ErrAwaitsRequest     = errors.New("the HTTP connection manager waits for a request the server-first client never sends")
	ErrHandshake         = errors.New("the chain terminates TLS and the client does not speak TLS: the handshake fails")
	ErrPeerRefused       = errors.New("the chain's handshake refuses the client's certificate: its URI SAN matches none of the chain's SAN matchers")
	ErrNoFilter          = errors.New("the chain has no network filter: Envoy closes the connection")
	ErrNotHTTP           = errors.New("the HTTP connection manager receives bytes that are not HTTP")
	ErrCodec             = errors.New("the HTTP connection manager's codec does not speak the client's HTTP version")
	ErrBadRequest        = errors.New("the request is malformed")
	ErrHTTP10            = errors.New("HTTP/1.0 and http_protocol_options.accept_http_10 is off: Envoy answers 426 Upgrade Required and closes")
	ErrUpgradeRejected   = errors.New("the upgrade is not allowed (the route's upgrade_configs entry for its type decides, else the HTTP connection manager's; with neither it is refused): Envoy answers 403")
	ErrConnectRejected   = errors.New("a CONNECT (a tunnel, not an extended CONNECT) to an HTTP connection manager with no CONNECT upgrade_configs entry and no route with a connect_matcher: Envoy refuses the upgrade, 403")
	ErrExtendedConnect   = errors.New("an extended CONNECT (RFC 8441) to an HTTP connection manager whose http2_protocol_options.allow_connect is off (it never advertised SETTINGS_ENABLE_CONNECT_PROTOCOL): the stream is reset")
	ErrNoRouteConfig     = errors.New("the route configuration is not among the resources")
	ErrNoVirtualHost     = errors.New("no virtual host matches the Host")
	ErrNoRoute           = errors.New("no route of the virtual host matches")
	ErrNoCluster         = errors.New("the cluster is not among the resources")
	ErrNoLoadAssignment  = errors.New("the EDS cluster's load assignment is not among the resources")
	ErrNoHealthyUpstream = errors.New("no endpoint receives traffic")
	ErrHandoff           = errors.New("hand-off: Envoy gives the connection to the listener bound to the original destination (use_original_dst), which the simulator does not follow")
	ErrUnsupported       = errors.New("the simulator does not model this")
	// ErrDenied (rbac.go) is an RBAC filter's denial.
)

// Outcome is where a connection lands, level by level.
type Outcome struct {
	// Listener is the listener that accepted the connection.
	Listener string
	// Destination is the address the listener matched on: the original destination when
	// original_dst restores it, else the listener's own address.
	Destination netip.AddrPort
	// Transport, ServerName and AppProtocols are what the listener filters detected.
	Transport    string
	ServerName   string
	AppProtocols []string
	// FiltersWaited is how long the listener filters held the connection before a chain was
	// chosen: 0 when nothing inspects it or its first bytes came at once, the client's delay when
	// they came within listener_filters_timeout, the timeout when it fired.
	FiltersWaited time.Duration
	// Chain is the matched filter chain's name; DefaultChain says it is the listener's default.
	Chain        string
	DefaultChain bool
	// ChainTLS is the chain's downstream TLS context when the chain terminates TLS.
	ChainTLS *TLS
	// Protocol is what the chain's terminal filter does: TCP (tcp_proxy) or HTTP (HCM).
	Protocol Protocol
	// RouteConfig, VirtualHost and Route say how an HTTP request was routed. Route is the
	// route's name, or "#<index>" in its virtual host when it has none.
	RouteConfig string
	VirtualHost string
	Route       string
	// Authority and Path are the request's :authority and :path as the connection manager routed
	// them: from an absolute-form request target (GET http://host:port/x) the URL's authority and
	// its origin-form path, which is what goes upstream.
	Authority string
	Path      string
	// Response is Envoy's own answer when Verdict is Answered.
	Response *Response
	// Targets are the clusters the connection or request goes to: one, or the weighted choices.
	Targets []Target
	// OnDemand are the clusters Envoy asked for on demand before the request or connection went
	// on (ondemand.go), in order; OnDemandWaited is how long it waited for answers that never
	// came (the discovery timeout each). An answered request waits one round trip, not counted.
	OnDemand       []string
	OnDemandWaited time.Duration
	// Verdict is what the client sees.
	Verdict Verdict
	// Err says why the connection reached no upstream and no configured answer; it wraps one of
	// the Err* values. It also names every broken weighted target.
	Err error
	// state is the connection's filter state (netns.go).
	state filterState
	// routed is how an HTTP request was routed (retry.go).
	routed *routed
}

// Response is an HTTP answer Envoy sends itself.
type Response struct {
	Status int
	// Headers are the response headers the configuration adds (names lower-case).
	Headers map[string][]string
	// Body is the configured body; empty for Envoy's own error answers (not modelled).
	Body string
	// Local says Envoy produced it (404 no route, 503 no upstream, 400), not the configuration.
	Local bool
}

// Header is the first value of the response header name.
func (r *Response) Header(name string) string {
	if r == nil || len(r.Headers[strings.ToLower(name)]) == 0 {
		return ""
	}
	return r.Headers[strings.ToLower(name)][0]
}

// Target is one cluster a connection or request goes to.
type Target struct {
	// Cluster is the cluster's name.
	Cluster string
	// Weight is its share among the targets: 1 for the only cluster, the configured weight of a
	// weighted cluster (0: never chosen).
	Weight uint32
	// Type is the cluster's discovery type: STATIC, STRICT_DNS, LOGICAL_DNS, EDS, ORIGINAL_DST.
	Type string
	// LoadAssignment names the membership: an EDS cluster's service name (else its name), or an
	// inline load assignment's cluster_name.
	LoadAssignment string
	// TLS is the upstream TLS context; nil for plaintext.
	TLS *TLS
	// UpstreamHTTP lists what the router may speak upstream (HTTP only): [h2], [http/1.1] or both.
	UpstreamHTTP []string
	// Upgrade is the upgrade the router asks of the upstream (HTTP only): the request's, as an
	// Upgrade header to HTTP/1.1, as an extended CONNECT (:protocol) to HTTP/2
	// (transformUpgradeRequestFromH1toH2); "" for a plain request.
	Upgrade string
	// Endpoints are the membership, each with its health and whether it receives traffic.
	Endpoints []Endpoint
	// Passthrough is the original destination an ORIGINAL_DST cluster connects to.
	Passthrough string
	// Netns is the network namespace the upstream connection leaves from: a path, or "" for
	// Envoy's own (the node's). Mark is its socket's mark (SO_MARK; 0 for none).
	Netns string
	Mark  uint32
	// Err says why this target reaches nothing.
	Err error
}

// Receiving are the endpoints that receive traffic.
func (t Target) Receiving() []Endpoint {
	var in []Endpoint
	for _, e := range t.Endpoints {
		if e.Receives {
			in = append(in, e)
		}
	}
	return in
}

// Endpoint is one member of a cluster.
type Endpoint struct {
	// Address is an IP or a host name, or "unix:<path>".
	Address string
	Port    uint32
	// Health is the EDS health status: UNKNOWN, HEALTHY, UNHEALTHY, DRAINING, TIMEOUT, DEGRADED.
	Health   string
	Priority uint32
	// Locality is region/zone/sub_zone.
	Locality string
	// Weight is the load-balancing weight (1 when unset).
	Weight uint32
	// Receives says Envoy's load balancer sends it traffic, given the health of every member.
	Receives bool
}

// TLS is a TLS context: an upstream one (what the ClientHello carries and how the peer is
// verified) or a chain's downstream one.
type TLS struct {
	// SNI is the server name the ClientHello carries (upstream only).
	SNI string
	// ALPN is what the ClientHello offers (upstream), or what the server accepts (downstream).
	ALPN []string
	// Certificates are the SDS names of the certificates presented ("inline" for an inline one).
	Certificates []string
	// TrustBundle is the SDS name of the validation context ("inline" for an inline one).
	TrustBundle string
	// SANs are the subject alternative names the peer's certificate must carry (any of them).
	SANs []SAN
	// RequireClientCertificate says a downstream context demands the client's certificate.
	RequireClientCertificate bool
}

// SAN is a subject-alternative-name matcher: Type (URI, DNS, EMAIL, IP_ADDRESS, or "" for any),
// Match (exact, prefix, suffix, contains, regex) and Value.
type SAN struct {
	Type, Match, Value string
}

// Dial opens c through its listener.
func (s *Sim) Dial(c Conn) Outcome {
	out := Outcome{Listener: c.Listener}
	l, ok := s.listeners[c.Listener]
	if !ok {
		return out.fail(Closed, fmt.Errorf("%w: %q", ErrNoListener, c.Listener))
	}
	dst, err := addrPort(c.DstIP, c.DstPort)
	if err != nil {
		return out.fail(Unmodelled, fmt.Errorf("%w: Conn.DstIP: %v", ErrUnsupported, err))
	}
	src, err := remoteAddr(c.SrcIP, c.SrcPort)
	if err != nil {
		return out.fail(Unmodelled, fmt.Errorf("%w: Conn.SrcIP: %v", ErrUnsupported, err))
	}
	s.accept(&out, l, c, localAddress(l, dst), src)
	return out
}

// Arrive is the destination's side of a mesh hop: a TLS connection carrying sni and alpn (what
// the source's upstream TLS context sends) arrives at the inbound listener named listener, on
// the listener's own port; req is the HTTP request it carries (nil for TCP). The destination IP
// is not known here: when a chain of the listener matches on destination IPs, Arrive says so
// (ErrUnsupported) and Dial, with the pod's IP, is the way.
func (s *Sim) Arrive(listener, sni string, alpn []string, req *Request) Outcome {
	caller := ""
	if req != nil {
		caller = req.ClientCertURI
	}
	return s.ArriveAs(caller, listener, sni, alpn, req)
}

// ArriveAs is Arrive from the peer whose certificate's URI SAN is caller (its SPIFFE ID): what
// the chains' RBAC filters read (rbac.go). The request, when there is one, carries it too.
func (s *Sim) ArriveAs(caller, listener, sni string, alpn []string, req *Request) Outcome {
	if req != nil {
		r := *req
		r.ClientCertURI = caller
		req = &r
	}
	out := Outcome{Listener: listener}
	l, ok := s.listeners[listener]
	if !ok {
		return out.fail(Closed, fmt.Errorf("%w: %q", ErrNoListener, listener))
	}
	local, err := listenerAddress(l)
	if err != nil {
		return out.fail(Unmodelled, fmt.Errorf("%w: listener %q: %v", ErrUnsupported, listener, err))
	}
	if local.Addr().IsUnspecified() && matchesDestinationIP(l) {
		return out.fail(Unmodelled, fmt.Errorf("%w: listener %q binds %s and its chains match on destination IPs: Dial it with the pod's IP",
			ErrUnsupported, listener, local))
	}
	c := Conn{Listener: listener, TLS: true, SNI: sni, ALPN: alpn, HTTP: req, ClientCertURI: caller}
	src, _ := remoteAddr("", 0)
	s.accept(&out, l, c, local, src)
	return out
}

// fail ends the walk with a verdict and its reason.
func (o Outcome) fail(v Verdict, err error) Outcome {
	o.Verdict, o.Err = v, err
	return o
}

// String spells the walk on one line, for test failures.
func (o Outcome) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", o.Listener, o.Destination)
	if o.Transport != "" {
		fmt.Fprintf(&b, " [%s sni=%q alpn=%v]", o.Transport, o.ServerName, o.AppProtocols)
	}
	if o.Chain != "" || o.DefaultChain {
		fmt.Fprintf(&b, " → chain %q", o.Chain)
		if o.DefaultChain {
			b.WriteString(" (default)")
		}
		fmt.Fprintf(&b, " %s", o.Protocol)
	}
	if o.RouteConfig != "" {
		fmt.Fprintf(&b, " → routes %q vhost %q route %q", o.RouteConfig, o.VirtualHost, o.Route)
	}
	for _, t := range o.Targets {
		fmt.Fprintf(&b, " → %s(w%d, %s, la %q", t.Cluster, t.Weight, t.Type, t.LoadAssignment)
		if t.TLS != nil {
			fmt.Fprintf(&b, ", sni %q alpn %v", t.TLS.SNI, t.TLS.ALPN)
		}
		for _, e := range t.Receiving() {
			fmt.Fprintf(&b, ", %s:%d", e.Address, e.Port)
		}
		if t.Passthrough != "" {
			fmt.Fprintf(&b, ", to %s", t.Passthrough)
		}
		b.WriteString(")")
	}
	if o.Response != nil {
		fmt.Fprintf(&b, " → %d %v %q", o.Response.Status, o.Response.Headers, o.Response.Body)
	}
	fmt.Fprintf(&b, ": %s", o.Verdict)
	if o.Err != nil {
		fmt.Fprintf(&b, " (%v)", o.Err)
	}
	return b.String()
}
