// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve_test

import (
	"slices"
	"strings"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

const host = "payments.shop.aether.internal"

func h1(n int32) portspec.Port  { return portspec.Port{Port: n, Protocol: meshv1alpha1.ProtocolHTTP} }
func h2(n int32) portspec.Port  { return portspec.Port{Port: n, Protocol: meshv1alpha1.ProtocolHTTP2} }
func tcp(n int32) portspec.Port { return portspec.Port{Port: n, Protocol: meshv1alpha1.ProtocolTCP} }
func udp(n int32) portspec.Port { return portspec.Port{Port: n, Protocol: meshv1alpha1.ProtocolUDP} }

// set builds a port set the way callers do: ports in any order, normalised by NewPortSet.
func set(primary int32, ports ...portspec.Port) portspec.PortSet {
	return portspec.NewPortSet(primary, ports)
}

// The port sets of DESIGN section 5's table, shared by the tests below.
var (
	mixed        = set(8080, h1(8080), h2(9090), tcp(9000))
	tcpOnly      = set(9000, tcp(9000), tcp(5432))
	httpOnly     = set(8080, h1(8080))
	noPorts      = set(0)
	tls443       = set(8080, h1(8080), tcp(443))
	http443      = set(443, h1(443))
	http443Extra = set(8080, h1(8080), h1(443))
	port80HTTP   = set(8080, h1(8080), h1(80))
	port80HTTP2  = set(9090, h2(9090), h2(80), tcp(9000))
	port80TCP    = set(8080, h1(8080), tcp(80), tcp(9000))
	port80TCPAll = set(80, tcp(80))
	tcpPrimary   = set(9000, tcp(9000), h2(9090), h1(8080))
	tcpPrimaries = set(9000, tcp(9000), tcp(5432), tcp(7000), h1(8080))
	httpPrimTCPs = set(8080, h1(8080), tcp(9000), tcp(5432), tcp(7000))
	noPrimary    = set(0, tcp(9000), h2(9090), tcp(5432), h1(8080))
	lostPrimary  = set(7777, tcp(9000), h2(9090), tcp(5432), h1(8080))
	lostPrimary2 = set(1, h2(9090), h1(8080))
	udpPrimary   = set(5353, udp(5353), tcp(9000), h1(8080))
	udpOnly      = set(53, udp(53), udp(5353))
	udpBeside    = set(8080, h1(8080), udp(5353), udp(80))
)

// allSets are every port set above: the properties below hold for each.
var allSets = map[string]portspec.PortSet{
	"mixed": mixed, "tcpOnly": tcpOnly, "httpOnly": httpOnly, "noPorts": noPorts,
	"tls443": tls443, "http443": http443, "http443Extra": http443Extra,
	"port80HTTP": port80HTTP, "port80HTTP2": port80HTTP2, "port80TCP": port80TCP, "port80TCPAll": port80TCPAll,
	"tcpPrimary": tcpPrimary, "tcpPrimaries": tcpPrimaries, "httpPrimTCPs": httpPrimTCPs,
	"noPrimary": noPrimary, "lostPrimary": lostPrimary, "lostPrimary2": lostPrimary2,
	"udpPrimary": udpPrimary, "udpOnly": udpOnly, "udpBeside": udpBeside,
}

func TestDefaultPorts(t *testing.T) {
	tests := map[string]struct {
		set    portspec.PortSet
		http   int32
		httpOK bool
		tcp    int32
		tcpOK  bool
		rule   string // what DESIGN section 5 says, for the failure message
	}{
		"mixed, HTTP primary, no 80": {set: mixed, tcp: 9000, tcpOK: true,
			rule: "HTTP: none, 80 not declared (the HTTP primary 8080 is not a default); TCP: the only TCP port"},
		"no HTTP port": {set: tcpOnly, tcp: 9000, tcpOK: true,
			rule: "HTTP: none; TCP: the primary"},
		"HTTP only, no 80": {set: httpOnly,
			rule: "HTTP: none, 80 not declared; TCP: none"},
		"no ports": {set: noPorts, rule: "neither"},
		"443 declared TCP": {set: tls443, tcp: 443, tcpOK: true,
			rule: "HTTP: none; TCP: 443, the lowest (only) TCP port"},
		"443 declared HTTP, primary": {set: http443,
			rule: "HTTP: none, 443 is not 80; TCP: none"},
		"443 declared HTTP, not primary": {set: http443Extra,
			rule: "HTTP: none"},
		"80 declared HTTP": {set: port80HTTP, http: 80, httpOK: true,
			rule: "HTTP: 80"},
		"80 declared HTTP2": {set: port80HTTP2, http: 80, httpOK: true, tcp: 9000, tcpOK: true,
			rule: "HTTP: 80 (HTTP2 is HTTP-class)"},
		"80 declared TCP, HTTP elsewhere": {set: port80TCP, tcp: 80, tcpOK: true,
			rule: "HTTP: none, 80 being TCP; TCP: the lowest TCP port, 80"},
		"80 declared TCP, only TCP": {set: port80TCPAll, tcp: 80, tcpOK: true,
			rule: "HTTP: none; TCP: the primary 80"},
		"80 declared HTTP, primary TCP": {set: set(9000, tcp(9000), h1(80), h1(8080)), http: 80, httpOK: true, tcp: 9000, tcpOK: true,
			rule: "HTTP: 80; TCP: the primary"},
		"TCP primary, HTTP elsewhere": {set: tcpPrimary, tcp: 9000, tcpOK: true,
			rule: "HTTP: none; TCP: the primary"},
		"TCP primary, several TCP ports": {set: tcpPrimaries, tcp: 9000, tcpOK: true,
			rule: "TCP: the primary 9000, not the lowest 5432"},
		"HTTP primary, several TCP ports": {set: httpPrimTCPs, tcp: 5432, tcpOK: true,
			rule: "TCP: the lowest TCP port"},
		"primary 0": {set: noPrimary, tcp: 5432, tcpOK: true,
			rule: "a service-level set with no primary: the lowest TCP port"},
		"primary not among the ports": {set: lostPrimary, tcp: 5432, tcpOK: true,
			rule: "primary 7777 undeclared: the lowest TCP port"},
		"primary not among the ports, HTTP only": {set: lostPrimary2,
			rule: "no 80, no TCP port"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gotHTTP, gotHTTPOK := resolve.DefaultHTTPPort(tc.set)
			if gotHTTP != tc.http || gotHTTPOK != tc.httpOK {
				t.Errorf("DefaultHTTPPort(%v) = %d, %t; want %d, %t (%s)", tc.set, gotHTTP, gotHTTPOK, tc.http, tc.httpOK, tc.rule)
			}
			gotTCP, gotTCPOK := resolve.DefaultTCPPort(tc.set)
			if gotTCP != tc.tcp || gotTCPOK != tc.tcpOK {
				t.Errorf("DefaultTCPPort(%v) = %d, %t; want %d, %t (%s)", tc.set, gotTCP, gotTCPOK, tc.tcp, tc.tcpOK, tc.rule)
			}
		})
	}
}

