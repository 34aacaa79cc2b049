// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestFirstStatusCarriesTheFirstProbe: a new endpoint whose pod answers its probe is never seen
// Registered and still Pending: a watch on it, opened before the pod exists, sees its first
// Registered=True status (for the current generation) already Healthy. (The controller's verdict,
// or a prober round that comes first, may add states before it; none is Registered and Pending.)
// A pod that does not answer is Registered and Pending, the prober's to decide.
func TestFirstStatusCarriesTheFirstProbe(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(ctx, &meshv1alpha1.MeshEndpointList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	answering := newPodIP()
	port, _ := listenHTTP(t, answering, "/")
	annotations := map[string]string{portspec.AnnotationPort: strconv.Itoa(port), portspec.AnnotationPorts: strconv.Itoa(port)}
	createPod(t, ctx, ns, "answers", testNode, answering, true, annotations)
	silent := newPodIP() // nothing listens there: the probe is refused
	createPod(t, ctx, ns, "silent", testNode, silent, true, annotations)

	// Every status each endpoint was seen with, in order, until both are Registered.
	seen := map[string][]string{}
	registered := map[string]*meshv1alpha1.MeshEndpoint{}
	for len(registered) < 2 {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-ctx.Done():
			t.Fatalf("the endpoints were not both Registered in time; statuses seen: %v", seen)
		}
		ep, ok := ev.Object.(*meshv1alpha1.MeshEndpoint)
		if !ok {
			t.Fatalf("watch event %s: %T", ev.Type, ev.Object)
		}
		c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered)
		state := fmt.Sprintf("%s health=%q registered=%v", ev.Type, ep.Status.Health, c != nil && c.Status == metav1.ConditionTrue)
		seen[ep.Name] = append(seen[ep.Name], state)
		if c != nil && c.Status == metav1.ConditionTrue && registered[ep.Name] == nil {
			registered[ep.Name] = ep
		}
	}

	answered := registered["answers"]
	if answered.Status.Health != meshv1alpha1.HealthHealthy {
		t.Errorf("the answering pod's endpoint was first Registered with health %q, want Healthy in the same write; statuses seen: %v",
			answered.Status.Health, seen["answers"])
	}
	if got := registered["silent"].Status.Health; got != meshv1alpha1.HealthPending {
		t.Errorf("the silent pod's endpoint was Registered with health %q, want Pending", got)
	}
	for name, ep := range registered {
		c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered)
		if c.Reason != meshv1alpha1.EndpointReasonRegistered || c.ObservedGeneration != ep.Generation || ep.Status.ObservedGeneration != ep.Generation {
			t.Errorf("%s: Registered %+v, status observedGeneration %d; want reason %s at generation %d", name, c,
				ep.Status.ObservedGeneration, meshv1alpha1.EndpointReasonRegistered, ep.Generation)
		}
	}
}

// TestStatusFollowsTheCreate: a new endpoint's first status is written right after its create,
// on the object the create returned, not once the create's watch event reaches the agent's
// cache: with the agent's MeshEndpoint watch held back, the endpoint is still Registered.
func TestStatusFollowsTheCreate(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node := "node-" + ns
	if _, err := createNode(node)(env); err != nil {
		t.Fatal(err)
	}
	hold := testenv.NewWatchHold("meshendpoints")
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = hold.Wrap
	stop, err := startAgentWith(env, cfg, Options{NodeName: node, Health: testHealth, controllerName: "agent-" + ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	annotations := map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080"}
	// A first pod registered shows the agent's caches synced and its pod controller running (the
	// cache's first list may itself come over a watch, which the hold would stop).
	createPod(t, ctx, ns, "first", node, newPodIP(), true, annotations)
	registeredEndpoint(t, ctx, ns, "first", "the first endpoint Registered")
	hold.Hold() // from now on the agent's cache sees no endpoint change
	t.Cleanup(hold.Release)

	createPod(t, ctx, ns, "held", node, newPodIP(), true, annotations)
	registeredEndpoint(t, ctx, ns, "held", "the endpoint Registered while the agent's cache has not seen it")
}

// verdictAfterCreate is the real client as an agent's cache that has not yet seen the endpoint
// named name (a Get answers NotFound), while the controller's verdict on it lands right after
// the agent's create returns: the first status write, made on the created object, conflicts.
type verdictAfterCreate struct {
	client.Client
	name string
	t    *testing.T
}

func (c verdictAfterCreate) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, isEndpoint := obj.(*meshEndpoint); isEndpoint && key.Name == c.name {
		return apierrors.NewNotFound(meshv1alpha1.GroupVersion.WithResource("meshendpoints").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c verdictAfterCreate) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	if ep, isEndpoint := obj.(*meshEndpoint); isEndpoint && ep.Name == c.name {
		verdict := ep.DeepCopy()
		patch := client.MergeFrom(verdict.DeepCopy())
		verdict.Status.Conditions = conditions.Set(verdict.Status.Conditions, metav1.Condition{Type: meshv1alpha1.EndpointConditionVerified,
			Status: metav1.ConditionTrue, Reason: "RealPod", Message: "matches its pod, says the staged controller"}, verdict.Generation, metav1.Now())
		if err := c.Client.Status().Patch(ctx, verdict, patch); err != nil {
			c.t.Errorf("the staged controller's verdict: %v", err)
		}
	}
	return nil
}

// TestFirstStatusSurvivesTheVerdict: when the controller's verdict lands between a new
// endpoint's create and its first status write, the write is made again on the endpoint as the
// API server holds it, in the same reconcile, though the agent's cache has not seen the endpoint
// yet (the next reconcile would find none there, and try to create it again). Both conditions
// stand after that one reconcile. The negative control reads through the lagging cache only: the
// endpoint is not found there, and the one reconcile leaves it without Registered.
func TestFirstStatusSurvivesTheVerdict(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node := "node-" + ns // no agent runs for it: the test's reconciler is its only writer
	for _, tc := range []struct {
		name           string
		apiReader      func(lagging client.Client) client.Reader
		wantRegistered bool
	}{
		{name: "read-past-the-cache", apiReader: func(client.Client) client.Reader { return env.Client }, wantRegistered: true},
		{name: "cache-only", apiReader: func(lagging client.Client) client.Reader { return lagging }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			createPod(t, ctx, ns, tc.name, node, newPodIP(), true, map[string]string{portspec.AnnotationPorts: "8080"})
			lagging := verdictAfterCreate{Client: env.Client, name: tc.name, t: t}
			r := &PodReconciler{Client: lagging, apiReader: tc.apiReader(lagging), NodeName: node}
			result, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: tc.name}})
			if err != nil || result.RequeueAfter > 0 {
				t.Fatalf("reconcile: %+v, %v; want it done", result, err)
			}
			ep, err := getEndpoint(ctx, ns, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified); c == nil || c.Status != metav1.ConditionTrue {
				t.Errorf("the staged verdict is gone: %+v", ep.Status.Conditions)
			}
			c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered)
			if registered := c != nil && c.Status == metav1.ConditionTrue; registered != tc.wantRegistered {
				t.Errorf("Registered=True after the one reconcile: %v, want %v: %+v", registered, tc.wantRegistered, ep.Status.Conditions)
			}
		})
	}
}
