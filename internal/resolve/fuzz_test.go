// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
)

var fuzzProtocols = [...]portspec.Protocol{portspec.HTTP, portspec.HTTP2, portspec.TCP}

// fuzzPorts reads fuzzer bytes as a port set: byte 0 chooses the primary, then every three bytes
// are a port (two bytes, big-endian, mapped to 1..65535) and its protocol (one byte mod 3).
// Reserved ports are skipped and a repeated number keeps its first protocol. Reading stops at
// portspec.MaxPorts ports (what one endpoint may declare): the properties do not depend on size,
// and small sets keep the fuzzer fast. The primary is the i-th port, or 0, or a port nobody
// declared: a service-level set whose primary is unknown. The ports are returned in input order.
func fuzzPorts(data []byte) (primary int32, ports []portspec.Port) {
	if len(data) == 0 {
		return 0, nil
	}
	sel, data := data[0], data[1:]
	seen := map[int32]bool{}
	for ; len(data) >= 3 && len(ports) < portspec.MaxPorts; data = data[3:] {
		n := 1 + int32(uint16(data[0])<<8|uint16(data[1]))%65535
		if _, reserved := portspec.Reserved[n]; reserved || seen[n] {
			continue
		}
		seen[n] = true
		ports = append(ports, portspec.Port{Number: n, Protocol: fuzzProtocols[data[2]%3]})
	}
	switch i := int(sel) % (len(ports) + 2); {
	case i < len(ports):
		primary = ports[i].Number
	case i == len(ports):
		primary = 0
	default:
		for primary = 1; seen[primary]; primary++ {
		}
	}
	return primary, ports
}

// fuzzBytes is the inverse of fuzzPorts, for the seed corpus: sel chooses the primary.
func fuzzBytes(sel byte, ports ...portspec.Port) []byte {
	data := []byte{sel}
	for _, p := range ports {
		n := uint16(p.Number - 1)
		data = append(data, byte(n>>8), byte(n), byte(slices.Index(fuzzProtocols[:], p.Protocol)))
	}
	return data
}

func FuzzSurface(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add(fuzzBytes(0, h1(8080), h2(9090), tcp(9000)))                   // mixed, HTTP primary
	f.Add(fuzzBytes(0, tcp(9000), tcp(5432)))                            // no HTTP port, TCP primary
	f.Add(fuzzBytes(0, h1(8080)))                                        // no TCP port
	f.Add(fuzzBytes(0, h1(80), tcp(443)))                                // 80 HTTP, 443 TCP
	f.Add(fuzzBytes(0, h1(443)))                                         // 443 HTTP
	f.Add(fuzzBytes(0, h1(8080), h2(80), tcp(9000)))                     // 80 HTTP2 beats the HTTP primary
	f.Add(fuzzBytes(0, h1(8080), tcp(80), tcp(9000)))                    // 80 TCP
	f.Add(fuzzBytes(0, tcp(9000), tcp(5432), tcp(7000), h1(8080)))       // TCP primary among TCP ports
	f.Add(fuzzBytes(0, h1(8080), tcp(9000), tcp(5432)))                  // HTTP primary, several TCP ports
	f.Add(fuzzBytes(2, tcp(9000), h2(9090)))                             // primary 0
	f.Add(fuzzBytes(3, tcp(9000), h2(9090)))                             // primary undeclared
	f.Add(fuzzBytes(0, tcp(18081), tcp(18082), h1(18001), h1(18008)))    // reserved only
	f.Add(fuzzBytes(1, tcp(9000), h1(9000), h2(1), tcp(65535), h1(443))) // duplicate, extremes
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 7})           // 65535 wraps to 1

	hosts := resolve.Hosts("payments", "shop", resolve.DefaultMeshDomain)
	f.Fuzz(func(t *testing.T, data []byte) {
		primary, ports := fuzzPorts(data)
		s := portspec.NewPortSet(primary, ports)

		// Deterministic.
		surface := resolve.Surface(s, hosts...)
		if again := resolve.Surface(s, hosts...); !reflect.DeepEqual(surface, again) {
			t.Fatalf("Surface(%v) is not deterministic:\n%+v\n%+v", s, surface, again)
		}

		// Independent of input order: reversed, and rotated by the selector byte.
		want := marshal(t, surface)
		reversed := slices.Clone(ports)
		slices.Reverse(reversed)
		orders := [][]portspec.Port{reversed}
		if len(ports) > 1 {
			k := int(data[0]) % len(ports)
			orders = append(orders, append(slices.Clone(ports[k:]), ports[:k]...))
		}
		for _, order := range orders {
			if got := marshal(t, resolve.Surface(portspec.NewPortSet(primary, order), hosts...)); !bytes.Equal(got, want) {
				t.Fatalf("Surface depends on the order of the ports %v:\n%s\n%s", order, got, want)
			}
		}

		// The default ports, against DESIGN section 5.
		checkDefault(t, s, "HTTP", portspec.Protocol.IsHTTP, 80, resolve.DefaultHTTPPort)
		checkDefault(t, s, "TCP", func(p portspec.Protocol) bool { return p == portspec.TCP }, 0, resolve.DefaultTCPPort)

		// The rows.
		if len(surface) != len(hosts)*(len(s.Ports)+5) {
			t.Fatalf("%d rows for %d hosts and %d ports", len(surface), len(hosts), len(s.Ports))
		}
		httpPort, httpOK := resolve.DefaultHTTPPort(s)
		tcpPort, tcpOK := resolve.DefaultTCPPort(s)
		for _, d := range surface {
			checkRow(t, s, d, httpPort, httpOK, tcpPort, tcpOK)
		}
	})
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkDefault checks a default port: ok exactly when a port of the class exists, and then the
// port is preferred when declared of the class (0: none), else the primary when of the class,
// else the lowest port of the class.
func checkDefault(t *testing.T, s portspec.PortSet, class string, of func(portspec.Protocol) bool,
	preferred int32, def func(portspec.PortSet) (int32, bool)) {
	t.Helper()
	got, ok := def(s)
	var want int32
	for _, p := range s.Ports {
		if of(p.Protocol) {
			want = p.Number
			break
		}
	}
	exists := want != 0
	if p, declared := s.Lookup(s.Primary); declared && of(p) {
		want = s.Primary
	}
	if p, declared := s.Lookup(preferred); preferred != 0 && declared && of(p) {
		want = preferred
	}
	if ok != exists {
		t.Fatalf("default %s port of %v: ok = %t; a port of the class exists: %t", class, s, ok, exists)
	}
	if !ok {
		if got != 0 {
			t.Fatalf("default %s port of %v: %d with ok = false", class, s, got)
		}
		return
	}
	if p, declared := s.Lookup(got); !declared || !of(p) {
		t.Fatalf("default %s port of %v: %d is not a declared %s port", class, s, got, class)
	}
	if got != want {
		t.Fatalf("default %s port of %v: %d; want %d", class, s, got, want)
	}
}