// reaches and misdirected are the results TestHTTPRequest expects, without reason and body.
func reaches(port int32) resolve.Result {
	return resolve.Result{Port: port, Protocol: meshv1alpha1.ProtocolHTTP, Outcome: resolve.Reaches}
}

func misdirected(code resolve.MeshError) resolve.Result {
	return resolve.Result{Protocol: meshv1alpha1.ProtocolHTTP, Outcome: resolve.Misdirected, Error: code}
}

func TestHTTPRequest(t *testing.T) {
	tests := map[string]struct {
		set       portspec.PortSet
		authority string
		// want is the result without reason and body; both must contain every one of words
		// (the reason also the x-aether-error value), and neither any of notWords.
		want     resolve.Result
		words    []string
		notWords []string
	}{
		// No port in the authority: port 80, or 421.
		"portless, 80 declared HTTP": {set: port80HTTP, authority: host,
			want: reaches(80)},
		"portless, 80 declared HTTP2": {set: port80HTTP2, authority: host,
			want: reaches(80)},
		"portless, 80 declared TCP, HTTP elsewhere": {set: port80TCP, authority: host,
			want:  misdirected(resolve.PortNotDeclared),
			words: []string{"port 80 is declared TCP", "http://" + host + ":8080/"}},
		"portless, 80 declared TCP, no HTTP": {set: port80TCPAll, authority: host,
			want:  misdirected(resolve.NoHTTPPort),
			words: []string{"port 80 is declared TCP", "serves no HTTP", host + ":80 ", host + ":18082"}},
		"portless, no 80, HTTP on the primary": {set: mixed, authority: host,
			want:     misdirected(resolve.PortNotDeclared),
			words:    []string{"port 80 is not declared", "HTTP on 8080 and 9090", "http://" + host + ":8080/", "http://" + host + ":9090/"},
			notWords: []string{host + ":9000"}}, // a TCP port is no HTTP spelling that works
		"portless, no 80, HTTP on a non-primary port": {set: tcpPrimary, authority: host,
			want:  misdirected(resolve.PortNotDeclared),
			words: []string{"HTTP on 8080 and 9090"}},
		"portless, 443 declared HTTP": {set: http443, authority: host,
			want:  misdirected(resolve.PortNotDeclared),
			words: []string{"http://" + host + ":443/"}},
		"portless, no HTTP port": {set: tcpOnly, authority: host,
			want:     misdirected(resolve.NoHTTPPort),
			words:    []string{"serves no HTTP", "TCP on 5432 and 9000", host + ":9000", host + ":18082"},
			notWords: []string{"http://"}},
		"portless, no ports": {set: noPorts, authority: host,
			want:     misdirected(resolve.NoHTTPPort),
			words:    []string{"declares no ports", "endpoint.aether.io/ports"},
			notWords: []string{":18082"}}, // refused too: naming it would send the user to another refusal

		// A port in the authority is the port.
		"declared HTTP": {set: mixed, authority: host + ":8080",
			want: reaches(8080)},
		"declared HTTP2": {set: mixed, authority: host + ":9090",
			want: reaches(9090)},
		"declared HTTP, not the primary": {set: tcpPrimary, authority: host + ":8080",
			want: reaches(8080)},
		"explicit 80, declared HTTP": {set: port80HTTP, authority: host + ":80",
			want: reaches(80)},
		"explicit 80, declared TCP": {set: port80TCP, authority: host + ":80",
			want:  misdirected(resolve.PortNotHTTP),
			words: []string{"port 80 is declared TCP", host + ":80 as TCP", "http://" + host + ":8080/"}},
		"explicit 80, not declared": {set: mixed, authority: host + ":80",
			want: misdirected(resolve.PortNotDeclared), words: []string{"port 80 is not declared"}},
		"443 declared HTTP": {set: http443, authority: host + ":443",
			want: reaches(443)},
		"443 declared TCP": {set: tls443, authority: host + ":443",
			want: misdirected(resolve.PortNotHTTP), words: []string{"443 is declared TCP"}},
		"declared TCP": {set: mixed, authority: host + ":9000",
			want:  misdirected(resolve.PortNotHTTP),
			words: []string{"port 9000 is declared TCP, not HTTP", host + ":9000 as TCP", "http://" + host + ":8080/"}},
		"declared TCP, no HTTP port": {set: tcpOnly, authority: host + ":5432",
			want:  misdirected(resolve.PortNotHTTP),
			words: []string{"port 5432 is declared TCP", "serves no HTTP"}},
		"undeclared": {set: mixed, authority: host + ":1234",
			want: misdirected(resolve.PortNotDeclared), words: []string{"port 1234 is not declared", "http://" + host + ":8080/"}},
		"undeclared, no HTTP port": {set: tcpOnly, authority: host + ":8080",
			want: misdirected(resolve.PortNotDeclared), words: []string{"port 8080 is not declared", "serves no HTTP"}},
		"undeclared, no ports": {set: noPorts, authority: host + ":8080",
			want: misdirected(resolve.PortNotDeclared), words: []string{"declares no ports"}},
		"the undeclared primary of a lost-primary set": {set: lostPrimary, authority: host + ":7777",
			want: misdirected(resolve.PortNotDeclared)},
		"the proxy port 18081": {set: mixed, authority: host + ":18081",
			want: misdirected(resolve.PortNotDeclared), words: []string{"18081 is the mesh's HTTP proxy port", "http://" + host + ":8080/"}},
		"the TCP port 18082": {set: mixed, authority: host + ":18082",
			want: misdirected(resolve.PortNotDeclared), words: []string{"18082 is the mesh's TCP port", host + ":18082 as TCP"}},
		"the TCP port 18082, no TCP port": {set: httpOnly, authority: host + ":18082",
			want: misdirected(resolve.PortNotDeclared), words: []string{"18082 is the mesh's TCP port", "http://" + host + ":8080/"},
			notWords: []string{":18082 as TCP"}}, // refused too: naming it would send the user to another refusal
		"18081, no HTTP port": {set: tcpOnly, authority: host + ":18081",
			want: misdirected(resolve.PortNotDeclared)},
		"extremes: port 1": {set: set(1, h1(1), h1(65535)), authority: host + ":1",
			want: reaches(1)},
		"extremes: port 65535": {set: set(1, h1(1), h1(65535)), authority: host + ":65535",
			want: reaches(65535)},

		// Hosts of every shape the caller may have matched: the host is only echoed.
		"a short name":                {set: mixed, authority: "payments:8080", want: reaches(8080)},
		"a trailing dot":              {set: mixed, authority: host + ".:8080", want: reaches(8080)},
		"upper case":                  {set: mixed, authority: "Payments.Shop:8080", want: reaches(8080)},
		"an IPv4 address":             {set: mixed, authority: "10.96.0.10:8080", want: reaches(8080)},
		"an IPv6 address with a port": {set: mixed, authority: "[fd00::10]:8080", want: reaches(8080)},
		"an IPv6 address, no port":    {set: port80HTTP, authority: "[fd00::10]", want: reaches(80)},
		"an IPv6 address, TCP port": {set: mixed, authority: "[fd00::10]:9000",
			want: misdirected(resolve.PortNotHTTP), words: []string{"[fd00::10]:9000 as TCP", "http://[fd00::10]:8080/"}},
		"an IPv4-mapped IPv6 address": {set: mixed, authority: "[::ffff:10.96.0.10]:8080", want: reaches(8080)},
		"a host of 253 bytes":         {set: mixed, authority: strings.Repeat("a", 253) + ":8080", want: reaches(8080)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := resolve.HTTPRequest(tc.set, tc.authority)
			checkWords(t, tc.authority, got, tc.words, tc.notWords)
			got.Reason, got.Body = "", ""
			if got != tc.want {
				t.Errorf("HTTPRequest(%v, %q) = %+v; want %+v", tc.set, tc.authority, got, tc.want)
			}
		})
	}
}

