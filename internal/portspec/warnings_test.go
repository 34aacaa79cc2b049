// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestWarnings(t *testing.T) {
	warn := func(key, meant string) string {
		return fmt.Sprintf("annotation %q is not a mesh annotation and is ignored; did you mean %q?", key, meant)
	}
	tests := map[string]struct {
		annotations map[string]string
		want        []string
	}{
		"none":                   {annotations: nil},
		"the grammar's own keys": {annotations: canonicalAnnotations()},
		"unrelated annotations":  {annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "now", "aether.io/port-protocols": "8080=http", "prometheus.io/port": "9090"}},
		"a typo under our prefix is Parse's error, not a warning": {annotations: one("endpoint.aether.io/prots", "8080")},
		"endpoints.aether.io/ports": {
			annotations: one("endpoints.aether.io/ports", "8080"),
			want:        []string{warn("endpoints.aether.io/ports", AnnotationPorts)},
		},
		"endpoint.aether.i/ports": {
			annotations: one("endpoint.aether.i/ports", "8080"),
			want:        []string{warn("endpoint.aether.i/ports", AnnotationPorts)},
		},
		"Endpoint.aether.io/port": {
			annotations: one("Endpoint.aether.io/port", "8080"),
			want:        []string{warn("Endpoint.aether.io/port", AnnotationPort)},
		},
		"endpoints.aether.io/health-check-mode": {
			annotations: one("endpoints.aether.io/health-check-mode", "active"),
			want:        []string{warn("endpoints.aether.io/health-check-mode", AnnotationHealthCheckMode)},
		},
		"two edits, prefix and name: endpoints.aether.io/prots": {
			annotations: one("endpoints.aether.io/prots", "8080"),
			want:        []string{warn("endpoints.aether.io/prots", AnnotationPorts)},
		},
		"a wrong prefix and an unknown name": {
			annotations: one("endpoints.aether.io/zone", "a"),
			want:        []string{warn("endpoints.aether.io/zone", "endpoint.aether.io/zone")},
		},
		"config.aether.io/upstream": {
			annotations: one("config.aether.io/upstream", "payments"),
			want:        []string{warn("config.aether.io/upstream", AnnotationUpstreams)},
		},
		"aether.io/exclude-outbound-port": {
			annotations: one("aether.io/exclude-outbound-port", "5432"),
			want:        []string{warn("aether.io/exclude-outbound-port", AnnotationExcludeOutboundPorts)},
		},
		"aether.io/identity-gates": {
			annotations: one("aether.io/identity-gates", "false"),
			want:        []string{warn("aether.io/identity-gates", AnnotationIdentityGate)},
		},
		"configs.aether.io/upstreams": {
			annotations: one("configs.aether.io/upstreams", "payments"),
			want:        []string{warn("configs.aether.io/upstreams", AnnotationUpstreams)},
		},
		"metadata.endpoints.aether.io/x": {
			annotations: one("metadata.endpoints.aether.io/x", "v"),
			want:        []string{warn("metadata.endpoints.aether.io/x", "metadata.endpoint.aether.io/x")},
		},
		"metadata.endpoint.aether.i/version, a 63-byte name": {
			annotations: one("metadata.endpoint.aether.i/"+strings.Repeat("v", 63), "v"),
			want:        []string{warn("metadata.endpoint.aether.i/"+strings.Repeat("v", 63), AnnotationMetadataPrefix+strings.Repeat("v", 63))},
		},
		"a wrong prefix and a misspelt name": {
			annotations: one("endpoints.aether.io/prts", "8080"),
			want:        []string{warn("endpoints.aether.io/prts", AnnotationPorts)},
		},
		"three edits from every key and prefix is no typo": {annotations: one("endpointsxy.aether.io/ports", "8080")},
		"in key order": {
			annotations: map[string]string{"endpoint.aether.i/ports": "1", "config.aether.io/upstream": "a", AnnotationPort: "8080"},
			want:        []string{warn("config.aether.io/upstream", AnnotationUpstreams), warn("endpoint.aether.i/ports", AnnotationPorts)},
		},
		"a key longer than Kubernetes allows is not considered": {
			annotations: one("metadata.endpoints.aether.io/"+strings.Repeat("v", maxQuotedKey), "v"),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Warnings(tt.annotations); !slices.Equal(got, tt.want) {
				t.Errorf("Warnings(%q)\n got %q\nwant %q", tt.annotations, got, tt.want)
			}
		})
	}
}

