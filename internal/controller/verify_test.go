// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// agentOf is a client speaking as the node agent of node, with that node's real token claim.
func agentOf(t *testing.T, node string) client.Client {
	t.Helper()
	c, err := env.AgentClient(node)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tenantOf is a client speaking as a namespace's tenant who was granted write access to its
// MeshEndpoints (a mistake the mesh must survive).
func tenantOf(t *testing.T, ctx context.Context, ns string) client.Client {
	t.Helper()
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "meshendpoint-writer"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{meshv1alpha1.GroupVersion.Group}, Resources: []string{"meshendpoints"}, Verbs: []string{"get", "create"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "meshendpoint-writer"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "tenant"}}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	c, err := env.ClientAs("tenant", []string{"system:authenticated"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// nodeAuthorityEnforced waits until the API server enforces config/admission's policy (it loads
// policies asynchronously): the agent of node-a is denied an endpoint naming node-b.
func nodeAuthorityEnforced(t *testing.T, ctx context.Context, agentA client.Client, ns string) {
	t.Helper()
	i := 0
	testenv.Eventually(t, "the node-authority policy is enforced", func() error {
		i++
		ep := &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("probe-%d", i)},
			Spec: meshv1alpha1.MeshEndpointSpec{ServiceName: "probe", PodName: fmt.Sprintf("probe-%d", i), PodUID: "u", NodeName: "node-b",
				Address: "127.0.0.1", PrimaryPort: 8080, Ports: []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}}}}
		if err := agentA.Create(ctx, ep); err == nil || !strings.Contains(err.Error(), "aether-agent-node-authority") {
			return fmt.Errorf("the agent of node-a creating an endpoint on node-b: %v", err)
		}
		return nil
	})
}

// idle waits until the meshservice controller has nothing queued and nothing running, so that
// an assertion that something did not happen comes after every reconcile already triggered.
func idle(t *testing.T) {
	t.Helper()
	idleController(t, "meshservice")
}

// idleController is idle for the controller of that name (a reconciler of a test's own manager).
func idleController(t *testing.T, name string) {
	t.Helper()
	testenv.Eventually(t, "the "+name+" controller idle", func() error {
		depth, err := testenv.Gauge("workqueue_depth", "controller", name)
		if err != nil {
			return err
		}
		active, err := testenv.Gauge("controller_runtime_active_workers", "controller", name)
		if err != nil {
			return err
		}
		if depth != 0 || active != 0 {
			return fmt.Errorf("%v queued, %v running", depth, active)
		}
		return nil
	})
}

// expectEndpointEvents waits for the Events of type and reason on the MeshEndpoint and returns them.
func expectEndpointEvents(t *testing.T, ctx context.Context, ns, name, eventType, reason string) []corev1.Event {
	t.Helper()
	var found []corev1.Event
	testenv.Eventually(t, fmt.Sprintf("%s Event %s on MeshEndpoint %s", eventType, reason, name), func() error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		found = nil
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "MeshEndpoint" && e.InvolvedObject.Name == name && e.Type == eventType && e.Reason == reason {
				found = append(found, e)
			}
		}
		if len(found) == 0 {
			return fmt.Errorf("none among %d Events", len(events.Items))
		}
		return nil
	})
	return found
}

// absent checks that no object of o's kind has that name (after idle: nothing is pending).
func absent(t *testing.T, ctx context.Context, ns, name string, o client.Object) {
	t.Helper()
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); !apierrors.IsNotFound(err) {
		t.Errorf("%T %s exists (%v), want none: no verified endpoint names it", o, name, err)
	}
}

