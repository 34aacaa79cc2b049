// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds_test

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// BenchmarkBuild: a full build of a node's configuration for 100 and 1 000 services of 10
// endpoints serving HTTP 8080, h2 9090 and TCP 9000, with 2 local pods (xdstest.Fleet), the
// acceptance's figure (target: under 100 ms at 1 000).
func BenchmarkBuild(b *testing.B) {
	for _, services := range []int{100, 1000} {
		b.Run(strconv.Itoa(services), func(b *testing.B) {
			m := xdstest.Fleet(services, 10).Mesh()
			if _, err := xds.Build(m); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := xds.Build(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEndpointChange: one endpoint's health flips (Healthy, Unhealthy, in turn) and the
// node's configuration is rebuilt as the agent rebuilds it: the changed service's model
// (model.BuildService over its endpoints) and a build by the agent's one Builder, which reuses
// what the change left alone (the work of one endpoint event in the agent). Besides the wall
// time it reports the process's CPU time per change (cpu-ns/op, its GC included), which other
// work on the machine does not inflate. The fleets are
// xdstest.Fleet's of 100 and 1 000 services, and the latter with 50 local identities.
func BenchmarkEndpointChange(b *testing.B) {
	benchmarkEndpointChange(b, new(xds.Builder).Build)
}

// BenchmarkEndpointChangeFullBuild is BenchmarkEndpointChange with a full build (xds.Build)
// after each change, which is what the agent did before it kept a Builder.
func BenchmarkEndpointChangeFullBuild(b *testing.B) {
	benchmarkEndpointChange(b, xds.Build)
}

func benchmarkEndpointChange(b *testing.B, build func(model.Mesh) (xds.Resources, error)) {
	fleets := []struct {
		name  string
		fleet xdstest.Scenario
	}{
		{"100", xdstest.Fleet(100, 10)},
		{"1000", xdstest.Fleet(1000, 10)},
		// 50 local pods of 50 identities, every service carried for each (a busy node).
		{"1000-identities-50", xdstest.DeclaringFleet(1000, 10, 50, 5, model.UpstreamsAll)},
	}
	for _, f := range fleets {
		b.Run(f.name, func(b *testing.B) {
			fleet := f.fleet
			m, inputs := fleet.Mesh(), fleet.Inputs() // the same order: by namespace and name
			changed := len(inputs) / 2
			target := &inputs[changed].Endpoints[3].Status.Health
			flip := func() error {
				if *target == meshv1alpha1.HealthHealthy {
					*target = meshv1alpha1.HealthUnhealthy
				} else {
					*target = meshv1alpha1.HealthHealthy
				}
				m.Services[changed] = model.BuildService(inputs[changed])
				_, err := build(m)
				return err
			}
			if err := flip(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var cpu time.Duration
			for b.Loop() {
				if cpu == 0 {
					cpu = -processCPU() // from the first timed change
				}
				if err := flip(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpu+processCPU()).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkSecretNames: what the xDS server adds to each publish of a node's configuration to
// choose the SDS secrets it serves (xds.SecretNames over the clusters and listeners), for the
// fleets of BenchmarkBuild; compare with BenchmarkBuild's time.
func BenchmarkSecretNames(b *testing.B) {
	for _, services := range []int{100, 1000} {
		b.Run(strconv.Itoa(services), func(b *testing.B) {
			res, err := xds.Build(xdstest.Fleet(services, 10).Mesh())
			if err != nil {
				b.Fatal(err)
			}
			names, err := xds.SecretNames(res.Clusters, res.Listeners)
			if err != nil || len(names) == 0 {
				b.Fatalf("SecretNames: %q, %v", names, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := xds.SecretNames(res.Clusters, res.Listeners); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUpstreams: a node's configuration for 1 000 services of 10 endpoints (HTTP 8080, h2
// 9090, TCP 9000) with 30 local identities, each declaring 5 upstreams
// (xdstest.DeclaringFleet), built carrying the declared upstreams only (the agent's default,
// --upstreams=declared) and carrying every service (--upstreams=all). Besides the build's time,
// it reports the node's clusters, load assignments, listeners and route configurations, and
// the bytes of each kind and of all (their encoded size, what a full push sends).
func BenchmarkUpstreams(b *testing.B) {
	for _, mode := range []model.UpstreamsMode{model.UpstreamsDeclared, model.UpstreamsAll} {
		b.Run(string(mode), func(b *testing.B) {
			m := xdstest.DeclaringFleet(1000, 10, 30, 5, mode).Mesh()
			res, err := xds.Build(m)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Skipped) > 0 {
				b.Fatalf("the fleet left things out: %q", res.Skipped)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := xds.Build(m); err != nil {
					b.Fatal(err)
				}
			}
			clusters, endpoints := encodedSize(res.Clusters), encodedSize(res.Endpoints)
			listeners, routes := encodedSize(res.Listeners), encodedSize(res.Routes)
			b.ReportMetric(float64(len(res.Clusters)), "clusters")
			b.ReportMetric(float64(len(res.Endpoints)), "load-assignments")
			b.ReportMetric(float64(len(res.Listeners)), "listeners")
			b.ReportMetric(float64(len(res.Routes)), "route-configs")
			b.ReportMetric(float64(clusters), "cluster-bytes")
			b.ReportMetric(float64(endpoints), "endpoint-bytes")
			b.ReportMetric(float64(listeners), "listener-bytes")
			b.ReportMetric(float64(routes), "route-bytes")
			b.ReportMetric(float64(clusters+endpoints+listeners+routes), "resource-bytes")
		})
	}
}

// encodedSize is the bytes of the resources' encodings.
func encodedSize[T proto.Message](resources []T) int {
	n := 0
	for _, r := range resources {
		n += proto.Size(r)
	}
	return n
}
