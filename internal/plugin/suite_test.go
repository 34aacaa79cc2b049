// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
	"github.com/aether-mesh/aether-operator/internal/routes"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// env is this package's real kube-apiserver and etcd, holding the fixture of makeFixture: dial and
// status are run against it as a user runs them, through --kubeconfig.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Run(m, &env, makeFixture)
}

// fixtureNamespace holds the fixture (this package's own API server: the name is fixed so the
// golden files can spell it).
const fixtureNamespace = "shop"

// stamp is the time the fixture's conditions carry (not printed).
var stamp = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

// fixtureEndpoint is one pod of a service, as its node agent registers it, with its health and
// the controller's verdict.
type fixtureEndpoint struct {
	name, service string
	primary       int32
	ports         []meshv1alpha1.PortProtocol
	health        meshv1alpha1.Health
}

func pp(port int32, p meshv1alpha1.Protocol) meshv1alpha1.PortProtocol {
	return meshv1alpha1.PortProtocol{Port: port, Protocol: p}
}

// makeFixture writes, in namespace shop:
//   - payments: three verified endpoints serving 8080 HTTP, 9090 HTTP2 and 9000, which two ready
//     ones declare TCP and one pending one (a rollout retyping it) HTTP;
//   - web: one endpoint serving 80 HTTP and 443 TCP;
//   - routes: an HTTPRoute parented to payments:8080 sending to it, an HTTPRoute sending to the
//     TCP port 9000 (ResolvedRefs=False), a GRPCRoute parented to the whole of payments.
//
// Each MeshService's status is what the controller derives (meshservice.Translate) from those
// endpoints, and each route's status what the route controller derives (routes.Evaluate): the
// reconcilers' own rules, written directly instead of waiting for them.
func makeFixture(e *testenv.Env) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fixtureNamespace}}); err != nil {
		return nil, err
	}
	endpoints := []fixtureEndpoint{
		{"payments-a", "payments", 8080, []meshv1alpha1.PortProtocol{pp(8080, "HTTP"), pp(9000, "TCP"), pp(9090, "HTTP2")}, meshv1alpha1.HealthHealthy},
		{"payments-b", "payments", 8080, []meshv1alpha1.PortProtocol{pp(8080, "HTTP"), pp(9000, "TCP"), pp(9090, "HTTP2")}, meshv1alpha1.HealthHealthy},
		{"payments-c", "payments", 8080, []meshv1alpha1.PortProtocol{pp(8080, "HTTP"), pp(9000, "HTTP"), pp(9090, "HTTP2")}, meshv1alpha1.HealthPending},
		{"web-a", "web", 80, []meshv1alpha1.PortProtocol{pp(80, "HTTP"), pp(443, "TCP")}, meshv1alpha1.HealthHealthy},
	}
	byService := map[string][]meshv1alpha1.MeshEndpoint{}
	for i, fe := range endpoints {
		ep, err := createEndpoint(ctx, c, fe, i)
		if err != nil {
			return nil, err
		}
		byService[fe.service] = append(byService[fe.service], *ep)
	}
	var services []meshv1alpha1.MeshService
	for _, name := range []string{"payments", "web"} {
		// The Service the controller generates (its ports do not matter to the route evaluation),
		// at a fixed cluster IP, the VIP, so that dial --from's goldens can spell it.
		if err := c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNamespace, Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: fixtureVIPs[name], Ports: []corev1.ServicePort{{Name: "mesh", Port: meshv1alpha1.MeshHTTPPort}}}}); err != nil {
			return nil, err
		}
		ms, err := createMeshService(ctx, c, name, byService[name])
		if err != nil {
			return nil, err
		}
		services = append(services, *ms)
	}
	if err := createFromFixture(ctx, c); err != nil {
		return nil, err
	}
	if err := createRoutes(ctx, c, services); err != nil {
		return nil, err
	}
	// payments' port 8080 admits only pods of ServiceAccount client, and only under /checkout.
	if err := c.Create(ctx, &configv1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNamespace, Name: "payments-http"},
		Spec: configv1.AccessPolicySpec{
			TargetRef: &configv1.TargetRef{Kind: configv1.KindService, Name: "payments"}, Ports: []int32{8080},
			Rules: []configv1.AccessRule{{From: []configv1.AccessSource{{ServiceAccount: &configv1.ServiceAccountRef{Name: "client"}}}, PathPrefixes: []string{"/checkout"}}},
		}}); err != nil {
		return nil, err
	}
	return func() {}, nil
}

func createEndpoint(ctx context.Context, c client.Client, fe fixtureEndpoint, i int) (*meshv1alpha1.MeshEndpoint, error) {
	ep := &meshv1alpha1.MeshEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNamespace, Name: fe.name},
		Spec: meshv1alpha1.MeshEndpointSpec{ServiceName: fe.service, PodName: fe.name,
			PodUID: fmt.Sprintf("6f1c2b9e-0d4a-4c7e-9b1a-%012d", i+1), NodeName: "node-a",
			Address: fmt.Sprintf("127.0.0.%d", i+10), PrimaryPort: fe.primary, Ports: fe.ports,
			PortsSummary: meshv1alpha1.FormatPorts(fe.ports), Weight: 1024},
	}
	if err := c.Create(ctx, ep); err != nil {
		return nil, fmt.Errorf("creating MeshEndpoint %s: %w", fe.name, err)
	}
	ep.Status.Health = fe.health
	ep.Status.Conditions = conditions.Merge(nil, []metav1.Condition{{Type: meshv1alpha1.EndpointConditionVerified,
		Status: metav1.ConditionTrue, Reason: meshv1alpha1.EndpointReasonPodMatches, Message: "the pod matches"}}, ep.Generation, stamp)
	if err := c.Status().Update(ctx, ep); err != nil {
		return nil, fmt.Errorf("setting the status of MeshEndpoint %s: %w", fe.name, err)
	}
	return ep, nil
}