// TestOnlyRealPodsCount: MeshEndpoints that the node-authority policy admits — written by the
// agent of node-a with its real node claim, naming node-a — or that a tenant with write access
// writes, join no MeshService unless they are a real pod's: each forgery carries Verified=False
// with the reason naming the mismatch and a Warning Event, no MeshService or Service appears for
// them alone, and beside a real endpoint they change neither the count nor the ports.
func TestOnlyRealPodsCount(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "payments")
	agentA := agentOf(t, "node-a")
	nodeAuthorityEnforced(t, ctx, agentA, ns)

	declared := declaring(8080, []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: "HTTP"}, {Port: 9000, Protocol: "TCP"}})
	real := env.CreatePod(t, ctx, ns, "payments-0", "payments", "node-a", testenv.PodIP(), declared)
	// Not yet bound to a node. (An endpoint naming another node than the one its pod is bound to
	// is deleted: TestSquatterRemoved.)
	unbound := env.CreatePod(t, ctx, ns, "payments-b", "payments", "", testenv.PodIP(), declared)
	ledger := env.CreatePod(t, ctx, ns, "ledger-0", "ledger", "node-a", testenv.PodIP(), declared)
	forIP := env.CreatePod(t, ctx, ns, "payments-1", "payments", "node-a", testenv.PodIP(), declared)
	forUID := env.CreatePod(t, ctx, ns, "payments-2", "payments", "node-a", testenv.PodIP(), declared)
	forPort := env.CreatePod(t, ctx, ns, "payments-3", "payments", "node-a", testenv.PodIP(), declared)
	unmanaged := env.CreatePod(t, ctx, ns, "plain-0", "payments", "node-a", testenv.PodIP(), declared)
	unmanaged.Labels = nil
	if err := env.Client.Update(ctx, unmanaged); err != nil {
		t.Fatal(err)
	}

	forged := func(pod *corev1.Pod, change func(*meshv1alpha1.MeshEndpointSpec)) *meshv1alpha1.MeshEndpoint {
		ep := testenv.EndpointOf(t, pod)
		change(&ep.Spec)
		ep.Spec.PortsSummary = meshv1alpha1.FormatPorts(ep.Spec.Ports)
		return ep
	}
	twin := testenv.EndpointOf(t, real)
	twin.Name = "payments-0-twin"
	ghost := testenv.EndpointOf(t, real) // a tenant's invention: no such pod, a node without an agent
	ghost.Name, ghost.Spec.PodName, ghost.Spec.PodUID, ghost.Spec.ServiceName, ghost.Spec.NodeName = "ghost", "ghost", "uid-ghost", "checkout", "node-z"
	cases := []struct {
		name    string
		writer  client.Client
		ep      *meshv1alpha1.MeshEndpoint
		reason  string
		message string
	}{
		{"a pod bound to no node yet", agentA, forged(unbound, func(s *meshv1alpha1.MeshEndpointSpec) { s.NodeName = "node-a" }),
			meshv1alpha1.EndpointReasonNodeMismatch, `spec.nodeName "node-a" is not the node pod ` + ns + `/payments-b is bound to (none yet)`},
		{"a made-up IP", agentA, forged(forIP, func(s *meshv1alpha1.MeshEndpointSpec) { s.Address = "203.0.113.9" }),
			meshv1alpha1.EndpointReasonAddressMismatch, `spec.address "203.0.113.9" is not among the IPs of pod ` + ns + `/payments-1 (` + forIP.Status.PodIP + `)`},
		{"another pod's UID", agentA, forged(forUID, func(s *meshv1alpha1.MeshEndpointSpec) { s.PodUID = string(real.UID) }),
			meshv1alpha1.EndpointReasonPodUIDMismatch, `spec.podUID "` + string(real.UID) + `" is not the UID of pod ` + ns + `/payments-2`},
		{"another ServiceAccount", agentA, forged(ledger, func(s *meshv1alpha1.MeshEndpointSpec) { s.ServiceName = "payments" }),
			meshv1alpha1.EndpointReasonServiceAccountMismatch, `spec.serviceName "payments" is not the ServiceAccount of pod ` + ns + `/ledger-0 (ledger)`},
		{"an extra port", agentA, forged(forPort, func(s *meshv1alpha1.MeshEndpointSpec) {
			s.Ports = append(s.Ports, meshv1alpha1.PortProtocol{Port: 9999, Protocol: meshv1alpha1.ProtocolTCP})
		}), meshv1alpha1.EndpointReasonPortsMismatch, `spec.ports 8080/HTTP,9000/TCP,9999/TCP (primary 8080) are not what the annotations of pod ` + ns + `/payments-3 declare: 8080/HTTP,9000/TCP (primary 8080)`},
		{"a pod that is not managed", agentA, forged(unmanaged, func(*meshv1alpha1.MeshEndpointSpec) {}),
			meshv1alpha1.EndpointReasonPodNotFound, `no pod ` + ns + `/plain-0 labelled aether.io/managed=true exists`},
		{"a real pod counted twice", agentA, twin,
			meshv1alpha1.EndpointReasonPodNameMismatch, `spec.podName "payments-0" is not this MeshEndpoint's name "payments-0-twin"`},
		{"a tenant's, on a node with no agent", tenantOf(t, ctx, ns), ghost,
			meshv1alpha1.EndpointReasonPodNotFound, `no pod ` + ns + `/ghost labelled aether.io/managed=true exists`},
	}
	for _, tc := range cases {
		if err := tc.writer.Create(ctx, tc.ep); err != nil {
			t.Fatalf("%s: the API server refused the MeshEndpoint (it must be admitted: verification is what stops it): %v", tc.name, err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := verdict(t, ctx, tc.ep, metav1.ConditionFalse, tc.reason)
			if c := condition(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified); !strings.Contains(c.Message, tc.message) {
				t.Errorf("Verified message %q\ndoes not contain %q", c.Message, tc.message)
			}
			expectEndpointEvents(t, ctx, ns, tc.ep.Name, corev1.EventTypeWarning, tc.reason)
		})
	}

	// Forgeries alone: no MeshService, no Service, for payments or for the tenant's checkout.
	idle(t)
	for _, name := range []string{"payments", "checkout"} {
		absent(t, ctx, ns, name, &meshv1alpha1.MeshService{})
		absent(t, ctx, ns, name, &corev1.Service{})
	}
	forgedVersions := map[string]string{}
	for _, tc := range cases {
		ep := &meshv1alpha1.MeshEndpoint{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc.ep), ep); err != nil {
			t.Fatal(err)
		}
		forgedVersions[ep.Name] = ep.ResourceVersion
	}

	// Positive control: the real pod's own endpoint, written by the same agent, joins alone.
	own := testenv.EndpointOf(t, real)
	if err := agentA.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the agent sets its endpoint Healthy", func() error {
		if err := agentA.Get(ctx, client.ObjectKeyFromObject(own), own); err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(own.DeepCopy(), client.MergeFromWithOptimisticLock{})
		own.Status.Health = meshv1alpha1.HealthHealthy
		return agentA.Status().Patch(ctx, own, patch) // a conflict with the controller's verdict is retried
	})
	verdict(t, ctx, own, metav1.ConditionTrue, meshv1alpha1.EndpointReasonPodMatches)
	ms := serviceReady(t, ctx, ns, "payments", 1)
	if ms.Status.PortsSummary != "8080/HTTP,9000/TCP" {
		t.Errorf("MeshService ports %s, want 8080/HTTP,9000/TCP: the forged 9999 must not count", ms.Status.PortsSummary)
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "payments"}, svc); err != nil {
		t.Fatal(err)
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == 9999 {
			t.Errorf("the generated Service exposes the forged port 9999 (%s)", p.Name)
		}
	}

	// The reconciles the positive control caused re-verified every forgery: nothing was written
	// again (a verdict and its Event come once per flip), and each is still out.
	idle(t)
	for _, tc := range cases {
		ep := &meshv1alpha1.MeshEndpoint{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc.ep), ep); err != nil {
			t.Fatal(err)
		}
		if ep.ResourceVersion != forgedVersions[ep.Name] {
			t.Errorf("%s: the unchanged verdict was written again (resourceVersion %s → %s)", tc.name, forgedVersions[ep.Name], ep.ResourceVersion)
		}
		if events := expectEndpointEvents(t, ctx, ns, tc.ep.Name, corev1.EventTypeWarning, tc.reason); len(events) != 1 {
			t.Errorf("%s: %d Warning Events, want 1", tc.name, len(events))
		}
	}
	if ms, _ := getMeshService(ctx, ns, "payments"); ms.Status.Endpoints.Total != 1 {
		t.Errorf("MeshService counts %d endpoints, want 1", ms.Status.Endpoints.Total)
	}
}

