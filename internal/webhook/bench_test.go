// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// maxAnnotations is the most a pod's annotations may hold (the API server's limit, 256 KiB).
const maxAnnotations = 256 << 10

// BenchmarkReview judges managed pods whose annotations fill the 256 KiB a pod may carry, as the
// validator does for each admission request (parse, warnings, the denial's text): the cost and
// the memory of one hostile request, which once took the webhook past its timeout and the
// manager to gigabytes.
func BenchmarkReview(b *testing.B) {
	metadata := map[string]string{}
	value := strings.Repeat("v", portspec.MaxMetadataValue+1)
	for i, total := 0, 0; total < maxAnnotations-1024; i++ {
		key := portspec.AnnotationMetadataPrefix + "k" + strconv.Itoa(i)
		metadata[key] = value
		total += len(key) + len(value)
	}
	unknown := map[string]string{} // keys under endpoint.aether.io/ the grammar does not define
	for i, total := 0, 0; total < maxAnnotations-1024; i++ {
		key := "endpoint.aether.io/port-" + strconv.Itoa(i)
		unknown[key] = "8080"
		total += len(key) + 4
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
	}{
		{"commas", map[string]string{portspec.AnnotationPorts: strings.Repeat(",", maxAnnotations-1024)}},
		{"bad-suffixes", map[string]string{portspec.AnnotationPorts: strings.Repeat("9000=tpc,", (maxAnnotations-1024)/9)}},
		{"metadata-values", metadata},
		{"unknown-keys", unknown},
	} {
		pod := pod("bench", true, tc.annotations)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp := review(context.Background(), pod, nil)
				if resp.Allowed || len(resp.Result.Message) > 4096 {
					b.Fatalf("allowed %v, denial of %d bytes", resp.Allowed, len(resp.Result.Message))
				}
			}
		})
	}
}