func createMeshService(ctx context.Context, c client.Client, name string, eps []meshv1alpha1.MeshEndpoint) (*meshv1alpha1.MeshService, error) {
	ms := &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNamespace, Name: name}}
	if err := c.Create(ctx, ms); err != nil {
		return nil, fmt.Errorf("creating MeshService %s: %w", name, err)
	}
	out, err := meshservice.Translate(meshservice.Input{Namespace: fixtureNamespace, Name: name, UID: ms.UID,
		MeshDomain: "aether.internal", Endpoints: eps,
		Service: meshservice.ServiceFacts{Exists: true, Owned: true, ClusterIP: fixtureVIPs[name]}})
	if err != nil {
		return nil, err
	}
	ms.Status = out.Status
	ms.Status.ObservedGeneration = ms.Generation
	ms.Status.Conditions = conditions.Merge(nil, out.Status.Conditions, ms.Generation, stamp)
	for i := range ms.Status.Ports {
		ms.Status.Ports[i].Conditions = conditions.Merge(nil, ms.Status.Ports[i].Conditions, ms.Generation, stamp)
	}
	if err := c.Status().Update(ctx, ms); err != nil {
		return nil, fmt.Errorf("setting the status of MeshService %s: %w", name, err)
	}
	return ms, nil
}

func serviceParent(name string, port *gwapiv1.PortNumber) gwapiv1.ParentReference {
	return gwapiv1.ParentReference{Group: ptr.To[gwapiv1.Group](""), Kind: ptr.To[gwapiv1.Kind]("Service"),
		Name: gwapiv1.ObjectName(name), Port: port}
}

func serviceBackend(name string, port gwapiv1.PortNumber) gwapiv1.BackendObjectReference {
	return gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(name), Port: &port}
}

func createRoutes(ctx context.Context, c client.Client, services []meshv1alpha1.MeshService) error {
	checkout := &gwapiv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNamespace, Name: "payments-checkout"},
		Spec: gwapiv1.HTTPRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{serviceParent("payments", ptr.To[gwapiv1.PortNumber](8080))}},
			Rules:           []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: serviceBackend("payments", 8080)}}}}},
		},
	}
	ledger := &gwapiv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNamespace, Name: "payments-ledger"},
		Spec: gwapiv1.HTTPRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{serviceParent("web", nil)}},
			Rules:           []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: serviceBackend("payments", 9000)}}}}},
		},
	}
	grpc := &gwapiv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNamespace, Name: "payments-grpc"},
		Spec: gwapiv1.GRPCRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{serviceParent("payments", nil)}},
			Rules:           []gwapiv1.GRPCRouteRule{{BackendRefs: []gwapiv1.GRPCBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: serviceBackend("payments", 9090)}}}}},
		},
	}
	for _, r := range []struct {
		obj     client.Object
		route   routes.Route
		parents *[]gwapiv1.RouteParentStatus
	}{
		{checkout, routes.Route{Kind: routes.HTTPRoute, ParentRefs: checkout.Spec.ParentRefs,
			Rules: []routes.Rule{{BackendRefs: []gwapiv1.BackendObjectReference{checkout.Spec.Rules[0].BackendRefs[0].BackendObjectReference}}}}, &checkout.Status.Parents},
		{ledger, routes.Route{Kind: routes.HTTPRoute, ParentRefs: ledger.Spec.ParentRefs,
			Rules: []routes.Rule{{BackendRefs: []gwapiv1.BackendObjectReference{ledger.Spec.Rules[0].BackendRefs[0].BackendObjectReference}}}}, &ledger.Status.Parents},
		{grpc, routes.Route{Kind: routes.GRPCRoute, ParentRefs: grpc.Spec.ParentRefs,
			Rules: []routes.Rule{{BackendRefs: []gwapiv1.BackendObjectReference{grpc.Spec.Rules[0].BackendRefs[0].BackendObjectReference}}}}, &grpc.Status.Parents},
	} {
		if err := c.Create(ctx, r.obj); err != nil {
			return fmt.Errorf("creating route %s: %w", r.obj.GetName(), err)
		}
		r.route.Namespace, r.route.Name = fixtureNamespace, r.obj.GetName()
		*r.parents = routes.MergeParents(nil, routes.Evaluate(routes.Input{Route: r.route, MeshServices: services,
			Services: []string{fixtureNamespace + "/payments", fixtureNamespace + "/web"}}), r.obj.GetGeneration(), stamp)
		if err := c.Status().Update(ctx, r.obj); err != nil {
			return fmt.Errorf("setting the status of route %s: %w", r.obj.GetName(), err)
		}
	}
	return nil
}

// kubeconfig is the flag that points kubectl aether at this package's API server.
func kubeconfig() []string { return []string{"--kubeconfig", env.Kubeconfig} }
