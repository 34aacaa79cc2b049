// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkEndpointTimesServe: one read of /debug/endpoint-times at 10 000 endpoints held (1 000
// services of 10), answered and decoded as the latency harness decodes it.
func BenchmarkEndpointTimesServe(b *testing.B) {
	times := NewEndpointTimes()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for s := range 1000 {
		for e := range 10 {
			times.byEP[fmt.Sprintf("fleet/svc-%04d-%02d", s, e)] = &EndpointTime{Held: at, Address: fmt.Sprintf("10.%d.%d.%d", s/250, s%250, e+1)}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		times.ServeHTTP(w, httptest.NewRequest("GET", "/debug/endpoint-times", nil))
		var out EndpointTimesAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || len(out.Endpoints) != 10000 {
			b.Fatalf("%d endpoints read, %v", len(out.Endpoints), err)
		}
		b.ReportMetric(float64(w.Body.Len()), "bytes/op")
	}
}
