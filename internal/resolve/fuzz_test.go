// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

var fuzzProtocols = [...]meshv1alpha1.Protocol{meshv1alpha1.ProtocolHTTP, meshv1alpha1.ProtocolHTTP2, meshv1alpha1.ProtocolTCP, meshv1alpha1.ProtocolUDP}

// fuzzPorts reads fuzzer bytes as a port set: byte 0 chooses the primary, then every three bytes
// are a port (two bytes, big-endian, mapped to 1..65535) and its protocol (one byte mod 4).
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
		ports = append(ports, portspec.Port{Port: n, Protocol: fuzzProtocols[int(data[2])%len(fuzzProtocols)]})
	}
	switch i := int(sel) % (len(ports) + 2); {
	case i < len(ports):
		primary = ports[i].Port
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
		n := uint16(p.Port - 1)
		data = append(data, byte(n>>8), byte(n), byte(slices.Index(fuzzProtocols[:], p.Protocol)))
	}
	return data
}

// fuzzSeeds are the port sets of DESIGN section 5's edges, as fuzzer bytes.
var fuzzSeeds = [][]byte{
	{},
	{0},
	fuzzBytes(0, h1(8080), h2(9090), tcp(9000)),                   // mixed, HTTP primary, no 80
	fuzzBytes(0, tcp(9000), tcp(5432)),                            // no HTTP port, TCP primary
	fuzzBytes(0, h1(8080)),                                        // no TCP port, no 80
	fuzzBytes(0, h1(80), tcp(443)),                                // 80 HTTP, 443 TCP
	fuzzBytes(0, h1(443)),                                         // 443 HTTP
	fuzzBytes(0, h1(8080), h2(80), tcp(9000)),                     // 80 HTTP2
	fuzzBytes(0, h1(8080), tcp(80), tcp(9000)),                    // 80 TCP, HTTP elsewhere
	fuzzBytes(0, tcp(80)),                                         // 80 TCP, no HTTP
	fuzzBytes(0, tcp(9000), tcp(5432), tcp(7000), h1(8080)),       // TCP primary among TCP ports
	fuzzBytes(0, h1(8080), tcp(9000), tcp(5432)),                  // HTTP primary, several TCP ports
	fuzzBytes(2, tcp(9000), h2(9090)),                             // primary 0
	fuzzBytes(3, tcp(9000), h2(9090)),                             // primary undeclared
	fuzzBytes(0, tcp(18081), tcp(18082), h1(18001), h1(18008)),    // reserved only
	fuzzBytes(1, tcp(9000), h1(9000), h2(1), tcp(65535), h1(443)), // duplicate, extremes
	{0xff, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 7},                 // 65535 wraps to 1
}

