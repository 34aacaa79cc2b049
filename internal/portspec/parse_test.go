// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// spec builds the Spec a test expects: the grammar's defaults, with primary and ports as given
// (ports in any order; the parser returns them sorted).
func spec(primary int32, ports ...Port) Spec {
	return Spec{
		PortSet:     NewPortSet(primary, ports),
		Weight:      DefaultWeight,
		HealthCheck: HealthCheck{Mode: DefaultHealthCheckMode, Path: DefaultHealthPath},
	}
}

func http1(n int32) Port { return Port{Port: n, Protocol: meshv1alpha1.ProtocolHTTP} }
func http2(n int32) Port { return Port{Port: n, Protocol: meshv1alpha1.ProtocolHTTP2} }
func tcp(n int32) Port   { return Port{Port: n, Protocol: meshv1alpha1.ProtocolTCP} }
func udp(n int32) Port   { return Port{Port: n, Protocol: meshv1alpha1.ProtocolUDP} }

// grpc is an HTTP2 port declared =grpc: HTTP2 that remembers it speaks gRPC.
func grpc(n int32) Port {
	return Port{Port: n, Protocol: meshv1alpha1.ProtocolHTTP2, AppProtocol: meshv1alpha1.AppProtocolGRPC}
}

// with returns s changed by f, so a row can state only what differs from the defaults.
func with(s Spec, f func(*Spec)) Spec {
	f(&s)
	return s
}

// portList is "first,first+1,...,first+n-1", each with suffix (when not empty).
func portList(first, n int, suffix string) string {
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = strconv.Itoa(first + i)
		if suffix != "" {
			tokens[i] += "=" + suffix
		}
	}
	return strings.Join(tokens, ",")
}

// portRange is the Ports first..first+n-1, each with protocol proto.
func portRange(first, n int, proto meshv1alpha1.Protocol) []Port {
	ports := make([]Port, n)
	for i := range ports {
		ports[i] = Port{Port: int32(first + i), Protocol: proto}
	}
	return ports
}

// metadataAnnotations is n metadata annotations k00=v00, k01=v01, ...
func metadataAnnotations(n int) (map[string]string, map[string]string) {
	annotations, meta := map[string]string{}, map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("k%02d", i), fmt.Sprintf("v%02d", i)
		annotations[AnnotationMetadataPrefix+k] = v
		meta[k] = v
	}
	return annotations, meta
}

