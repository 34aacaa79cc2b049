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
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

const (
	healthy = meshv1alpha1.HealthHealthy
	pending = meshv1alpha1.HealthPending
)

// serviceReady waits until the MeshService reports Ready with total endpoints, all of them
// ready, and returns it.
func serviceReady(t *testing.T, ctx context.Context, ns, name string, total int32) *meshv1alpha1.MeshService {
	t.Helper()
	var ms *meshv1alpha1.MeshService
	testenv.Eventually(t, "MeshService "+name+" Ready", func() (err error) {
		if ms, err = getMeshService(ctx, ns, name); err != nil {
			return err
		}
		if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionReady); c.Status != metav1.ConditionTrue ||
			ms.Status.Endpoints != (meshv1alpha1.EndpointCounts{Ready: total, Total: total}) {
			return fmt.Errorf("Ready=%s endpoints=%+v", c.Status, ms.Status.Endpoints)
		}
		return nil
	})
	return ms
}

func dialRow(ms *meshv1alpha1.MeshService, address string) (meshv1alpha1.Dial, bool) {
	for _, d := range ms.Status.DialSurface {
		if d.Address == address {
			return d, true
		}
	}
	return meshv1alpha1.Dial{}, false
}

func portOf(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// TestPortSets covers the rows of DESIGN section 5 end to end: endpoints in, MeshService status
// and generated Service out, on the real API server.
func TestPortSets(t *testing.T) {
	type row struct {
		address string
		outcome meshv1alpha1.DialOutcome
		port    int32
		err     meshv1alpha1.DialError // the x-aether-error of a Misdirected row
	}
	const notDeclared, notHTTP, noHTTP = meshv1alpha1.DialErrorPortNotDeclared, meshv1alpha1.DialErrorPortNotHTTP, meshv1alpha1.DialErrorNoHTTPPort
	cases := map[string]struct {
		primary      int32
		ports        []any
		httpPort     int32
		tcpPort      int32
		rows         []row
		servicePorts []string // names of the generated Service's ports, in order
		appProtocol  string
	}{
		"pure HTTP": {
			primary: 8080, ports: []any{8080, "HTTP"},
			rows: []row{{"http://<name>/", "Misdirected", 0, notDeclared}, {"<name>:18081", "HostDecides", 0, ""},
				{"Host: <name>:8080", "Reaches", 8080, ""}, {"<name>:18082", "Refused", 0, ""}},
			servicePorts: []string{"http", "https", "http-8080", "mesh", "mesh-tcp"}, appProtocol: "http",
		},
		"pure TCP": {
			primary: 5432, ports: []any{5432, "TCP"}, tcpPort: 5432,
			rows: []row{{"http://<name>/", "Misdirected", 0, noHTTP}, {"Host: <name>:5432", "Misdirected", 0, notHTTP},
				{"<name>:18082", "Reaches", 5432, ""}},
			servicePorts: []string{"http", "https", "tcp-5432", "mesh", "mesh-tcp"}, appProtocol: "tcp",
		},
		"mixed": {
			primary: 8080, ports: []any{8080, "HTTP", 9000, "TCP", 9090, "HTTP2"}, tcpPort: 9000,
			rows: []row{
				{"http://<name>/", "Misdirected", 0, notDeclared}, {"<name>:18081", "HostDecides", 0, ""},
				{"Host: <name>", "Misdirected", 0, notDeclared}, {"Host: <name>:8080", "Reaches", 8080, ""},
				{"Host: <name>:9000", "Misdirected", 0, notHTTP}, {"Host: <name>:9090", "Reaches", 9090, ""},
				{"Host: <name>:18082", "Misdirected", 0, notDeclared}, {"Host: <name>:*", "Misdirected", 0, notDeclared},
				{"https://<name>/", "Refused", 0, ""}, {"<name>:18082", "Reaches", 9000, ""},
				{"<name>:9000", "Reaches", 9000, ""}, {"<name>:9090", "Reaches", 9090, ""}, {"<name>:*", "Refused", 0, ""},
			},
			servicePorts: []string{"http", "https", "http-8080", "tcp-9000", "h2-9090", "mesh", "mesh-tcp"}, appProtocol: "http",
		},
		"port 80 declared": {
			primary: 8080, ports: []any{80, "HTTP", 8080, "HTTP"}, httpPort: 80,
			rows: []row{{"http://<name>/", "Reaches", 80, ""}, {"Host: <name>", "Reaches", 80, ""},
				{"Host: <name>:8080", "Reaches", 8080, ""}},
			servicePorts: []string{"http-80", "https", "http-8080", "mesh", "mesh-tcp"}, appProtocol: "http",
		},
		"443 declared tcp": {
			primary: 8080, ports: []any{443, "TCP", 8080, "HTTP"}, tcpPort: 443,
			rows:         []row{{"https://<name>/", "Reaches", 443, ""}, {"Host: <name>:443", "Misdirected", 0, notHTTP}},
			servicePorts: []string{"http", "tcp-443", "http-8080", "mesh", "mesh-tcp"}, appProtocol: "http",
		},
		"no HTTP port": {
			primary: 9000, ports: []any{9000, "TCP", 9001, "TCP"}, tcpPort: 9000,
			rows: []row{{"http://<name>/", "Misdirected", 0, noHTTP}, {"<name>:18081", "HostDecides", 0, ""},
				{"Host: <name>:9001", "Misdirected", 0, notHTTP}},
			servicePorts: []string{"http", "https", "tcp-9000", "tcp-9001", "mesh", "mesh-tcp"}, appProtocol: "tcp",
		},
		"no TCP port": {
			primary: 8080, ports: []any{8080, "HTTP", 9090, "HTTP2"},
			rows:         []row{{"<name>:18082", "Refused", 0, ""}},
			servicePorts: []string{"http", "https", "http-8080", "h2-9090", "mesh", "mesh-tcp"}, appProtocol: "http",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			ns := namespaceWithSA(t, ctx, "svc")
			endpoint(t, ctx, ns, "svc-0", "svc", healthy, tc.primary, tc.ports...)
			endpoint(t, ctx, ns, "svc-1", "svc", healthy, tc.primary, tc.ports...)
			ms := serviceReady(t, ctx, ns, "svc", 2)

			if got := portOf(ms.Status.DefaultHTTPPort); got != tc.httpPort {
				t.Errorf("defaultHTTPPort = %d, want %d", got, tc.httpPort)
			}
			if got := portOf(ms.Status.DefaultTCPPort); got != tc.tcpPort {
				t.Errorf("defaultTCPPort = %d, want %d", got, tc.tcpPort)
			}
			for _, r := range tc.rows {
				d, ok := dialRow(ms, r.address)
				if !ok || d.Outcome != r.outcome || portOf(d.Port) != r.port || d.Error != r.err {
					t.Errorf("dial %s = %+v (found %v), want %s port %d error %q", r.address, d, ok, r.outcome, r.port, r.err)
				}
			}
			if want := len(tc.ports) + 10; len(ms.Status.DialSurface) != want { // tc.ports holds port, protocol pairs: 2 × ports + 10
				t.Errorf("%d dial rows, want %d: each spelling once", len(ms.Status.DialSurface), want)
			}
			if want := []string{"svc." + ns + ".aether.internal", "svc." + ns + ".svc.cluster.local", "svc." + ns}; !slices.Equal(ms.Status.Names, want) {
				t.Errorf("names = %q, want %q", ms.Status.Names, want)
			}
			if ms.Status.Identity != "spiffe://aether.internal/ns/"+ns+"/sa/svc" {
				t.Errorf("identity = %q", ms.Status.Identity)
			}
			if ms.Status.Endpoints != (meshv1alpha1.EndpointCounts{Ready: 2, Total: 2}) || ms.Status.EndpointsSummary != "2/2" {
				t.Errorf("endpoints = %+v %q, want 2/2", ms.Status.Endpoints, ms.Status.EndpointsSummary)
			}

			svc := &corev1.Service{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "svc"}, svc); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range svc.Spec.Ports {
				names = append(names, p.Name)
				if p.TargetPort != intstr.FromInt32(p.Port) {
					t.Errorf("port %s targets %v, want %d", p.Name, p.TargetPort, p.Port)
				}
			}
			slices.SortFunc(names, func(a, b string) int { return portNumber(svc, a) - portNumber(svc, b) })
			want := slices.Clone(tc.servicePorts)
			slices.SortFunc(want, func(a, b string) int { return portNumber(svc, a) - portNumber(svc, b) })
			if !slices.Equal(names, want) {
				t.Errorf("Service ports = %v, want %v", names, want)
			}
			if svc.Spec.Selector != nil || svc.Labels["aether.io/generated"] != "true" || svc.Annotations["aether.io/app-protocol"] != tc.appProtocol {
				t.Errorf("Service selector %v labels %v annotations %v", svc.Spec.Selector, svc.Labels, svc.Annotations)
			}
			if svc.Spec.ClusterIP == "" || ms.Status.VIP != svc.Spec.ClusterIP {
				t.Errorf("vip %q, Service clusterIP %q", ms.Status.VIP, svc.Spec.ClusterIP)
			}
		})
	}
}

