// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// accessPolicy is a policy of ns targeting service (none when ""), on ports, admitting
// ServiceAccounts from with methods and paths.
func accessPolicy(ns, name, service string, ports []int32, methods []string, from ...string) *configv1.AccessPolicy {
	p := &configv1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: configv1.AccessPolicySpec{Ports: ports}}
	if service != "" {
		p.Spec.TargetRef = &configv1.TargetRef{Kind: configv1.KindService, Name: service}
	}
	if len(from) > 0 {
		rule := configv1.AccessRule{Methods: methods}
		for _, sa := range from {
			rule.From = append(rule.From, configv1.AccessSource{ServiceAccount: &configv1.ServiceAccountRef{Name: sa}})
		}
		p.Spec.Rules = []configv1.AccessRule{rule}
	}
	return p
}

// waitAccess waits until policy key's condition of type typ, for its current generation, has
// status and reason, and returns its message.
func waitAccess(t *testing.T, ctx context.Context, key client.ObjectKey, typ string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	var message string
	testenv.Eventually(t, fmt.Sprintf("AccessPolicy %s %s=%s %s", key, typ, status, reason), func() error {
		p := &configv1.AccessPolicy{}
		if err := env.Client.Get(ctx, key, p); err != nil {
			return err
		}
		c := condition(p.Status.Conditions, typ)
		if c.Status != status || c.Reason != reason || c.ObservedGeneration != p.Generation {
			return fmt.Errorf("%s=%s %s %q (generation %d of %d)", typ, c.Status, c.Reason, c.Message, c.ObservedGeneration, p.Generation)
		}
		message = c.Message
		return nil
	})
	return message
}

// edit changes p's spec with a fresh read (the controller writes its status meanwhile), leaving p
// as written.
func edit(t *testing.T, ctx context.Context, p *configv1.AccessPolicy, change func(*configv1.AccessPolicySpec)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		change(&p.Spec)
		return env.Client.Update(ctx, p)
	}); err != nil {
		t.Fatalf("editing AccessPolicy %s: %v", p.Name, err)
	}
}

