// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"strconv"
	"testing"

	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// BenchmarkBuildProxyless: one proxyless client's rendering (it sends SNI, so every service's h2
// port 9090 is served) of 100 and 1 000 services of 10 endpoints (xdstest.Fleet): the agent's
// work per distinct client identity on every rebuild.
func BenchmarkBuildProxyless(b *testing.B) {
	for _, services := range []int{100, 1000} {
		b.Run(strconv.Itoa(services), func(b *testing.B) {
			m := xdstest.Fleet(services, 10).Mesh()
			client := xds.ProxylessClient{Identity: xdstest.Identity("fleet", "svc-0000"), SNI: true}
			res, err := xds.BuildProxyless(m, client)
			if err != nil || len(res.Clusters) != services {
				b.Fatalf("%d clusters, %v; want %d", len(res.Clusters), err, services)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := xds.BuildProxyless(m, client); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