func portNumber(svc *corev1.Service, name string) int {
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			return int(p.Port)
		}
	}
	return -1
}

// TestRolloutRetypingAPort retypes port 9000 from HTTP to TCP the way a rolling update does:
// PortsConsistent is False with the counts while both exist, True after, and its
// lastTransitionTime moves only on the two flips.
func TestRolloutRetypingAPort(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "ledger")
	endpoint(t, ctx, ns, "old-0", "ledger", healthy, 8080, 8080, "HTTP", 9000, "HTTP")
	endpoint(t, ctx, ns, "old-1", "ledger", healthy, 8080, 8080, "HTTP", 9000, "HTTP")
	ms := serviceReady(t, ctx, ns, "ledger", 2)
	agreed := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionPortsConsistent)
	if agreed.Status != metav1.ConditionTrue {
		t.Fatalf("PortsConsistent before the rollout = %+v", agreed)
	}
	waitASecond(t) // lastTransitionTime has one-second resolution

	endpoint(t, ctx, ns, "new-0", "ledger", healthy, 8080, 8080, "HTTP", 9000, "TCP")
	wantMsg := "port 9000: 2 endpoints (2 ready) declare HTTP, 1 endpoint (1 ready) declares TCP; reported as HTTP"
	var conflict metav1.Condition
	testenv.Eventually(t, "PortsConsistent=False with the new endpoint ready", func() error {
		ms, _ = getMeshService(ctx, ns, "ledger")
		conflict = condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionPortsConsistent)
		if conflict.Status != metav1.ConditionFalse || !strings.Contains(conflict.Message, wantMsg) {
			return fmt.Errorf("%+v", conflict)
		}
		return nil
	})
	if conflict.Reason != meshv1alpha1.ServiceReasonProtocolConflict || !strings.Contains(conflict.Message, wantMsg) {
		t.Errorf("conflict = %s: %s\nwant reason ProtocolConflict and %q", conflict.Reason, conflict.Message, wantMsg)
	}
	if conflict.LastTransitionTime.Equal(&agreed.LastTransitionTime) {
		t.Errorf("lastTransitionTime did not move on the flip to False")
	}
	port := ms.Status.Ports[slices.IndexFunc(ms.Status.Ports, func(p meshv1alpha1.ServicePort) bool { return p.Port == 9000 })]
	if c := condition(port.Conditions, meshv1alpha1.PortConditionProtocolConsistent); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, wantMsg) {
		t.Errorf("port 9000 ProtocolConsistent = %+v", c)
	}
	expectEvent(t, ctx, ns, "ledger", "ProtocolConflict")
	waitASecond(t)

	// More of the rollout, still in conflict: the condition's message changes, its time does not.
	endpoint(t, ctx, ns, "new-1", "ledger", healthy, 8080, 8080, "HTTP", 9000, "TCP")
	endpoint(t, ctx, ns, "new-2", "ledger", healthy, 8080, 8080, "HTTP", 9000, "TCP")
	testenv.Eventually(t, "TCP wins with more ready endpoints", func() error {
		ms, _ = getMeshService(ctx, ns, "ledger")
		if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionPortsConsistent); !strings.Contains(c.Message, "reported as TCP") {
			return fmt.Errorf("%s", c.Message)
		}
		return nil
	})
	if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionPortsConsistent); !c.LastTransitionTime.Equal(&conflict.LastTransitionTime) {
		t.Errorf("lastTransitionTime moved without a flip: %v → %v", conflict.LastTransitionTime, c.LastTransitionTime)
	}
	waitASecond(t)

	for _, name := range []string{"old-0", "old-1"} {
		if err := env.Client.Delete(ctx, &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "PortsConsistent=True after the rollout", func() error {
		ms, _ = getMeshService(ctx, ns, "ledger")
		if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionPortsConsistent); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionPortsConsistent); c.LastTransitionTime.Equal(&conflict.LastTransitionTime) {
		t.Errorf("lastTransitionTime did not move on the flip back to True")
	}
	if ms.Status.PortsSummary != "8080/HTTP,9000/TCP" || portOf(ms.Status.DefaultTCPPort) != 9000 {
		t.Errorf("after the rollout: ports %s, default TCP %d", ms.Status.PortsSummary, portOf(ms.Status.DefaultTCPPort))
	}
}

