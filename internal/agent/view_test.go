// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/testrun"
)

// startView starts a view (slim or whole) over the test API server until the test ends, and
// waits for it to sync.
func startView(t testing.TB, slim bool) *View {
	t.Helper()
	v, err := newView(env.Config, env.Scheme, slim, allRouteKinds)
	if err != nil {
		t.Fatal(err)
	}
	return runView(t, v)
}

// runView starts v until the test ends, and waits for it to sync.
func runView(t testing.TB, v *View) *View {
	t.Helper()
	ctx := testrun.UntilCleanup(t, "view", v.Start)
	// Bounded: an informer the view's credentials may not list never syncs.
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	if !v.WaitForCacheSync(syncCtx) {
		t.Fatal("the view did not sync within a minute")
	}
	return v
}

// memberNames are the members' namespace/name of a service's port, per protocol.
func memberNames(svc model.Service, port int32) []string {
	var names []string
	for _, p := range svc.Ports {
		if p.Number != port {
			continue
		}
		for _, pair := range p.Pairs {
			for _, m := range pair.Members {
				names = append(names, fmt.Sprintf("%s/%s %s", m.Namespace, m.Name, pair.Protocol))
			}
		}
	}
	return names
}

// TestViewServices: the view sees MeshServices and MeshEndpoints of every namespace and node,
// and Services builds each service from the MeshService's VIP and identity and its verified
// endpoints only: an endpoint with no pod behind it (Verified=False) is in the view, not in the
// model.
func TestViewServices(t *testing.T) {
	ctx := testContext(t)
	ns, ns2 := namespace(t, ctx), namespace(t, ctx)
	annotations := map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9000=tcp"}
	createPod(t, ctx, ns, "a", testNode, newPodIP(), true, annotations)
	createPod(t, ctx, ns, "b", testNode, newPodIP(), true, annotations)
	createPod(t, ctx, ns2, "c", testNode, newPodIP(), true, annotations)
	// No pod behind it, on a node no agent serves: the controller writes Verified=False.
	createTCPEndpoint(t, ctx, ns, "ghost", "payments", "other-"+ns, newPodIP(), 8080)

	v := startView(t, true)
	want := map[string][]string{
		ns + "/payments":  {ns + "/a HTTP", ns + "/b HTTP"},
		ns2 + "/payments": {ns2 + "/c HTTP"},
	}
	testenv.Eventually(t, "both services in the view, with their verified endpoints", func() error {
		ghost, err := getEndpoint(ctx, ns, "ghost")
		if err != nil {
			return err
		}
		if c := conditions.Find(ghost.Status.Conditions, meshv1alpha1.EndpointConditionVerified); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("ghost's Verified = %+v, want False (else the test proves nothing)", c)
		}
		services, err := v.Services(ctx)
		if err != nil {
			return err
		}
		found := 0
		for _, svc := range services {
			key := svc.Namespace + "/" + svc.Name
			members, mine := want[key]
			if !mine {
				continue // another test's service: the view is cluster-wide
			}
			found++
			ms := &meshv1alpha1.MeshService{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: svc.Name}, ms); err != nil {
				return err
			}
			if svc.Identity == "" || svc.VIP == "" || svc.Identity != ms.Status.Identity || svc.VIP != ms.Status.VIP {
				return fmt.Errorf("%s: identity %q, VIP %q; MeshService says %q, %q", key, svc.Identity, svc.VIP, ms.Status.Identity, ms.Status.VIP)
			}
			if got := memberNames(svc, 8080); !slices.Equal(got, members) {
				return fmt.Errorf("%s port 8080 members %v, want %v", key, got, members)
			}
			if svc.Primary != 8080 || len(svc.Ports) != 2 {
				return fmt.Errorf("%s: primary %d, ports %+v", key, svc.Primary, svc.Ports)
			}
		}
		if found != len(want) {
			return fmt.Errorf("%d of %d services in the view", found, len(want))
		}
		return nil
	})
	if !slices.IsSortedFunc(mustServices(t, v), func(a, b model.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	}) {
		t.Error("Services are not sorted by namespace and name")
	}

	// What the cache holds of an endpoint: no managed fields, no Registered condition.
	cached := &meshEndpoint{}
	if err := v.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, cached); err != nil {
		t.Fatal(err)
	}
	if len(cached.ManagedFields) != 0 || cached.Spec.PodUID != "" || conditions.Find(cached.Status.Conditions, meshv1alpha1.EndpointConditionRegistered) != nil {
		t.Errorf("the view's cache holds more than the model needs: %+v", cached)
	}
}

