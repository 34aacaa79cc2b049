// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// The writes hack/bench counts: each test here pins a write the convergence figures showed was
// wasted (issue 15). They run in isolated namespaces, with a manager of their own built as
// cmd/manager builds it (CacheOptions, ClientOptions).

// isolatedManager runs a manager over isolated namespace ns alone until the test ends; with a
// window, it runs a MeshService reconciler with that batching window.
func isolatedManager(t *testing.T, ns string, window time.Duration) ctrl.Manager {
	t.Helper()
	return managerOver(t, ns, func(mgr ctrl.Manager) error {
		if window <= 0 {
			return nil
		}
		return (&MeshServiceReconciler{Client: mgr.GetClient(), MeshDomain: "aether.internal", BatchWindow: window,
			controllerName: "meshservice-" + ns}).SetupWithManager(mgr)
	})
}

// managerOver runs a manager over isolated namespace ns alone, built as cmd/manager builds it
// (CacheOptions, ClientOptions), with what setup adds to it, until the test ends.
func managerOver(t *testing.T, ns string, setup func(ctrl.Manager) error) ctrl.Manager {
	t.Helper()
	cacheOptions := CacheOptions()
	cacheOptions.DefaultNamespaces = map[string]cache.Config{ns: {}}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: cacheOptions, Client: ClientOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return mgr
}

// TestManagerReadsItsOwnWrites: a read through the manager's client right after its own write
// returns that write, not the object before it. A reconcile that followed the controller's own
// status write read the older MeshService from the cache, and its own next write then failed on
// the older resourceVersion: at 100x10 with eight workers, 32 status conflicts and 210 Verified
// ones (hack/bench), each a wasted write and a second's delay. Twenty write-then-read rounds: the
// informer's watch event, which the cache waits for, lags the write's answer on every one.
func TestManagerReadsItsOwnWrites(t *testing.T) {
	ctx := testContext(t)
	ns := isolated(t, ctx, "isolated-reads", "default")
	c := isolatedManager(t, ns, 0).GetClient()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rounds"}, Data: map[string]string{"round": "0"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 20; round++ {
		cm.Data["round"] = fmt.Sprint(round)
		if err := c.Update(ctx, cm); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		read := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cm), read); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if read.ResourceVersion != cm.ResourceVersion {
			t.Fatalf("round %d: the manager's client read resourceVersion %s (round %s) right after writing %s: not its own write",
				round, read.ResourceVersion, read.Data["round"], cm.ResourceVersion)
		}
	}
}

// TestScaleUpWritesTheStatusOnce: three endpoints joining a service (a Deployment scaled up: the
// pods, their endpoints, Pending then Healthy) change the MeshService's status once, whether they
// come at once or one every 2.5 s, over longer than the window (4 s here): the reconcile waits
// until the service's inputs are quiet for the window. Without a window, each step a reconcile
// caught was a status write of its own (at 100x10, 154 status writes for 100 services,
// hack/bench); a window counted from the first change wrote the slower scale-up twice.
func TestScaleUpWritesTheStatusOnce(t *testing.T) {
	cases := map[string]struct {
		ns   string
		pace time.Duration // between two endpoints: a rollout's pace, not a wait for anything
	}{
		"at once":        {ns: "isolated-burst"},
		"one every 2.5s": {ns: "isolated-trickle", pace: 2500 * time.Millisecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			ns := isolated(t, ctx, tc.ns, "orders")
			isolatedManager(t, ns, 4*time.Second)
			endpoint(t, ctx, ns, "orders-0", "orders", healthy, 8080, 8080, "HTTP")
			before := serviceReady(t, ctx, ns, "orders", 1)

			watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			w, err := watcher.Watch(ctx, &meshv1alpha1.MeshServiceList{}, client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: before.ResourceVersion}})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()

			for i := 1; i <= 3; i++ {
				if i > 1 {
					time.Sleep(tc.pace)
				}
				scaleUp(t, ctx, ns, fmt.Sprintf("orders-%d", i), "orders")
			}
			writes := 0
			deadline := time.After(30 * time.Second)
			for {
				select {
				case ev := <-w.ResultChan():
					ms, ok := ev.Object.(*meshv1alpha1.MeshService)
					if ev.Type != watch.Modified || !ok {
						t.Fatalf("unexpected watch event %s %T", ev.Type, ev.Object)
					}
					writes++
					t.Logf("write %d: %s endpoints ready", writes, ms.Status.EndpointsSummary)
					if ms.Status.Endpoints != (meshv1alpha1.EndpointCounts{Ready: 4, Total: 4}) {
						continue
					}
					if writes != 1 {
						t.Fatalf("the scale-up from 1 to 4 endpoints took %d writes of the MeshService, want 1", writes)
					}
					return
				case <-deadline:
					t.Fatalf("the MeshService did not reach 4/4 ready endpoints within 30s (%d writes seen)", writes)
				}
			}
		})
	}
}

// scaleUp creates a pod of service with its IP, and its MeshEndpoint, Pending then Healthy, as
// its agent would, without waiting for anything in between.
func scaleUp(t *testing.T, ctx context.Context, ns, name, service string) {
	t.Helper()
	ports := []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}}
	ep := testenv.EndpointOf(t, env.CreatePod(t, ctx, ns, name, service, "node-a", testenv.PodIP(), declaring(8080, ports)))
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	setHealth(t, ctx, ep, pending)
	setHealth(t, ctx, ep, healthy)
}

// TestHealthyEndpointVerifiedWithinTheWindow: an endpoint that turns Healthy while it awaits its
// verdict is Verified at once, though the service's batching window (an hour here) holds the
// service back: its traffic waits for the verdict, not for the window. The MeshService's status,
// which the batch writes, is not written meanwhile: the verdict alone is.
func TestHealthyEndpointVerifiedWithinTheWindow(t *testing.T) {
	ctx := testContext(t)
	ns := isolated(t, ctx, "isolated-prompt", "orders")
	isolatedManager(t, ns, time.Hour)
	// The ServiceAccount came in the initial list, which is not held: the service's first
	// reconcile runs at once (no endpoint yet, so no MeshService), before the endpoint exists.
	testenv.Eventually(t, "the initial reconcile of orders", func() error {
		n, err := testenv.Counter("controller_runtime_reconcile_total", "controller", "meshservice-"+ns)
		if err == nil && n < 1 {
			err = fmt.Errorf("%v reconciles", n)
		}
		return err
	})
	ports := []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}}
	ep := testenv.EndpointOf(t, env.CreatePod(t, ctx, ns, "orders-0", "orders", "node-a", testenv.PodIP(), declaring(8080, ports)))
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	setHealth(t, ctx, ep, healthy)
	testenv.Eventually(t, "orders-0 Verified=True within the window", func() error {
		fresh := &meshv1alpha1.MeshEndpoint{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ep), fresh); err != nil {
			return err
		}
		if c := condition(fresh.Status.Conditions, meshv1alpha1.EndpointConditionVerified); c.Status != metav1.ConditionTrue ||
			c.ObservedGeneration != fresh.Generation {
			return fmt.Errorf("Verified %s %s at generation %d", c.Status, c.Reason, c.ObservedGeneration)
		}
		return nil
	})
	if ms, err := getMeshService(ctx, ns, "orders"); err == nil {
		t.Errorf("the MeshService was written within the window (%s endpoints): the batch should hold it", ms.Status.EndpointsSummary)
	}
}
