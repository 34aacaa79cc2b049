// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package resolve_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/golden"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out.json from DialSurface, and delete the orphaned ones")

const (
	goldenDir = "testdata"
	inSuffix  = ".in.json"
	outSuffix = ".out.json"
)

// surfaceCase is a testdata/<case>.in.json file: a port set, ports in any order, and the mesh's
// identity issuer (spire when absent).
type surfaceCase struct {
	PortSet portspec.PortSet        `json:"portSet"`
	Issuer  workloadidentity.Issuer `json:"issuer,omitempty"`
}

// TestSurfaceGolden compares the dial surface of each testdata/<case>.in.json with
// testdata/<case>.out.json. Regenerate with go test ./internal/resolve -update, and review the
// diff against DESIGN section 5.
func TestSurfaceGolden(t *testing.T) {
	cases := golden.Cases(t, goldenDir, inSuffix)
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			golden.Compare(t, goldenDir, name, outSuffix, surfaceJSON(t, name), *update)
		})
	}
	golden.Orphans(t, goldenDir, cases, inSuffix, outSuffix, *update)
}

// surfaceJSON reads a case and renders its surface as the golden file holds it: indented, and
// <name> left as written.
func surfaceJSON(t *testing.T, name string) []byte {
	t.Helper()
	in := filepath.Join(goldenDir, name+inSuffix)
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	var c surfaceCase
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(resolve.DialSurface(portspec.NewPortSet(c.PortSet.Primary, c.PortSet.Ports), c.Issuer)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestSurfaceGoldenCases keeps the cases the design review relies on: every edge of DESIGN
// section 5's table has a golden file.
func TestSurfaceGoldenCases(t *testing.T) {
	for _, name := range []string{
		"mixed", "tcp-only", "http-only", "no-ports", "443-http", "443-tcp", "port-80-and-443-tcp",
		"port-80-http2", "port-80-tcp", "port-80-tcp-only", "tcp-primary-lowest-http", "no-primary",
		// Without an identity issuer: the raw-TCP rows refused, the HTTP rows as they were.
		"mixed-no-issuer", "tcp-only-no-issuer", "http-only-no-issuer", "port-80-and-443-tcp-no-issuer",
		// UDP: a UDP primary (which :18082/udp reaches), UDP ports beside an HTTP primary (80/udp
		// among them, which http:// does not reach), and UDP without an issuer (plaintext: reached).
		"udp-primary", "udp-beside-http", "udp-only-no-issuer",
	} {
		if _, err := os.Stat(filepath.Join(goldenDir, name+inSuffix)); err != nil {
			t.Errorf("case %s: %v", name, err)
		}
	}
}

func TestNames(t *testing.T) {
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
			if got := resolve.Names(tc.name, tc.namespace, tc.domain); !slices.Equal(got, tc.want) {
				t.Errorf("Names(%q, %q, %q) = %q; want %q", tc.name, tc.namespace, tc.domain, got, tc.want)
			}
		})
	}
	if resolve.DefaultMeshDomain != "aether.internal" {
		t.Errorf("DefaultMeshDomain = %q; want aether.internal (DESIGN section 5)", resolve.DefaultMeshDomain)
	}
}

// wantAddresses is the documented order of a surface's rows for the declared ports given, udp
// those of them declared UDP (their dial rows end in /udp).
func wantAddresses(udp []int32, ports ...int32) []string {
	const n = resolve.NamePlaceholder
	want := []string{"http://" + n + "/", n + ":18081", "Host: " + n}
	for _, p := range ports {
		want = append(want, "Host: "+n+":"+strconv.Itoa(int(p)))
	}
	want = append(want, "Host: "+n+":18081", "Host: "+n+":18082", "Host: "+n+":*", "https://"+n+"/", n+":18082", n+":18082/udp")
	for _, p := range ports {
		row := n + ":" + strconv.Itoa(int(p))
		if slices.Contains(udp, p) {
			row += "/udp"
		}
		want = append(want, row)
	}
	return append(want, n+":*")
}