func create(t *testing.T, ctx context.Context, objects ...client.Object) {
	t.Helper()
	for _, o := range objects {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

// TestAccessPolicyConditions: Accepted follows the target MeshService's ports (PortNotDeclared
// while it lacks a listed port, True once an endpoint declares it, False again when that endpoint
// goes), TargetNotFound names a missing target, HTTPRuleOnTCPPort a rule with methods governing a
// TCP port; ResolvedRefs is UnknownIdentity until the admitted ServiceAccount runs a meshed pod.
func TestAccessPolicyConditions(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "echo")
	create(t, ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	endpoint(t, ctx, ns, "echo-0", "echo", healthy, 8080, 8080, "HTTP", 9000, "TCP")
	serviceReady(t, ctx, ns, "echo", 1)

	orders := accessPolicy(ns, "orders", "echo", []int32{8080, 7000}, nil, "web")
	ghost := accessPolicy(ns, "ghost", "ghost", nil, nil, "echo")
	tcp := accessPolicy(ns, "tcp", "echo", nil, []string{"GET"}, "echo")
	create(t, ctx, orders, ghost, tcp)

	msg := waitAccess(t, ctx, client.ObjectKeyFromObject(orders), configv1.AccessConditionAccepted, metav1.ConditionFalse, configv1.AccessReasonPortNotDeclared)
	if want := "spec.ports: 7000 is not a port of " + ns + "/echo (its ports: 8080, 9000); the policy governs it once it is declared"; msg != want {
		t.Errorf("orders' Accepted message\n got %s\nwant %s", msg, want)
	}
	msg = waitAccess(t, ctx, client.ObjectKeyFromObject(orders), configv1.AccessConditionResolvedRefs, metav1.ConditionFalse, configv1.AccessReasonUnknownIdentity)
	if want := "no meshed pod runs as ServiceAccount " + ns + "/web (spiffe://aether.internal/ns/" + ns + "/sa/web)"; !strings.HasPrefix(msg, want) {
		t.Errorf("orders' ResolvedRefs message\n got %s\nwant it to start with %s", msg, want)
	}
	msg = waitAccess(t, ctx, client.ObjectKeyFromObject(ghost), configv1.AccessConditionAccepted, metav1.ConditionFalse, configv1.AccessReasonTargetNotFound)
	if want := "spec.targetRef: no MeshService " + ns + "/ghost (yet)"; !strings.HasPrefix(msg, want) {
		t.Errorf("ghost's Accepted message\n got %s\nwant it to start with %s", msg, want)
	}
	waitAccess(t, ctx, client.ObjectKeyFromObject(ghost), configv1.AccessConditionResolvedRefs, metav1.ConditionTrue, configv1.AccessReasonResolved)
	msg = waitAccess(t, ctx, client.ObjectKeyFromObject(tcp), configv1.AccessConditionAccepted, metav1.ConditionFalse, configv1.AccessReasonHTTPRuleOnTCPPort)
	if want := "spec.rules[0] has methods or pathPrefixes, which admit nothing on port 9000 (TCP: the mesh sees no request); drop them, " +
		"or list spec.ports without 9000"; msg != want {
		t.Errorf("tcp's Accepted message\n got %s\nwant %s", msg, want)
	}

	// The target gains port 7000, and web runs a meshed pod.
	second := endpoint(t, ctx, ns, "echo-1", "echo", healthy, 8080, 7000, "HTTP", 8080, "HTTP")
	msg = waitAccess(t, ctx, client.ObjectKeyFromObject(orders), configv1.AccessConditionAccepted, metav1.ConditionTrue, configv1.AccessReasonAccepted)
	if want := "governs echo:7000, echo:8080"; msg != want {
		t.Errorf("orders' Accepted message\n got %s\nwant %s", msg, want)
	}
	endpoint(t, ctx, ns, "web-0", "web", healthy, 8080, 8080, "HTTP")
	waitAccess(t, ctx, client.ObjectKeyFromObject(orders), configv1.AccessConditionResolvedRefs, metav1.ConditionTrue, configv1.AccessReasonResolved)

	// ... and loses it again.
	if err := env.Client.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitAccess(t, ctx, client.ObjectKeyFromObject(orders), configv1.AccessConditionAccepted, metav1.ConditionFalse, configv1.AccessReasonPortNotDeclared)
}

// TestNamespaceWidePolicyConditions: a policy without a target is judged against every
// MeshService of its namespace, each problem naming its service.
func TestNamespaceWidePolicyConditions(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "echo")
	create(t, ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}})
	endpoint(t, ctx, ns, "echo-0", "echo", healthy, 8080, 8080, "HTTP")
	endpoint(t, ctx, ns, "db-0", "db", healthy, 5432, 5432, "TCP")
	serviceReady(t, ctx, ns, "db", 1)
	serviceReady(t, ctx, ns, "echo", 1)

	readers := accessPolicy(ns, "readers", "", nil, []string{"GET"}, "echo")
	create(t, ctx, readers)
	msg := waitAccess(t, ctx, client.ObjectKeyFromObject(readers), configv1.AccessConditionAccepted, metav1.ConditionFalse, configv1.AccessReasonHTTPRuleOnTCPPort)
	if want := "MeshService db: spec.rules[0] has methods or pathPrefixes, which admit nothing on port 5432 (TCP: the mesh sees no " +
		"request); drop them, or list spec.ports without 5432"; msg != want {
		t.Errorf("readers' Accepted message\n got %s\nwant %s", msg, want)
	}
	deny := accessPolicy(ns, "deny", "", nil, nil)
	create(t, ctx, deny)
	msg = waitAccess(t, ctx, client.ObjectKeyFromObject(deny), configv1.AccessConditionAccepted, metav1.ConditionTrue, configv1.AccessReasonAccepted)
	if want := "governs db:5432, echo:8080"; msg != want {
		t.Errorf("deny's Accepted message\n got %s\nwant %s", msg, want)
	}
}

