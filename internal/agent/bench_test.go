// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkRefuseHostilePod refuses pods whose annotations fill the 256 KiB a pod may carry
// with 905 metadata values over the limit (327 KB of parser errors today): one reconcile each,
// straight from the API server (no cache), on a node no agent serves. B/op is what a reconcile
// allocates (decoding the pod, the parser's error text, the Event); retained-B/pod is the heap
// still in use, after a GC, per refused pod once all are refused: what the agent keeps in
// memory per refused pod (its pods' cache aside, which holds every pod whole).
//
//	go test ./internal/agent/ -run '^$' -bench RefuseHostilePod -benchtime 50x
func BenchmarkRefuseHostilePod(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns, err := env.Namespace(ctx, "bench-hostile")
	if err != nil {
		b.Fatal(err)
	}
	node := "node-" + ns
	r := &PodReconciler{Client: env.Client, NodeName: node}
	annotations := hostileMetadata(maxAnnotations - 512)
	reqs := make([]ctrl.Request, b.N)
	for i := range reqs {
		name := fmt.Sprintf("hostile-%d", i)
		createPod(b, ctx, ns, name, node, newPodIP(), true, annotations)
		reqs[i] = ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := r.Reconcile(ctx, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "retained-B/pod")
	runtime.KeepAlive(r)
}