// TestSurfaceRows checks the rows of a surface, with and without an identity issuer: each
// spelling once, in the documented order, SurfaceLen of them (2×ports + 10), each complete, and a
// reason that fits the API's 1024 bytes.
func TestSurfaceRows(t *testing.T) {
	var most []portspec.Port
	var mostNumbers []int32
	var mostUDP []int32
	for i := range int32(256) { // the MeshService status holds at most 256 ports
		most = append(most, []portspec.Port{h1(20000 + i), h2(20000 + i), tcp(20000 + i), udp(20000 + i)}[i%4])
		mostNumbers = append(mostNumbers, 20000+i)
		if i%4 == 3 {
			mostUDP = append(mostUDP, 20000+i)
		}
	}
	tests := map[string]struct {
		set   portspec.PortSet
		ports []int32
		udp   []int32
	}{
		"mixed":    {set: mixed, ports: []int32{8080, 9000, 9090}},
		"no ports": {set: noPorts},
		"unsorted input": {set: portspec.NewPortSet(9000, []portspec.Port{tcp(9000), h1(80), h2(9090), tcp(443), h1(8080)}),
			ports: []int32{80, 443, 8080, 9000, 9090}},
		"udp ports":                     {set: udpPrimary, ports: []int32{5353, 8080, 9000}, udp: []int32{5353}},
		"the most ports a status holds": {set: set(20000, most...), ports: mostNumbers, udp: mostUDP},
	}
	for name, tc := range tests {
		for _, issuer := range workloadidentity.Issuers {
			t.Run(name+"/"+string(issuer), func(t *testing.T) {
				checkSurfaceRows(t, resolve.DialSurface(tc.set, issuer), tc.ports, tc.udp)
			})
		}
	}
}

// checkSurfaceRows checks one surface's rows for TestSurfaceRows: ports are its declared ports,
// udp those of them declared UDP.
func checkSurfaceRows(t *testing.T, surface []resolve.Dial, ports, udp []int32) {
	t.Helper()
	got := make([]string, len(surface))
	for i, d := range surface {
		got[i] = d.Address
	}
	if want := wantAddresses(udp, ports...); !slices.Equal(got, want) {
		t.Errorf("addresses:\n got %q\nwant %q", got, want)
	}
	if want := 2*len(ports) + 10; len(surface) != want || resolve.SurfaceLen(len(ports)) != want {
		t.Errorf("%d rows, SurfaceLen %d; want 2×%d+10 = %d", len(surface), resolve.SurfaceLen(len(ports)), len(ports), want)
	}
	for i, d := range surface {
		if d.Address == "" || d.Reason == "" || d.Outcome == "" {
			t.Errorf("row %d: incomplete %+v", i, d)
		}
		if len(d.Reason) > 1024 || len(d.Body) > resolve.MaxBodyLength {
			t.Errorf("row %d %s: reason of %d bytes (the API holds 1024), body of %d", i, d.Address, len(d.Reason), len(d.Body))
		}
	}
}

