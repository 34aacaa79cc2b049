// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/capture/apply/nstest"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
	"github.com/aether-mesh/aether-operator/internal/xds/xdswalk"
)

// A live client of the corpus: it opens, from a pod's namespace (where the pod's capture rules
// apply), the connection an xdssim.Conn describes, sends its shape's bytes as a real client does,
// and reads what comes back into xdswalk.Seen. The servers say who they are (hack/testapp: a
// greeting naming the address a TCP connection reached, headers naming the address and protocol
// an HTTP request reached), so what is reached is observed, not inferred; an HTTP answer without
// them is the mesh's own.

// The bytes a client sends where the shape says nothing of them: what a client of a TCP port
// sends (the late client of a TCP row), and what goes over an upgraded WebSocket stream.
const (
	probe   = "aether-live-probe\n"
	wsProbe = "aether-websocket-probe\n"
)

// client sends the corpus from one pod's namespace.
type client struct {
	ns *nstest.NS
	// podOf names the pod an address belongs to.
	podOf func(address string) string
	// window is how long a server-first client waits for the first byte before it calls the
	// connection held (longer than the capture listener's listener filters timeout, after which
	// a TCP port's connection goes on).
	window time.Duration
	// deadline is how long the whole exchange may take before the client gives up; 15 s if 0.
	deadline time.Duration
}

// send opens conn as shape sh and says what the client saw.
func (c client) send(conn xdssim.Conn, sh xdswalk.Shape) xdswalk.Seen {
	address := net.JoinHostPort(conn.DstIP, strconv.Itoa(int(conn.DstPort)))
	var raw net.Conn
	var err error
	dialer := net.Dialer{Timeout: 5 * time.Second}
	if doErr := c.ns.Do(func() { raw, err = dialer.Dial("tcp", address) }); doErr != nil {
		return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: "entering the namespace: " + doErr.Error()}
	}
	if err != nil {
		return refusal("connect: ", err)
	}
	connected := time.Now()
	rec := &recorder{Conn: raw}
	defer rec.Close()
	_ = rec.SetDeadline(time.Now().Add(cmp.Or(c.deadline, 15*time.Second) + conn.FirstBytesAfter))
	if conn.FirstBytesAfter > 0 {
		// The shape itself: a client whose first bytes come this late (a pooled connection's
		// first request), not a wait for something to happen.
		time.Sleep(conn.FirstBytesAfter)
	}
	switch {
	case conn.ServerFirst:
		_ = rec.SetReadDeadline(time.Now().Add(c.window))
		s := c.read(rec, bufio.NewReader(rec), "")
		if s.Kind == xdswalk.SawApp {
			s.Waited = time.Since(connected)
		}
		return s
	case conn.TLS:
		return c.handshake(rec, conn)
	case conn.HTTP != nil && conn.HTTP.HTTP2:
		return c.h2c(rec, conn.HTTP)
	}
	request := []byte(probe)
	if conn.HTTP != nil {
		request = http1Request(conn.HTTP)
	}
	if _, err := rec.Write(request); err != nil {
		return refusal("writing the request: ", err)
	}
	return c.read(rec, bufio.NewReader(rec), string(request))
}

