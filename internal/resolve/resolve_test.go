// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

const host = "payments.shop.aether.internal"

func h1(n int32) portspec.Port  { return portspec.Port{Number: n, Protocol: portspec.HTTP} }
func h2(n int32) portspec.Port  { return portspec.Port{Number: n, Protocol: portspec.HTTP2} }
func tcp(n int32) portspec.Port { return portspec.Port{Number: n, Protocol: portspec.TCP} }

// set builds a port set the way callers do: ports in any order, normalised by NewPortSet.
func set(primary int32, ports ...portspec.Port) portspec.PortSet {
	return portspec.NewPortSet(primary, ports)
}

// The spellings, as Reach takes them.
var (
	httpURL  = resolve.Spelling{Scheme: resolve.SchemeHTTP}
	httpsURL = resolve.Spelling{Scheme: resolve.SchemeHTTPS}
	meshHTTP = resolve.Spelling{Port: resolve.MeshHTTPPort}
	meshTCP  = resolve.Spelling{Port: resolve.MeshTCPPort}
)

func port(n int32) resolve.Spelling { return resolve.Spelling{Port: n} }

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
	tcpPrimary   = set(9000, tcp(9000), h2(9090), h1(8080))
	tcpPrimaries = set(9000, tcp(9000), tcp(5432), tcp(7000), h1(8080))
	httpPrimTCPs = set(8080, h1(8080), tcp(9000), tcp(5432), tcp(7000))
	noPrimary    = set(0, tcp(9000), h2(9090), tcp(5432), h1(8080))
	lostPrimary  = set(7777, tcp(9000), h2(9090), tcp(5432), h1(8080))
	lostPrimary2 = set(1, h2(9090), h1(8080))
)