func mustServices(t *testing.T, v *View) []model.Service {
	t.Helper()
	services, err := v.Services(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return services
}

// fullEndpoint is a MeshEndpoint with everything the API server and its writers put on one.
func fullEndpoint(name string, created metav1.Time, health meshv1alpha1.Health, verified metav1.ConditionStatus) meshv1alpha1.MeshEndpoint {
	long := strings.Repeat("a verdict message, ", 500)
	return meshv1alpha1.MeshEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "42", Generation: 3,
			CreationTimestamp: created, Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"note": long},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: "pod-uid"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec: meshv1alpha1.MeshEndpointSpec{ServiceName: "payments", PodName: name, PodUID: "pod-uid", NodeName: "n1",
			Address: "10.0.0.7", PrimaryPort: 8080, PortsSummary: "8080/HTTP,9000/TCP,9090/HTTP2", Weight: 200,
			Ports: []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}, {Port: 9000, Protocol: meshv1alpha1.ProtocolTCP},
				{Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2, AppProtocol: meshv1alpha1.AppProtocolGRPC}},
			HealthCheck: meshv1alpha1.HealthCheck{Mode: meshv1alpha1.HealthCheckEDS, Path: "/healthz"},
			Metadata:    map[string]string{"version": "v2"}, Locality: meshv1alpha1.Locality{Region: "r", Zone: "z"}},
		Status: meshv1alpha1.MeshEndpointStatus{Health: health, ObservedGeneration: 3, Conditions: []metav1.Condition{
			{Type: meshv1alpha1.EndpointConditionRegistered, Status: metav1.ConditionTrue, Reason: "Registered", Message: long},
			{Type: meshv1alpha1.EndpointConditionVerified, Status: verified, Reason: "PodMatches", Message: long, ObservedGeneration: 3},
		}},
	}
}

// TestSlimMeshEndpoint: the transform drops what the model does not read, and the model built
// from slimmed endpoints is the model built from whole ones (a pure function: no API server).
func TestSlimMeshEndpoint(t *testing.T) {
	t0 := metav1.Now().Rfc3339Copy()
	whole := []meshv1alpha1.MeshEndpoint{
		fullEndpoint("a", t0, meshv1alpha1.HealthHealthy, metav1.ConditionTrue),
		fullEndpoint("b", metav1.NewTime(t0.Add(1e9)), meshv1alpha1.HealthDraining, metav1.ConditionTrue),
		fullEndpoint("c", t0, meshv1alpha1.HealthPending, metav1.ConditionFalse),
	}
	whole[1].Spec.Ports = whole[1].Spec.Ports[1:] // another primary's vote, another membership
	whole[1].Spec.PrimaryPort = 9000
	var slim []meshv1alpha1.MeshEndpoint
	for i := range whole {
		out, err := slimMeshEndpoint(whole[i].DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		ep := *out.(*meshv1alpha1.MeshEndpoint)
		if len(ep.ManagedFields)+len(ep.Annotations)+len(ep.Labels)+len(ep.OwnerReferences) != 0 || ep.Spec.PodUID != "" || ep.Spec.PortsSummary != "" {
			t.Errorf("%s: metadata or spec kept beyond the model's needs: %+v", ep.Name, ep)
		}
		// The verdict's generation stays: the view renders only a verdict on the current spec.
		wantConditions := []metav1.Condition{{Type: meshv1alpha1.EndpointConditionVerified, Status: whole[i].Status.Conditions[1].Status,
			ObservedGeneration: whole[i].Status.Conditions[1].ObservedGeneration}}
		if !equality.Semantic.DeepEqual(ep.Status.Conditions, wantConditions) {
			t.Errorf("%s: conditions %+v, want %+v", ep.Name, ep.Status.Conditions, wantConditions)
		}
		slim = append(slim, ep)
	}
	in := model.Input{Namespace: "shop", Name: "payments", Identity: "spiffe://x/ns/shop/sa/payments", VIP: "10.96.0.9"}
	fromWhole, fromSlim := in, in
	fromWhole.Endpoints, fromSlim.Endpoints = whole, slim
	if a, b := model.BuildService(fromWhole), model.BuildService(fromSlim); !reflect.DeepEqual(a, b) {
		t.Errorf("the model differs once the endpoints are slimmed:\nwhole %+v\n slim %+v", a, b)
	}
	if out, _ := slimMeshEndpoint("a tombstone"); out != "a tombstone" {
		t.Errorf("a non-endpoint was changed: %v", out)
	}
}

// TestViewCountsItsObjects: the gauge aether_agent_view_objects follows what the view holds, the
// API server's count of each kind, through creations and deletions, and drops the view's objects
// when it stops (no other view runs in this package's tests meanwhile).
func TestViewCountsItsObjects(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	v, err := newView(env.Config, env.Scheme, true, allRouteKinds)
	if err != nil {
		t.Fatal(err)
	}
	viewCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- v.Start(viewCtx) }()
	defer stop()

	matchesAPIServer := func() error {
		var services meshv1alpha1.MeshServiceList
		var endpoints meshv1alpha1.MeshEndpointList
		if err := env.Client.List(ctx, &services); err != nil {
			return err
		}
		if err := env.Client.List(ctx, &endpoints); err != nil {
			return err
		}
		for kind, want := range map[string]int{"MeshService": len(services.Items), "MeshEndpoint": len(endpoints.Items)} {
			if got, err := testenv.Gauge("aether_agent_view_objects", "kind", kind); err != nil || got != float64(want) {
				return fmt.Errorf("the gauge counts %v %ss, the API server lists %d (%v)", got, kind, want, err)
			}
		}
		return nil
	}
	testenv.Eventually(t, "the gauge counts what the API server holds", matchesAPIServer)
	// On a node no agent serves and with no pod behind them: nothing but this test changes them.
	first := createTCPEndpoint(t, ctx, ns, "counted-1", "counted", "other-"+ns, newPodIP(), 8080)
	createTCPEndpoint(t, ctx, ns, "counted-2", "counted", "other-"+ns, newPodIP(), 8080)
	testenv.Eventually(t, "the gauge counts the two new endpoints", matchesAPIServer)
	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the gauge forgets the deleted endpoint", matchesAPIServer)

	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"MeshService", "MeshEndpoint"} {
		if got, err := testenv.Gauge("aether_agent_view_objects", "kind", kind); err != nil || got != 0 {
			t.Errorf("the stopped view still counts %v %ss (%v)", got, kind, err)
		}
	}
}