// TestSurfaceTable checks the rows of DESIGN section 5's table that are not HTTP requests
// (those are TestSurfaceAgreesWithHTTPRequest's), for every set: https://, :18081, :18082,
// :<p> and :*.
func TestSurfaceTable(t *testing.T) {
	const n = resolve.NamePlaceholder
	for name, s := range allSets {
		t.Run(name, func(t *testing.T) {
			rows := map[string]resolve.Result{}
			for _, d := range resolve.DialSurface(s, workloadidentity.SPIRE) {
				rows[d.Address] = d.Result
			}
			check := func(address string, want resolve.Result) {
				t.Helper()
				got := rows[address]
				if got.Reason = ""; got != want {
					t.Errorf("%s: %+v; want %+v", address, got, want)
				}
			}
			check(n+":18081", resolve.Result{Protocol: meshv1alpha1.ProtocolHTTP, Outcome: resolve.HostDecides})
			if p, declared := s.Lookup(443); declared && p == meshv1alpha1.ProtocolTCP {
				check("https://"+n+"/", resolve.Result{Port: 443, Protocol: meshv1alpha1.ProtocolTCP, Outcome: resolve.Reaches})
			} else {
				check("https://"+n+"/", resolve.Result{Protocol: meshv1alpha1.ProtocolTCP, Outcome: resolve.Refused})
			}
			if port, ok := resolve.DefaultTCPPort(s); ok {
				check(n+":18082", resolve.Result{Port: port, Protocol: meshv1alpha1.ProtocolTCP, Outcome: resolve.Reaches})
			} else {
				check(n+":18082", resolve.Result{Protocol: meshv1alpha1.ProtocolTCP, Outcome: resolve.Refused})
			}
			if port, ok := resolve.DefaultUDPPort(s); ok {
				check(n+":18082/udp", resolve.Result{Port: port, Protocol: meshv1alpha1.ProtocolUDP, Outcome: resolve.Reaches})
			} else {
				check(n+":18082/udp", resolve.Result{Protocol: meshv1alpha1.ProtocolUDP, Outcome: resolve.Refused})
			}
			for _, p := range s.Ports {
				address := n + ":" + strconv.Itoa(int(p.Port))
				if p.Protocol == meshv1alpha1.ProtocolUDP {
					address += "/udp"
				}
				check(address, resolve.Result{Port: p.Port, Protocol: p.Protocol, Outcome: resolve.Reaches})
			}
			check(n+":*", resolve.Result{Outcome: resolve.Refused})
		})
	}
}

// TestSurfaceReasons spot-checks the words of the rows that are not HTTP requests.
func TestSurfaceReasons(t *testing.T) {
	const n = resolve.NamePlaceholder
	tests := []struct {
		set     portspec.PortSet
		address string
		words   []string
	}{
		{mixed, n + ":18081", []string{"HTTP proxy port", "Host header decides"}},
		{tls443, "https://" + n + "/", []string{"443 is declared TCP"}},
		{http443, "https://" + n + "/", []string{"443 is declared HTTP, not TCP", "443=tcp"}},
		{set(443, h2(443)), "https://" + n + "/", []string{"HTTP2"}},
		{mixed, "https://" + n + "/", []string{"443 is not declared"}},
		{httpOnly, n + ":18082", []string{"no TCP port"}},
		{tcpPrimaries, n + ":18082", []string{"primary port 9000 is TCP"}},
		{httpPrimTCPs, n + ":18082", []string{"port 5432 is the lowest TCP port"}},
		{mixed, n + ":9090", []string{"port 9090 is declared HTTP2"}},
		{mixed, n + ":*", []string{"refused"}},
	}
	for _, tc := range tests {
		i := slices.IndexFunc(resolve.DialSurface(tc.set, workloadidentity.SPIRE), func(d resolve.Dial) bool { return d.Address == tc.address })
		if i < 0 {
			t.Errorf("%v: no row %s", tc.set, tc.address)
			continue
		}
		reason := resolve.DialSurface(tc.set, workloadidentity.SPIRE)[i].Reason
		for _, w := range tc.words {
			if !strings.Contains(reason, w) {
				t.Errorf("%v, %s: reason %q lacks %q", tc.set, tc.address, reason, w)
			}
		}
	}
}

// undeclaredSamples are ports the Host: <name>:* row stands for, when s does not declare them.
var undeclaredSamples = []int32{1, 80, 81, 443, 1234, 8080, 65535}

