// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
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
	nodeAuthorityEnforced(t, ctx, asAgent, ns, node)

	stop, err := startAgentWith(env, cfg, Options{NodeName: node, Health: testHealth, controllerName: "agent-" + ns})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	pod := createPod(t, ctx, ns, "member", node, newPodIP(), true, map[string]string{portspec.AnnotationPorts: "8080,9000=tcp"})
	registered := registeredEndpoint(t, ctx, ns, "member", "registered by the agent's own credentials").Spec
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

// nodeAuthorityEnforced waits until the API server enforces the node-authority policy (it loads
// policies asynchronously) for asAgent, the agent of node: a MeshEndpoint for another node is
// denied.
func nodeAuthorityEnforced(t *testing.T, ctx context.Context, asAgent client.Client, ns, node string) {
	t.Helper()
	i := 0
	testenv.Eventually(t, "the node authority policy enforced", func() error {
		i++
		name := fmt.Sprintf("probe-%d", i)
		elsewhere := &meshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: meshv1alpha1.MeshEndpointSpec{
			ServiceName: "probe", PodName: name, PodUID: "uid", NodeName: "not-" + node, Address: "127.0.0.1",
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
}

// agentWithToken is a client speaking as the agent of node with a real bound token of a pod on
// that node (testenv.AgentTokenConfig), once the API server says, in a SelfSubjectReview, that
// the token's node claim is node's: the claim is the API server's own, not one the test asserts.
func agentWithToken(t *testing.T, ctx context.Context, node string) client.Client {
	t.Helper()
	if _, err := testenv.InstallNodeAuthority(env); err != nil {
		t.Fatal(err)
	}
	cfg, err := env.AgentTokenConfig(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		t.Fatalf("SelfSubjectReview with the agent's bound token: %v", err)
	}
	if user := review.Status.UserInfo; user.Username != testenv.AgentUser || fmt.Sprint(user.Extra[testenv.NodeClaim]) != "["+node+"]" {
		t.Fatalf("the bound token authenticates as %s with %s=%v, want %s with [%s]", user.Username, testenv.NodeClaim,
			user.Extra[testenv.NodeClaim], testenv.AgentUser, node)
	}
	return c
}

// TestOnlyTheControllerVerifies: the agent of a node, with the node claim of a real bound token
// of its pod there, writes the Registered condition of an endpoint of its own node (Verified
// carried over), but may not set Verified=True on it, nor remove Verified, through the status
// subresource (a patch or an update): the policy denies it as Forbidden, naming the condition,
// and the controller's verdict stands.
func TestOnlyTheControllerVerifies(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node := "node-" + ns // no agent runs for it: the forgery below stays
	if _, err := createNode(node)(env); err != nil {
		t.Fatal(err)
	}
	asAgent := agentWithToken(t, ctx, node)
	nodeAuthorityEnforced(t, ctx, asAgent, ns, node)

	// A forgery on the agent's own node (no pod behind it): admitted, and Verified=False.
	forged := forgedEndpoint(ns, "forged", node)
	if err := asAgent.Create(ctx, forged); err != nil {
		t.Fatalf("the agent creating an endpoint on its own node: %v", err)
	}
	testenv.Eventually(t, "the controller's verdict on the forgery", func() error {
		ep, err := getEndpoint(ctx, ns, "forged")
		if err != nil {
			return err
		}
		if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Verified = %+v, want False", c)
		}
		return nil
	})

	// writeStatus changes the endpoint's status as the agent, from a fresh read, retrying only on
	// a conflict (a race with the controller, not an answer of the policy).
	writeStatus := func(update bool, change func(*meshv1alpha1.MeshEndpointStatus)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ep := &meshEndpoint{}
			if err := asAgent.Get(ctx, client.ObjectKeyFromObject(forged), ep); err != nil {
				return err
			}
			patch := client.MergeFromWithOptions(ep.DeepCopy(), client.MergeFromWithOptimisticLock{})
			change(&ep.Status)
			if update {
				return asAgent.Status().Update(ctx, ep)
			}
			return asAgent.Status().Patch(ctx, ep, patch)
		})
	}
	// Positive control: Registered and health, with Verified carried over as it is.
	registered := metav1.Condition{Type: meshv1alpha1.EndpointConditionRegistered, Status: metav1.ConditionTrue,
		Reason: meshv1alpha1.EndpointReasonRegistered, Message: "the MeshEndpoint matches the pod's annotations"}
	if err := writeStatus(false, func(s *meshv1alpha1.MeshEndpointStatus) {
		s.Health = meshv1alpha1.HealthHealthy
		s.Conditions = conditions.Set(s.Conditions, registered, 1, metav1.NewTime(time.Now().Truncate(time.Second)))
	}); err != nil {
		t.Fatalf("the agent writing Registered and health, Verified unchanged: %v", err)
	}

	verifiedTrue := metav1.Condition{Type: meshv1alpha1.EndpointConditionVerified, Status: metav1.ConditionTrue,
		Reason: meshv1alpha1.EndpointReasonPodMatches, Message: "trust me"}
	for _, tc := range []struct {
		what   string
		update bool
		change func(*meshv1alpha1.MeshEndpointStatus)
	}{
		{"patching Verified=True", false, func(s *meshv1alpha1.MeshEndpointStatus) {
			s.Conditions = conditions.Set(s.Conditions, verifiedTrue, 1, metav1.NewTime(time.Now().Truncate(time.Second)))
		}},
		{"updating Verified=True", true, func(s *meshv1alpha1.MeshEndpointStatus) {
			s.Conditions = conditions.Set(s.Conditions, verifiedTrue, 1, metav1.NewTime(time.Now().Truncate(time.Second)))
		}},
		{"removing Verified", false, func(s *meshv1alpha1.MeshEndpointStatus) {
			s.Conditions = slices.DeleteFunc(s.Conditions, func(c metav1.Condition) bool { return c.Type == meshv1alpha1.EndpointConditionVerified })
		}},
	} {
		err := writeStatus(tc.update, tc.change)
		if err == nil {
			t.Errorf("the agent of node %s %s on its own node's endpoint: allowed, want Forbidden", node, tc.what)
			continue
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may not add, change or remove the Verified condition") ||
			!strings.Contains(err.Error(), "only the controller writes Verified") {
			t.Errorf("the agent %s: %v\nwant Forbidden, naming the Verified condition and its one writer", tc.what, err)
		}
	}
	ep, err := getEndpoint(ctx, ns, "forged")
	if err != nil {
		t.Fatal(err)
	}
	if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Verified = %+v after the agent's attempts, want the controller's False", c)
	}
	if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Registered = %+v, want the agent's True", c)
	}
}