// portPolicies waits until MeshService ns/name's ports list want (port → policies; a port absent
// from want lists none), and returns the MeshService.
func portPolicies(t *testing.T, ctx context.Context, ns, name string, want map[int32][]string) *meshv1alpha1.MeshService {
	t.Helper()
	var ms *meshv1alpha1.MeshService
	testenv.Eventually(t, fmt.Sprintf("MeshService %s lists %v", name, want), func() (err error) {
		if ms, err = getMeshService(ctx, ns, name); err != nil {
			return err
		}
		for _, p := range ms.Status.Ports {
			if !slices.Equal(p.AccessPolicies, want[p.Port]) {
				return fmt.Errorf("port %d lists %v", p.Port, p.AccessPolicies)
			}
		}
		return nil
	})
	return ms
}

// TestMeshServiceListsAccessPolicies: each MeshService port lists the policies that govern it,
// a targeted one on its ports, a namespace-wide one on every port; kubectl describe shows them;
// a policy change that changes no listing writes nothing (the negative control: one that does,
// writes), and deleting a policy drops it.
func TestMeshServiceListsAccessPolicies(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "echo")
	endpoint(t, ctx, ns, "echo-0", "echo", healthy, 8080, 8080, "HTTP", 9000, "TCP")
	serviceReady(t, ctx, ns, "echo", 1)
	portPolicies(t, ctx, ns, "echo", nil)

	api := accessPolicy(ns, "api", "echo", []int32{8080}, []string{"GET"}, "web")
	deny := accessPolicy(ns, "deny", "", nil, nil)
	create(t, ctx, api, deny)
	portPolicies(t, ctx, ns, "echo", map[int32][]string{8080: {ns + "/api", ns + "/deny"}, 9000: {ns + "/deny"}})

	out, stderr, err := env.Kubectl(ctx, "describe", "meshservice", "echo", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl describe: %v\n%s", err, stderr)
	}
	if want := "Access Policies: " + ns + "/api " + ns + "/deny"; !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
		t.Errorf("kubectl describe does not show %q:\n%s", want, out)
	}

	// A change of api's rules lists nothing new: the MeshService is reconciled, and not written.
	testenv.Settle(t, "meshservice", 0)
	ms, err := getMeshService(ctx, ns, "echo")
	if err != nil {
		t.Fatal(err)
	}
	before := reconciles(t)
	edit(t, ctx, api, func(spec *configv1.AccessPolicySpec) { spec.Rules[0].Methods = []string{"GET", "HEAD"} })
	testenv.Settle(t, "meshservice", before+1)
	if now, err := getMeshService(ctx, ns, "echo"); err != nil || now.ResourceVersion != ms.ResourceVersion {
		t.Errorf("a policy change that lists nothing new wrote the MeshService: resourceVersion %s → %s (%v)", ms.ResourceVersion, now.ResourceVersion, err)
	}

	// Negative control: one that does, writes; deleting the namespace-wide policy drops it.
	edit(t, ctx, api, func(spec *configv1.AccessPolicySpec) { spec.Ports = []int32{8080, 9000} })
	written := portPolicies(t, ctx, ns, "echo", map[int32][]string{8080: {ns + "/api", ns + "/deny"}, 9000: {ns + "/api", ns + "/deny"}})
	if written.ResourceVersion == ms.ResourceVersion {
		t.Errorf("the listing changed and the resourceVersion did not: %s", ms.ResourceVersion)
	}
	if err := env.Client.Delete(ctx, deny); err != nil {
		t.Fatal(err)
	}
	portPolicies(t, ctx, ns, "echo", map[int32][]string{8080: {ns + "/api"}, 9000: {ns + "/api"}})
}