// TestPodChangesReverify: the MeshService follows the pods, not just the endpoints: a pod's IP
// arriving verifies its endpoint, a changed or unparseable annotation and a deleted pod are
// seen, and the count follows.
func TestPodChangesReverify(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "orders")
	endpoint(t, ctx, ns, "orders-0", "orders", healthy, 8080, 8080, "HTTP")

	// An endpoint ahead of the pod's IP (as seen by the manager): counted once the IP arrives.
	declared := declaring(8080, []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: "HTTP"}})
	late := env.CreatePod(t, ctx, ns, "orders-1", "orders", "node-a", "", declared)
	ip := testenv.PodIP()
	withIP := late.DeepCopy()
	withIP.Status.PodIP = ip
	ep := testenv.EndpointOf(t, withIP)
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	setHealth(t, ctx, ep, healthy)
	waiting := verdict(t, ctx, ep, metav1.ConditionFalse, meshv1alpha1.EndpointReasonAddressMismatch)
	if c := condition(waiting.Status.Conditions, meshv1alpha1.EndpointConditionVerified); !strings.Contains(c.Message, "(none yet)") {
		t.Errorf("Verified message %q, want it to say the pod has no IP yet", c.Message)
	}
	serviceReady(t, ctx, ns, "orders", 1)
	env.SetPodIP(t, ctx, late, ip)
	verdict(t, ctx, ep, metav1.ConditionTrue, meshv1alpha1.EndpointReasonPodMatches)
	serviceReady(t, ctx, ns, "orders", 2)
	expectEndpointEvents(t, ctx, ns, "orders-1", corev1.EventTypeNormal, meshv1alpha1.EndpointReasonPodMatches)

	// The pod's annotations change under the endpoint: a port it no longer declares is out.
	annotate := func(ports string) {
		t.Helper()
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(late), pod); err != nil {
			t.Fatal(err)
		}
		pod.Annotations[portspec.AnnotationPorts] = ports
		if err := env.Client.Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	annotate("8080=h1,9000=tcp")
	verdict(t, ctx, ep, metav1.ConditionFalse, meshv1alpha1.EndpointReasonPortsMismatch)
	serviceReady(t, ctx, ns, "orders", 1)
	// Annotations that do not parse: the agent keeps the last valid registration in service, so
	// only the identity is checked, and the condition says so.
	annotate("8080=h1,9000=tpc")
	kept := verdict(t, ctx, ep, metav1.ConditionTrue, meshv1alpha1.EndpointReasonPodMatches)
	if c := condition(kept.Status.Conditions, meshv1alpha1.EndpointConditionVerified); !strings.Contains(c.Message, "ports not checked: the pod's annotations do not parse") {
		t.Errorf("Verified message %q, want it to say the ports were not checked", c.Message)
	}
	serviceReady(t, ctx, ns, "orders", 2)

	// The pod is deleted (no kubelet: at once): its endpoint stops counting.
	if err := env.Client.Delete(ctx, late, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	verdict(t, ctx, ep, metav1.ConditionFalse, meshv1alpha1.EndpointReasonPodNotFound)
	serviceReady(t, ctx, ns, "orders", 1)
	expectEndpointEvents(t, ctx, ns, "orders-1", corev1.EventTypeWarning, meshv1alpha1.EndpointReasonPodNotFound)
}