// canonicalAnnotations is every key of the grammar, valid.
func canonicalAnnotations() map[string]string {
	a := spec(9000, tcp(9000)).Annotations()
	a[AnnotationProtocol] = "tcp"
	a[AnnotationMetadataPrefix+"zone"] = "a"
	a[AnnotationUpstreams] = "payments"
	a[AnnotationProxyless] = ProxylessGRPC
	a[AnnotationIdentityGate] = IdentityGateOff
	return a
}

// TestWarningsBounded: many misspelt keys give MaxWarnings warnings, the last counting the rest;
// whatever the hostile shape and size, at most MaxWarnings warnings of bounded length.
func TestWarningsBounded(t *testing.T) {
	many := map[string]string{}
	for i := range 12 {
		many[fmt.Sprintf("endpoints.aether.io/p%02d", i)] = "x"
	}
	got := Warnings(many)
	if len(got) != MaxWarnings || !strings.HasPrefix(got[MaxWarnings-1], "and 8 more annotations that look like misspelt mesh annotations") {
		t.Errorf("12 misspelt keys: got %q, want %d warnings, the last counting 8 more", got, MaxWarnings)
	}
	for name, shape := range hostileShapes() {
		for sizeName, size := range hostileSizes {
			warnings := Warnings(shape.build(size))
			if len(warnings) > MaxWarnings {
				t.Errorf("%s %s: %d warnings, want at most %d", name, sizeName, len(warnings), MaxWarnings)
			}
			for _, w := range warnings {
				if len(w) > 2*maxQuotedKey+100 {
					t.Errorf("%s %s: a warning of %d bytes", name, sizeName, len(w))
				}
			}
		}
	}
}

// TestIsGrammarKey: the keys Parse reads, and only those.
func TestIsGrammarKey(t *testing.T) {
	for key := range canonicalAnnotations() {
		if !IsGrammarKey(key) {
			t.Errorf("IsGrammarKey(%q) = false, want true", key)
		}
	}
	for _, key := range []string{"endpoint.aether.io/prots", "endpoint.aether.io/", AnnotationMetadataPrefix, AnnotationMetadataPrefix + "Zone"} {
		if !IsGrammarKey(key) {
			t.Errorf("IsGrammarKey(%q) = false: Parse reports it, so it is the grammar's", key)
		}
	}
	for _, key := range []string{
		"kubectl.kubernetes.io/restartedAt", "config.aether.io/other", "endpoints.aether.io/ports",
		"aether.io/managed", "xendpoint.aether.io/port", "endpoint.aether.io", "", "aether.io/proxyles", "aether.io/capture-mode",
		"aether.io/identity-gates",
	} {
		if IsGrammarKey(key) {
			t.Errorf("IsGrammarKey(%q) = true, want false", key)
		}
	}
	// Every key IsGrammarKey rejects is ignored by Parse: adding it changes nothing.
	base := canonicalAnnotations()
	want, err := Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"config.aether.io/other", "endpoints.aether.io/ports", "metadata.endpoints.aether.io/x"} {
		added := one(key, "garbage,,=")
		maps.Copy(added, base)
		if got, err := Parse(added); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("adding %q (not the grammar's) changed Parse: %v, %v", key, got, err)
		}
	}
}

// osaDistance is the textbook optimal-string-alignment distance over the whole matrix: the
// reference editDistance's band must agree with.
func osaDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// TestEditDistanceAgreesWithTheFullMatrix: for every pair of strings over a small alphabet up to
// length 6, and for the grammar's keys against their one- and two-edit variants, editDistance is
// the full matrix's distance when that is at most typoDistance, and far otherwise.
func TestEditDistanceAgreesWithTheFullMatrix(t *testing.T) {
	var words []string
	var grow func(prefix string)
	grow = func(prefix string) {
		words = append(words, prefix)
		if len(prefix) < 5 {
			for _, c := range "ab" {
				grow(prefix + string(c))
			}
		}
	}
	grow("")
	words = append(words, "tcp", "tpc", "h2", "http2", "grpc", "abcdef", "badcfe")
	for _, key := range grammarKeys {
		words = append(words, key, key[1:], key+"s", strings.Replace(key, "o", "0", 2), strings.Replace(key, "endpoint", "endpionts", 1))
	}
	for _, a := range words {
		for _, b := range words {
			want := osaDistance(a, b)
			if want > typoDistance {
				want = far
			}
			if got := editDistance(a, b); got != want {
				t.Fatalf("editDistance(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}