// TestOwnedServiceConverges: a Service an older version generated with only 18081 gains the
// whole dial surface.
func TestOwnedServiceConverges(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "orders")
	// The controller makes the MeshService and its Service (the endpoint keeps them, whatever
	// its cache knows of the ServiceAccount yet); the test then puts the Service back to what an
	// older version left: one port, no annotations, the same owner. (A MeshService the test made
	// itself could be removed by a controller whose cache had not seen the ServiceAccount yet, and
	// a Service owned by that removed MeshService is no longer the mesh's.)
	endpoint(t, ctx, ns, "orders-0", "orders", healthy, 8080, 8080, "HTTP", 9000, "TCP")
	old := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}}
	testenv.Eventually(t, "the Service an older version made", func() error {
		live := &corev1.Service{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), live); err != nil {
			return err
		}
		if metav1.GetControllerOf(live) == nil || metav1.GetControllerOf(live).Kind != "MeshService" {
			return fmt.Errorf("the Service has no MeshService owner yet: %v", live.OwnerReferences)
		}
		live.Annotations, live.Spec.Ports = nil, []corev1.ServicePort{{Name: "mesh", Port: 18081}}
		return env.Client.Update(ctx, live)
	})
	testenv.Eventually(t, "the old Service converges", func() error {
		svc := &corev1.Service{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), svc); err != nil {
			return err
		}
		var ports []int32
		for _, p := range svc.Spec.Ports {
			ports = append(ports, p.Port)
		}
		slices.Sort(ports)
		if !slices.Equal(ports, []int32{80, 443, 8080, 9000, 18081, 18082}) || svc.Annotations["aether.io/port-protocols"] != "8080=http,9000=tcp" {
			return fmt.Errorf("ports %v annotations %v", ports, svc.Annotations)
		}
		return nil
	})
	if svc := serviceReady(t, ctx, ns, "orders", 1); condition(svc.Status.Conditions, meshv1alpha1.ServiceConditionServiceReady).Status != metav1.ConditionTrue {
		t.Errorf("ServiceReady = %+v", condition(svc.Status.Conditions, meshv1alpha1.ServiceConditionServiceReady))
	}
}