// disagreements compares every HTTP-request row of surface (http://<name>/, Host: <name>,
// Host: <name>:<p>, Host: <name>:*), written for each name, with what HTTPRequest answers for
// that authority on s: word for word, except the :* row, which stands for many ports (outcome,
// error and port must agree for each sample). It also reports a declared port with no Host row,
// so that a row left out cannot agree by absence.
func disagreements(s portspec.PortSet, surface []resolve.Dial, names []string) []string {
	var out []string
	covered := map[string]bool{}
	for _, row := range surface {
		for _, name := range names {
			d := row.For(name)
			authority, isHost := strings.CutPrefix(d.Address, resolve.HostRowPrefix)
			switch {
			case d.Address == "http://"+name+"/":
				authority = name
			case !isHost:
				continue
			}
			if isHost {
				covered[strings.TrimPrefix(authority, name)] = true
			}
			if strings.HasSuffix(authority, ":"+resolve.AnyOtherPort) {
				for _, p := range undeclaredSamples {
					if _, declared := s.Lookup(p); declared {
						continue
					}
					got := resolve.HTTPRequest(s, name+":"+strconv.Itoa(int(p)))
					if got.Outcome != d.Outcome || got.Error != d.Error || got.Port != d.Port || got.Protocol != d.Protocol {
						out = append(out, fmt.Sprintf("%s for port %d: row %+v; HTTPRequest %+v", d.Address, p, d.Result, got))
					}
				}
				continue
			}
			if got := resolve.HTTPRequest(s, authority); got != d.Result {
				out = append(out, fmt.Sprintf("%s: row %+v;\nHTTPRequest(%q) %+v", d.Address, d.Result, authority, got))
			}
		}
	}
	for _, suffix := range []string{"", ":18081", ":18082", ":*"} {
		if !covered[suffix] {
			out = append(out, fmt.Sprintf("no row for Host: <name>%s", suffix))
		}
	}
	for _, p := range s.Ports {
		if suffix := ":" + strconv.Itoa(int(p.Port)); !covered[suffix] {
			out = append(out, "no Host row for the declared port "+suffix)
		}
	}
	return out
}

// TestSurfaceAgreesWithHTTPRequest: the status (the surface) and the data plane (HTTPRequest)
// can never disagree: for every set and every name, each HTTP-request row is what HTTPRequest
// answers. The negative controls prove the check can fail: a surface of a retyped port, a
// surface missing a row, a row with other words.
func TestSurfaceAgreesWithHTTPRequest(t *testing.T) {
	names := resolve.Names("payments", "shop", resolve.DefaultMeshDomain)
	for name, s := range allSets {
		t.Run(name, func(t *testing.T) {
			if d := disagreements(s, resolve.DialSurface(s, workloadidentity.SPIRE), names); len(d) > 0 {
				t.Errorf("the surface disagrees with HTTPRequest:\n%s", strings.Join(d, "\n"))
			}
		})
	}

	t.Run("negative control: the surface of 8080 retyped TCP", func(t *testing.T) {
		retyped := set(8080, tcp(8080), h2(9090), tcp(9000))
		d := disagreements(mixed, resolve.DialSurface(retyped, workloadidentity.SPIRE), names)
		if !slices.ContainsFunc(d, func(s string) bool { return strings.HasPrefix(s, "Host: payments.shop:8080: row") }) {
			t.Errorf("a surface that says 8080 is not HTTP agrees with HTTPRequest on a set where it is:\n%s", strings.Join(d, "\n"))
		}
	})
	t.Run("negative control: a Host row left out", func(t *testing.T) {
		surface := slices.DeleteFunc(resolve.DialSurface(mixed, workloadidentity.SPIRE), func(d resolve.Dial) bool {
			return d.Address == resolve.HostRowPrefix+resolve.NamePlaceholder+":9000"
		})
		if d := disagreements(mixed, surface, names); !slices.Contains(d, "no Host row for the declared port :9000") {
			t.Errorf("a surface without the Host row of 9000 passes: %q", d)
		}
	})
	t.Run("negative control: other words", func(t *testing.T) {
		surface := resolve.DialSurface(mixed, workloadidentity.SPIRE)
		surface[0].Body += "!"
		if d := disagreements(mixed, surface, names); len(d) != len(names) {
			t.Errorf("a changed body on http://<name>/: %d disagreements, want one per name (%d): %q", len(d), len(names), d)
		}
	})
	t.Run("negative control: the :* row says Reaches", func(t *testing.T) {
		surface := resolve.DialSurface(mixed, workloadidentity.SPIRE)
		i := slices.IndexFunc(surface, func(d resolve.Dial) bool { return strings.HasSuffix(d.Address, ":*") })
		surface[i].Outcome = resolve.Reaches
		if d := disagreements(mixed, surface, names); len(d) == 0 {
			t.Error("a Host: <name>:* row that Reaches passes")
		}
	})
}