// TestVerdictKeepsTheAgentsConditions: the controller's Verified and the agent's Registered live
// side by side on one status; a write of either keeps the other.
func TestVerdictKeepsTheAgentsConditions(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "cart")
	ep := endpoint(t, ctx, ns, "cart-0", "cart", healthy, 8080, 8080, "HTTP")
	agentA := agentOf(t, "node-a")
	registered := metav1.Condition{Type: meshv1alpha1.EndpointConditionRegistered, Status: metav1.ConditionTrue,
		Reason: meshv1alpha1.EndpointReasonRegistered, Message: "the MeshEndpoint matches the pod's annotations",
		LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
	testenv.Eventually(t, "the agent writes Registered", func() error {
		if err := agentA.Get(ctx, client.ObjectKeyFromObject(ep), ep); err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(ep.DeepCopy(), client.MergeFromWithOptimisticLock{})
		ep.Status.Conditions = append(ep.Status.Conditions, registered)
		return agentA.Status().Patch(ctx, ep, patch) // a conflict is retried, as the agent does
	})
	// A flip of the verdict (the pod goes) is written next to Registered, not over it.
	if err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cart-0"}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	after := verdict(t, ctx, ep, metav1.ConditionFalse, meshv1alpha1.EndpointReasonPodNotFound)
	if c := condition(after.Status.Conditions, meshv1alpha1.EndpointConditionRegistered); c.Status != metav1.ConditionTrue || c.Reason != registered.Reason {
		t.Errorf("the agent's Registered condition was lost: %+v", after.Status.Conditions)
	}
	if after.Status.Health != healthy {
		t.Errorf("health %q, want the agent's %q kept", after.Status.Health, healthy)
	}
}