// TestUsersServiceIsNeverModified: a Service of the same name that is not the mesh's stays
// byte-identical; the MeshService says why, and a Warning Event is emitted.
func TestUsersServiceIsNeverModified(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "billing")
	users := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing", Labels: map[string]string{"team": "billing"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "billing"},
			Ports: []corev1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if err := env.Client.Create(ctx, users); err != nil {
		t.Fatal(err)
	}
	endpoint(t, ctx, ns, "billing-0", "billing", healthy, 8080, 8080, "HTTP")
	var ms *meshv1alpha1.MeshService
	testenv.Eventually(t, "ServiceReady=False NameConflict", func() (err error) {
		if ms, err = getMeshService(ctx, ns, "billing"); err != nil {
			return err
		}
		if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionServiceReady); c.Reason != meshv1alpha1.ServiceReasonNameConflict {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionServiceReady)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "is not the mesh's") || !strings.Contains(c.Message, "rename or delete that Service") {
		t.Errorf("ServiceReady = %+v", c)
	}
	if ms.Status.VIP != "" {
		t.Errorf("vip = %q, want none: the Service is not the mesh's", ms.Status.VIP)
	}
	expectEvent(t, ctx, ns, "billing", "NameConflict")
	after := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(users), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != users.ResourceVersion || !equality.Semantic.DeepEqual(after.Spec, users.Spec) || !equality.Semantic.DeepEqual(after.ObjectMeta, users.ObjectMeta) {
		t.Errorf("the user's Service changed:\nbefore %+v\nafter  %+v", users, after)
	}
}