// TestDialPorts: the ports capture takes on a service's VIP are, said another way than the
// surface's rows, 80 and 18081 always, 18082 when there is a default TCP port, and every declared
// TCP or HTTP port (never a UDP one: a TCP connection to it reaches nothing); for every port set
// above.
func TestDialPorts(t *testing.T) {
	for name, s := range allSets {
		t.Run(name, func(t *testing.T) {
			want := []int32{resolve.HTTPPort, meshv1alpha1.MeshHTTPPort}
			if _, ok := resolve.DefaultTCPPort(s); ok {
				want = append(want, meshv1alpha1.MeshTCPPort)
			}
			for _, p := range s.Ports {
				if p.Protocol != meshv1alpha1.ProtocolUDP {
					want = append(want, p.Port)
				}
			}
			slices.Sort(want)
			want = slices.Compact(want)
			if got := resolve.DialPorts(s, workloadidentity.SPIRE); !slices.Equal(got, want) {
				t.Errorf("DialPorts = %v, want %v", got, want)
			}
		})
	}
}

// TestUDPDialPorts: the ports UDP capture is to take on a service's VIP are 18082 when the primary
// is UDP and every declared UDP port, whatever the issuer (UDP is plaintext); for every port set
// above.
func TestUDPDialPorts(t *testing.T) {
	for name, s := range allSets {
		t.Run(name, func(t *testing.T) {
			var want []int32
			if p, _ := s.Lookup(s.Primary); p == meshv1alpha1.ProtocolUDP {
				want = append(want, meshv1alpha1.MeshTCPPort)
			}
			for _, p := range s.Ports {
				if p.Protocol == meshv1alpha1.ProtocolUDP {
					want = append(want, p.Port)
				}
			}
			slices.Sort(want)
			if got := resolve.UDPDialPorts(s); !slices.Equal(got, want) {
				t.Errorf("UDPDialPorts = %v, want %v", got, want)
			}
		})
	}
}

// TestConnectionAddress: a dial finds its row by port and transport; a TCP dial of a UDP port, and
// a datagram to a TCP or HTTP port, find <name>:*, which is refused.
func TestConnectionAddress(t *testing.T) {
	const n = resolve.NamePlaceholder
	tests := []struct {
		port int32
		udp  bool
		want string
	}{
		{5353, true, n + ":5353/udp"},
		{5353, false, n + ":*"},
		{9000, false, n + ":9000"},
		{9000, true, n + ":*"},
		{8080, true, n + ":*"},
		{18082, true, n + ":18082/udp"},
		{18082, false, n + ":18082"},
		{18081, false, n + ":18081"},
		{18081, true, n + ":*"},
		{7, false, n + ":*"},
	}
	rows := map[string]resolve.Result{}
	for _, d := range resolve.DialSurface(udpPrimary, workloadidentity.SPIRE) {
		rows[d.Address] = d.Result
	}
	for _, tc := range tests {
		got := resolve.ConnectionAddress(udpPrimary, tc.port, tc.udp)
		if got != tc.want {
			t.Errorf("ConnectionAddress(%d, udp %t) = %q, want %q", tc.port, tc.udp, got, tc.want)
		}
		if _, ok := rows[got]; !ok {
			t.Errorf("ConnectionAddress(%d, udp %t) = %q: no row of the surface", tc.port, tc.udp, got)
		}
	}
	if r := rows[n+":*"]; r.Outcome != resolve.Refused || !strings.Contains(r.Reason, "a TCP connection never reaches a port declared UDP") {
		t.Errorf("<name>:* = %+v: want Refused, saying a TCP connection never reaches a UDP port", r)
	}
}