// TestOwnPodDeletedIsNoAlarm: an endpoint the agent wrote (controlled by its pod) whose pod is
// deleted stops counting and says PodNotFound, without a Warning: every scale-down does that.
func TestOwnPodDeletedIsNoAlarm(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "search")
	ep := endpoint(t, ctx, ns, "search-0", "search", healthy, 8080, 8080, "HTTP")
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "search-0"}, pod); err != nil {
		t.Fatal(err)
	}
	ep.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: new(true)}}
	if err := env.Client.Update(ctx, ep); err != nil {
		t.Fatal(err)
	}
	serviceReady(t, ctx, ns, "search", 1)
	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	verdict(t, ctx, ep, metav1.ConditionFalse, meshv1alpha1.EndpointReasonPodNotFound)
	// A forgery after it: once its Warning is out, one for search-0 would be too (one recorder,
	// in order).
	sentinel := testenv.EndpointOf(t, pod)
	sentinel.Name, sentinel.Spec.PodName = "sentinel", "sentinel"
	if err := env.Client.Create(ctx, sentinel); err != nil {
		t.Fatal(err)
	}
	expectEndpointEvents(t, ctx, ns, "sentinel", corev1.EventTypeWarning, meshv1alpha1.EndpointReasonPodNotFound)
	var events corev1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "MeshEndpoint" && e.InvolvedObject.Name != "sentinel" && e.Type == corev1.EventTypeWarning {
			t.Errorf("Warning Event %s on %s for its own pod's deletion: %s", e.Reason, e.InvolvedObject.Name, e.Message)
		}
	}
	ms, err := getMeshService(ctx, ns, "search")
	if err != nil || ms.Status.Endpoints.Total != 0 {
		t.Errorf("MeshService endpoints %+v (%v), want none counted", ms.Status.Endpoints, err)
	}
}

// TestVerificationInputsChanged: the pod watch passes on the updates that change what Verify
// reads, and only those.
func TestVerificationInputsChanged(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", UID: "u", ResourceVersion: "1",
				Labels: map[string]string{"aether.io/managed": "true"}, Annotations: map[string]string{portspec.AnnotationPorts: "8080"}},
			Spec:   corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "payments"},
			Status: corev1.PodStatus{PodIP: "127.0.0.9", PodIPs: []corev1.PodIP{{IP: "127.0.0.9"}}, Phase: corev1.PodPending},
		}
	}
	cases := map[string]struct {
		change func(*corev1.Pod)
		want   bool
	}{
		"resourceVersion only": {func(p *corev1.Pod) { p.ResourceVersion = "2" }, false},
		"phase and conditions": {func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: "Ready"}}
		}, false},
		"an unrelated annotation": {func(p *corev1.Pod) { p.Annotations["team"] = "a" }, false},
		"the IP":                  {func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "127.0.0.8", []corev1.PodIP{{IP: "127.0.0.8"}} }, true},
		"a second IP":             {func(p *corev1.Pod) { p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: "fd00::9"}) }, true},
		"the ports annotation":    {func(p *corev1.Pod) { p.Annotations[portspec.AnnotationPorts] = "8080,9000=tcp" }, true},
		"the managed label":       {func(p *corev1.Pod) { p.Labels["aether.io/managed"] = "false" }, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			after := base()
			tc.change(after)
			if got := verificationInputsChanged(base(), after); got != tc.want {
				t.Errorf("verificationInputsChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestVerdictSurvivesAConflict: a Verified write that meets a real conflict — the agent's probe
// changed the endpoint's status after the controller read it, and the API server answers 409 —
// is retried from a fresh read and lands, with the agent's change kept. The reconciler runs
// alone, called directly, in a namespace the package's manager does not see.
func TestVerdictSurvivesAConflict(t *testing.T) {
	ctx := testContext(t)
	ns := isolated(t, ctx, "isolated-verdict", "orders")
	pod := env.CreatePod(t, ctx, ns, "orders-0", "orders", "node-a", testenv.PodIP(),
		declaring(8080, []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}}))
	read := testenv.EndpointOf(t, pod) // what the controller read: the endpoint before the agent's write
	if err := env.Client.Create(ctx, read); err != nil {
		t.Fatal(err)
	}
	var answers []error
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if len(answers) == 0 { // the agent's probe lands between the controller's read and its write
				setHealth(t, ctx, read.DeepCopy(), healthy)
			}
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			answers = append(answers, err)
			return err
		},
	})
	r := &MeshServiceReconciler{Client: c, APIReader: env.Client}
	verdict, err := EndpointVerdict(ctx, env.Client, read, nil)
	if err != nil || verdict.Status != metav1.ConditionTrue {
		t.Fatalf("the verdict on the pod's own endpoint: %+v (%v), want True", verdict, err)
	}
	if err := r.recordVerdict(ctx, read, verdict); err != nil {
		t.Fatalf("recordVerdict: %v", err)
	}
	if len(answers) == 0 || !apierrors.IsConflict(answers[0]) {
		t.Fatalf("the first write's answer %v, want a conflict (else the test proves nothing)", answers)
	}
	ep := &meshv1alpha1.MeshEndpoint{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(read), ep); err != nil {
		t.Fatal(err)
	}
	if c := condition(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified); c.Status != metav1.ConditionTrue || c.ObservedGeneration != ep.Generation {
		t.Errorf("Verified = %q (observed generation %d of %d) after the write met a conflict, want True for the current generation: the verdict was dropped (writes answered %v)",
			c.Status, c.ObservedGeneration, ep.Generation, answers)
	}
	if ep.Status.Health != healthy {
		t.Errorf("health %q, want the agent's %q kept", ep.Status.Health, healthy)
	}
	if len(answers) != 2 || answers[1] != nil {
		t.Errorf("writes answered %v, want a conflict then success", answers)
	}
}

