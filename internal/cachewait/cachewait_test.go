// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cachewait

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

// testBound keeps the tests short; production uses Bound.
const testBound = 500 * time.Millisecond

// consistentClient is a manager's client with read-your-writes consistency, its cache holding
// only ConfigMaps labelled cached=yes in namespace ns, made by newClient.
func consistentClient(t *testing.T, ns string, newClient client.NewClientFunc) client.Client {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{"cached": "yes"}), Namespaces: map[string]cache.Config{ns: {}}},
		}},
		Client:    client.Options{Cache: &client.CacheOptions{EnableReadYourWritesConsistency: new(true)}},
		NewClient: newClient,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return mgr.GetClient()
}

// A write whose event the cache never shows (here: an object outside the cache's selector; on a
// node, an endpoint written and then deleted while the watch was down) holds controller-runtime's
// reads of it, and every List of its kind, until some object the cache holds changes. With the
// bound, the reads answer from the cache as it is.
func TestAReadWaitsForAnUnseenWriteAtMostTheBound(t *testing.T) {
	ctx := context.Background()
	// Each client's cache holds its own namespace only: a write the other makes must not move it.
	unboundedNS, boundedNS := namespace(t, "cachewait-unbounded"), namespace(t, "cachewait-bounded")
	unbounded := consistentClient(t, unboundedNS, client.New)
	bounded := New(consistentClient(t, boundedNS, client.New), testBound)

	for ns, c := range map[string]client.Client{unboundedNS: unbounded, boundedNS: bounded} {
		// A ConfigMap the cache holds, then one it never will.
		seen := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "seen", Labels: map[string]string{"cached": "yes"}}}
		if err := c.Create(ctx, seen); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(seen), &corev1.ConfigMap{}); err != nil {
			t.Fatalf("%s: reading back a write the cache shows: %v", ns, err)
		}
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unseen"}}); err != nil {
			t.Fatal(err)
		}
	}

	// controller-runtime's own: the read waits for as long as it is let (5 s here).
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := unbounded.Get(short, client.ObjectKey{Namespace: unboundedNS, Name: "unseen"}, &corev1.ConfigMap{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("controller-runtime's read of an unseen write returned %v; want it still waiting after 5s (context.DeadlineExceeded)", err)
	}

	before, err := testenv.Counter("aether_cache_waits_abandoned_total", "operation", "get")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = bounded.Get(ctx, client.ObjectKey{Namespace: boundedNS, Name: "unseen"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("bounded read of an unseen write: %v, want the cache's answer, NotFound", err)
	}
	if took := time.Since(began); took > 5*testBound {
		t.Fatalf("bounded read took %s, bound %s", took, testBound)
	}
	after, err := testenv.Counter("aether_cache_waits_abandoned_total", "operation", "get")
	if err != nil {
		t.Fatal(err)
	}
	if after != before+1 {
		t.Fatalf("aether_cache_waits_abandoned_total{operation=get}: %v → %v, want one more", before, after)
	}

	var list corev1.ConfigMapList
	if err := bounded.List(ctx, &list, client.InNamespace(boundedNS)); err != nil {
		t.Fatalf("bounded List after an unseen write: %v", err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("bounded List holds %d ConfigMaps, want the one the cache holds", len(list.Items))
	}
	listed, err := testenv.Counter("aether_cache_waits_abandoned_total", "operation", "list")
	if err != nil || listed < 1 {
		t.Fatalf("aether_cache_waits_abandoned_total{operation=list} = %v (%v), want at least 1", listed, err)
	}
}

// A read that the cache can answer at once does not wait, and is not counted.
func TestAReadOfASeenWriteIsNotCounted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "cachewait-seen")
	c := New(consistentClient(t, ns, client.New), testBound)
	before, _ := testenv.Counter("aether_cache_waits_abandoned_total", "operation", "get")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "seen", Labels: map[string]string{"cached": "yes"}}, Data: map[string]string{"v": "1"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "2"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil || got.Data["v"] != "2" {
		t.Fatalf("read after update: %v, %v; want the update", got.Data, err)
	}
	if after, _ := testenv.Counter("aether_cache_waits_abandoned_total", "operation", "get"); after != before {
		t.Fatalf("a read of a seen write was counted: %v → %v", before, after)
	}
}

// namespace creates a namespace for one test.
func namespace(t *testing.T, name string) string {
	t.Helper()
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}
