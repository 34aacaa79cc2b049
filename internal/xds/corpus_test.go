// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// The traffic corpus: the shapes of client traffic the surface walk sends for every row of every
// dial surface, and what each shape gets on a row of each kind. The rows come from resolve (what
// status promises); what a shape gets there is written here, from the workload requirements page
// and Envoy's documented behaviour, and from nothing the builder or resolve computes.

// shape is one kind of client traffic.
type shape string

const (
	shapeHTTP11 shape = "HTTP/1.1"
	shapeHTTP10 shape = "HTTP/1.0"
	// shapeH2C is cleartext HTTP/2 with prior knowledge (gRPC without TLS).
	shapeH2C         shape = "h2c"
	shapeTLSSNIALPN  shape = "TLS+SNI+ALPN"
	shapeTLSSNI      shape = "TLS+SNI"
	shapeTLSALPN     shape = "TLS+ALPN"
	shapeTLS         shape = "TLS"
	shapeWebSocket   shape = "WebSocket"
	shapeLate        shape = "late-first-byte"
	shapeServerFirst shape = "server-first"
)

// corpus is every shape, in the order the walk sends them.
var corpus = []shape{shapeHTTP11, shapeHTTP10, shapeH2C, shapeTLSSNIALPN, shapeTLSSNI, shapeTLSALPN, shapeTLS,
	shapeWebSocket, shapeLate, shapeServerFirst}

// lateBy is when a late client sends its first bytes: a pooled HTTP client's first request comes
// whenever the application makes it, seconds after the pool connected.
const lateBy = 3 * time.Second

// speaksHTTP says the shape's client sends an HTTP request in cleartext.
func (s shape) speaksHTTP() bool {
	return s == shapeHTTP11 || s == shapeHTTP10 || s == shapeH2C || s == shapeWebSocket
}

// shapeConn is the connection of shape sh to where canonical (the row's own client) connects.
// An HTTP client sends the Host the row's client sends (name:port when that one sends bytes);
// a TLS client names the row's name and offers h2 and http/1.1, as browsers and gRPC do.
func shapeConn(canonical xdssim.Conn, sh shape, name string) xdssim.Conn {
	c := xdssim.Conn{Listener: canonical.Listener, DstIP: canonical.DstIP, DstPort: canonical.DstPort}
	host := name + ":" + strconv.Itoa(int(canonical.DstPort))
	if canonical.HTTP != nil {
		host = canonical.HTTP.Host
	}
	switch sh {
	case shapeHTTP11:
		c.HTTP = &xdssim.Request{Host: host}
	case shapeHTTP10:
		c.HTTP = &xdssim.Request{Host: host, HTTP10: true}
	case shapeH2C:
		c.HTTP = &xdssim.Request{Host: host, HTTP2: true}
	case shapeWebSocket:
		c.HTTP = &xdssim.Request{Host: host, Upgrade: "websocket", Headers: map[string]string{
			"sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
		}}
	case shapeTLSSNIALPN, shapeTLSSNI, shapeTLSALPN, shapeTLS:
		c.TLS = true
		if sh == shapeTLSSNIALPN || sh == shapeTLSSNI {
			c.SNI = name
		}
		if sh == shapeTLSSNIALPN || sh == shapeTLSALPN {
			c.ALPN = []string{"h2", "http/1.1"}
		}
	case shapeLate:
		c = canonical
		c.FirstBytesAfter = lateBy
	case shapeServerFirst:
		c.ServerFirst = true
	}
	return c
}

// rowKind is what a surface row promises, as the table reads it.
type rowKind string

const (
	kindHTTPPort rowKind = "HTTP port" // reaches a port declared HTTP-class
	kindTCPPort  rowKind = "TCP port"  // reaches a port declared TCP
	kindRefusal  rowKind = "refusal"   // nothing claims it
	kindAnswer   rowKind = "answer"    // the mesh answers 421 (or 400) itself
)