// TestAccessPolicyStatusWritesOnlyOnChange: reconciling a converged policy writes nothing (its
// resourceVersion stays); the negative control, a spec change that changes its verdict, is
// written, and the same comparison sees it.
func TestAccessPolicyStatusWritesOnlyOnChange(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "echo")
	endpoint(t, ctx, ns, "echo-0", "echo", healthy, 8080, 8080, "HTTP")
	serviceReady(t, ctx, ns, "echo", 1)
	p := accessPolicy(ns, "quiet", "echo", nil, nil, "echo")
	create(t, ctx, p)
	key := client.ObjectKeyFromObject(p)
	waitAccess(t, ctx, key, configv1.AccessConditionResolvedRefs, metav1.ConditionTrue, configv1.AccessReasonResolved)
	waitAccess(t, ctx, key, configv1.AccessConditionAccepted, metav1.ConditionTrue, configv1.AccessReasonAccepted)
	testenv.Settle(t, "accesspolicy", 0)

	version := func() string {
		if err := env.Client.Get(ctx, key, p); err != nil {
			t.Fatal(err)
		}
		return p.ResourceVersion
	}
	rv := version()
	r := &AccessPolicyReconciler{Client: env.Client, TrustDomain: "aether.internal"}
	for range 3 {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	if now := version(); now != rv {
		t.Errorf("reconciling a converged policy wrote it: resourceVersion %s → %s", rv, now)
	}

	// Negative control: admitting a ServiceAccount no pod runs as changes ResolvedRefs.
	edit(t, ctx, p, func(spec *configv1.AccessPolicySpec) {
		spec.Rules[0].From = append(spec.Rules[0].From, configv1.AccessSource{ServiceAccount: &configv1.ServiceAccountRef{Name: "nobody"}})
	})
	rv = p.ResourceVersion
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if now := version(); now == rv {
		t.Errorf("a changed verdict was not written: resourceVersion still %s", rv)
	}
	waitAccess(t, ctx, key, configv1.AccessConditionResolvedRefs, metav1.ConditionFalse, configv1.AccessReasonUnknownIdentity)
}

// TestAccessPolicyConditionsAreStable: the verdict does not depend on the order the cache lists
// the services in (a reordered list would otherwise rewrite the message, and the status): a
// namespace-wide policy's problems come by service name, each naming its service.
func TestAccessPolicyConditionsAreStable(t *testing.T) {
	service := func(name string, ports ...meshv1alpha1.ServicePort) meshv1alpha1.MeshService {
		return meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Status: meshv1alpha1.MeshServiceStatus{Ports: ports}}
	}
	tcp := func(port int32) meshv1alpha1.ServicePort {
		return meshv1alpha1.ServicePort{Port: port, Protocol: meshv1alpha1.ProtocolTCP}
	}
	services := []meshv1alpha1.MeshService{service("queue", tcp(5672)), service("db", tcp(5432)), service("echo")}
	p := accessPolicy("shop", "readers", "", nil, []string{"GET"}, "web")
	want := "MeshService db: spec.rules[0] has methods or pathPrefixes, which admit nothing on port 5432 (TCP: the mesh sees no " +
		"request); drop them, or list spec.ports without 5432; MeshService queue: spec.rules[0] has methods or pathPrefixes, which " +
		"admit nothing on port 5672 (TCP: the mesh sees no request); drop them, or list spec.ports without 5672"
	for _, order := range []string{"as listed", "reversed"} {
		got := AccessPolicyConditions("aether.internal", p, services, nil)
		if c := condition(got, configv1.AccessConditionAccepted); c.Reason != configv1.AccessReasonHTTPRuleOnTCPPort || c.Message != want {
			t.Errorf("services %s: Accepted %s %q\nwant %s %q", order, c.Reason, c.Message, configv1.AccessReasonHTTPRuleOnTCPPort, want)
		}
		slices.Reverse(services)
	}
}