func FuzzSurface(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	names := resolve.Names("payments", "shop", resolve.DefaultMeshDomain)
	f.Fuzz(func(t *testing.T, data []byte) {
		primary, ports := fuzzPorts(data)
		s := portspec.NewPortSet(primary, ports)

		// Deterministic.
		surface := resolve.DialSurface(s, workloadidentity.SPIRE)
		if again := resolve.DialSurface(s, workloadidentity.SPIRE); !reflect.DeepEqual(surface, again) {
			t.Fatalf("DialSurface(%v) is not deterministic:\n%+v\n%+v", s, surface, again)
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
			if got := marshal(t, resolve.DialSurface(portspec.NewPortSet(primary, order), workloadidentity.SPIRE)); !bytes.Equal(got, want) {
				t.Fatalf("DialSurface depends on the order of the ports %v:\n%s\n%s", order, got, want)
			}
		}

		// The default ports, against DESIGN section 5.
		checkDefaultHTTP(t, s)
		checkDefaultTCP(t, s)
		checkDefaultUDP(t, s)

		// The rows: as many as the formula says, each sound, and the HTTP-request rows what
		// HTTPRequest answers for every name.
		if len(surface) != resolve.SurfaceLen(len(s.Ports)) || len(surface) != 2*len(s.Ports)+10 {
			t.Fatalf("%d rows for %d ports; SurfaceLen says %d", len(surface), len(s.Ports), resolve.SurfaceLen(len(s.Ports)))
		}
		for _, d := range surface {
			checkRow(t, s, d)
		}
		if d := disagreements(s, surface, names); len(d) > 0 {
			t.Fatalf("the surface of %v disagrees with HTTPRequest:\n%s", s, strings.Join(d, "\n"))
		}

		// Without an identity issuer: the same rows, raw TCP refused, the rest word for word.
		if d := withoutIssuer(surface, resolve.DialSurface(s, workloadidentity.NoIssuer)); len(d) > 0 {
			t.Fatalf("the surface of %v without an issuer:\n%s", s, strings.Join(d, "\n"))
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

// checkDefaultHTTP: 80 exactly when declared HTTP-class, whatever else is declared.
func checkDefaultHTTP(t *testing.T, s portspec.PortSet) {
	t.Helper()
	p, declared := s.Lookup(80)
	want := declared && p.IsHTTP()
	got, ok := resolve.DefaultHTTPPort(s)
	if ok != want || ok && got != 80 || !ok && got != 0 {
		t.Fatalf("DefaultHTTPPort(%v) = %d, %t; want 80 exactly when 80 is declared HTTP-class (%t)", s, got, ok, want)
	}
}

// checkDefaultTCP: ok exactly when a TCP port exists, and then the primary when TCP, else the
// lowest TCP port.
func checkDefaultTCP(t *testing.T, s portspec.PortSet) {
	t.Helper()
	got, ok := resolve.DefaultTCPPort(s)
	var want int32
	for _, p := range s.Ports {
		if p.Protocol == meshv1alpha1.ProtocolTCP {
			want = p.Port
			break
		}
	}
	if p, declared := s.Lookup(s.Primary); declared && p == meshv1alpha1.ProtocolTCP {
		want = s.Primary
	}
	if ok != (want != 0) || got != want {
		t.Fatalf("DefaultTCPPort(%v) = %d, %t; want %d", s, got, ok, want)
	}
}

// checkDefaultUDP: the primary exactly when it is UDP (the workload page: :18082/udp reaches the
// port in endpoint.aether.io/port), never another port.
func checkDefaultUDP(t *testing.T, s portspec.PortSet) {
	t.Helper()
	got, ok := resolve.DefaultUDPPort(s)
	var want int32
	if p, declared := s.Lookup(s.Primary); declared && p == meshv1alpha1.ProtocolUDP {
		want = s.Primary
	}
	if ok != (want != 0) || got != want {
		t.Fatalf("DefaultUDPPort(%v) = %d, %t; want %d", s, got, ok, want)
	}
}

// checkRow checks one row of the surface: the spelling's protocol, the port reached, the
// outcomes each spelling may have, and the answer's words when the mesh answers itself.
func checkRow(t *testing.T, s portspec.PortSet, d resolve.Dial) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v, row %s %+v: "+format, append([]any{s, d.Address, d.Result}, args...)...)
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
		} else if d.Protocol.IsHTTP() && !p.IsHTTP() || !d.Protocol.IsHTTP() && d.Protocol != p {
			// An HTTP row reaches an HTTP-class port, a TCP row a TCP port, a UDP row a UDP one.
			fail("port %d is declared %s", d.Port, p)
		}
	}
	if status := resolve.HTTPStatus(d.Outcome); (status != 0) != (d.Error != "") || (status != 0) != (d.Body != "") {
		fail("an x-aether-error and a body exactly when the mesh answers itself")
	}
	if d.Error != "" && !strings.Contains(d.Reason, resolve.ErrorHeader+": "+string(d.Error)) {
		fail("the reason does not name its x-aether-error")
	}
	if len(d.Reason) > 1024 || len(d.Body) > resolve.MaxBodyLength {
		fail("reason of %d bytes, body of %d", len(d.Reason), len(d.Body))
	}
	const n = resolve.NamePlaceholder
	var (
		wantProtocol meshv1alpha1.Protocol
		outcomes     []resolve.Outcome
	)
	switch {
	case strings.HasPrefix(d.Address, resolve.HostRowPrefix), d.Address == "http://"+n+"/":
		wantProtocol, outcomes = meshv1alpha1.ProtocolHTTP, []resolve.Outcome{resolve.Reaches, resolve.Misdirected}
	case d.Address == n+":18081":
		wantProtocol, outcomes = meshv1alpha1.ProtocolHTTP, []resolve.Outcome{resolve.HostDecides}
	case d.Address == "https://"+n+"/", d.Address == n+":18082":
		wantProtocol, outcomes = meshv1alpha1.ProtocolTCP, []resolve.Outcome{resolve.Reaches, resolve.Refused}
	case d.Address == n+":18082"+resolve.UDPSuffix:
		wantProtocol, outcomes = meshv1alpha1.ProtocolUDP, []resolve.Outcome{resolve.Reaches, resolve.Refused}
	case d.Address == n+":*":
		outcomes = []resolve.Outcome{resolve.Refused}
	default:
		number, udp := strings.CutSuffix(strings.TrimPrefix(d.Address, n+":"), resolve.UDPSuffix)
		port, err := strconv.Atoi(number)
		p, declared := s.Lookup(int32(port))
		if err != nil || !declared || d.Port != int32(port) {
			fail("a declared port's row does not reach it")
		}
		if udp != p.IsUDP() {
			fail("port %d is declared %s: its row is /udp exactly when the port is UDP", port, p)
		}
		wantProtocol, outcomes = p, []resolve.Outcome{resolve.Reaches}
	}
	if d.Protocol != wantProtocol {
		fail("protocol %q; want %q", d.Protocol, wantProtocol)
	}
	if !slices.Contains(outcomes, d.Outcome) {
		fail("outcome %s; want one of %v", d.Outcome, outcomes)
	}
}

// simpleAuthority is the plainest well-formed authority: a name and maybe a canonical port. Its
// only failure may be a port over 65535.
var simpleAuthority = regexp.MustCompile(`^[A-Za-z0-9._-]{1,253}(:[1-9][0-9]{0,4})?$`)

func FuzzHTTPRequest(f *testing.F) {
	authorities := []string{
		"payments.shop.aether.internal", "payments.shop:8080", "payments:80", "payments:9000",
		"payments:18081", "payments:18082", "payments:443", "payments:1", "payments:65535",
		"10.96.0.10:8080", "[fd00::10]:8080", "[fd00::10]", "",
		":8080", "payments:", "payments:0", "payments:65536", "payments:08080", "payments:+80",
		"payments:http", "fd00::10", "[fd00::10", "[]:80", "[fd00::10]x", "user@payments:80",
		"pay ments", "payments\x00:80", "paym\xffents",
	}
	for i, seed := range fuzzSeeds {
		f.Add(seed, authorities[i%len(authorities)])
	}
	for i, a := range authorities {
		f.Add(fuzzSeeds[2+i%(len(fuzzSeeds)-2)], a)
	}
	f.Fuzz(func(t *testing.T, data []byte, authority string) {
		primary, ports := fuzzPorts(data)
		s := portspec.NewPortSet(primary, ports)
		got := resolve.HTTPRequest(s, authority)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("HTTPRequest(%v, %q) = %+v: "+format, append([]any{s, authority, got}, args...)...)
		}

		// The answer is well-formed, its x-aether-error from the constant set, its body bounded.
		if got.Reason == "" {
			fail("no reason")
		}
		if got.Protocol != meshv1alpha1.ProtocolHTTP {
			fail("an HTTP request's protocol is HTTP")
		}
		if len(got.Body) > resolve.MaxBodyLength {
			fail("body of %d bytes", len(got.Body))
		}
		switch got.Outcome {
		case resolve.Reaches:
			if got.Error != "" || got.Body != "" {
				fail("Reaches with an x-aether-error or a body")
			}
		case resolve.Misdirected:
			if !slices.Contains([]resolve.MeshError{resolve.NoHTTPPort, resolve.PortNotDeclared, resolve.PortNotHTTP}, got.Error) {
				fail("a 421 with x-aether-error %q", got.Error)
			}
		case resolve.BadRequest:
			if got.Error != resolve.BadAuthority {
				fail("a 400 with x-aether-error %q", got.Error)
			}
		default:
			fail("outcome %s is not an answer to an HTTP request", got.Outcome)
		}
		if got.Outcome != resolve.Reaches && (got.Body == "" || got.Port != 0 ||
			!strings.Contains(got.Reason, resolve.ErrorHeader+": "+string(got.Error))) {
			fail("the mesh's own answer needs a body, no port, and the x-aether-error in the reason")
		}

		// A plain name with a port in range is never a bad authority.
		if simple := simpleAuthority.MatchString(authority); simple && got.Outcome == resolve.BadRequest {
			if _, port, _ := strings.Cut(authority, ":"); port == "" || len(port) < 5 || port <= "65535" {
				fail("a plain authority answered 400")
			}
		}
		if got.Outcome == resolve.BadRequest {
			return
		}

		// Anything else is an authority net/url reads the same way (host, then a canonical
		// port or none), and the port it names decides: Reaches exactly when declared
		// HTTP-class, and each 421 value in its case.
		u, err := url.Parse("http://" + authority + "/")
		if err != nil || u.Host != authority || u.User != nil {
			fail("not a bad authority, but net/url reads it otherwise (%v)", err)
		}
		port, portless := int32(80), u.Port() == ""
		if !portless {
			n, err := strconv.Atoi(u.Port())
			if err != nil || strconv.Itoa(n) != u.Port() || n < 1 || n > 65535 {
				fail("port %q is not canonical in 1..65535", u.Port())
			}
			port = int32(n)
		}
		p, declared := s.Lookup(port)
		if (got.Outcome == resolve.Reaches) != (declared && p.IsHTTP()) {
			fail("Reaches exactly when port %d is declared HTTP-class (declared %t, %s)", port, declared, p)
		}
		if got.Outcome == resolve.Reaches && got.Port != port {
			fail("reaches %d; the authority names %d", got.Port, port)
		}
		if got.Outcome != resolve.Misdirected {
			return
		}
		wantError := resolve.PortNotDeclared
		switch {
		case portless && !slices.ContainsFunc(s.Ports, func(p portspec.Port) bool { return p.Protocol.IsHTTP() }):
			wantError = resolve.NoHTTPPort
		case !portless && declared && !p.IsHTTP():
			wantError = resolve.PortNotHTTP
		}
		if got.Error != wantError {
			fail("x-aether-error %s; want %s", got.Error, wantError)
		}
	})
}