func TestDefaultPorts(t *testing.T) {
	tests := map[string]struct {
		set    portspec.PortSet
		http   int32
		httpOK bool
		tcp    int32
		tcpOK  bool
		rule   string // what DESIGN section 5 says, for the failure message
	}{
		"mixed, HTTP primary": {set: mixed, http: 8080, httpOK: true, tcp: 9000, tcpOK: true,
			rule: "HTTP: the HTTP primary; TCP: the only TCP port"},
		"no HTTP port": {set: tcpOnly, http: 0, httpOK: false, tcp: 9000, tcpOK: true,
			rule: "HTTP: none; TCP: the primary"},
		"no TCP port": {set: httpOnly, http: 8080, httpOK: true, tcp: 0, tcpOK: false,
			rule: "HTTP: the primary; TCP: none"},
		"no ports": {set: noPorts, rule: "neither"},
		"443 declared TCP": {set: tls443, http: 8080, httpOK: true, tcp: 443, tcpOK: true,
			rule: "443/TCP is the lowest (only) TCP port"},
		"443 declared HTTP, primary": {set: http443, http: 443, httpOK: true,
			rule: "HTTP: the primary 443; TCP: none"},
		"443 declared HTTP, not primary": {set: http443Extra, http: 8080, httpOK: true,
			rule: "HTTP: the primary 8080, not the lower 443"},
		"80 declared HTTP wins over the HTTP primary": {set: port80HTTP, http: 80, httpOK: true,
			rule: "HTTP: 80 (http:// means port 80)"},
		"80 declared HTTP2 wins over the HTTP primary": {set: port80HTTP2, http: 80, httpOK: true, tcp: 9000, tcpOK: true,
			rule: "HTTP: 80 (HTTP2 is HTTP-class)"},
		"80 declared TCP is not the default HTTP port": {set: port80TCP, http: 8080, httpOK: true, tcp: 80, tcpOK: true,
			rule: "HTTP: the primary; TCP: the lowest TCP port, 80"},
		"80 declared TCP, only TCP": {set: set(80, tcp(80)), http: 0, httpOK: false, tcp: 80, tcpOK: true,
			rule: "HTTP: none, 80 being TCP; TCP: the primary 80"},
		"80 declared HTTP, primary TCP": {set: set(9000, tcp(9000), h1(80), h1(8080)), http: 80, httpOK: true, tcp: 9000, tcpOK: true,
			rule: "HTTP: 80; TCP: the primary"},
		"TCP primary": {set: tcpPrimary, http: 8080, httpOK: true, tcp: 9000, tcpOK: true,
			rule: "HTTP: the lowest HTTP-class port; TCP: the primary"},
		"TCP primary, lowest HTTP port is HTTP2": {set: set(9000, tcp(9000), h2(7070), h1(8080)), http: 7070, httpOK: true, tcp: 9000, tcpOK: true,
			rule: "HTTP: the lowest HTTP-class port, HTTP2 included"},
		"TCP primary, several TCP ports": {set: tcpPrimaries, http: 8080, httpOK: true, tcp: 9000, tcpOK: true,
			rule: "TCP: the primary 9000, not the lowest 5432"},
		"HTTP primary, several TCP ports": {set: httpPrimTCPs, http: 8080, httpOK: true, tcp: 5432, tcpOK: true,
			rule: "TCP: the lowest TCP port"},
		"HTTP2 primary, lower HTTP port": {set: set(9090, h2(9090), h1(8080)), http: 9090, httpOK: true,
			rule: "HTTP: the primary, not the lowest"},
		"primary 0 falls back to lowest": {set: noPrimary, http: 8080, httpOK: true, tcp: 5432, tcpOK: true,
			rule: "a service-level set with no primary: lowest of each class"},
		"primary not among the ports falls back to lowest": {set: lostPrimary, http: 8080, httpOK: true, tcp: 5432, tcpOK: true,
			rule: "primary 7777 undeclared: lowest of each class"},
		"primary not among the ports, HTTP only": {set: lostPrimary2, http: 8080, httpOK: true,
			rule: "primary 1 undeclared: lowest HTTP port; no TCP port"},
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

func TestReach(t *testing.T) {
	tests := map[string]struct {
		set      portspec.PortSet
		spelling resolve.Spelling
		// want is the result without its reason; the reason must contain every one of reason.
		want   resolve.Result
		reason []string
		// notInReason must not appear in the reason.
		notInReason []string
	}{
		// No HTTP port: the HTTP spellings are answered 421 naming the TCP spellings.
		"no HTTP port, http://": {set: tcpOnly, spelling: httpURL,
			want: resolve.Result{Protocol: portspec.HTTP, Outcome: resolve.Misdirected},
			reason: []string{"421", "x-aether-error: no-http-port", resolve.NoHTTPPortHeader,
				host + ":18082", host + ":5432", host + ":9000"}},
		"no HTTP port, :18081": {set: tcpOnly, spelling: meshHTTP,
			want: resolve.Result{Protocol: portspec.HTTP, Outcome: resolve.Misdirected},
			reason: []string{"421", "x-aether-error: no-http-port",
				host + ":18082", host + ":5432", host + ":9000"}},
		"no HTTP port, 80 declared TCP, http://": {set: set(80, tcp(80)), spelling: httpURL,
			want:   resolve.Result{Protocol: portspec.HTTP, Outcome: resolve.Misdirected},
			reason: []string{"421", "x-aether-error: no-http-port", host + ":18082", host + ":80"}},
		"no ports, http://": {set: noPorts, spelling: httpURL,
			want:        resolve.Result{Protocol: portspec.HTTP, Outcome: resolve.Misdirected},
			reason:      []string{"421", "x-aether-error: no-http-port", "declares no ports"},
			notInReason: []string{":18082"}}, // refused too: naming it would send the user to another refusal
		"no HTTP port, :18082 still reaches the TCP primary": {set: tcpOnly, spelling: meshTCP,
			want:   resolve.Result{Port: 9000, Protocol: portspec.TCP, Outcome: resolve.Reaches},
			reason: []string{"default TCP port", "primary port 9000"}},

		// No TCP port.
		"no TCP port, :18082": {set: httpOnly, spelling: meshTCP,
			want:   resolve.Result{Protocol: portspec.TCP, Outcome: resolve.Refused},
			reason: []string{"no TCP port"}},
		"no ports, :18082": {set: noPorts, spelling: meshTCP,
			want: resolve.Result{Protocol: portspec.TCP, Outcome: resolve.Refused}},
		"no TCP port, http:// reaches the primary": {set: httpOnly, spelling: httpURL,
			want:   resolve.Result{Port: 8080, Protocol: portspec.HTTP, Outcome: resolve.Reaches},
			reason: []string{"default HTTP port", "primary port 8080"}},

		// https:// and port 443.
		"443 declared TCP, https://": {set: tls443, spelling: httpsURL,
			want:   resolve.Result{Port: 443, Protocol: portspec.TCP, Outcome: resolve.Reaches},
			reason: []string{"443", "TCP"}},
		"443 declared TCP, :443": {set: tls443, spelling: port(443),
			want: resolve.Result{Port: 443, Protocol: portspec.TCP, Outcome: resolve.Reaches}},
		"443 declared HTTP, https://": {set: http443, spelling: httpsURL,
			want:   resolve.Result{Protocol: portspec.TCP, Outcome: resolve.Refused},
			reason: []string{"443", "HTTP", "443=tcp"}},
		"443 declared HTTP, :443": {set: http443, spelling: port(443),
			want:   resolve.Result{Port: 443, Protocol: portspec.HTTP, Outcome: resolve.Reaches},
			reason: []string{"443", "HTTP"}},
		"443 declared HTTP, http:// reaches the primary 443": {set: http443, spelling: httpURL,
			want: resolve.Result{Port: 443, Protocol: portspec.HTTP, Outcome: resolve.Reaches}},
		"443 declared HTTP2, https://": {set: set(443, h2(443)), spelling: httpsURL,
			want:   resolve.Result{Protocol: portspec.TCP, Outcome: resolve.Refused},
			reason: []string{"HTTP2"}},
		"443 not declared, https://": {set: mixed, spelling: httpsURL,
			want:   resolve.Result{Protocol: portspec.TCP, Outcome: resolve.Refused},
			reason: []string{"443", "not declared"}},
		"443 not declared, no ports, https://": {set: noPorts, spelling: httpsURL,
			want: resolve.Result{Protocol: portspec.TCP, Outcome: resolve.Refused}},
		"443 not declared, :443": {set: mixed, spelling: port(443),
			want: resolve.Result{Outcome: resolve.Refused}},

		// Port 80.
		"80 declared HTTP, http:// reaches 80, not the primary": {set: port80HTTP, spelling: httpURL,
			want:   resolve.Result{Port: 80, Protocol: portspec.HTTP, Outcome: resolve.Reaches},
			reason: []string{"port 80 is declared HTTP"}},
		"80 declared HTTP, :18081 reaches 80": {set: port80HTTP, spelling: meshHTTP,
			want: resolve.Result{Port: 80, Protocol: portspec.HTTP, Outcome: resolve.Reaches}},
		"80 declared HTTP2, http:// reaches 80 as HTTP": {set: port80HTTP2, spelling: httpURL,
			want:   resolve.Result{Port: 80, Protocol: portspec.HTTP, Outcome: resolve.Reaches},
			reason: []string{"port 80 is declared HTTP2"}},
		"80 declared HTTP2, :80 reaches 80 as HTTP2": {set: port80HTTP2, spelling: port(80),
			want: resolve.Result{Port: 80, Protocol: portspec.HTTP2, Outcome: resolve.Reaches}},
		"80 declared TCP, http:// reaches the HTTP primary": {set: port80TCP, spelling: httpURL,
			want:   resolve.Result{Port: 8080, Protocol: portspec.HTTP, Outcome: resolve.Reaches},
			reason: []string{"primary port 8080"}},
		"80 declared TCP, :80 reaches 80 as TCP": {set: port80TCP, spelling: port(80),
			want: resolve.Result{Port: 80, Protocol: portspec.TCP, Outcome: resolve.Reaches}},
		"80 declared TCP, :18082 reaches the lowest TCP port 80": {set: port80TCP, spelling: meshTCP,
			want:   resolve.Result{Port: 80, Protocol: portspec.TCP, Outcome: resolve.Reaches},
			reason: []string{"lowest TCP port"}},
		"80 not declared, :80": {set: mixed, spelling: port(80),
			want: resolve.Result{Outcome: resolve.Refused}},

		// Mixed ports, HTTP primary.
		"mixed, http://": {set: mixed, spelling: httpURL,
			want: resolve.Result{Port: 8080, Protocol: portspec.HTTP, Outcome: resolve.Reaches}},
		"mixed, :18081": {set: mixed, spelling: meshHTTP,
			want: resolve.Result{Port: 8080, Protocol: portspec.HTTP, Outcome: resolve.Reaches}},
		"mixed, :18082": {set: mixed, spelling: meshTCP,
			want:   resolve.Result{Port: 9000, Protocol: portspec.TCP, Outcome: resolve.Reaches},
			reason: []string{"lowest TCP port"}},
		"mixed, :8080": {set: mixed, spelling: port(8080),
			want: resolve.Result{Port: 8080, Protocol: portspec.HTTP, Outcome: resolve.Reaches}},
		"mixed, :9090": {set: mixed, spelling: port(9090),
			want:   resolve.Result{Port: 9090, Protocol: portspec.HTTP2, Outcome: resolve.Reaches},
			reason: []string{"port 9090 is declared HTTP2"}},
		"mixed, :9000": {set: mixed, spelling: port(9000),
			want: resolve.Result{Port: 9000, Protocol: portspec.TCP, Outcome: resolve.Reaches}},

		// TCP primary: default TCP is the primary, default HTTP the lowest HTTP-class port.
		"TCP primary, http://": {set: tcpPrimary, spelling: httpURL,
			want:   resolve.Result{Port: 8080, Protocol: portspec.HTTP, Outcome: resolve.Reaches},
			reason: []string{"lowest HTTP port"}},
		"TCP primary, :18082": {set: tcpPrimary, spelling: meshTCP,
			want:   resolve.Result{Port: 9000, Protocol: portspec.TCP, Outcome: resolve.Reaches},
			reason: []string{"primary port 9000 is TCP"}},
		"TCP primary, several TCP ports, :18082 reaches the primary": {set: tcpPrimaries, spelling: meshTCP,
			want: resolve.Result{Port: 9000, Protocol: portspec.TCP, Outcome: resolve.Reaches}},
		"HTTP primary, several TCP ports, :18082 reaches the lowest": {set: httpPrimTCPs, spelling: meshTCP,
			want:   resolve.Result{Port: 5432, Protocol: portspec.TCP, Outcome: resolve.Reaches},
			reason: []string{"port 5432 is the lowest TCP port"}},

		// Declared and undeclared ports.
		"declared port, :5432": {set: tcpPrimaries, spelling: port(5432),
			want: resolve.Result{Port: 5432, Protocol: portspec.TCP, Outcome: resolve.Reaches}},
		"undeclared port": {set: mixed, spelling: port(1234),
			want:   resolve.Result{Outcome: resolve.Refused},
			reason: []string{"1234", "not declared", "8080/HTTP, 9000/TCP, 9090/HTTP2"}},
		"undeclared port, no ports": {set: noPorts, spelling: port(8080),
			want:   resolve.Result{Outcome: resolve.Refused},
			reason: []string{"no ports"}},
		"the undeclared primary of a lost-primary set": {set: lostPrimary, spelling: port(7777),
			want: resolve.Result{Outcome: resolve.Refused}},

		// Primary 0 or not among the ports: lowest of each class.
		"primary 0, http://": {set: noPrimary, spelling: httpURL,
			want:   resolve.Result{Port: 8080, Protocol: portspec.HTTP, Outcome: resolve.Reaches},
			reason: []string{"lowest HTTP port"}},
		"primary 0, :18082": {set: noPrimary, spelling: meshTCP,
			want:   resolve.Result{Port: 5432, Protocol: portspec.TCP, Outcome: resolve.Reaches},
			reason: []string{"lowest TCP port"}},
		"primary not among the ports, http://": {set: lostPrimary, spelling: httpURL,
			want: resolve.Result{Port: 8080, Protocol: portspec.HTTP, Outcome: resolve.Reaches}},
		"primary not among the ports, :18082": {set: lostPrimary, spelling: meshTCP,
			want: resolve.Result{Port: 5432, Protocol: portspec.TCP, Outcome: resolve.Reaches}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := resolve.Reach(tc.set, host, tc.spelling)
			if got.Reason == "" {
				t.Errorf("Reach(%v, %+v): empty reason", tc.set, tc.spelling)
			}
			for _, want := range tc.reason {
				if !strings.Contains(got.Reason, want) {
					t.Errorf("Reach(%v, %+v).Reason = %q; want it to contain %q", tc.set, tc.spelling, got.Reason, want)
				}
			}
			for _, unwanted := range tc.notInReason {
				if strings.Contains(got.Reason, unwanted) {
					t.Errorf("Reach(%v, %+v).Reason = %q; want it not to contain %q", tc.set, tc.spelling, got.Reason, unwanted)
				}
			}
			got.Reason = ""
			if got != tc.want {
				t.Errorf("Reach(%v, %+v) = %+v; want %+v", tc.set, tc.spelling, got, tc.want)
			}
		})
	}
}

// allSets are every port set above: the properties below hold for each.
var allSets = map[string]portspec.PortSet{
	"mixed": mixed, "tcpOnly": tcpOnly, "httpOnly": httpOnly, "noPorts": noPorts,
	"tls443": tls443, "http443": http443, "http443Extra": http443Extra,
	"port80HTTP": port80HTTP, "port80HTTP2": port80HTTP2, "port80TCP": port80TCP,
	"tcpPrimary": tcpPrimary, "tcpPrimaries": tcpPrimaries, "httpPrimTCPs": httpPrimTCPs,
	"noPrimary": noPrimary, "lostPrimary": lostPrimary, "lostPrimary2": lostPrimary2,
}

// TestSpellingProtocol checks that a spelling's protocol never depends on the service: http://
// and :18081 are HTTP and https:// and :18082 TCP whatever the outcome, :<p> is p's declared
// protocol, and an undeclared port has none.
func TestSpellingProtocol(t *testing.T) {
	for name, s := range allSets {
		t.Run(name, func(t *testing.T) {
			fixed := map[string]struct {
				spelling resolve.Spelling
				want     portspec.Protocol
			}{
				"http://":  {httpURL, portspec.HTTP},
				":18081":   {meshHTTP, portspec.HTTP},
				"https://": {httpsURL, portspec.TCP},
				":18082":   {meshTCP, portspec.TCP},
				":1":       {port(1), ""},
				":65535":   {port(65535), ""},
			}
			for sp, tc := range fixed {
				if got := resolve.Reach(s, host, tc.spelling); got.Protocol != tc.want {
					t.Errorf("%s: protocol %q (outcome %s); want %q", sp, got.Protocol, got.Outcome, tc.want)
				}
			}
			for _, p := range s.Ports {
				got := resolve.Reach(s, host, port(p.Number))
				want := resolve.Result{Port: p.Number, Protocol: p.Protocol, Outcome: resolve.Reaches}
				if got.Reason = ""; got != want {
					t.Errorf(":%d: %+v; want %+v", p.Number, got, want)
				}
			}
		})
	}
}

// TestReachAgreesWithDefaults checks that the mesh spellings reach exactly the default ports, and
// are Misdirected or Refused exactly when there is none.
func TestReachAgreesWithDefaults(t *testing.T) {
	for name, s := range allSets {
		t.Run(name, func(t *testing.T) {
			httpPort, httpOK := resolve.DefaultHTTPPort(s)
			for _, sp := range []resolve.Spelling{httpURL, meshHTTP} {
				got := resolve.Reach(s, host, sp)
				switch {
				case httpOK && (got.Outcome != resolve.Reaches || got.Port != httpPort):
					t.Errorf("%+v: %+v; want Reaches %d", sp, got, httpPort)
				case !httpOK && (got.Outcome != resolve.Misdirected || got.Port != 0):
					t.Errorf("%+v: %+v; want Misdirected", sp, got)
				}
			}
			tcpPort, tcpOK := resolve.DefaultTCPPort(s)
			got := resolve.Reach(s, host, meshTCP)
			switch {
			case tcpOK && (got.Outcome != resolve.Reaches || got.Port != tcpPort):
				t.Errorf(":18082: %+v; want Reaches %d", got, tcpPort)
			case !tcpOK && (got.Outcome != resolve.Refused || got.Port != 0):
				t.Errorf(":18082: %+v; want Refused", got)
			}
		})
	}
}

func TestHosts(t *testing.T) {
	tests := map[string]struct {
		name, namespace, domain string
		want                    []string
	}{
		"default mesh domain": {"payments", "shop", resolve.DefaultMeshDomain, []string{
			"payments.shop.aether.internal", "payments.shop.svc.cluster.local", "payments.shop"}},
		"custom mesh domain": {"db", "data", "mesh.example.com", []string{
			"db.data.mesh.example.com", "db.data.svc.cluster.local", "db.data"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := resolve.Hosts(tc.name, tc.namespace, tc.domain); !slices.Equal(got, tc.want) {
				t.Errorf("Hosts(%q, %q, %q) = %q; want %q", tc.name, tc.namespace, tc.domain, got, tc.want)
			}
		})
	}
	if resolve.DefaultMeshDomain != "aether.internal" {
		t.Errorf("DefaultMeshDomain = %q; want aether.internal (DESIGN section 5)", resolve.DefaultMeshDomain)
	}
}

// TestSurfaceRowOrder checks the rows of a surface: per host, in the order of the hosts,
// http://, :18081, https://, :18082, the declared ports ascending, and :*.
func TestSurfaceRowOrder(t *testing.T) {
	hosts := resolve.Hosts("payments", "shop", resolve.DefaultMeshDomain)
	tests := map[string]struct {
		set   portspec.PortSet
		ports []string
	}{
		"mixed":    {mixed, []string{":8080", ":9000", ":9090"}},
		"no ports": {noPorts, nil},
		"unsorted input": {portspec.NewPortSet(9000, []portspec.Port{tcp(9000), h1(80), h2(9090), tcp(443), h1(8080)}),
			[]string{":80", ":443", ":8080", ":9000", ":9090"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var want []string
			for _, h := range hosts {
				want = append(want, "http://"+h+"/", h+":18081", "https://"+h+"/", h+":18082")
				for _, p := range tc.ports {
					want = append(want, h+p)
				}
				want = append(want, h+resolve.OtherPorts)
			}
			surface := resolve.Surface(tc.set, hosts...)
			got := make([]string, len(surface))
			for i, d := range surface {
				got[i] = d.Address
			}
			if !slices.Equal(got, want) {
				t.Errorf("addresses:\n got %q\nwant %q", got, want)
			}
			for i, d := range surface {
				if d.Address == "" || d.Reason == "" || d.Outcome == "" {
					t.Errorf("row %d: incomplete %+v", i, d)
				}
				if strings.HasSuffix(d.Address, resolve.OtherPorts) {
					other := resolve.Result{Outcome: resolve.Refused}
					if d.Reason = ""; d.Result != other {
						t.Errorf("row %d %s: %+v; want Refused with no port or protocol", i, d.Address, d.Result)
					}
				}
			}
		})
	}
	if got := resolve.Surface(mixed); len(got) != 0 {
		t.Errorf("Surface with no hosts: %d rows; want none", len(got))
	}
}

// TestSurfaceRowsAreReach checks that every row but :* is what Reach says for its host and
// spelling: the surface decides nothing on its own.
func TestSurfaceRowsAreReach(t *testing.T) {
	hosts := resolve.Hosts("payments", "shop", resolve.DefaultMeshDomain)
	for name, s := range allSets {
		t.Run(name, func(t *testing.T) {
			surface := resolve.Surface(s, hosts...)
			if want := len(hosts) * (len(s.Ports) + 5); len(surface) != want {
				t.Fatalf("%d rows; want %d", len(surface), want)
			}
			rows := len(s.Ports) + 5
			for i, h := range hosts {
				spellings := []resolve.Spelling{httpURL, meshHTTP, httpsURL, meshTCP}
				for _, p := range s.Ports {
					spellings = append(spellings, port(p.Number))
				}
				for j, sp := range spellings {
					d := surface[i*rows+j]
					if want := resolve.Reach(s, h, sp); d.Result != want {
						t.Errorf("%s: %+v; want Reach's %+v", d.Address, d.Result, want)
					}
				}
			}
		})
	}
}
