// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package portspec

import (
	"strconv"
	"strings"
	"testing"
)

// BenchmarkParse measures the parser on what admission and the agent see per pod: a typical
// mixed pod, and a pod declaring the most ports allowed.
func BenchmarkParse(b *testing.B) {
	many := make([]string, 0, MaxPorts-1)
	for p := 10000; len(many) < MaxPorts-1; p++ {
		many = append(many, strconv.Itoa(p)+"=tcp")
	}
	cases := map[string]map[string]string{
		"mixed": {
			AnnotationPort: "8080", AnnotationPorts: "8080,9090=h2,9000=tcp",
			AnnotationHealthPath: "/healthz", AnnotationMetadataPrefix + "version": "v2",
			AnnotationUpstreams: "ledger,audit.compliance", "kubectl.kubernetes.io/restartedAt": "2026-11-30T00:00:00Z",
		},
		"max-ports": {AnnotationPorts: strings.Join(many, ",")},
	}
	for name, annotations := range cases {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(annotations); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseHostile measures the parser on the hostile shapes (hostileShapes) at 256 KiB, the
// most annotations the API server lets a pod carry: it must stay in milliseconds, far inside the
// admission webhook's deadline, because every value is capped before it is read and every error
// quotes a bounded excerpt.
func BenchmarkParseHostile(b *testing.B) {
	benchHostile(b, func(annotations map[string]string) {
		_, err := Parse(annotations)
		if err != nil {
			_ = err.Error() // what the webhook sends back
		}
	})
}

// BenchmarkWarnings measures the typo check on the same hostile shapes: it reads every key.
func BenchmarkWarnings(b *testing.B) {
	benchHostile(b, func(annotations map[string]string) { _ = Warnings(annotations) })
}

// benchHostile runs read on each hostile shape at 256 KiB, a sub-benchmark a shape.
func benchHostile(b *testing.B, read func(annotations map[string]string)) {
	size := hostileSizes["256KiB"]
	for name, shape := range hostileShapes() {
		annotations := shape.build(size)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				read(annotations)
			}
		})
	}
}
