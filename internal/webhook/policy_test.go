// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// agentOf is a client speaking as the node agent, with the node claim of node (none when empty).
func agentOf(t *testing.T, node string) client.Client {
	t.Helper()
	c, err := env.AgentClient(node)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func meshEndpoint(ns, name, node string) *meshv1alpha1.MeshEndpoint {
	ports := []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}}
	return &meshv1alpha1.MeshEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: meshv1alpha1.MeshEndpointSpec{
			ServiceName: "payments", PodName: name, PodUID: "uid-" + name, NodeName: node,
			Address: "127.0.0.1", PrimaryPort: 8080, Ports: ports, PortsSummary: meshv1alpha1.FormatPorts(ports),
		},
	}
}

// policyActive waits until the API server enforces the policy (it loads policies asynchronously).
func policyActive(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		err := agentOf(t, "node-a").Create(ctx, meshEndpoint(ns, fmt.Sprintf("probe-%d", i), "node-b"))
		if err != nil && strings.Contains(err.Error(), "aether-agent-node-authority") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy is not enforced after 30s (last: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func expectDenied(t *testing.T, what string, err error, message string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want denied", what)
		return
	}
	for _, want := range []string{`ValidatingAdmissionPolicy 'aether-agent-node-authority'`, message} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v\nwant it to contain %q", what, err, want)
		}
	}
}

// TestAgentWritesOnlyItsNode: the agent's ServiceAccount, with the node claim, may write only
// its own node's MeshEndpoints; without the claim nothing; an admin is not affected.
func TestAgentWritesOnlyItsNode(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	policyActive(t, ctx, ns)
	agentA, agentB := agentOf(t, "node-a"), agentOf(t, "node-b")

	own := meshEndpoint(ns, "own", "node-a")
	if err := agentA.Create(ctx, own); err != nil {
		t.Fatalf("the agent of node-a creating an endpoint on node-a: %v", err)
	}
	expectDenied(t, "create for another node", agentA.Create(ctx, meshEndpoint(ns, "other", "node-b")),
		"the node agent of node node-a may write only MeshEndpoints of pods on its own node; this one names node node-b")

	moved := own.DeepCopy()
	moved.Spec.NodeName = "node-b"
	expectDenied(t, "update moving the endpoint to another node", agentA.Update(ctx, moved),
		"this one names node node-b")
	expectDenied(t, "the other node's agent taking it over", agentB.Update(ctx, moved),
		"the node agent of node node-b may change or delete only MeshEndpoints of pods on its own node; this one is on node node-a")

	own.Status.Health = meshv1alpha1.HealthHealthy
	if err := agentA.Status().Update(ctx, own); err != nil {
		t.Errorf("the agent of node-a updating its endpoint's health: %v", err)
	}
	expectDenied(t, "status update of another node's endpoint", agentB.Status().Update(ctx, own), "this one names node node-a")
	expectDenied(t, "delete of another node's endpoint", agentB.Delete(ctx, own), "is on node node-a")

	expectDenied(t, "no node claim", agentOf(t, "").Create(ctx, meshEndpoint(ns, "claimless", "node-a")),
		"carry no authentication.kubernetes.io/node-name claim")

	// An admin (system:masters) is out of the policy's scope: any node, any change.
	admins := meshEndpoint(ns, "admins", "node-c")
	if err := env.Client.Create(ctx, admins); err != nil {
		t.Errorf("an admin creating an endpoint on node-c: %v", err)
	}
	admins.Spec.NodeName = "node-d"
	if err := env.Client.Update(ctx, admins); err != nil {
		t.Errorf("an admin moving an endpoint: %v", err)
	}
	if err := agentA.Delete(ctx, own); err != nil {
		t.Errorf("the agent of node-a deleting its own endpoint: %v", err)
	}
}
