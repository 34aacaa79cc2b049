// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdswalk

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

// The traffic corpus: the shapes of client traffic the surface walk sends for every row of every
// dial surface, and what each shape gets on a row of each kind. The rows come from resolve (what
// status promises); what a shape gets there is written here, from the workload requirements page
// and Envoy's documented behaviour, and from nothing the builder or resolve computes.

// Shape is one kind of client traffic.
type Shape string

// The shapes of the corpus.
const (
	ShapeHTTP11 Shape = "HTTP/1.1"
	ShapeHTTP10 Shape = "HTTP/1.0"
	// ShapeH2C is cleartext HTTP/2 with prior knowledge (gRPC without TLS).
	ShapeH2C         Shape = "h2c"
	ShapeTLSSNIALPN  Shape = "TLS+SNI+ALPN"
	ShapeTLSSNI      Shape = "TLS+SNI"
	ShapeTLSALPN     Shape = "TLS+ALPN"
	ShapeTLS         Shape = "TLS"
	ShapeWebSocket   Shape = "WebSocket"
	ShapeLate        Shape = "late-first-byte"
	ShapeServerFirst Shape = "server-first"
)

// Corpus is every shape, in the order the walk sends them.
var Corpus = []Shape{ShapeHTTP11, ShapeHTTP10, ShapeH2C, ShapeTLSSNIALPN, ShapeTLSSNI, ShapeTLSALPN, ShapeTLS,
	ShapeWebSocket, ShapeLate, ShapeServerFirst}

// LateBy is when a late client sends its first bytes: a pooled HTTP client's first request comes
// whenever the application makes it, seconds after the pool connected.
const LateBy = 3 * time.Second

// SpeaksHTTP says the shape's client sends an HTTP request in cleartext.
func (s Shape) SpeaksHTTP() bool {
	return s == ShapeHTTP11 || s == ShapeHTTP10 || s == ShapeH2C || s == ShapeWebSocket
}

// ShapeConn is the connection of shape sh to where canonical (the row's own client) connects.
// An HTTP client sends the Host the row's client sends (name:port when that one sends bytes);
// a TLS client names the row's name and offers h2 and http/1.1, as browsers and gRPC do.
func ShapeConn(canonical xdssim.Conn, sh Shape, name string) xdssim.Conn {
	c := xdssim.Conn{Listener: canonical.Listener, DstIP: canonical.DstIP, DstPort: canonical.DstPort}
	host := name + ":" + strconv.Itoa(int(canonical.DstPort))
	if canonical.HTTP != nil {
		host = canonical.HTTP.Host
	}
	switch sh {
	case ShapeHTTP11:
		c.HTTP = &xdssim.Request{Host: host}
	case ShapeHTTP10:
		c.HTTP = &xdssim.Request{Host: host, HTTP10: true}
	case ShapeH2C:
		c.HTTP = &xdssim.Request{Host: host, HTTP2: true}
	case ShapeWebSocket:
		c.HTTP = &xdssim.Request{Host: host, Upgrade: "websocket", Headers: map[string]string{
			"sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
		}}
	case ShapeTLSSNIALPN, ShapeTLSSNI, ShapeTLSALPN, ShapeTLS:
		c.TLS = true
		if sh == ShapeTLSSNIALPN || sh == ShapeTLSSNI {
			c.SNI = name
		}
		if sh == ShapeTLSSNIALPN || sh == ShapeTLSALPN {
			c.ALPN = []string{"h2", "http/1.1"}
		}
	case ShapeLate:
		c = canonical
		c.FirstBytesAfter = LateBy
	case ShapeServerFirst:
		c.ServerFirst = true
	}
	return c
}

// RowKind is what a surface row promises, as Table reads it.
type RowKind string

// The kinds of row.
const (
	KindHTTPPort RowKind = "HTTP port" // reaches a port declared HTTP-class
	KindTCPPort  RowKind = "TCP port"  // reaches a port declared TCP
	KindRefusal  RowKind = "refusal"   // nothing claims it
	KindAnswer   RowKind = "answer"    // the mesh answers 421 (or 400) itself
)