// checkRow checks one row of the surface: the spelling's protocol, the port reached, and the
// outcome each spelling may have.
func checkRow(t *testing.T, s portspec.PortSet, d resolve.Dial, httpPort int32, httpOK bool, tcpPort int32, tcpOK bool) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v, row %s %+v: "+format, append([]any{s, d.Address}, append([]any{d.Result}, args...)...)...)
	}
	if d.Reason == "" {
		fail("no reason")
	}
	if (d.Outcome == resolve.Reaches) != (d.Port != 0) {
		fail("a port is reached exactly when the outcome is Reaches")
	}
	if d.Outcome == resolve.Reaches {
		if p, declared := s.Lookup(d.Port); !declared {
			fail("port %d is not declared", d.Port)
		} else if d.Protocol == portspec.TCP && p != portspec.TCP || d.Protocol.IsHTTP() && !p.IsHTTP() {
			fail("port %d is declared %s", d.Port, p)
		}
	}
	var (
		wantProtocol portspec.Protocol
		wantPort     int32
		outcomes     []resolve.Outcome // when no port is reached
	)
	switch {
	case strings.HasPrefix(d.Address, "http://"), strings.HasSuffix(d.Address, ":18081"):
		wantProtocol, wantPort, outcomes = portspec.HTTP, httpPort, []resolve.Outcome{resolve.Misdirected}
		if !httpOK {
			wantPort = 0
			if !strings.Contains(d.Reason, resolve.NoHTTPPortHeader) || !strings.Contains(d.Reason, "421") {
				fail("the reason names no 421 with %s", resolve.NoHTTPPortHeader)
			}
		}
	case strings.HasPrefix(d.Address, "https://"):
		wantProtocol, outcomes = portspec.TCP, []resolve.Outcome{resolve.Refused}
		if p, declared := s.Lookup(443); declared && p == portspec.TCP {
			wantPort = 443
		}
	case strings.HasSuffix(d.Address, ":18082"):
		wantProtocol, wantPort, outcomes = portspec.TCP, tcpPort, []resolve.Outcome{resolve.Refused}
		if !tcpOK {
			wantPort = 0
		}
	case strings.HasSuffix(d.Address, resolve.OtherPorts):
		outcomes = []resolve.Outcome{resolve.Refused}
	default:
		n := d.Address[strings.LastIndexByte(d.Address, ':')+1:]
		p, declared := s.Lookup(d.Port)
		if !declared || n != strconv.Itoa(int(d.Port)) {
			fail("a declared port's row does not reach it")
		}
		wantProtocol, wantPort = p, d.Port
	}
	if d.Protocol != wantProtocol {
		fail("protocol %q; want %q", d.Protocol, wantProtocol)
	}
	if d.Port != wantPort {
		fail("port %d; want %d", d.Port, wantPort)
	}
	if d.Port == 0 && !slices.Contains(outcomes, d.Outcome) {
		fail("outcome %s; want one of %v", d.Outcome, outcomes)
	}
}
