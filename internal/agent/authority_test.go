// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// agentCredentials installs the agent's shipped ClusterRole (config/rbac/agent) and node
// authority policy (config/admission), and returns a config that speaks as the agent's
// ServiceAccount with node's claim.
func agentCredentials(t *testing.T, _ context.Context, node string) *rest.Config {
	t.Helper()
	if _, err := testenv.InstallNodeAuthority(env); err != nil {
		t.Fatal(err)
	}
	return env.AgentConfig(node)
}

// TestAgentNeedsNoMoreThanItsShippedAuthority: an agent speaking as its ServiceAccount, with
// exactly the shipped RBAC and under the node authority policy, registers a pod, rewrites a
// spec another writer changed, refuses a pod with an Event and removes an endpoint; and the
// policy is proven active by denying the same credentials a write for another node.
func TestAgentNeedsNoMoreThanItsShippedAuthority(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node := "node-" + ns
	if _, err := createNode(node)(env); err != nil {
		t.Fatal(err)
	}
	cfg := agentCredentials(t, ctx, node)
	asAgent, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the node authority policy enforced", func() error {
		elsewhere := &meshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elsewhere"}, Spec: meshv1alpha1.MeshEndpointSpec{
			ServiceName: "payments", PodName: "elsewhere", PodUID: "uid", NodeName: "another-node", Address: "127.0.0.1",
			PrimaryPort: 8080, Ports: []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}},
		}}
		err := asAgent.Create(ctx, elsewhere)
		if err == nil {
			_ = env.Client.Delete(ctx, elsewhere)
			return fmt.Errorf("a MeshEndpoint for another node was allowed")
		}
		if !strings.Contains(err.Error(), "may write only MeshEndpoints of pods on its own node") {
			return err
		}
		return nil
	})

	stop, err := startAgentWith(env, cfg, Options{NodeName: node, Health: testHealth, controllerName: "agent-" + ns})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	pod := createPod(t, ctx, ns, "member", node, newPodIP(), true, map[string]string{portspec.AnnotationPorts: "8080,9000=tcp"})
	var registered meshv1alpha1.MeshEndpointSpec
	testenv.Eventually(t, "registered by the agent's own credentials", func() error {
		ep, err := getEndpoint(ctx, ns, "member")
		if err != nil {
			return err
		}
		if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Registered = %+v", c)
		}
		registered = ep.Spec
		return nil
	})
	if _, stderr, err := env.Kubectl(ctx, "patch", "meshendpoint", "member", "-n", ns, "--type", "merge", "-p", `{"spec":{"metadata":{"intruder":"yes"}}}`); err != nil {
		t.Fatalf("kubectl patch: %v: %s", err, stderr)
	}
	testenv.Eventually(t, "the foreign key removed by the agent's own credentials", func() error {
		ep, err := getEndpoint(ctx, ns, "member")
		if err != nil {
			return err
		}
		if fmt.Sprint(ep.Spec) != fmt.Sprint(registered) {
			return fmt.Errorf("spec %+v", ep.Spec)
		}
		return nil
	})

	refused := createPod(t, ctx, ns, "refused", node, newPodIP(), true, map[string]string{portspec.AnnotationPorts: "9000=tpc"})
	oneRefusalEvent(t, ctx, refused, portspec.AnnotationPorts)

	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the MeshEndpoint removed by the agent's own credentials", func() error {
		if _, err := getEndpoint(ctx, ns, "member"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}