// noIdentityPrefix starts the reason of a raw-TCP row refused for want of a workload identity.
const noIdentityPrefix = "no workload identity, so the connection is refused: "

// withoutIssuer compares the surface of s without an identity issuer (none) with the surface
// with one (spire), row by row, and says each way they differ other than the rule: a raw-TCP row
// that reaches a port with an issuer is refused without one, no port, the same protocol, its
// reason the no-identity words, then the row's own reason, then workloadidentity.NoIssuerTCP (the fix);
// every other row is the same, word for word.
func withoutIssuer(with, without []resolve.Dial) []string {
	if len(with) != len(without) {
		return []string{fmt.Sprintf("%d rows without an issuer, %d with one: the rows must not change", len(without), len(with))}
	}
	var out []string
	for i, w := range with {
		got := without[i]
		want := w
		if w.Protocol == meshv1alpha1.ProtocolTCP && w.Outcome == resolve.Reaches {
			want.Result = resolve.Result{Protocol: meshv1alpha1.ProtocolTCP, Outcome: resolve.Refused,
				Reason: noIdentityPrefix + w.Reason + "; " + workloadidentity.NoIssuerTCP}
		}
		if got != want {
			out = append(out, fmt.Sprintf("%s: without an issuer %+v;\nwant %+v", w.Address, got.Result, want.Result))
		}
	}
	return out
}

// TestSurfaceWithoutIssuer: without an identity issuer, every raw-TCP spelling that reaches a
// port with one (https:// on 443=tcp, :18082, :<p> for a TCP p) is refused and says why (no
// workload identity) and the fix; every HTTP row, and every row refused already, is unchanged;
// and no TCP row reaches anything. The zero issuer is spire's surface. The negative control: a
// rule that forgot :18082 is caught.
func TestSurfaceWithoutIssuer(t *testing.T) {
	for name, s := range allSets {
		t.Run(name, func(t *testing.T) {
			with, without := resolve.DialSurface(s, workloadidentity.SPIRE), resolve.DialSurface(s, workloadidentity.NoIssuer)
			if d := withoutIssuer(with, without); len(d) > 0 {
				t.Errorf("the surface without an issuer:\n%s", strings.Join(d, "\n"))
			}
			for _, d := range without {
				if d.Protocol == meshv1alpha1.ProtocolTCP && d.Outcome != resolve.Refused {
					t.Errorf("%s is TCP and %s without an issuer; it must be refused", d.Address, d.Outcome)
				}
				if d.Port != 0 && d.Protocol == meshv1alpha1.ProtocolTCP {
					t.Errorf("%s reaches port %d as %s without an issuer", d.Address, d.Port, d.Protocol)
				}
			}
			if zero := resolve.DialSurface(s, ""); !slices.Equal(zero, with) {
				t.Errorf("the zero issuer's surface differs from spire's")
			}
		})
	}
	t.Run("the reason says why and the fix", func(t *testing.T) {
		rows := resolve.DialSurface(mixed, workloadidentity.NoIssuer)
		i := slices.IndexFunc(rows, func(d resolve.Dial) bool { return d.Address == resolve.NamePlaceholder+":9000" })
		for _, w := range []string{"no workload identity", "refused", "port 9000 is declared TCP", "mTLS", "never plaintext",
			"--identity-issuer=none", "install SPIRE", "--identity-issuer=spire"} {
			if !strings.Contains(rows[i].Reason, w) {
				t.Errorf("<name>:9000 without an issuer: reason %q lacks %q", rows[i].Reason, w)
			}
		}
	})
	t.Run("negative control: :18082 left reaching", func(t *testing.T) {
		with, without := resolve.DialSurface(mixed, workloadidentity.SPIRE), resolve.DialSurface(mixed, workloadidentity.NoIssuer)
		i := slices.IndexFunc(with, func(d resolve.Dial) bool { return d.Address == resolve.NamePlaceholder+":18082" })
		without[i] = with[i]
		d := withoutIssuer(with, without)
		if len(d) != 1 || !strings.HasPrefix(d[0], "<name>:18082: without an issuer {Port:9000") {
			t.Fatalf("a surface whose :18082 still reaches 9000 without an issuer: %q", d)
		}
		t.Logf("negative control: %s", strings.SplitN(d[0], "\n", 2)[0])
	})
}

