// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// BenchmarkViewMemory starts a View over the benchmarks' mesh (benchmesh_test.go: 1 000
// MeshServices × 10 MeshEndpoints as the agent and the controller write them, in an API server of
// its own), waits for its cache to sync, and reports the heap the view added, after a GC:
// view-heap-alloc-MiB and view-B/endpoint (HeapAlloc delta: the live objects, the figure to
// read; per endpoint, its service's share included) and view-heap-inuse-MiB (HeapInuse delta, lower and noisier: the new objects fill spans
// that earlier garbage left partly free). "whole" caches the objects as the API server sends
// them; "slim" with the view's transforms. process-heap-inuse-MiB is the whole test process's heap
// afterwards (the API server's client, the suite's agent and controller included), an upper
// bound for an agent's heap with the view; BenchmarkAgentRSS measures a real agent process.
//
//	go test ./internal/agent/ -run '^$' -bench ViewMemory -benchtime 1x
func BenchmarkViewMemory(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mesh, err := benchMeshEnv(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, variant := range []struct {
		name string
		slim bool
	}{{"whole", false}, {"slim", true}} {
		b.Run(variant.name, func(b *testing.B) {
			for range b.N {
				measureView(b, ctx, mesh, variant.slim)
			}
		})
	}
}

// measureView starts one view, waits for it to sync, reports its heap and stops it.
func measureView(b *testing.B, ctx context.Context, mesh *testenv.Env, slim bool) {
	var before, after runtime.MemStats
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&before)

	viewCtx, stop := context.WithCancel(ctx)
	defer stop()
	v, err := newView(mesh.Config, mesh.Scheme, slim, allRouteKinds)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- v.Start(viewCtx) }()
	if !v.WaitForCacheSync(viewCtx) {
		b.Fatal("the view did not sync")
	}
	synced := time.Since(began)
	services, err := v.Services(ctx)
	if err != nil {
		b.Fatal(err)
	}
	members := 0
	for _, svc := range services {
		members += int(svc.Endpoints)
	}
	if len(services) != benchServices || members != benchServices*benchEndpointsPerSvc {
		b.Fatalf("the view's model has %d services and %d members, want %d and %d", len(services), members, benchServices, benchServices*benchEndpointsPerSvc)
	}
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	const mib = 1 << 20
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/mib, "view-heap-inuse-MiB")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/mib, "view-heap-alloc-MiB")
	b.ReportMetric(float64(after.HeapInuse)/mib, "process-heap-inuse-MiB")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(benchServices*benchEndpointsPerSvc), "view-B/endpoint")
	b.ReportMetric(synced.Seconds(), "sync-s")
	b.Logf("slim=%v: synced in %s; %d services, %d verified members", slim, synced.Round(time.Millisecond), len(services), members)
	runtime.KeepAlive(v)
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkViewServicesEndpointChange: what View.Services does per rebuild after one MeshEndpoint
// changed, the MeshService list aside: at 1 000 services of 10 verified endpoints (slimmed as the
// view caches them), one endpoint's health flips per op, reaching the view's index as the
// informer's update, and the index builds the mesh (regrouping the changed service alone). The
// model-level counterpart is internal/model's BenchmarkServicesEndpointChange ("changed" is the
// view's former path, grouping every endpoint on every build; "kept" this one's).
//
//	go test ./internal/agent/ -run '^$' -bench ViewServicesEndpointChange -benchtime 20x
func BenchmarkViewServicesEndpointChange(b *testing.B) {
	const services, perService = 1000, 10
	created := metav1.Now().Rfc3339Copy()
	x := newEndpointIndex()
	mss := make([]meshv1alpha1.MeshService, 0, services)
	var endpoints []*meshv1alpha1.MeshEndpoint
	rv := 0
	next := func() string { rv++; return strconv.Itoa(rv) }
	for s := range services {
		name := fmt.Sprintf("svc-%04d", s)
		mss = append(mss, meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, ResourceVersion: next()}})
		for e := range perService {
			whole := fullEndpoint(fmt.Sprintf("%s-%02d", name, e), created, meshv1alpha1.HealthHealthy, metav1.ConditionTrue)
			whole.Spec.ServiceName, whole.ResourceVersion = name, next()
			slim, err := slimMeshEndpoint(&whole)
			if err != nil {
				b.Fatal(err)
			}
			ep := slim.(*meshv1alpha1.MeshEndpoint)
			endpoints = append(endpoints, ep)
			x.OnAdd(ep, true)
		}
	}
	var sb model.ServiceBuilder
	if got := x.build(&sb, mss); len(got) != services || got[0].Endpoints != perService {
		b.Fatalf("built %d services, the first of %d endpoints", len(got), got[0].Endpoints)
	}
	i := len(endpoints) / 2
	b.ReportAllocs()
	for b.Loop() {
		changed := endpoints[i].DeepCopy()
		if changed.Status.Health == meshv1alpha1.HealthHealthy {
			changed.Status.Health = meshv1alpha1.HealthUnhealthy
		} else {
			changed.Status.Health = meshv1alpha1.HealthHealthy
		}
		changed.ResourceVersion = next()
		x.OnUpdate(endpoints[i], changed)
		endpoints[i] = changed
		x.build(&sb, mss)
	}
}
