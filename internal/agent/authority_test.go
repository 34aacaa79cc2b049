// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// The node agent's identity as config/admission's policy names it (config/default's namespace
// and name prefix applied to config/rbac/agent's ServiceAccount).
const (
	agentNamespace = "aether-operator-system"
	agentName      = "aether-operator-agent"
	nodeClaim      = "authentication.kubernetes.io/node-name"
)

// agentCredentials installs the agent's shipped ClusterRole (config/rbac/agent) and node
// authority policy (config/admission) with the real kubectl, binds the role to the agent's
// ServiceAccount, and returns a config that speaks as that ServiceAccount with node's claim.
func agentCredentials(t *testing.T, ctx context.Context, node string) *rest.Config {
	t.Helper()
	root := testenv.RepoRoot()
	for _, file := range []string{filepath.Join(root, "config", "admission", "agent-node-authority.yaml"), filepath.Join(root, "config", "rbac", "agent", "role.yaml")} {
		if out, stderr, err := env.Kubectl(ctx, "apply", "-f", file); err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s%s", file, err, out, stderr)
		}
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: agentName}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: agentName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agent-role"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agentNamespace, Name: agentName}},
		},
	} {
		if err := env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + agentNamespace + ":" + agentName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + agentNamespace, "system:authenticated"},
		Extra:    map[string][]string{nodeClaim: {node}},
	}
	return cfg
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