func kindOf(r resolve.Result) rowKind {
	switch r.Outcome {
	case resolve.Reaches:
		if r.Protocol.IsHTTP() {
			return kindHTTPPort
		}
		return kindTCPPort
	case resolve.Refused:
		return kindRefusal
	}
	return kindAnswer
}

// outcome is a class of outcome the table names.
type outcome string

const (
	// asRow is what the row promises: its port in its protocol, its refusal, its answer (status,
	// x-aether-error and body).
	asRow outcome = "as the row says"
	// asBytes is the row's port, the bytes carried as TCP: an HTTP client of a TCP port talks to
	// the application's TCP server, as it would without the mesh.
	asBytes outcome = "the row's port, carried as TCP"
	// promptly is the row's port, without the listener filters holding the connection: a
	// server-first client (MySQL, SMTP) of a TCP port gets its greeting at once.
	promptly outcome = "the row's port, not held by the listener filters"
	// refused: the connection is refused (the passthrough to the selectorless VIP, which the
	// Kubernetes proxy rejects) or closed; never served.
	refused outcome = "refused"
	// refusedOrNotDeclared: refused, or, once the mesh reads the request, 421 port-not-declared
	// (the workload page: a request for a port the service does not serve as HTTP is 421 with
	// an x-aether-error that says why).
	refusedOrNotDeclared outcome = "refused, or 421 port-not-declared"
	// notHTTP is 421 port-not-http: HTTP to port 80 of a service that declares 80 as TCP is
	// http://<name>/, which the page answers 421.
	notHTTP outcome = "421 port-not-http"
	// asRowOrAnswered is the row's outcome or a clear HTTP answer from the mesh (a 4xx), never
	// a reset: HTTP/1.0, which a proxy may serve or refuse.
	asRowOrAnswered outcome = "as the row says, or a 4xx answer"
	// refusedOrAnswered: refused, or a clear 4xx answer.
	refusedOrAnswered outcome = "refused, or a 4xx answer"
	// held is a connection the mesh keeps open, waiting for the request an HTTP server waits for
	// (a server-first client on an HTTP port gets what it gets from an HTTP server: nothing).
	held outcome = "held open, unanswered, as an HTTP server holds it"
)

// table is what each shape gets on a row of each kind, from the workload requirements page
// ("Calling other services", "How a spelling resolves") and Envoy's documented behaviour:
//
//   - an HTTP port is cleartext HTTP whatever the version (h2c with prior knowledge, WebSocket's
//     Upgrade, which the page's "your application speaks what it always did" leaves to the
//     application) and whenever the first request comes; TLS to it is not HTTP and is not
//     served; a client that waits for the server waits, as with any HTTP server;
//   - a TCP port carries every byte to the application's port (HTTP, TLS, anything) and a
//     server-first client is not held: the mesh knows the port's protocol;
//   - a refusal refuses everything; an HTTP request may instead be told why (421
//     port-not-declared);
//   - an answer (421, 400) answers every HTTP request, late or not; TLS is refused.
var table = map[rowKind]map[shape]outcome{
	kindHTTPPort: {
		shapeHTTP11: asRow, shapeHTTP10: asRowOrAnswered, shapeH2C: asRow, shapeWebSocket: asRow, shapeLate: asRow,
		shapeTLSSNIALPN: refused, shapeTLSSNI: refused, shapeTLSALPN: refused, shapeTLS: refused,
		shapeServerFirst: held,
	},
	kindTCPPort: {
		shapeHTTP11: asBytes, shapeHTTP10: asBytes, shapeH2C: asBytes, shapeWebSocket: asBytes, shapeLate: asRow,
		shapeTLSSNIALPN: asRow, shapeTLSSNI: asRow, shapeTLSALPN: asRow, shapeTLS: asRow,
		shapeServerFirst: promptly,
	},
	kindRefusal: {
		shapeHTTP11: refusedOrNotDeclared, shapeHTTP10: refusedOrAnswered, shapeH2C: refusedOrNotDeclared,
		shapeWebSocket: refusedOrNotDeclared, shapeLate: refused,
		shapeTLSSNIALPN: refused, shapeTLSSNI: refused, shapeTLSALPN: refused, shapeTLS: refused,
		shapeServerFirst: refused,
	},
	kindAnswer: {
		shapeHTTP11: asRow, shapeHTTP10: asRowOrAnswered, shapeH2C: asRow, shapeWebSocket: asRow, shapeLate: asRow,
		shapeTLSSNIALPN: refused, shapeTLSSNI: refused, shapeTLSALPN: refused, shapeTLS: refused,
		shapeServerFirst: held,
	},
}

