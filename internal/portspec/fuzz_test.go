// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// Bits of FuzzParse's set argument: an annotation whose bit is set is added even when the
// fuzzer's string for it is empty, so "set but empty" is explored as well as "unset".
const (
	setPort uint16 = 1 << iota
	setPorts
	setProtocol
	setWeight
	setHealthPath
	setHealthCheckMode
	setMetadata
	setUpstreams
	setExtra
)

func FuzzParse(f *testing.F) {
	type seed struct {
		set                                           uint16
		port, ports, protocol, weight, path, mode     string
		metaKey, metaValue, upstreams, extraK, extraV string
	}
	seeds := []seed{
		// Valid.
		{},
		{port: "9000", ports: "8080,9090=h2,9000=tcp"},
		{ports: "9001=h1,9002=h2,9003=http2,9004=grpc,9005=tcp"},
		{protocol: "tcp", ports: "9000,8080=h1"},
		{protocol: "tcp", port: "5432", ports: "5432"},
		{ports: "9090=grpc,9090=h2"},
		{port: "9090", ports: "9090=h2,9090=grpc,9091=grpc"},
		{port: " 9000 ", ports: " 9000 = tcp , 80 ", protocol: " http ", weight: " 7 "},
		{weight: "65535", path: "/healthz", mode: "active"},
		{metaKey: "zone", metaValue: "us-east-1a", upstreams: "payments,ledger.finance,payments"},
		{metaKey: "version", set: setMetadata, upstreams: "b , a"},
		{extraK: "aether.io/managed", extraV: "true"},
		{port: "1", ports: "65535=tcp", weight: "1"},
		{port: "5353", ports: "5353=udp,8080=h1,9000=tcp"},
		{port: "53", protocol: "udp"},
		// Invalid.
		{set: setPort | setPorts | setProtocol | setWeight | setHealthPath | setHealthCheckMode | setMetadata | setUpstreams},
		{ports: "8080,,9000,"},
		{port: "18081", ports: "18082=tcp,18001=h2,18008=grpc"},
		{ports: "9000=tpc,9000=H2,9000=,=tcp"},
		{port: "9000=tcp"},
		{ports: "8080,8080=tcp,9000=h2,9000=tcp"},
		{ports: "0,65536,99999999999,+80,-1,8 080,0x50"},
		{ports: portList(1, MaxPorts, "")},
		{protocol: "sctp", weight: "0", path: "healthz", mode: "Active"},
		{metaKey: "Zone", metaValue: "x"},
		{metaKey: "ip", metaValue: "x", upstreams: "A,a.b.c,,"},
		{metaKey: "blob", metaValue: strings.Repeat("v", MaxMetadataValue+1)},
		{extraK: "endpoint.aether.io/prots", extraV: "8080"},
		{extraK: AnnotationMetadataPrefix, extraV: "x"},
		{ports: strings.Repeat(",", MaxPortsLength+1), upstreams: strings.Repeat("A,", MaxErrors)},
		{ports: "a,b,c,d,e,f,g,h,i,j,k", extraK: "endpoints.aether.io/ports", extraV: "8080"},
		{extraK: "config.aether.io/upstream", extraV: "payments", path: "/" + strings.Repeat("p", MaxHealthPath)},
		{extraK: AnnotationExcludeOutboundPorts, extraV: " 6379,5432,6379"},
		{extraK: AnnotationExcludeOutboundPorts, extraV: "5432, 18082,x,,0,5432-5440"},
	}
	for _, s := range seeds {
		f.Add(s.set, s.port, s.ports, s.protocol, s.weight, s.path, s.mode, s.metaKey, s.metaValue, s.upstreams, s.extraK, s.extraV)
	}

	f.Fuzz(func(t *testing.T, set uint16, port, ports, protocol, weight, path, mode, metaKey, metaValue, upstreams, extraKey, extraValue string) {
		annotations := map[string]string{}
		add := func(bit uint16, key, value string) {
			if value != "" || set&bit != 0 {
				annotations[key] = value
			}
		}
		add(setPort, AnnotationPort, port)
		add(setPorts, AnnotationPorts, ports)
		add(setProtocol, AnnotationProtocol, protocol)
		add(setWeight, AnnotationWeight, weight)
		add(setHealthPath, AnnotationHealthPath, path)
		add(setHealthCheckMode, AnnotationHealthCheckMode, mode)
		if metaKey != "" || set&setMetadata != 0 {
			annotations[AnnotationMetadataPrefix+metaKey] = metaValue
		}
		add(setUpstreams, AnnotationUpstreams, upstreams)
		if extraKey != "" || set&setExtra != 0 {
			annotations[extraKey] = extraValue
		}
		before := maps.Clone(annotations)

		spec, err := Parse(annotations)
		if !maps.Equal(annotations, before) {
			t.Fatalf("Parse modified its input")
		}
		if warnings := Warnings(annotations); len(warnings) > MaxWarnings {
			t.Errorf("%d warnings, want at most %d", len(warnings), MaxWarnings)
		}
		// Parse reads exactly the keys IsGrammarKey names: without the others, the same result.
		grammarOnly := maps.Clone(annotations)
		maps.DeleteFunc(grammarOnly, func(k, _ string) bool { return !IsGrammarKey(k) })
		if onlySpec, onlyErr := Parse(grammarOnly); !reflect.DeepEqual(onlySpec, spec) || fmt.Sprint(onlyErr) != fmt.Sprint(err) {
			t.Errorf("Parse reads a key IsGrammarKey rejects:\n%v\nwithout them\n%v", err, onlyErr)
		}
		if err != nil {
			if !reflect.DeepEqual(spec, Spec{}) {
				t.Errorf("Parse returned %#v with its error, want the zero Spec", spec)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T is not an ErrorList", err)
			}
			checkErrorList(t, annotations, list)
			for _, e := range list {
				if !slices.Contains(AllKinds(), e.Kind) {
					t.Errorf("unknown Kind %q", e.Kind)
				}
			}
			var first *Error
			if !errors.As(err, &first) || first != list[0] {
				t.Errorf("errors.As does not find the first *Error")
			}
			if _, again := Parse(maps.Clone(annotations)); again == nil || again.Error() != err.Error() {
				t.Errorf("Parse is not deterministic:\n%v\nthen\n%v", err, again)
			}
			return
		}

		checkValid(t, spec)
		for _, p := range spec.Ports {
			if p.AppProtocol == meshv1alpha1.AppProtocolGRPC && !strings.Contains(annotations[AnnotationPorts], "grpc") {
				t.Errorf("port %d speaks gRPC, but %s %q never says grpc", p.Port, AnnotationPorts, annotations[AnnotationPorts])
			}
		}
		canonical := spec.Annotations()
		again, err := Parse(canonical)
		if err != nil {
			t.Fatalf("Parse(%q) accepted, but its canonical form %q is refused:\n%v", annotations, canonical, err)
		}
		if !reflect.DeepEqual(again, spec) {
			t.Fatalf("round trip of %q:\n got %#v\nwant %#v", annotations, again, spec)
		}
		if !maps.Equal(again.Annotations(), canonical) {
			t.Errorf("canonical form is not stable: %q then %q", canonical, again.Annotations())
		}
	})
}