// TestScaleToZeroAndBack: ports and VIP stay while the service has no endpoints.
func TestScaleToZeroAndBack(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "cart")
	endpoint(t, ctx, ns, "cart-0", "cart", healthy, 8080, 8080, "HTTP", 9000, "TCP")
	before := serviceReady(t, ctx, ns, "cart", 1)
	if err := env.Client.Delete(ctx, &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cart-0"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Ready=False NoEndpoints", func() error {
		ms, err := getMeshService(ctx, ns, "cart")
		if err != nil {
			return err
		}
		if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionReady); c.Reason != meshv1alpha1.ServiceReasonNoEndpoints || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("%+v", c)
		}
		if ms.Status.PortsSummary != before.Status.PortsSummary || ms.Status.VIP != before.Status.VIP ||
			!equality.Semantic.DeepEqual(ms.Status.DialSurface, before.Status.DialSurface) {
			return fmt.Errorf("at zero: ports %s vip %s; before: %s %s", ms.Status.PortsSummary, ms.Status.VIP, before.Status.PortsSummary, before.Status.VIP)
		}
		return nil
	})
	endpoint(t, ctx, ns, "cart-1", "cart", healthy, 8080, 8080, "HTTP", 9000, "TCP")
	after := serviceReady(t, ctx, ns, "cart", 1)
	if after.Status.VIP != before.Status.VIP || after.Status.PortsSummary != before.Status.PortsSummary {
		t.Errorf("after scaling back: vip %s ports %s; before %s %s", after.Status.VIP, after.Status.PortsSummary, before.Status.VIP, before.Status.PortsSummary)
	}
}