// expectation is what one shape should get on one row.
type expectation struct {
	outcome outcome
	kind    rowKind
	// mayWait says a server-first client may be held for the listener filters' timeout: the
	// port is shared (sharedPorts).
	mayWait bool
}

// expected is the table's entry for sh on row, dialled on port (shared or not). HTTP to port 80
// of a TCP row is the page's http://<name>/ of a service whose 80 is TCP: 421 port-not-http.
func expected(row resolve.Dial, sh shape, port uint16, shared bool) expectation {
	kind := kindOf(row.Result)
	e := expectation{outcome: table[kind][sh], kind: kind, mayWait: shared}
	if kind == kindTCPPort && int32(port) == resolve.HTTPPort && sh.speaksHTTP() {
		e.outcome = notHTTP
	}
	return e
}

func (e expectation) String() string {
	s := fmt.Sprintf("%s (%s row)", e.outcome, e.kind)
	if e.outcome == promptly && e.mayWait {
		s += ", held up to the timeout on this shared port"
	}
	return s
}

// reaches says the connection goes to the row's port.
func (e expectation) reaches() bool {
	switch e.outcome {
	case asBytes, promptly:
		return true
	case asRow:
		return e.kind == kindHTTPPort || e.kind == kindTCPPort
	}
	return false
}

// protocol is how the connection reaches the row's port.
func (e expectation) protocol(r resolve.Result) xdssim.Protocol {
	if e.outcome == asRow && r.Protocol.IsHTTP() {
		return xdssim.HTTP
	}
	return xdssim.TCP
}

// check says how out differs from e; row is the row's promise, fqdn the service's mesh name.
func (e expectation) check(out xdssim.Outcome, row resolve.Result, fqdn string) error {
	switch e.outcome {
	case asRow:
		return xdssim.Agrees(out, row, fqdn)
	case asBytes:
		return xdssim.Agrees(out, resolve.Result{Outcome: resolve.Reaches, Port: row.Port, Protocol: meshv1alpha1.ProtocolTCP}, fqdn)
	case promptly:
		if err := xdssim.Agrees(out, row, fqdn); err != nil {
			return err
		}
		if out.FiltersWaited > 0 && !e.mayWait {
			return fmt.Errorf("the listener filters hold the connection %s before it is forwarded: %s", out.FiltersWaited, out)
		}
		return nil
	case refused:
		return xdssim.Agrees(out, resolve.Result{Outcome: resolve.Refused}, fqdn)
	case refusedOrNotDeclared:
		if answeredWith(out, http.StatusMisdirectedRequest, "port-not-declared") == nil {
			return nil
		}
		return xdssim.Agrees(out, resolve.Result{Outcome: resolve.Refused}, fqdn)
	case notHTTP:
		return answeredWith(out, http.StatusMisdirectedRequest, "port-not-http")
	case asRowOrAnswered:
		if answered4xx(out) {
			return nil
		}
		return xdssim.Agrees(out, row, fqdn)
	case refusedOrAnswered:
		if answered4xx(out) {
			return nil
		}
		return xdssim.Agrees(out, resolve.Result{Outcome: resolve.Refused}, fqdn)
	case held:
		if out.Verdict != xdssim.Stalled || out.Response != nil {
			return fmt.Errorf("the data plane gives %s", out)
		}
		return nil
	}
	return fmt.Errorf("the table has no entry for this shape on a %s row", e.kind)
}