func TestParse(t *testing.T) {
	maxMetaAnnotations, maxMeta := metadataAnnotations(MaxMetadata)
	longKey := strings.Repeat("k", 63)
	longValue := strings.Repeat("v", MaxMetadataValue)
	longPath := "/" + strings.Repeat("p", MaxHealthPath-1)

	tests := map[string]struct {
		annotations map[string]string
		want        Spec
	}{
		// Defaults.
		"nil annotations: primary 8080 HTTP, weight 1024, health eds /": {
			annotations: nil,
			want: Spec{
				PortSet:     PortSet{Primary: 8080, Ports: []Port{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}}},
				Weight:      1024,
				HealthCheck: HealthCheck{Mode: "eds", Path: "/"},
			},
		},
		"empty annotations: defaults": {
			annotations: map[string]string{},
			want:        spec(8080, http1(8080)),
		},

		// The primary, listed or not.
		"primary set, ports unset: the primary is the only port": {
			annotations: map[string]string{AnnotationPort: "9000"},
			want:        spec(9000, http1(9000)),
		},
		"primary set and listed": {
			annotations: map[string]string{AnnotationPort: "9000", AnnotationPorts: "9000,9090=h2"},
			want:        spec(9000, http1(9000), http2(9090)),
		},
		"primary set and not listed: it is served anyway": {
			annotations: map[string]string{AnnotationPort: "9000", AnnotationPorts: "9090=h2,9100=tcp"},
			want:        spec(9000, http1(9000), http2(9090), tcp(9100)),
		},
		"primary unset and not listed: 8080 is served anyway": {
			annotations: map[string]string{AnnotationPorts: "9090=h2"},
			want:        spec(8080, http1(8080), http2(9090)),
		},
		"primary unset and listed with a suffix: the list decides its protocol": {
			annotations: map[string]string{AnnotationPorts: "8080=tcp"},
			want:        spec(8080, tcp(8080)),
		},
		"primary listed as tcp": {
			annotations: map[string]string{AnnotationPort: "5432", AnnotationPorts: "5432=tcp,8080"},
			want:        spec(5432, tcp(5432), http1(8080)),
		},
		"a udp port beside the http primary": {
			annotations: map[string]string{AnnotationPorts: "8080,5353=udp"},
			want:        spec(8080, udp(5353), http1(8080)),
		},
		"primary listed as udp: a UDP primary, which <name>:18082/udp reaches": {
			annotations: map[string]string{AnnotationPort: "5353", AnnotationPorts: "5353=udp,9000=tcp"},
			want:        spec(5353, udp(5353), tcp(9000)),
		},
		"protocol udp: every port without a suffix is udp, the primary too": {
			annotations: map[string]string{AnnotationPort: "53", AnnotationProtocol: "udp", AnnotationPorts: "53,5353,8080=h1"},
			want:        spec(53, udp(53), udp(5353), http1(8080)),
		},
		"a udp port declared twice is one port": {
			annotations: map[string]string{AnnotationPorts: "5353=udp, 5353=udp"},
			want:        spec(8080, udp(5353), http1(8080)),
		},
		"primary listed as grpc: the primary speaks gRPC": {
			annotations: map[string]string{AnnotationPort: "9090", AnnotationPorts: "9090=grpc"},
			want:        spec(9090, grpc(9090)),
		},
		"primary listed as h2 next to a grpc port: only the grpc one speaks gRPC": {
			annotations: map[string]string{AnnotationPort: "9090", AnnotationPorts: "9090=h2,9091=grpc"},
			want:        spec(9090, http2(9090), grpc(9091)),
		},
		"ports listed out of order are sorted": {
			annotations: map[string]string{AnnotationPorts: "9100=tcp,80,443=tcp,8080,9090=h2"},
			want:        spec(8080, http1(80), tcp(443), http1(8080), http2(9090), tcp(9100)),
		},
		"the design's example": {
			annotations: map[string]string{AnnotationPorts: "8080,9090=h2,9000=tcp"},
			want:        spec(8080, http1(8080), tcp(9000), http2(9090)),
		},
		"lowest and highest ports": {
			annotations: map[string]string{AnnotationPort: "1", AnnotationPorts: "65535=tcp"},
			want:        spec(1, http1(1), tcp(65535)),
		},
		"leading zeros are a port number": {
			annotations: map[string]string{AnnotationPort: "08080", AnnotationPorts: "0009000=tcp"},
			want:        spec(8080, http1(8080), tcp(9000)),
		},
		"ports next to the reserved ones are not reserved": {
			annotations: map[string]string{AnnotationPorts: "18000,18002,18007,18009,18080,18083=tcp"},
			want: spec(8080, http1(8080), http1(18000), http1(18002), http1(18007), http1(18009),
				http1(18080), tcp(18083)),
		},
		"MaxPorts ports, the unlisted primary included": {
			annotations: map[string]string{AnnotationPorts: portList(1, MaxPorts-1, "tcp")},
			want:        spec(8080, append(portRange(1, MaxPorts-1, meshv1alpha1.ProtocolTCP), http1(8080))...),
		},
		"MaxPorts ports, the primary listed": {
			annotations: map[string]string{AnnotationPort: "1", AnnotationPorts: portList(1, MaxPorts, "")},
			want:        spec(1, portRange(1, MaxPorts, meshv1alpha1.ProtocolHTTP)...),
		},

		// Suffixes.
		"suffix h1 is HTTP": {
			annotations: map[string]string{AnnotationPorts: "9000=h1"},
			want:        spec(8080, http1(8080), http1(9000)),
		},
		"suffix h2 is HTTP2": {
			annotations: map[string]string{AnnotationPorts: "9000=h2"},
			want:        spec(8080, http1(8080), http2(9000)),
		},
		"suffix http2 is HTTP2": {
			annotations: map[string]string{AnnotationPorts: "9000=http2"},
			want:        spec(8080, http1(8080), http2(9000)),
		},
		"suffix grpc is HTTP2 that speaks gRPC": {
			annotations: map[string]string{AnnotationPorts: "9000=grpc"},
			want:        spec(8080, http1(8080), grpc(9000)),
		},
		"suffix tcp is TCP": {
			annotations: map[string]string{AnnotationPorts: "9000=tcp"},
			want:        spec(8080, http1(8080), tcp(9000)),
		},
		"every suffix at once": {
			annotations: map[string]string{AnnotationPorts: "9001=h1,9002=h2,9003=http2,9004=grpc,9005=tcp"},
			want:        spec(8080, http1(8080), http1(9001), http2(9002), http2(9003), grpc(9004), tcp(9005)),
		},

		// endpoint.aether.io/protocol.
		"protocol http: unsuffixed ports are HTTP": {
			annotations: map[string]string{AnnotationProtocol: "http", AnnotationPorts: "9000"},
			want:        spec(8080, http1(8080), http1(9000)),
		},
		"protocol tcp: the unlisted default primary is TCP": {
			annotations: map[string]string{AnnotationProtocol: "tcp"},
			want:        spec(8080, tcp(8080)),
		},
		"protocol tcp: the unlisted set primary is TCP": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationPort: "5432"},
			want:        spec(5432, tcp(5432)),
		},
		// The primary is 8080 unless endpoint.aether.io/port says otherwise (DESIGN section 3):
		// listing 9000 first does not make it the primary. 8080 is listed =h1, so it is HTTP;
		// 9000 has no suffix, so it takes the pod's protocol, tcp.
		"protocol tcp with ports 9000,8080=h1: primary 8080 HTTP, 9000 TCP": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationPorts: "9000,8080=h1"},
			want:        spec(8080, http1(8080), tcp(9000)),
		},
		"protocol tcp with port 9000 and ports 9000,8080=h1: primary 9000 TCP": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationPort: "9000", AnnotationPorts: "9000,8080=h1"},
			want:        spec(9000, http1(8080), tcp(9000)),
		},
		// A pod with protocol tcp and ports that leave out the primary still serves 8080 (as
		// TCP): the primary is always served, listed or not.
		"protocol tcp with ports 5432: the unlisted primary 8080 is served as TCP": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationPorts: "5432"},
			want:        spec(8080, tcp(5432), tcp(8080)),
		},
		"protocol tcp: suffixes still win": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationPorts: "9001,9002=h1,9003=h2,9004=grpc,9005=http2"},
			want:        spec(8080, tcp(8080), tcp(9001), http1(9002), http2(9003), grpc(9004), http2(9005)),
		},

		// One port listed twice with one protocol.
		"the same port twice, same suffix": {
			annotations: map[string]string{AnnotationPorts: "9000=tcp,9000=tcp"},
			want:        spec(8080, http1(8080), tcp(9000)),
		},
		"the same port twice, unsuffixed and h1 on an http pod": {
			annotations: map[string]string{AnnotationPorts: "8080,8080=h1"},
			want:        spec(8080, http1(8080)),
		},
		"the same port twice, unsuffixed and tcp on a tcp pod": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationPorts: "9000,9000=tcp"},
			want:        spec(8080, tcp(8080), tcp(9000)),
		},
		// =grpc says more about an HTTP2 port, not something else: the port speaks gRPC, in any
		// order of the declarations.
		"grpc and h2 on one port are not a conflict: it speaks gRPC": {
			annotations: map[string]string{AnnotationPorts: "9090=grpc,9090=h2,9090=http2"},
			want:        spec(8080, http1(8080), grpc(9090)),
		},
		"h2 then grpc on one port: it speaks gRPC": {
			annotations: map[string]string{AnnotationPorts: "9090=h2,9090=http2,9090=grpc"},
			want:        spec(8080, http1(8080), grpc(9090)),
		},
		"grpc twice on one port": {
			annotations: map[string]string{AnnotationPort: "9090", AnnotationPorts: "9090=grpc, 9090 = grpc "},
			want:        spec(9090, grpc(9090)),
		},
		"the primary listed twice": {
			annotations: map[string]string{AnnotationPort: "9000", AnnotationPorts: "9000=tcp,9000=tcp"},
			want:        spec(9000, tcp(9000)),
		},

		// Whitespace.
		"whitespace around every token is trimmed": {
			annotations: map[string]string{
				AnnotationPort:            " 9000\t",
				AnnotationPorts:           " 9000 = tcp ,\t9090= h2 , 80 ,\n443 =tcp ",
				AnnotationProtocol:        " http ",
				AnnotationWeight:          " 10 ",
				AnnotationHealthPath:      "  /healthz\n",
				AnnotationHealthCheckMode: "\tactive ",
				AnnotationUpstreams:       " ledger.finance ,  payments ",
			},
			want: Spec{
				PortSet:     NewPortSet(9000, []Port{tcp(9000), http2(9090), http1(80), tcp(443)}),
				Weight:      10,
				HealthCheck: HealthCheck{Mode: "active", Path: "/healthz"},
				Upstreams:   []string{"ledger.finance", "payments"},
			},
		},
		"protocol tcp written with whitespace": {
			annotations: map[string]string{AnnotationProtocol: "\ttcp\n", AnnotationPorts: " 9000 "},
			want:        spec(8080, tcp(8080), tcp(9000)),
		},
		"metadata values are kept as written, whitespace included": {
			annotations: map[string]string{AnnotationMetadataPrefix + "zone": " us-east-1a "},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Metadata = map[string]string{"zone": " us-east-1a "} }),
		},

		// Weight.
		"weight 1": {
			annotations: map[string]string{AnnotationWeight: "1"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Weight = 1 }),
		},
		"weight 65535": {
			annotations: map[string]string{AnnotationWeight: "65535"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Weight = 65535 }),
		},
		"weight 1024 written out": {
			annotations: map[string]string{AnnotationWeight: "1024"},
			want:        spec(8080, http1(8080)),
		},
		"weight with leading zeros": {
			annotations: map[string]string{AnnotationWeight: "0042"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Weight = 42 }),
		},

		// Health check.
		"health path": {
			annotations: map[string]string{AnnotationHealthPath: "/healthz"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.HealthCheck.Path = "/healthz" }),
		},
		"health path with a query and punctuation": {
			annotations: map[string]string{AnnotationHealthPath: "/v1/health?deep=1&x=%20~!"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.HealthCheck.Path = "/v1/health?deep=1&x=%20~!" }),
		},
		"health path of the longest length": {
			annotations: map[string]string{AnnotationHealthPath: longPath},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.HealthCheck.Path = longPath }),
		},
		"health-check-mode active": {
			annotations: map[string]string{AnnotationHealthCheckMode: "active"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.HealthCheck.Mode = "active" }),
		},
		"health-check-mode eds written out": {
			annotations: map[string]string{AnnotationHealthCheckMode: "eds"},
			want:        spec(8080, http1(8080)),
		},
		// The health path applies to an HTTP primary; on a TCP primary it is accepted and
		// carried (the agent then connects instead of GETting).
		"health path on a TCP primary is carried": {
			annotations: map[string]string{AnnotationProtocol: "tcp", AnnotationHealthPath: "/healthz"},
			want:        with(spec(8080, tcp(8080)), func(s *Spec) { s.HealthCheck.Path = "/healthz" }),
		},

		// Metadata.
		"one metadata key": {
			annotations: map[string]string{AnnotationMetadataPrefix + "version": "v2"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Metadata = map[string]string{"version": "v2"} }),
		},
		"several metadata keys, digits and dashes, an empty value": {
			annotations: map[string]string{
				AnnotationMetadataPrefix + "version":   "v2",
				AnnotationMetadataPrefix + "canary-1":  "true",
				AnnotationMetadataPrefix + "0":         "",
				AnnotationMetadataPrefix + "shard-a-9": "any value: at all, even = and ,",
			},
			want: with(spec(8080, http1(8080)), func(s *Spec) {
				s.Metadata = map[string]string{"version": "v2", "canary-1": "true", "0": "", "shard-a-9": "any value: at all, even = and ,"}
			}),
		},
		"metadata key of 63 characters and value of the longest length": {
			annotations: map[string]string{AnnotationMetadataPrefix + longKey: longValue},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Metadata = map[string]string{longKey: longValue} }),
		},
		"metadata keys that merely contain a reserved word": {
			annotations: map[string]string{AnnotationMetadataPrefix + "pod-ip": "x", AnnotationMetadataPrefix + "ips": "y"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Metadata = map[string]string{"pod-ip": "x", "ips": "y"} }),
		},
		"MaxMetadata metadata keys": {
			annotations: maxMetaAnnotations,
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Metadata = maxMeta }),
		},

		// Upstreams.
		"one upstream": {
			annotations: map[string]string{AnnotationUpstreams: "payments"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Upstreams = []string{"payments"} }),
		},
		"upstreams are sorted and de-duplicated": {
			annotations: map[string]string{AnnotationUpstreams: "payments,ledger.finance,auth,payments,ledger.finance,0-svc"},
			want: with(spec(8080, http1(8080)), func(s *Spec) {
				s.Upstreams = []string{"0-svc", "auth", "ledger.finance", "payments"}
			}),
		},
		"upstreams equal after trimming are de-duplicated": {
			annotations: map[string]string{AnnotationUpstreams: "b , a,b,  a"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Upstreams = []string{"a", "b"} }),
		},
		"an upstream and the same name qualified are two upstreams": {
			annotations: map[string]string{AnnotationUpstreams: "ledger.finance,ledger"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.Upstreams = []string{"ledger", "ledger.finance"} }),
		},

		// Excluded outbound ports.
		"excluded outbound ports": {
			annotations: map[string]string{AnnotationExcludeOutboundPorts: "6379,5432"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.ExcludeOutboundPorts = []int32{5432, 6379} }),
		},
		"excluded outbound ports are trimmed, sorted and de-duplicated": {
			annotations: map[string]string{AnnotationExcludeOutboundPorts: " 6379 , 5432,6379, 1"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.ExcludeOutboundPorts = []int32{1, 5432, 6379} }),
		},
		"an excluded outbound port the pod also serves": {
			annotations: map[string]string{AnnotationExcludeOutboundPorts: "8080"},
			want:        with(spec(8080, http1(8080)), func(s *Spec) { s.ExcludeOutboundPorts = []int32{8080} }),
		},
		"as many excluded outbound ports as allowed": {
			annotations: map[string]string{AnnotationExcludeOutboundPorts: portList(20000, MaxPorts, "")},
			want: with(spec(8080, http1(8080)), func(s *Spec) {
				for _, p := range portRange(20000, MaxPorts, meshv1alpha1.ProtocolTCP) {
					s.ExcludeOutboundPorts = append(s.ExcludeOutboundPorts, p.Port)
				}
			}),
		},

		// Annotations outside the grammar.
		"annotations outside the grammar's prefixes are ignored": {
			annotations: map[string]string{
				"aether.io/managed":                         "true",
				"aether.io/app-protocol":                    "bogus",
				"kubectl.kubernetes.io/last-applied":        "{}",
				"config.aether.io/something-else":           "x",
				"mesh.aether.io/ports":                      "18081",
				"xendpoint.aether.io/port":                  "not a port",
				"endpoint.aether.io":                        "no slash",
				"metadata.endpoint.aether.io":               "no slash",
				"Endpoint.aether.io/port":                   "0",
				"sub.endpoint.aether.io/ports":              "=",
				"prometheus.io/port":                        "18081",
				"container.apparmor.security.beta.kubernet": "x",
			},
			want: spec(8080, http1(8080)),
		},
		"everything at once": {
			annotations: map[string]string{
				AnnotationPort:                    "9000",
				AnnotationPorts:                   "8080,9090=grpc,5432=tcp,9000",
				AnnotationProtocol:                "http",
				AnnotationWeight:                  "200",
				AnnotationHealthPath:              "/ready",
				AnnotationHealthCheckMode:         "active",
				AnnotationMetadataPrefix + "tier": "gold",
				AnnotationUpstreams:               "payments,ledger.finance",
				"aether.io/managed":               "true",
			},
			want: Spec{
				PortSet:     NewPortSet(9000, []Port{http1(8080), grpc(9090), tcp(5432), http1(9000)}),
				Weight:      200,
				HealthCheck: HealthCheck{Mode: "active", Path: "/ready"},
				Metadata:    map[string]string{"tier": "gold"},
				Upstreams:   []string{"ledger.finance", "payments"},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tt.annotations)
			if err != nil {
				t.Fatalf("Parse(%q) error:\n%v", tt.annotations, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q)\n got %#v\nwant %#v", tt.annotations, got, tt.want)
			}
			checkValid(t, got)
			// Every accepted input round-trips through its canonical form.
			again, err := Parse(got.Annotations())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("Parse(Annotations()) = %#v, %v; want %#v", again, err, got)
			}
		})
	}
}