// checkWords checks a result's words: a reason always; for an answer of the mesh's own, a body
// and the x-aether-error value in the reason; words in both, notWords in neither.
func checkWords(t *testing.T, authority string, got resolve.Result, words, notWords []string) {
	t.Helper()
	if got.Reason == "" {
		t.Errorf("%q: empty reason", authority)
	}
	if resolve.HTTPStatus(got.Outcome) == 0 {
		if got.Body != "" || got.Error != "" {
			t.Errorf("%q: %s with body %q and error %q", authority, got.Outcome, got.Body, got.Error)
		}
		return
	}
	header := resolve.ErrorHeader + ": " + string(got.Error)
	if !strings.Contains(got.Reason, header) {
		t.Errorf("%q: reason %q does not name %q", authority, got.Reason, header)
	}
	for _, w := range words {
		if !strings.Contains(got.Reason, w) || !strings.Contains(got.Body, w) {
			t.Errorf("%q: want %q in the reason and the body:\nreason %q\nbody   %q", authority, w, got.Reason, got.Body)
		}
	}
	for _, w := range notWords {
		if strings.Contains(got.Reason, w) || strings.Contains(got.Body, w) {
			t.Errorf("%q: want no %q in the reason or the body:\nreason %q\nbody   %q", authority, w, got.Reason, got.Body)
		}
	}
}