// answeredWith says whether out is the mesh's own answer status with x-aether-error code.
func answeredWith(out xdssim.Outcome, status int, code string) error {
	r := out.Response
	if out.Verdict != xdssim.Answered || r == nil || r.Status != status || r.Header(resolve.ErrorHeader) != code {
		return fmt.Errorf("want %d %s: %s; the data plane gives %s", status, resolve.ErrorHeader, code, out)
	}
	return nil
}

// answered4xx says out is an HTTP answer of the 4xx class: the client is told, not reset.
func answered4xx(out xdssim.Outcome) bool {
	return out.Verdict == xdssim.Answered && out.Response != nil && out.Response.Status >= 400 && out.Response.Status < 500
}

// sharedPorts are the destination ports where even a TCP port's server-first client may be held
// for the listener filters' timeout: Envoy skips a listener filter by destination port only
// (ListenerFilterChainMatchPredicate has no destination IP), and VIP ports overlap across
// services, so the inspectors run on a port wherever any destination on it needs them: a port
// some service declares HTTP-class (TLS must be told from HTTP there), port 80 (http:// is HTTP at
// every VIP, answered 421 when not served), and the ports where a TLSRoute reads the SNI (its own,
// and 18082, which reaches a routed default TCP port).
func sharedPorts(m model.Mesh) map[uint32]bool {
	shared := map[uint32]bool{uint32(resolve.HTTPPort): true}
	for _, s := range m.Services {
		for _, p := range s.Ports {
			if p.Protocol.IsHTTP() {
				shared[uint32(p.Number)] = true
			}
		}
	}
	for _, r := range m.Routes {
		if r.Kind != model.TLSRoute {
			continue
		}
		shared[uint32(meshv1alpha1.MeshTCPPort)] = true
		for _, p := range r.Parents {
			shared[uint32(p.Port)] = true
		}
	}
	return shared
}

// The choice filter_disabled forces, shown on two meshes: a server-first client of a TCP port is
// not held where the port is TCP on every VIP (mixed-http-primary's 9000), and is held for the
// timeout where another VIP serves HTTP on the same port (shared-port's 9000, catalog's), whose
// late HTTP client is served by catalog's own chain all the same.
func TestServerFirstWaitsOnlyOnSharedPorts(t *testing.T) {
	const paymentsVIP, catalogVIP = "10.96.0.10", "10.96.0.11"
	capture := xds.CaptureListener(xds.PodKey("web", "frontend-0"))
	for _, tc := range []struct {
		scenario string
		conn     xdssim.Conn
		verdict  xdssim.Verdict
		waited   time.Duration
	}{
		{"mixed-http-primary", xdssim.Conn{Listener: capture, DstIP: paymentsVIP, DstPort: 9000, ServerFirst: true}, xdssim.Forwarded, 0},
		{"shared-port", xdssim.Conn{Listener: capture, DstIP: paymentsVIP, DstPort: 9000, ServerFirst: true}, xdssim.Forwarded, time.Second},
		{"shared-port", xdssim.Conn{Listener: capture, DstIP: catalogVIP, DstPort: 9000, FirstBytesAfter: lateBy,
			HTTP: &xdssim.Request{Host: "catalog.shop.aether.internal:9000"}}, xdssim.Forwarded, time.Second},
	} {
		res, err := xds.Build(xdstest.All()[tc.scenario])
		if err != nil {
			t.Fatal(err)
		}
		out := xdssim.New(res).Dial(tc.conn)
		if out.Verdict != tc.verdict || out.FiltersWaited != tc.waited {
			t.Errorf("%s: %s: %s after %s, want %s after %s: %s", tc.scenario, describe(tc.conn), out.Verdict, out.FiltersWaited,
				tc.verdict, tc.waited, out)
		}
	}
}