// TestSquatterRemoved: a MeshEndpoint, admitted for the node it names, that holds the name of a
// managed pod bound to another node is deleted by the controller once the pod is there, with a
// Warning Event on the pod naming both nodes; one naming the pod's own node (an earlier pod's
// UID: that node's agent replaces it) stays, judged Verified=False.
func TestSquatterRemoved(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "payments")
	agentA := agentOf(t, "node-a")
	nodeAuthorityEnforced(t, ctx, agentA, ns)

	declared := declaring(8080, []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}})
	// Both endpoints come before their pods (a StatefulSet's next name is known in advance).
	squatter := &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments-0"}, Spec: meshv1alpha1.MeshEndpointSpec{
		ServiceName: "payments", PodName: "payments-0", PodUID: "uid-forged", NodeName: "node-a", Address: testenv.PodIP(),
		PrimaryPort: 8080, Ports: []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}}}}
	earlier := squatter.DeepCopy()
	earlier.Name, earlier.Spec.PodName = "payments-1", "payments-1"
	for _, ep := range []*meshv1alpha1.MeshEndpoint{squatter, earlier} {
		if err := agentA.Create(ctx, ep); err != nil {
			t.Fatalf("the agent of node-a creating %s naming node-a: %v", ep.Name, err)
		}
	}
	verdict(t, ctx, squatter, metav1.ConditionFalse, meshv1alpha1.EndpointReasonPodNotFound) // no pod yet: kept, not counted

	onB := env.CreatePod(t, ctx, ns, "payments-0", "payments", "node-b", testenv.PodIP(), declared)
	env.CreatePod(t, ctx, ns, "payments-1", "payments", "node-a", testenv.PodIP(), declared)
	testenv.Eventually(t, "the endpoint squatting the name of node-b's pod deleted", func() error {
		ep := &meshv1alpha1.MeshEndpoint{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(squatter), ep); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (node %s, pod UID %s; %v)", ep.Spec.NodeName, ep.Spec.PodUID, err)
		}
		return nil
	})
	events := &corev1.EventList{}
	testenv.Eventually(t, "a Warning Event NameSquatted on the pod", func() error {
		if err := env.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.UID == onB.UID && e.Type == corev1.EventTypeWarning &&
				e.Reason == meshv1alpha1.EndpointReasonNameSquatted {
				for _, want := range []string{"named node node-a (pod UID uid-forged)", "runs on node node-b"} {
					if !strings.Contains(e.Message, want) {
						return fmt.Errorf("message %q does not contain %q", e.Message, want)
					}
				}
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(events.Items))
	})
	verdict(t, ctx, earlier, metav1.ConditionFalse, meshv1alpha1.EndpointReasonPodUIDMismatch)
}