func TestFormatPortsAnnotation(t *testing.T) {
	tests := map[string]struct {
		ports []Port
		want  string
	}{
		"none":                                {ports: nil, want: ""},
		"one of each":                         {ports: []Port{http1(8080), tcp(9000), http2(9090)}, want: "8080=h1,9000=tcp,9090=h2"},
		"order kept":                          {ports: []Port{tcp(9000), http1(80)}, want: "9000=tcp,80=h1"},
		"extreme numbers":                     {ports: []Port{http1(1), tcp(65535)}, want: "1=h1,65535=tcp"},
		"grpc is written =grpc, h2 stays =h2": {ports: []Port{http2(9090), grpc(9091)}, want: "9090=h2,9091=grpc"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := FormatPortsAnnotation(tt.ports); got != tt.want {
				t.Errorf("FormatPortsAnnotation(%v) = %q, want %q", tt.ports, got, tt.want)
			}
		})
	}
}

// canonical is the canonical annotations of spec(primary, ports...): port and ports, and the
// defaults of weight and health checking written out; extra are more key, value pairs.
func canonical(port, ports string, extra ...string) map[string]string {
	m := map[string]string{
		AnnotationPort: port, AnnotationPorts: ports, AnnotationWeight: "1024",
		AnnotationHealthPath: "/", AnnotationHealthCheckMode: "eds",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

func TestAnnotationsRoundTrip(t *testing.T) {
	tests := map[string]struct {
		spec Spec
		want map[string]string
	}{
		"defaults": {
			spec: spec(8080, http1(8080)),
			want: canonical("8080", "8080=h1"),
		},
		"a TCP primary and every protocol": {
			spec: spec(5432, tcp(5432), http1(8080), http2(9090)),
			want: canonical("5432", "5432=tcp,8080=h1,9090=h2"),
		},
		"everything set": {
			spec: Spec{
				PortSet:     NewPortSet(9000, []Port{tcp(9000), http2(9090), http1(80)}),
				Weight:      7,
				HealthCheck: HealthCheck{Mode: "active", Path: "/healthz?deep=1"},
				Metadata:    map[string]string{"zone": "us-east-1a", "canary": ""},
				Upstreams:   []string{"ledger.finance", "payments"},

				ExcludeOutboundPorts: []int32{5432, 6379},
			},
			want: map[string]string{
				AnnotationPort: "9000", AnnotationPorts: "80=h1,9000=tcp,9090=h2", AnnotationWeight: "7",
				AnnotationHealthPath: "/healthz?deep=1", AnnotationHealthCheckMode: "active",
				AnnotationMetadataPrefix + "zone": "us-east-1a", AnnotationMetadataPrefix + "canary": "",
				AnnotationUpstreams: "ledger.finance,payments", AnnotationExcludeOutboundPorts: "5432,6379",
			},
		},
		"proxyless gRPC": {
			spec: with(spec(9090, grpc(9090)), func(s *Spec) { s.Proxyless = ProxylessGRPC }),
			want: canonical("9090", "9090=grpc", AnnotationProxyless, "grpc"),
		},
		"out of the identity gate": {
			spec: with(spec(8080, http1(8080)), func(s *Spec) { s.NoIdentityGate = true }),
			want: canonical("8080", "8080=h1", AnnotationIdentityGate, "false"),
		},
		"out of the mesh DNS": {
			spec: with(spec(8080, http1(8080)), func(s *Spec) { s.NoMeshDNS = true }),
			want: canonical("8080", "8080=h1", AnnotationMeshDNS, "false"),
		},
		"a gRPC primary next to an h2 port": {
			spec: spec(9090, grpc(9090), http2(9091), http1(8080)),
			want: canonical("9090", "8080=h1,9090=grpc,9091=h2"),
		},
		"MaxPorts ports of gRPC": {
			spec: spec(1, grpcRange(1, MaxPorts)...),
			want: canonical("1", portList(1, MaxPorts, "grpc")),
		},
		"MaxPorts ports": {
			spec: spec(1, portRange(1, MaxPorts, meshv1alpha1.ProtocolTCP)...),
			want: canonical("1", portList(1, MaxPorts, "tcp")),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := tt.spec.Annotations()
			if !maps.Equal(got, tt.want) {
				t.Errorf("Annotations()\n got %q\nwant %q", got, tt.want)
			}
			back, err := Parse(got)
			if err != nil {
				t.Fatalf("Parse(Annotations()): %v", err)
			}
			if !reflect.DeepEqual(back, tt.spec) {
				t.Errorf("Parse(Annotations())\n got %#v\nwant %#v", back, tt.spec)
			}
		})
	}
}

// TestNewPortSet: order normalised, duplicates dropped (NewPortSet does not validate); of an h2
// and a grpc duplicate the grpc one is kept, in either order, as Parse keeps it.
func TestNewPortSet(t *testing.T) {
	got := NewPortSet(9000, []Port{tcp(9000), http1(80), tcp(9000), http2(443)})
	want := PortSet{Primary: 9000, Ports: []Port{http1(80), http2(443), tcp(9000)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NewPortSet = %#v, want %#v", got, want)
	}
	for _, ports := range [][]Port{{http2(9090), grpc(9090)}, {grpc(9090), http2(9090)}} {
		got := NewPortSet(9090, ports)
		if want := (PortSet{Primary: 9090, Ports: []Port{grpc(9090)}}); !reflect.DeepEqual(got, want) {
			t.Errorf("NewPortSet(%v) = %#v, want %#v", ports, got, want)
		}
	}
}

// grpcRange is the gRPC ports first..first+n-1.
func grpcRange(first, n int) []Port {
	ports := portRange(first, n, meshv1alpha1.ProtocolHTTP2)
	for i := range ports {
		ports[i].AppProtocol = meshv1alpha1.AppProtocolGRPC
	}
	return ports
}