// http1Request is req's bytes (its method and path; GET / when unset) in HTTP/1.1, or HTTP/1.0 (ab's request: no Connection header),
// with WebSocket's upgrade headers when it asks for one.
func http1Request(req *xdssim.Request) []byte {
	var b bytes.Buffer
	version := "HTTP/1.1"
	if req.HTTP10 {
		version = "HTTP/1.0"
	}
	method, path := cmp.Or(req.Method, "GET"), cmp.Or(req.Path, "/")
	fmt.Fprintf(&b, "%s %s %s\r\nHost: %s\r\n", method, path, version, req.Host)
	if req.Upgrade != "" {
		fmt.Fprintf(&b, "Connection: Upgrade\r\nUpgrade: %s\r\n", req.Upgrade)
	} else if !req.HTTP10 {
		b.WriteString("Connection: close\r\n")
	}
	for name, value := range req.Headers {
		fmt.Fprintf(&b, "%s: %s\r\n", name, value)
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// read reads what comes back on an HTTP/1 or raw connection: a Hello server's greeting (a TCP
// port reached: the echo of sent must follow), an HTTP response (the application's, or the
// mesh's answer), nothing (held, once the read deadline passes), or the connection's end.
func (c client) read(rec *recorder, r *bufio.Reader, sent string) xdswalk.Seen {
	first, err := r.Peek(len(testapp.HelloPrefix))
	switch {
	case len(first) == 0 && isTimeout(err):
		return xdswalk.Seen{Kind: xdswalk.SawNothing, Detail: "nothing came back"}
	case len(first) == 0:
		return refusal("", err)
	case bytes.HasPrefix(first, []byte(testapp.HelloPrefix)):
		return c.greeted(r, sent)
	case bytes.HasPrefix(first, []byte("HTTP/")):
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: fmt.Sprintf("an HTTP response that does not parse: %v: %q", err, rec.first())}
		}
		return c.response(resp, func() xdswalk.Seen { return c.upgraded(rec, r) })
	}
	return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: fmt.Sprintf("bytes of no known shape: %q (%v)", rec.first(), err)}
}

// greeted reads a Hello server's greeting and the echo of sent after it.
func (c client) greeted(r *bufio.Reader, sent string) xdswalk.Seen {
	line, err := r.ReadString('\n')
	if err != nil {
		return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: fmt.Sprintf("a greeting cut short: %q: %v", line, err)}
	}
	s := c.reached(strings.TrimSpace(strings.TrimPrefix(line, testapp.HelloPrefix)), xdssim.TCP)
	if sent != "" {
		echo := make([]byte, len(sent))
		if _, err := io.ReadFull(r, echo); err != nil || string(echo) != sent {
			s.Detail += fmt.Sprintf("; the echo is %q (%v)", echo, err)
		}
	}
	return s
}

// reached is the application at address (host:port), in protocol.
func (c client) reached(address string, protocol xdssim.Protocol) xdswalk.Seen {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: fmt.Sprintf("the application names no address: %q", address)}
	}
	pod := c.podOf(ap.Addr().String())
	if pod == "" {
		pod = "the pod at " + ap.Addr().String()
	}
	return xdswalk.Seen{Kind: xdswalk.SawApp, Port: int32(ap.Port()), Protocol: protocol, Pods: []string{pod}}
}

// response reads resp: the application's (it names its address) or the mesh's answer. upgraded
// checks the stream after a 101.
func (c client) response(resp *http.Response, upgraded func() xdswalk.Seen) xdswalk.Seen {
	defer resp.Body.Close()
	if at := resp.Header.Get(testapp.AtHeader); at != "" {
		s := c.reached(at, xdssim.HTTP)
		s.Detail = fmt.Sprintf("%s %d, the application read %s", resp.Proto, resp.StatusCode, resp.Header.Get(testapp.ProtoHeader))
		switch resp.StatusCode {
		case http.StatusSwitchingProtocols:
			if u := upgraded(); u.Kind != xdswalk.SawApp {
				s.Detail += "; after the 101: " + u.String()
			} else {
				s.Upgraded = true
			}
		case http.StatusOK:
		default:
			s.Kind = xdswalk.SawUnknown
		}
		return s
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	s := xdswalk.Seen{Kind: xdswalk.SawAnswer, Status: resp.StatusCode, Error: resp.Header.Get(resolve.ErrorHeader), Body: string(body),
		Detail: resp.Proto}
	if err != nil {
		s.Detail += fmt.Sprintf("; reading the body: %v", err)
	}
	return s
}

// upgraded says whether the stream after a 101 carries bytes both ways (the application echoes).
func (c client) upgraded(rec *recorder, r *bufio.Reader) xdswalk.Seen {
	if _, err := io.WriteString(rec, wsProbe); err != nil {
		return refusal("writing on the upgraded stream: ", err)
	}
	line, err := r.ReadString('\n')
	if err != nil || line != wsProbe {
		return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: fmt.Sprintf("the upgraded stream echoes %q (%v)", line, err)}
	}
	return xdswalk.Seen{Kind: xdswalk.SawApp}
}