// KindOf is the kind of row r is.
func KindOf(r resolve.Result) RowKind {
	switch r.Outcome {
	case resolve.Reaches:
		if r.Protocol.IsHTTP() {
			return KindHTTPPort
		}
		return KindTCPPort
	case resolve.Refused:
		return KindRefusal
	}
	return KindAnswer
}

// Class is a class of outcome Table names.
type Class string

const (
	// AsRow is what the row promises: its port in its protocol, its refusal, its answer (status,
	// x-aether-error and body).
	AsRow Class = "as the row says"
	// AsBytes is the row's port, the bytes carried as TCP: an HTTP client of a TCP port talks to
	// the application's TCP server, as it would without the mesh.
	AsBytes Class = "the row's port, carried as TCP"
	// Promptly is the row's port, without the listener filters holding the connection: a
	// server-first client (MySQL, SMTP) of a TCP port gets its greeting at once.
	Promptly Class = "the row's port, not held by the listener filters"
	// Refused is a connection refused (the passthrough to the selectorless VIP, which the
	// Kubernetes proxy rejects) or closed; never served.
	Refused Class = "refused"
	// RefusedOrNotDeclared is refused, or, once the mesh reads the request, 421 port-not-declared
	// (the workload page: a request for a port the service does not serve as HTTP is 421 with
	// an x-aether-error that says why).
	RefusedOrNotDeclared Class = "refused, or 421 port-not-declared"
	// NotHTTP is 421 port-not-http: HTTP to port 80 of a service that declares 80 as TCP is
	// http://<name>/, which the page answers 421.
	NotHTTP Class = "421 port-not-http"
	// AsRowOrAnswered is the row's outcome or a clear HTTP answer from the mesh (a 4xx), never
	// a reset: HTTP/1.0, which a proxy may serve or refuse.
	AsRowOrAnswered Class = "as the row says, or a 4xx answer"
	// RefusedOrAnswered is refused, or a clear 4xx answer.
	RefusedOrAnswered Class = "refused, or a 4xx answer"
	// Held is a connection the mesh keeps open, waiting for the request an HTTP server waits for
	// (a server-first client on an HTTP port gets what it gets from an HTTP server: nothing).
	Held Class = "held open, unanswered, as an HTTP server holds it"
)

// Table is what each shape gets on a row of each kind, from the workload requirements page
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
var Table = map[RowKind]map[Shape]Class{
	KindHTTPPort: {
		ShapeHTTP11: AsRow, ShapeHTTP10: AsRowOrAnswered, ShapeH2C: AsRow, ShapeWebSocket: AsRow, ShapeLate: AsRow,
		ShapeTLSSNIALPN: Refused, ShapeTLSSNI: Refused, ShapeTLSALPN: Refused, ShapeTLS: Refused,
		ShapeServerFirst: Held,
	},
	KindTCPPort: {
		ShapeHTTP11: AsBytes, ShapeHTTP10: AsBytes, ShapeH2C: AsBytes, ShapeWebSocket: AsBytes, ShapeLate: AsRow,
		ShapeTLSSNIALPN: AsRow, ShapeTLSSNI: AsRow, ShapeTLSALPN: AsRow, ShapeTLS: AsRow,
		ShapeServerFirst: Promptly,
	},
	KindRefusal: {
		ShapeHTTP11: RefusedOrNotDeclared, ShapeHTTP10: RefusedOrAnswered, ShapeH2C: RefusedOrNotDeclared,
		ShapeWebSocket: RefusedOrNotDeclared, ShapeLate: Refused,
		ShapeTLSSNIALPN: Refused, ShapeTLSSNI: Refused, ShapeTLSALPN: Refused, ShapeTLS: Refused,
		ShapeServerFirst: Refused,
	},
	KindAnswer: {
		ShapeHTTP11: AsRow, ShapeHTTP10: AsRowOrAnswered, ShapeH2C: AsRow, ShapeWebSocket: AsRow, ShapeLate: AsRow,
		ShapeTLSSNIALPN: Refused, ShapeTLSSNI: Refused, ShapeTLSALPN: Refused, ShapeTLS: Refused,
		ShapeServerFirst: Held,
	},
}