// TestHTTPRequestMalformed: every malformed authority is answered 400 bad-authority, with a
// reason that says what is wrong and what to write; none panics.
func TestHTTPRequestMalformed(t *testing.T) {
	tests := map[string]struct {
		authority string
		words     []string
	}{
		"empty":                       {"", []string{"empty", "Host: payments.shop:8080"}},
		"no host":                     {":8080", []string{"no host"}},
		"empty port":                  {host + ":", []string{"empty", "write " + host + " for port 80"}},
		"not a number":                {host + ":http", []string{`"http" is not a decimal number`}},
		"signed":                      {host + ":+80", []string{`"+80" is not a decimal number`}},
		"negative":                    {host + ":-1", []string{`"-1" is not a decimal number`}},
		"space":                       {host + ": 80", []string{`" 80" is not a decimal number`}},
		"port 0":                      {host + ":0", []string{`"0" is outside 1..65535`}},
		"port 65536":                  {host + ":65536", []string{`"65536" is outside 1..65535`}},
		"port overflows int":          {host + ":99999999999999999999999", []string{"outside 1..65535"}},
		"leading zero":                {host + ":08080", []string{"leading zero", "write " + host + ":8080"}},
		"two colons":                  {host + ":80:80", []string{"more than one colon"}},
		"IPv6 without brackets":       {"fd00::10", []string{"more than one colon", "[fd00::1]:8080"}},
		"IPv6 unclosed":               {"[fd00::10", []string{"does not close it"}},
		"IPv6 unclosed with port":     {"[fd00::10:8080", []string{"does not close it"}},
		"IPv6 empty":                  {"[]", []string{"not an IPv6 address"}},
		"IPv6 empty, port":            {"[]:8080", []string{"not an IPv6 address"}},
		"IPv6 junk after ]":           {"[fd00::10]8080", []string{`"8080" after the IPv6 address`}},
		"IPv6 empty port":             {"[fd00::10]:", []string{"empty"}},
		"IPv6 bad port":               {"[fd00::10]:x", []string{"not a decimal number"}},
		"IPv6 colon only":             {"[:]", []string{"not an IPv6 address"}},
		"IPv6 not hex":                {"[fd00::zz]:8080", []string{"not an IPv6 address"}},
		"IPv6 zone":                   {"[fe80::1%25eth0]:8080", []string{"not an IPv6 address"}},
		"IPv4 in brackets":            {"[10.0.0.1]:8080", []string{"not an IPv6 address"}},
		"userinfo":                    {"user@" + host + ":8080", []string{`has '@'`}},
		"path":                        {host + "/x", []string{`has '/'`}},
		"space in host":               {"pay ments:8080", []string{`has ' '`}},
		"non-ASCII host":              {"paymënts:8080", []string{`has 'ë'`}},
		"invalid UTF-8":               {"pay\xffments:8080", []string{"has"}},
		"NUL":                         {"payments\x00:8080", []string{`has '\x00'`}},
		"a host over 253 bytes":       {strings.Repeat("a", 254) + ":8080", []string{"254 bytes long"}},
		"an authority over 259 bytes": {strings.Repeat("a", 300), []string{"300 bytes long"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := resolve.HTTPRequest(mixed, tc.authority)
			want := resolve.Result{Protocol: meshv1alpha1.ProtocolHTTP, Outcome: resolve.BadRequest, Error: resolve.BadAuthority}
			checkWords(t, tc.authority, got, tc.words, nil)
			if len(got.Body) > resolve.MaxBodyLength {
				t.Errorf("%q: body of %d bytes", tc.authority, len(got.Body))
			}
			if got.Reason, got.Body = "", ""; got != want {
				t.Errorf("HTTPRequest(mixed, %q) = %+v; want %+v", tc.authority, got, want)
			}
		})
	}
}