// TestServiceAccountLifecycle: the MeshService lives while its ServiceAccount or any endpoint
// exists. The ServiceAccount deleted under running pods leaves the MeshService, its Service and
// the VIP as they are; the last endpoint then removes both; the ServiceAccount recreated with
// endpoints brings the MeshService back, tied to the new ServiceAccount; scaling to zero with the
// ServiceAccount present keeps it.
func TestServiceAccountLifecycle(t *testing.T) {
	ctx := testContext(t)
	ns := namespaceWithSA(t, ctx, "search")
	ep := endpoint(t, ctx, ns, "search-0", "search", healthy, 8080, 8080, "HTTP")
	ms := serviceReady(t, ctx, ns, "search", 1)
	sa := &corev1.ServiceAccount{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "search"}, sa); err != nil {
		t.Fatal(err)
	}
	if len(ms.OwnerReferences) != 0 || ms.Annotations[saUIDAnnotation] != string(sa.UID) {
		// Not fatal: what follows shows what the owner reference costs.
		t.Errorf("MeshService owners %+v, annotation %q: want no owner reference (the garbage collector would delete it with the "+
			"ServiceAccount) and the ServiceAccount's UID %s in %s", ms.OwnerReferences, ms.Annotations[saUIDAnnotation], sa.UID, saUIDAnnotation)
	}

	if err := env.Client.Delete(ctx, sa); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the ServiceAccount's deletion seen, the MeshService and the VIP kept", func() error {
		now, err := getMeshService(ctx, ns, "search")
		if err != nil {
			return err
		}
		svc, err := getService(ctx, ns, "search")
		if err != nil {
			return err
		}
		if now.UID != ms.UID || svc.Spec.ClusterIP != ms.Status.VIP || now.Status.VIP != ms.Status.VIP {
			return fmt.Errorf("MeshService uid %s (was %s), vip %q and Service clusterIP %q (was %q)", now.UID, ms.UID, now.Status.VIP, svc.Spec.ClusterIP, ms.Status.VIP)
		}
		if _, tied := now.Annotations[saUIDAnnotation]; tied {
			return fmt.Errorf("still tied to the deleted ServiceAccount: %v", now.Annotations)
		}
		return nil
	})

	if err := env.Client.Delete(ctx, ep); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "MeshService and Service removed with the last endpoint", func() error {
		for _, o := range []client.Object{&meshv1alpha1.MeshService{}, &corev1.Service{}} {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "search"}, o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T still there (%v)", o, err)
			}
		}
		return nil
	})

	sa = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "search"}}
	if err := env.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	ep = endpoint(t, ctx, ns, "search-1", "search", healthy, 8080, 8080, "HTTP")
	back := serviceReady(t, ctx, ns, "search", 1)
	testenv.Eventually(t, "tied to the new ServiceAccount", func() error {
		now, err := getMeshService(ctx, ns, "search")
		if err != nil {
			return err
		}
		if now.Annotations[saUIDAnnotation] != string(sa.UID) || len(now.OwnerReferences) != 0 {
			return fmt.Errorf("annotation %q (want %s), owners %+v", now.Annotations[saUIDAnnotation], sa.UID, now.OwnerReferences)
		}
		return nil
	})

	if err := env.Client.Delete(ctx, ep); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "scaled to zero with the ServiceAccount present: kept", func() error {
		now, err := getMeshService(ctx, ns, "search")
		if err != nil {
			return err
		}
		if c := condition(now.Status.Conditions, meshv1alpha1.ServiceConditionReady); c.Reason != meshv1alpha1.ServiceReasonNoEndpoints ||
			now.UID != back.UID || now.Status.VIP != back.Status.VIP {
			return fmt.Errorf("Ready %s %s, uid %s (was %s), vip %q (was %q)", c.Status, c.Reason, now.UID, back.UID, now.Status.VIP, back.Status.VIP)
		}
		return nil
	})
	if _, err := getService(ctx, ns, "search"); err != nil {
		t.Errorf("the Service at zero endpoints: %v", err)
	}
}

// expectEvent waits for an Event of the given reason on the MeshService and returns its message.
func expectEvent(t *testing.T, ctx context.Context, ns, name, reason string) string {
	t.Helper()
	var message string
	testenv.Eventually(t, "Event "+reason, func() error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.InvolvedObject.Kind == "MeshService" && e.Reason == reason {
				message = e.Message
				return nil
			}
		}
		return fmt.Errorf("no %s Event among %d", reason, len(events.Items))
	})
	return message
}

func waitASecond(t *testing.T) {
	t.Helper()
	select {
	case <-context.Background().Done():
	case <-timeAfterSecond():
	}
}