// Expectation is what one shape should get on one row.
type Expectation struct {
	Class Class
	Kind  RowKind
	Shape Shape
	// MayWait says a server-first client may be held for the listener filters' timeout: the
	// port is shared (SharedPorts).
	MayWait bool
}

// Expected is Table's entry for sh on row, dialled on port (shared or not). HTTP to port 80
// of a TCP row is the page's http://<name>/ of a service whose 80 is TCP: 421 port-not-http.
func Expected(row resolve.Dial, sh Shape, port uint16, shared bool) Expectation {
	kind := KindOf(row.Result)
	e := Expectation{Class: Table[kind][sh], Kind: kind, Shape: sh, MayWait: shared}
	if kind == KindTCPPort && int32(port) == resolve.HTTPPort && sh.SpeaksHTTP() {
		e.Class = NotHTTP
	}
	return e
}

func (e Expectation) String() string {
	s := fmt.Sprintf("%s (%s row)", e.Class, e.Kind)
	if e.Class == Promptly && e.MayWait {
		s += ", held up to the timeout on this shared port"
	}
	return s
}

// Reaches says the connection goes to the row's port.
func (e Expectation) Reaches() bool {
	switch e.Class {
	case AsBytes, Promptly:
		return true
	case AsRow:
		return e.Kind == KindHTTPPort || e.Kind == KindTCPPort
	}
	return false
}

// Protocol is how the connection reaches the row's port.
func (e Expectation) Protocol(r resolve.Result) xdssim.Protocol {
	if e.Class == AsRow && r.Protocol.IsHTTP() {
		return xdssim.HTTP
	}
	return xdssim.TCP
}

// Check says how the simulator's outcome out differs from e; row is the row's promise, fqdn the service's mesh name.
func (e Expectation) Check(out xdssim.Outcome, row resolve.Result, fqdn string) error {
	switch e.Class {
	case AsRow:
		return xdssim.Agrees(out, row, fqdn)
	case AsBytes:
		return xdssim.Agrees(out, resolve.Result{Outcome: resolve.Reaches, Port: row.Port, Protocol: meshv1alpha1.ProtocolTCP}, fqdn)
	case Promptly:
		if err := xdssim.Agrees(out, row, fqdn); err != nil {
			return err
		}
		if out.FiltersWaited > 0 && !e.MayWait {
			return fmt.Errorf("the listener filters hold the connection %s before it is forwarded: %s", out.FiltersWaited, out)
		}
		return nil
	case Refused:
		return xdssim.Agrees(out, resolve.Result{Outcome: resolve.Refused}, fqdn)
	case RefusedOrNotDeclared:
		if answeredWith(out, http.StatusMisdirectedRequest, "port-not-declared") == nil {
			return nil
		}
		return xdssim.Agrees(out, resolve.Result{Outcome: resolve.Refused}, fqdn)
	case NotHTTP:
		return answeredWith(out, http.StatusMisdirectedRequest, "port-not-http")
	case AsRowOrAnswered:
		if answered4xx(out) {
			return nil
		}
		return xdssim.Agrees(out, row, fqdn)
	case RefusedOrAnswered:
		if answered4xx(out) {
			return nil
		}
		return xdssim.Agrees(out, resolve.Result{Outcome: resolve.Refused}, fqdn)
	case Held:
		if out.Verdict != xdssim.Stalled || out.Response != nil {
			return fmt.Errorf("the data plane gives %s", out)
		}
		return nil
	}
	return fmt.Errorf("the table has no entry for this shape on a %s row", e.Kind)
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

// SharedPorts are the destination ports where even a TCP port's server-first client may be held
// for the listener filters' timeout: Envoy skips a listener filter by destination port only
// (ListenerFilterChainMatchPredicate has no destination IP), and VIP ports overlap across
// services, so the inspectors run on a port wherever any destination on it needs them: a port
// some service declares HTTP-class (TLS must be told from HTTP there), port 80 (http:// is HTTP at
// every VIP, answered 421 when not served), and the ports where a TLSRoute reads the SNI (its own,
// and 18082, which reaches a routed default TCP port).
func SharedPorts(m model.Mesh) map[uint32]bool {
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
