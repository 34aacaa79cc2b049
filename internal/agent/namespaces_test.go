// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestIgnoredNamespacesAreNeverRegistered: a managed pod in a namespace the agent ignores gets no
// MeshEndpoint, however often the agent looks at it; the same pod in another namespace, on the
// same node and agent, is registered (the positive control).
func TestIgnoredNamespacesAreNeverRegistered(t *testing.T) {
	ctx := testContext(t)
	ignoredNS := namespace(t, ctx)
	meshNS, err := env.Namespace(ctx, "ignored-control")
	if err != nil {
		t.Fatal(err)
	}
	node := "node-" + ignoredNS
	if _, err := createNode(node)(env); err != nil {
		t.Fatal(err)
	}
	controller := "agent-" + ignoredNS
	stop, err := startAgentWith(env, env.Config, Options{NodeName: node, Health: testHealth, controllerName: controller,
		IgnoredNamespaces: registration.IgnoredNamespaces{ignoredNS: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	annotations := map[string]string{portspec.AnnotationPorts: "8080,9000=tcp"}
	pod := createPod(t, ctx, ignoredNS, "system-pod", node, newPodIP(), true, annotations)
	// The pod has its IP now; one more change brings a reconcile that sees the whole pod. It is
	// the only pod of this agent's node: every reconcile the agent counts is this pod's.
	before := reconciles(t, controller)
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Labels["touched"] = "yes"
	if err := env.Client.Patch(ctx, pod, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the agent reconciled the ignored pod after its change", func() error {
		if n := reconciles(t, controller); n <= before {
			return fmt.Errorf("%v reconciles, %v before the change", n, before)
		}
		return nil
	})
	if _, err := getEndpoint(ctx, ignoredNS, "system-pod"); !apierrors.IsNotFound(err) {
		t.Errorf("a pod of ignored namespace %s got a MeshEndpoint (%v)", ignoredNS, err)
	}

	createPod(t, ctx, meshNS, "app-pod", node, newPodIP(), true, annotations)
	testenv.Eventually(t, "the control pod registered", func() error {
		_, err := getEndpoint(ctx, meshNS, "app-pod")
		return err
	})
	if _, err := getEndpoint(ctx, ignoredNS, "system-pod"); !apierrors.IsNotFound(err) {
		t.Errorf("a pod of ignored namespace %s got a MeshEndpoint (%v)", ignoredNS, err)
	}
}
