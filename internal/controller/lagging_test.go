// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestServiceEndpointsWaitOnlyForTheirOwnWrites: with the cache's MeshEndpoint watch held back
// (the lag of a loaded API server, made certain), a service's endpoints are read at once after
// the manager wrote another service's endpoint, where a List through the read-your-writes client
// waits for that write to reach the cache; and they still wait for the manager's own write of one
// of them, and then read it.
func TestServiceEndpointsWaitOnlyForTheirOwnWrites(t *testing.T) {
	ctx := testContext(t)
	ns := isolated(t, ctx, "isolated-lagging", "default")
	hold := testenv.NewWatchHold("meshendpoints")
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = hold.Wrap
	cacheOptions := CacheOptions()
	cacheOptions.DefaultNamespaces = map[string]cache.Config{ns: {}}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Cache: cacheOptions, Client: ClientOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &meshv1alpha1.MeshEndpoint{}, EndpointServiceIndex,
		func(o client.Object) []string { return []string{o.(*meshv1alpha1.MeshEndpoint).Spec.ServiceName} }); err != nil {
		t.Fatal(err)
	}
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	r := &MeshServiceReconciler{Client: mgr.GetClient()}

	orders, payments := lagEndpoint(t, ctx, ns, "orders-0", "orders"), lagEndpoint(t, ctx, ns, "payments-0", "payments")
	testenv.Eventually(t, "the manager's cache holds both endpoints", func() error {
		for _, ep := range []*meshv1alpha1.MeshEndpoint{orders, payments} {
			if err := r.Get(ctx, client.ObjectKeyFromObject(ep), &meshv1alpha1.MeshEndpoint{}); err != nil {
				return err
			}
		}
		return nil
	})

	hold.Hold()
	t.Cleanup(hold.Release)
	setHealthAs(t, ctx, r, payments, meshv1alpha1.HealthHealthy)

	got, err := r.serviceEndpoints(bounded(t, ctx), types.NamespacedName{Namespace: ns, Name: "orders"})
	if err != nil || len(got) != 1 || got[0].Name != "orders-0" {
		t.Fatalf("orders' endpoints, while the cache has not seen the manager's write of payments-0: %v (err %v), want orders-0 at once", names(got), err)
	}
	// The hold holds: a List through the read-your-writes client waits for payments-0's write.
	var list meshv1alpha1.MeshEndpointList
	if err := r.List(bounded(t, ctx), &list, client.InNamespace(ns), client.MatchingFields{EndpointServiceIndex: "orders"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a List through the read-your-writes client read %v (err %v) while the cache had not seen the manager's last write; want it to wait", names(list.Items), err)
	}

	setHealthAs(t, ctx, r, orders, meshv1alpha1.HealthHealthy)
	if got, err := r.serviceEndpoints(bounded(t, ctx), types.NamespacedName{Namespace: ns, Name: "orders"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("orders' endpoints read %v (err %v) before the cache saw the manager's own write of orders-0; want them to wait for it", names(got), err)
	}
	hold.Release()
	got, err = r.serviceEndpoints(ctx, types.NamespacedName{Namespace: ns, Name: "orders"})
	if err != nil || len(got) != 1 || got[0].ResourceVersion != orders.ResourceVersion || got[0].Status.Health != meshv1alpha1.HealthHealthy {
		t.Fatalf("orders' endpoints after the cache caught up: %v (err %v), want orders-0 at resourceVersion %s, Healthy", got, err, orders.ResourceVersion)
	}
}

// lagEndpoint creates a managed pod and its MeshEndpoint of service (no health, no verdict: no
// controller watches this namespace).
func lagEndpoint(t *testing.T, ctx context.Context, ns, name, service string) *meshv1alpha1.MeshEndpoint {
	t.Helper()
	ep := testenv.EndpointOf(t, env.CreatePod(t, ctx, ns, name, service, "node-a", testenv.PodIP(), nil))
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatalf("creating MeshEndpoint %s: %v", name, err)
	}
	return ep
}

// setHealthAs sets ep's health through c, recording the write as c's own.
func setHealthAs(t *testing.T, ctx context.Context, c client.Client, ep *meshv1alpha1.MeshEndpoint, health meshv1alpha1.Health) {
	t.Helper()
	patch := client.MergeFrom(ep.DeepCopy())
	ep.Status.Health = health
	if err := c.Status().Patch(ctx, ep, patch); err != nil {
		t.Fatalf("setting the health of %s: %v", ep.Name, err)
	}
}

// bounded is ctx for a read expected to return at once, or to wait (until 2 s).
func bounded(t *testing.T, ctx context.Context) context.Context {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func names(eps []meshv1alpha1.MeshEndpoint) []string {
	out := make([]string, len(eps))
	for i, ep := range eps {
		out[i] = ep.Name
	}
	return out
}