// TestParseDoesNotModifyInput: Parse only reads the map it is given.
func TestParseDoesNotModifyInput(t *testing.T) {
	in := map[string]string{AnnotationPorts: " 9000=tcp , 9000=tcp", AnnotationMetadataPrefix + "Bad": "x"}
	before := map[string]string{AnnotationPorts: " 9000=tcp , 9000=tcp", AnnotationMetadataPrefix + "Bad": "x"}
	_, _ = Parse(in)
	if !reflect.DeepEqual(in, before) {
		t.Errorf("Parse modified its input: %q, was %q", in, before)
	}
}

func TestPortSetLookup(t *testing.T) {
	s, err := Parse(map[string]string{AnnotationPort: "9000", AnnotationPorts: "9000=tcp,8080,9090=grpc"})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		port  int32
		want  meshv1alpha1.Protocol
		found bool
	}{
		"primary":      {port: 9000, want: meshv1alpha1.ProtocolTCP, found: true},
		"http":         {port: 8080, want: meshv1alpha1.ProtocolHTTP, found: true},
		"grpc":         {port: 9090, want: meshv1alpha1.ProtocolHTTP2, found: true},
		"not declared": {port: 9001},
		"zero":         {port: 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, found := s.Lookup(tt.port)
			if got != tt.want || found != tt.found {
				t.Errorf("Lookup(%d) = %q, %v; want %q, %v", tt.port, got, found, tt.want, tt.found)
			}
		})
	}
	if got := s.PrimaryProtocol(); got != meshv1alpha1.ProtocolTCP {
		t.Errorf("PrimaryProtocol() = %q, want TCP", got)
	}
}

