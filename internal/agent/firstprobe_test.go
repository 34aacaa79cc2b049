// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
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