// squatBound is how long, at most, a MeshEndpoint holding the name of a pod of another node keeps
// that pod out of the mesh (docs/architecture.md, "Per-node authority"): the controller deletes it in the first
// reconcile of its service after the pod is bound, which the batching window holds back at most
// five windows (this package's controller has none), and the pod's agent, whose create met
// AlreadyExists, tries again staleRetry later. squatSlack covers what the bound leaves out: a
// reconcile's and a write's own time on a loaded test machine, and the whole seconds of the
// creation timestamps the test compares.
const (
	squatBound = staleRetry
	squatSlack = 4 * time.Second
)

// TestSquatterDoesNotKeepAPodOut: the agent of one node, with its real node claim, creates a
// MeshEndpoint named after a pod that is then bound to another node (the policy admits it: it
// names the writer's own node). The agent of the pod's node cannot create the pod's endpoint
// (AlreadyExists) nor remove the squatter (the policy), but the controller deletes the squatter,
// and the pod's own endpoint, written by its node's agent under the same policy, is created within
// squatBound of the pod and verified.
func TestSquatterDoesNotKeepAPodOut(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	squatterNode, podNode := "squatter-"+ns, "node-"+ns // no agent runs for the squatter's node
	for _, node := range []string{squatterNode, podNode} {
		if _, err := createNode(node)(env); err != nil {
			t.Fatal(err)
		}
	}
	asSquatter := agentWithToken(t, ctx, squatterNode)
	nodeAuthorityEnforced(t, ctx, asSquatter, ns, squatterNode)
	squatter := forgedEndpoint(ns, "victim", squatterNode)
	if err := asSquatter.Create(ctx, squatter); err != nil {
		t.Fatalf("the agent of %s creating an endpoint that names its own node: %v", squatterNode, err)
	}

	cfg, err := env.AgentTokenConfig(ctx, podNode)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := startAgentWith(env, cfg, Options{NodeName: podNode, Health: testHealth, controllerName: "agent-" + ns})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	pod := createPod(t, ctx, ns, "victim", podNode, newPodIP(), true, map[string]string{portspec.AnnotationPorts: "8080"})

	var own *meshEndpoint
	testenv.Eventually(t, "the pod's own endpoint, written by its node's agent, verified", func() error {
		ep, err := getEndpoint(ctx, ns, "victim")
		if err != nil {
			return err
		}
		if ep.Spec.NodeName != podNode || ep.Spec.PodUID != string(pod.UID) {
			return fmt.Errorf("the endpoint of the pod's name names node %s and pod UID %s, want %s and %s", ep.Spec.NodeName, ep.Spec.PodUID, podNode, pod.UID)
		}
		if !registration.Verified(ep) {
			return fmt.Errorf("not verified: %+v", ep.Status.Conditions)
		}
		own = ep
		return nil
	})
	out := own.CreationTimestamp.Sub(pod.CreationTimestamp.Time)
	t.Logf("the pod was out of the mesh for %s (bound %s)", out, squatBound)
	if out > squatBound+squatSlack {
		t.Errorf("the pod's endpoint came %s after the pod, want within %s (+%s slack)", out, squatBound, squatSlack)
	}
}

// forgedEndpoint is an endpoint of payments (HTTP 8080) named name on node, with no pod behind it.
func forgedEndpoint(ns, name, node string) *meshEndpoint {
	return &meshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: meshv1alpha1.MeshEndpointSpec{
		ServiceName: "payments", PodName: name, PodUID: "uid-forged", NodeName: node, Address: newPodIP(),
		PrimaryPort: 8080, Ports: []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}},
	}}
}
