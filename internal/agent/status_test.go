// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestAgentKeepsOtherWritersConditions: the agent owns Registered and nothing else on a
// MeshEndpoint's status; a condition another writer put there (the controller's Verified, or
// any other) survives the agent's own writes, here a flip of Registered to False.
func TestAgentKeepsOtherWritersConditions(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	pod := createPod(t, ctx, ns, "audited", testNode, newPodIP(), true, map[string]string{portspec.AnnotationPorts: "8080"})
	var ep *meshEndpoint
	testenv.Eventually(t, "MeshEndpoint audited, Registered", func() (err error) {
		if ep, err = getEndpoint(ctx, ns, "audited"); err != nil {
			return err
		}
		if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Registered = %+v", c)
		}
		return nil
	})

	// Another writer's condition, written with an optimistic lock as every writer does.
	other := metav1.Condition{Type: "Audited", Status: metav1.ConditionTrue, Reason: "Checked", Message: "by another writer",
		ObservedGeneration: ep.Generation, LastTransitionTime: metav1.Now().Rfc3339Copy()}
	testenv.Eventually(t, "the other writer's condition written", func() error {
		fresh, err := getEndpoint(ctx, ns, "audited")
		if err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(fresh.DeepCopy(), client.MergeFromWithOptimisticLock{})
		fresh.Status.Conditions = append(fresh.Status.Conditions, other)
		return env.Client.Status().Patch(ctx, fresh, patch) // a conflict is retried
	})

	// The agent writes Registered=False: the pod's annotations no longer parse.
	pod.Annotations = map[string]string{portspec.AnnotationPorts: "8080,9000=tpc"}
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Registered=False, the other condition kept", func() error {
		fresh, err := getEndpoint(ctx, ns, "audited")
		if err != nil {
			return err
		}
		if c := conditions.Find(fresh.Status.Conditions, meshv1alpha1.EndpointConditionRegistered); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Registered = %+v", c)
		}
		if c := conditions.Find(fresh.Status.Conditions, "Audited"); c == nil || !equality.Semantic.DeepEqual(*c, other) {
			t.Fatalf("the agent's write of Registered=False dropped or changed another writer's condition: %+v", fresh.Status.Conditions)
		}
		return nil
	})
}