// handshake starts TLS with conn's SNI and ALPN: a TCP port's server greets instead (its greeting
// is among the bytes the handshake read); a refusal ends it with nothing read.
func (c client) handshake(rec *recorder, conn xdssim.Conn) xdswalk.Seen {
	// Nothing here verifies a server: whatever completes the handshake is reported, not trusted.
	cfg := &tls.Config{ServerName: conn.SNI, NextProtos: conn.ALPN, InsecureSkipVerify: true} //nolint:gosec // see above
	tc := tls.Client(rec, cfg)
	err := tc.Handshake()
	if err == nil {
		state := tc.ConnectionState()
		return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: fmt.Sprintf("a TLS server completed the handshake (ALPN %q, %d certificates)",
			state.NegotiatedProtocol, len(state.PeerCertificates))}
	}
	if first := rec.first(); len(first) > 0 {
		if bytes.HasPrefix(first, []byte(testapp.HelloPrefix)) {
			return c.greeted(bufio.NewReader(bytes.NewReader(first)), "")
		}
		return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: fmt.Sprintf("the handshake read %q: %v", first, err)}
	}
	return refusal("the TLS handshake: ", err)
}

// h2c sends one request with prior knowledge of HTTP/2 (Go's client: its preface, SETTINGS and
// HEADERS at once): r's host, method, path and headers (GET / when unset).
func (c client) h2c(rec *recorder, r *xdssim.Request) xdswalk.Seen {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	used := false
	transport := &http.Transport{Protocols: protocols, Proxy: nil, DisableKeepAlives: true,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if used {
				return nil, errors.New("the walk's h2c client dials once")
			}
			used = true
			return rec, nil
		}}
	defer transport.CloseIdleConnections()
	req, err := http.NewRequest(cmp.Or(r.Method, http.MethodGet), "http://"+rec.RemoteAddr().String()+cmp.Or(r.Path, "/"), nil)
	if err != nil {
		return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: err.Error()}
	}
	req.Host = r.Host
	for name, value := range r.Headers {
		req.Header.Set(name, value)
	}
	resp, err := transport.RoundTrip(req)
	if err != nil {
		if first := rec.first(); bytes.HasPrefix(first, []byte(testapp.HelloPrefix)) {
			return c.greeted(bufio.NewReader(bytes.NewReader(first)), "")
		} else if len(first) > 0 && !looksHTTP2(first) {
			return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: fmt.Sprintf("h2c read %q: %v", first, err)}
		}
		return refusal("h2c: ", err)
	}
	return c.response(resp, func() xdswalk.Seen { return xdswalk.Seen{Kind: xdswalk.SawUnknown, Detail: "a 101 over HTTP/2"} })
}

// looksHTTP2 says first begins with an HTTP/2 frame header: a server's first frame is SETTINGS
// (type 4) on stream 0.
func looksHTTP2(first []byte) bool {
	return len(first) >= 9 && first[3] == 4 && first[5]|first[6]|first[7]|first[8] == 0
}

// refusal is what a connection that ended with err (before anything came back) saw.
func refusal(what string, err error) xdswalk.Seen {
	detail := what + "closed"
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		detail = what + "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		detail = what + "connection reset"
	case isTimeout(err):
		return xdswalk.Seen{Kind: xdswalk.SawNothing, Detail: what + "timed out"}
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		detail = what + err.Error()
	}
	return xdswalk.Seen{Kind: xdswalk.SawRefusal, Detail: detail}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// recorder is a connection that keeps the first bytes it read, for the clients whose library
// reads them (TLS, HTTP/2) and fails: those bytes say what answered.
type recorder struct {
	net.Conn
	mu   sync.Mutex
	head []byte
}

func (r *recorder) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.mu.Lock()
	if room := 512 - len(r.head); room > 0 {
		r.head = append(r.head, b[:min(n, room)]...)
	}
	r.mu.Unlock()
	return n, err
}

func (r *recorder) first() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.head)
}