// checkValid fails t unless s is a spec the grammar can produce: ports sorted and unique, the
// primary among them, every port in 1..65535 and not reserved, at most MaxPorts; the other
// fields within their bounds.
func checkValid(t *testing.T, s Spec) {
	t.Helper()
	if len(s.Ports) == 0 || len(s.Ports) > MaxPorts {
		t.Errorf("%d ports, want 1..%d: %v", len(s.Ports), MaxPorts, s.Ports)
	}
	primaryFound := false
	for i, p := range s.Ports {
		if i > 0 && s.Ports[i-1].Port >= p.Port {
			t.Errorf("ports not sorted and unique at %d: %v", i, s.Ports)
		}
		if p.Port < 1 || p.Port > 65535 {
			t.Errorf("port %d outside 1..65535", p.Port)
		}
		if _, reserved := Reserved[p.Port]; reserved {
			t.Errorf("reserved port %d accepted", p.Port)
		}
		if !slices.Contains([]meshv1alpha1.Protocol{meshv1alpha1.ProtocolHTTP, meshv1alpha1.ProtocolHTTP2, meshv1alpha1.ProtocolTCP, meshv1alpha1.ProtocolUDP}, p.Protocol) {
			t.Errorf("port %d has protocol %q", p.Port, p.Protocol)
		}
		if p.AppProtocol != "" && (p.AppProtocol != meshv1alpha1.AppProtocolGRPC || p.Protocol != meshv1alpha1.ProtocolHTTP2) {
			t.Errorf("port %d has protocol %q and app protocol %q; want none, or grpc on HTTP2", p.Port, p.Protocol, p.AppProtocol)
		}
		primaryFound = primaryFound || p.Port == s.Primary
	}
	if !primaryFound {
		t.Errorf("primary %d not among ports %v", s.Primary, s.Ports)
	}
	if s.Weight < 1 || s.Weight > 65535 {
		t.Errorf("weight %d outside 1..65535", s.Weight)
	}
	if s.HealthCheck.Mode != "eds" && s.HealthCheck.Mode != "active" {
		t.Errorf("health-check mode %q", s.HealthCheck.Mode)
	}
	if len(s.HealthCheck.Path) > MaxHealthPath || !healthPath.MatchString(s.HealthCheck.Path) {
		t.Errorf("health path %q", s.HealthCheck.Path)
	}
	if len(s.Metadata) > MaxMetadata {
		t.Errorf("%d metadata keys", len(s.Metadata))
	}
	if s.Metadata != nil && len(s.Metadata) == 0 {
		t.Error("metadata is empty but not nil")
	}
	for k, v := range s.Metadata {
		if !dnsLabel.MatchString(k) || k == "ip" || k == "pod" || k == "cluster" || k == "namespace" || len(v) > MaxMetadataValue {
			t.Errorf("metadata %q=%q accepted", k, v)
		}
	}
	if s.Upstreams != nil && len(s.Upstreams) == 0 {
		t.Error("upstreams are empty but not nil")
	}
	for i, u := range s.Upstreams {
		if i > 0 && s.Upstreams[i-1] >= u {
			t.Errorf("upstreams not sorted and unique: %q", s.Upstreams)
		}
	}
	if s.ExcludeOutboundPorts != nil && len(s.ExcludeOutboundPorts) == 0 {
		t.Error("excluded outbound ports are empty but not nil")
	}
	for i, n := range s.ExcludeOutboundPorts {
		if _, reserved := Reserved[n]; reserved || n < 1 || n > 65535 || (i > 0 && s.ExcludeOutboundPorts[i-1] >= n) {
			t.Errorf("excluded outbound ports not sorted, unique and unreserved: %v", s.ExcludeOutboundPorts)
		}
	}
}