// TestHTTPRequestBodyBounded: however many ports a service has and however long its name, the
// answer names a few and stays within MaxBodyLength.
func TestHTTPRequestBodyBounded(t *testing.T) {
	var manyHTTP, manyTCP []portspec.Port
	for i := range int32(portspec.MaxPorts) {
		manyHTTP = append(manyHTTP, h1(20000+i))
		manyTCP = append(manyTCP, tcp(20000+i))
	}
	longest := strings.Repeat("a", resolve.MaxHostLength)
	for name, s := range map[string]portspec.PortSet{
		"many HTTP ports": set(20000, manyHTTP...), "many TCP ports": set(20000, manyTCP...),
	} {
		t.Run(name, func(t *testing.T) {
			authorities := []string{longest, longest + ":1", longest + ":18081", longest + ":18082"}
			if !s.Ports[0].Protocol.IsHTTP() {
				authorities = append(authorities, longest+":20000") // port-not-http
			}
			for _, authority := range authorities {
				got := resolve.HTTPRequest(s, authority)
				if got.Outcome != resolve.Misdirected {
					t.Fatalf("%q: %s; want Misdirected", authority, got.Outcome)
				}
				if len(got.Body) > resolve.MaxBodyLength || len(got.Reason) > resolve.MaxBodyLength+100 {
					t.Errorf("%q: body of %d bytes, reason of %d", authority[resolve.MaxHostLength-4:], len(got.Body), len(got.Reason))
				}
				if want := "and 58 more"; !strings.Contains(got.Body, want) {
					t.Errorf("%q: body %q does not say %q", authority[resolve.MaxHostLength-4:], got.Body, want)
				}
			}
		})
	}
}

// TestMeshErrors pins the x-aether-error values: clients and dashboards match them as text.
func TestMeshErrors(t *testing.T) {
	want := []string{"no-http-port", "port-not-declared", "port-not-http", "bad-authority", "not-mesh-name"}
	var got []string
	for _, e := range resolve.MeshErrors() {
		got = append(got, string(e))
	}
	if !slices.Equal(got, want) {
		t.Errorf("MeshErrors() = %q; want %q", got, want)
	}
	if resolve.ErrorHeader != "x-aether-error" {
		t.Errorf("ErrorHeader = %q", resolve.ErrorHeader)
	}
	statuses := map[resolve.Outcome]int{resolve.Reaches: 0, resolve.Refused: 0, resolve.HostDecides: 0,
		resolve.Misdirected: 421, resolve.BadRequest: 400, resolve.NotMesh: 404}
	for o, want := range statuses {
		if got := resolve.HTTPStatus(o); got != want {
			t.Errorf("HTTPStatus(%s) = %d; want %d", o, got, want)
		}
	}
}
