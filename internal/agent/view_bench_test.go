// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
)

// Sizes of the view benchmark's mesh: 1 000 services × 10 endpoints.
const (
	benchServices          = 1000
	benchEndpointsPerSvc   = 10
	benchCreateConcurrency = 16
)

// BenchmarkViewMemory loads 10 000 MeshEndpoints (1 000 services × 10, three ports, two metadata
// keys, a locality, Healthy with a Registered condition; the controller adds its Verified verdict)
// into the real API server, then starts a View over them, waits for its cache to sync, and
// reports the heap the view added, after a GC: view-heap-alloc-MiB and view-B/endpoint (HeapAlloc
// delta: the live objects, the figure to read) and view-heap-inuse-MiB (HeapInuse delta, lower and
// noisier: the new objects fill spans that the creation phase's garbage left partly free). "whole" caches the objects as the API
// server sends them; "slim" with the view's transforms. process-heap-inuse-MiB is the whole test
// process's heap afterwards (the API server's client, the suite's agent and controller included),
// an upper bound for an agent's heap with the view.
//
//	go test ./internal/agent/ -run '^$' -bench ViewMemory -benchtime 1x
func BenchmarkViewMemory(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns, err := env.Namespace(ctx, "bench-view")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	createBenchEndpoints(b, ctx, ns)
	b.Logf("created %d MeshEndpoints in %s", benchServices*benchEndpointsPerSvc, time.Since(start).Round(time.Millisecond))
	// The suite's controller writes its Verified verdict on each (no pod stands behind them): wait
	// for the last, so its writes neither land in a measurement (its own cache grows with them) nor
	// change the objects between the two views.
	// testenv.Eventually allows 30 s; the controller needs longer for 10 000 endpoints.
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
		err := allVerified(ctx, ns)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
	}

	for _, variant := range []struct {
		name string
		slim bool
	}{{"whole", false}, {"slim", true}} {
		b.Run(variant.name, func(b *testing.B) {
			for range b.N {
				measureView(b, ctx, variant.slim)
			}
		})
	}
}

// measureView starts one view, waits for it to sync, reports its heap and stops it.
func measureView(b *testing.B, ctx context.Context, slim bool) {
	var before, after runtime.MemStats
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&before)

	viewCtx, stop := context.WithCancel(ctx)
	defer stop()
	v, err := newView(env.Config, env.Scheme, slim, allRouteKinds)
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
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	const mib = 1 << 20
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/mib, "view-heap-inuse-MiB")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/mib, "view-heap-alloc-MiB")
	b.ReportMetric(float64(after.HeapInuse)/mib, "process-heap-inuse-MiB")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(benchServices*benchEndpointsPerSvc), "view-B/endpoint")
	b.ReportMetric(synced.Seconds(), "sync-s")
	b.Logf("slim=%v: synced in %s; %d services in the cluster, %d verified members", slim, synced.Round(time.Millisecond), len(services), members)
	runtime.KeepAlive(v)
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// createBenchEndpoints writes the benchmark's MeshEndpoints, and their status, benchCreateConcurrency at a time.
func createBenchEndpoints(b *testing.B, ctx context.Context, ns string) {
	b.Helper()
	total := benchServices * benchEndpointsPerSvc
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchCreateConcurrency)
	for range benchCreateConcurrency {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < total; i = int(next.Add(1)) - 1 {
				if err := createBenchEndpoint(ctx, ns, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// createBenchEndpoint writes endpoint i as a node's agent would: the spec, then its status.
func createBenchEndpoint(ctx context.Context, ns string, i int) error {
	svc, name := fmt.Sprintf("svc-%04d", i/benchEndpointsPerSvc), fmt.Sprintf("svc-%04d-%d", i/benchEndpointsPerSvc, i%benchEndpointsPerSvc)
	ep := &meshEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: meshv1alpha1.MeshEndpointSpec{ServiceName: svc, PodName: name, PodUID: fmt.Sprintf("0000%04d-0000-0000-0000-%012d", i%7919, i),
			NodeName: fmt.Sprintf("bench-node-%d", i%50), Address: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256),
			PrimaryPort: 8080, PortsSummary: "8080/HTTP,9000/TCP,9090/HTTP2", Weight: 1024,
			Ports: []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}, {Port: 9000, Protocol: meshv1alpha1.ProtocolTCP},
				{Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2, AppProtocol: meshv1alpha1.AppProtocolGRPC}},
			HealthCheck: meshv1alpha1.HealthCheck{Mode: meshv1alpha1.HealthCheckEDS, Path: "/healthz"},
			Metadata:    map[string]string{"version": "v2", "track": "stable"},
			Locality:    meshv1alpha1.Locality{Region: "eu-west-1", Zone: fmt.Sprintf("eu-west-1%c", 'a'+rune(i%3))}},
	}
	if err := env.Client.Create(ctx, ep, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	ep.Status = meshv1alpha1.MeshEndpointStatus{Health: meshv1alpha1.HealthHealthy, ObservedGeneration: ep.Generation,
		Conditions: []metav1.Condition{{Type: meshv1alpha1.EndpointConditionRegistered, Status: metav1.ConditionTrue,
			Reason: meshv1alpha1.EndpointReasonRegistered, Message: "the MeshEndpoint matches the pod's annotations",
			ObservedGeneration: ep.Generation, LastTransitionTime: metav1.Now().Rfc3339Copy()}}}
	if err := env.Client.Status().Update(ctx, ep, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("status of %s: %w", name, err)
	}
	return nil
}

// allVerified is nil once every MeshEndpoint of ns carries the controller's Verified verdict.
func allVerified(ctx context.Context, ns string) error {
	var list meshv1alpha1.MeshEndpointList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	unverified := 0
	for _, ep := range list.Items {
		if conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified) == nil {
			unverified++
		}
	}
	if unverified > 0 {
		return fmt.Errorf("%d of %d endpoints have no verdict yet", unverified, len(list.Items))
	}
	return nil
}