// TestDialPortsWithoutIssuer: without an identity issuer, capture takes on a service's VIP 80
// and 18081 (HTTP, answered by the mesh) and every HTTP-class port, and no port only raw TCP
// dials (18082, a TCP port, 443 declared TCP): those rows are refused, so kube-proxy refuses
// the dial (the generated Service has no endpoints) and no byte of it reaches the mesh.
func TestDialPortsWithoutIssuer(t *testing.T) {
	for name, s := range allSets {
		t.Run(name, func(t *testing.T) {
			want := []int32{resolve.HTTPPort, meshv1alpha1.MeshHTTPPort}
			for _, p := range s.Ports {
				if p.Protocol.IsHTTP() {
					want = append(want, p.Port)
				}
			}
			slices.Sort(want)
			want = slices.Compact(want)
			if got := resolve.DialPorts(s, workloadidentity.NoIssuer); !slices.Equal(got, want) {
				t.Errorf("DialPorts without an issuer = %v, want %v", got, want)
			}
		})
	}
}

// TestNamesFrom: the bare name reaches a service from its own namespace only (the workload page:
// "a name without a namespace (Host: my-svc:8080) is my-svc in the caller's own namespace"),
// after the names that hold from anywhere.
func TestNamesFrom(t *testing.T) {
	everywhere := []string{"payments.shop.aether.internal", "payments.shop.svc.cluster.local", "payments.shop"}
	for caller, want := range map[string][]string{
		"shop": append(slices.Clone(everywhere), "payments"),
		"web":  everywhere,
		"":     everywhere,
	} {
		if got := resolve.NamesFrom("payments", "shop", caller, resolve.DefaultMeshDomain); !slices.Equal(got, want) {
			t.Errorf("NamesFrom(payments, shop, %q) = %q; want %q", caller, got, want)
		}
	}
	if got := resolve.LocalName("payments"); got != "payments" {
		t.Errorf("LocalName(payments) = %q; want payments", got)
	}
}

// TestDeclaredService: a declaration names exactly the service whose names from the caller's
// namespace (NamesFrom) include it, case aside, for every form internal/portspec accepts.
func TestDeclaredService(t *testing.T) {
	services := [][2]string{{"payments", "shop"}, {"payments", "finance"}, {"ledger", "shop"}}
	upstreams := []string{"payments", "payments.shop", "Payments.SHOP", "payments.finance", "ledger", "ledger.finance", "audit"}
	for _, caller := range []string{"shop", "finance", "elsewhere"} {
		for _, u := range upstreams {
			name, namespace := resolve.DeclaredService(u, caller)
			matched := 0
			for _, s := range services {
				want := slices.ContainsFunc(resolve.NamesFrom(s[0], s[1], caller, resolve.DefaultMeshDomain), func(n string) bool { return strings.EqualFold(n, u) })
				if got := name == s[0] && namespace == s[1]; got != want {
					t.Errorf("DeclaredService(%q, from %s) = %s.%s; names %s.%s: %v, want %v (NamesFrom)", u, caller, name, namespace, s[0], s[1], got, want)
				}
				if want {
					matched++
				}
			}
			if matched > 1 {
				t.Errorf("%q from %s names %d services", u, caller, matched)
			}
		}
	}
}