// TestViewRendersOnlyTheCurrentVerdict: an endpoint counts in the view's model only while the
// controller's Verified=True was observed at its current generation: a spec changed since (here
// its address, the way a node agent's token could move it) is left out until the verdict is
// written again for it. The test writes the verdicts itself, in a namespace the package's
// controller does not see.
func TestViewRendersOnlyTheCurrentVerdict(t *testing.T) {
	ctx := testContext(t)
	ns := isolatedNamespace(t, ctx)
	if err := env.Client.Create(ctx, &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"}}); err != nil {
		t.Fatal(err)
	}
	ep := createTCPEndpoint(t, ctx, ns, "member", "payments", "other-"+ns, newPodIP(), 9000)
	verify := func(observed int64) {
		t.Helper()
		patch := client.MergeFrom(ep.DeepCopy())
		ep.Status.Conditions = []metav1.Condition{{Type: meshv1alpha1.EndpointConditionVerified, Status: metav1.ConditionTrue,
			Reason: meshv1alpha1.EndpointReasonPodMatches, Message: "the test's verdict", ObservedGeneration: observed,
			LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}}
		if err := env.Client.Status().Patch(ctx, ep, patch); err != nil {
			t.Fatal(err)
		}
	}
	v := startView(t, true)
	rendered := func(want bool, what string) {
		t.Helper()
		testenv.Eventually(t, what, func() error {
			services, err := v.Services(ctx)
			if err != nil {
				return err
			}
			for _, svc := range services {
				if svc.Namespace != ns || svc.Name != "payments" {
					continue
				}
				members := memberNames(svc, 9000)
				if got := slices.Contains(members, ns+"/member TCP"); got != want {
					return fmt.Errorf("members of port 9000: %v", members)
				}
				return nil
			}
			return fmt.Errorf("no service %s/payments in the view", ns)
		})
	}

	verify(ep.Generation)
	rendered(true, "the endpoint verified for its generation rendered")

	ep.Spec.Address = newPodIP()
	if err := env.Client.Update(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified); ep.Generation == c.ObservedGeneration {
		t.Fatalf("generation %d after the spec changed, still the verdict's: the test proves nothing", ep.Generation)
	}
	rendered(false, "the endpoint whose spec changed since its verdict left out")

	verify(ep.Generation)
	rendered(true, "the endpoint verified again for its new spec rendered")
}
