// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package invariant

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/agent"
	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/routes"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// env is this package's real kube-apiserver and etcd, with the agent's node authority
// (config/admission) and RBAC installed: the agent each test runs speaks as the agent.
var env *testenv.Env

// testNode is the node the test pods are bound to and the test agent serves.
const testNode = "node-a"

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Run(m, &env, testenv.InstallNodeAuthority, func(e *testenv.Env) (func(), error) {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode,
			Labels: map[string]string{registration.LabelRegion: "eu-west-1", registration.LabelZone: "eu-west-1a"}}}
		return func() {}, e.Client.Create(context.Background(), node)
	})
}

// system is the mesh running in-process over one namespace: the node agent of testNode (as the
// agent, under config/admission's policy) and the controllers (MeshService, routes), each a
// manager of its own built as its binary builds it, so that a test stops one and keeps the other.
type system struct {
	stopAgent, stopController func()
}

// opts are Check's options matching the system's: the default mesh domain and ignored namespaces.
var opts = Options{}.withDefaults()

// startSystem runs the mesh over namespace ns until stopped or the test ends.
func startSystem(t *testing.T, ns string) system {
	t.Helper()
	scoped := func(o cache.Options) cache.Options {
		o.DefaultNamespaces = map[string]cache.Config{ns: {}}
		return o
	}
	agentMgr, err := ctrl.NewManager(env.AgentConfig(testNode), ctrl.Options{
		Scheme: env.Scheme, Cache: scoped(agent.CacheOptions(testNode)), Client: agent.ClientOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: new(true)}, // one system per test, in one process
	})
	if err != nil {
		t.Fatal(err)
	}
	health := agent.HealthOptions{Interval: 200 * time.Millisecond, Timeout: 300 * time.Millisecond, FailureThreshold: 2, SuccessThreshold: 1}
	if err := agent.Setup(agentMgr, agent.Options{NodeName: testNode, Health: health, IgnoredNamespaces: opts.Ignored}); err != nil {
		t.Fatal(err)
	}
	controllerMgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: scoped(controller.CacheOptions()), Client: controller.ClientOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&controller.MeshServiceReconciler{Client: controllerMgr.GetClient(), Recorder: controllerMgr.GetEventRecorder("aether-controller"),
		MeshDomain: opts.MeshDomain, Ignored: opts.Ignored}).SetupWithManager(controllerMgr); err != nil {
		t.Fatal(err)
	}
	if skipped, err := controller.SetupRouteControllers(controllerMgr); err != nil || len(skipped) > 0 {
		t.Fatalf("route controllers: skipped %v: %v", skipped, err)
	}
	s := system{stopAgent: start(t, agentMgr), stopController: start(t, controllerMgr)}
	return s
}

// start runs mgr until the returned stop (idempotent) is called or the test ends.
func start(t *testing.T, mgr ctrl.Manager) func() {
	t.Helper()
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	stop = sync.OnceFunc(stop)
	t.Cleanup(stop)
	return stop
}

// stop stops the whole system: nothing repairs what a test breaks next.
func (s system) stop() {
	s.stopAgent()
	s.stopController()
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// podHosts numbers the loopback addresses that stand in for pod IPs (the agent's health probes
// dial them, and find nothing listening: the endpoints are Unhealthy, deterministically).
var podHosts atomic.Int32

// meshFixture is what every test starts from, in a namespace of its own: ServiceAccounts orders
// and billing, their pods (orders-0 and orders-1 serving 8080 and raw TCP 9000, billing-0
// serving 8080), an HTTPRoute parented to the mesh Service orders whose backend is orders' TCP
// port (ResolvedRefs=False, UnsupportedProtocol), and, with the system running, whatever the
// agent and the controllers make of them.
func meshFixture(t *testing.T, ctx context.Context) string {
	t.Helper()
	prefix := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	ns, err := env.Namespace(ctx, prefix[:min(len(prefix), 40)])
	if err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"orders", "billing"} {
		if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil {
			t.Fatal(err)
		}
	}
	runPod(t, ctx, ns, "orders-0", "orders", "8080,9000=tcp")
	runPod(t, ctx, ns, "orders-1", "orders", "8080,9000=tcp")
	runPod(t, ctx, ns, "billing-0", "billing", "8080")
	route := &gwapiv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-db"},
		Spec: gwapiv1.HTTPRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{
				Group: new(gwapiv1.Group("")), Kind: new(gwapiv1.Kind("Service")), Name: "orders"}}},
			Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{
				BackendObjectReference: gwapiv1.BackendObjectReference{Name: "orders", Port: new(gwapiv1.PortNumber(9000))}}}}}},
		},
	}
	if err := env.Client.Create(ctx, route); err != nil {
		t.Fatal(err)
	}
	return ns
}

// runPod creates a managed pod of ServiceAccount sa on testNode declaring ports, and makes it
// Running with an IP through the status subresource, as a kubelet would (none runs here).
func runPod(t *testing.T, ctx context.Context, ns, name, sa, ports string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels:      map[string]string{registration.LabelManaged: registration.ManagedValue},
			Annotations: map[string]string{portspec.AnnotationPorts: ports}},
		Spec: corev1.PodSpec{NodeName: testNode, ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	n := podHosts.Add(1)
	ip := fmt.Sprintf("127.0.%d.%d", 100+n/250, n%250+1)
	pod.Status.PodIP, pod.Status.PodIPs, pod.Status.Phase = ip, []corev1.PodIP{{IP: ip}}, corev1.PodRunning
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatalf("setting the IP of pod %s: %v", name, err)
	}
	return pod
}

// in is opts for namespace ns.
func in(ns string) Options {
	o := opts
	o.Namespace = ns
	return o
}

// converged waits until the agent has settled every endpoint of ns on Unhealthy (nothing
// listens at the pods' addresses: the last health change the agent writes) and Check then finds
// nothing there: the mesh is converged and will not change by itself.
func converged(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	testenv.Eventually(t, "every endpoint of "+ns+" Unhealthy", func() error {
		var eps meshv1alpha1.MeshEndpointList
		if err := env.Client.List(ctx, &eps, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ep := range eps.Items {
			if ep.Status.Health != meshv1alpha1.HealthUnhealthy {
				return fmt.Errorf("MeshEndpoint %s is %q", ep.Name, ep.Status.Health)
			}
		}
		return nil
	})
	if found, took := Within(ctx, env.Client, in(ns), time.Minute); len(found) > 0 {
		t.Fatalf("the mesh in %s did not converge within %s: %d violations:\n%s", ns, took.Round(time.Millisecond), len(found), list(found))
	} else {
		t.Logf("the mesh in %s converged in %s", ns, took.Round(time.Millisecond))
	}
}

func list(found []Violation) string {
	lines := make([]string, len(found))
	for i, v := range found {
		lines[i] = "  " + v.String()
	}
	return strings.Join(lines, "\n")
}

// frozen stops the system and checks that what it left is converged: a negative control then
// changes one thing, and whatever Check finds is that one thing.
func frozen(t *testing.T, ctx context.Context, ns string, sys system) {
	t.Helper()
	sys.stop()
	if found := Check(ctx, env.Client, in(ns)); len(found) > 0 {
		t.Fatalf("the stopped system left violations before anything was changed:\n%s", list(found))
	}
}

// frozenMesh is the start of every negative control: the mesh fixture in a namespace of its
// own, converged and then frozen, so that the one thing the test changes is all Check finds.
func frozenMesh(t *testing.T) (context.Context, string) {
	t.Helper()
	ctx := testContext(t)
	ns := meshFixture(t, ctx)
	sys := startSystem(t, ns)
	converged(t, ctx, ns)
	frozen(t, ctx, ns, sys)
	return ctx, ns
}

// get reads ns/name into obj or fails the test.
func get(t *testing.T, ctx context.Context, ns, name string, obj client.Object) {
	t.Helper()
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
}

// exactly fails the test unless found is exactly one violation of check on kind ns/name at field.
func exactly(t *testing.T, found []Violation, check, kind, ns, name, field string) Violation {
	t.Helper()
	if len(found) != 1 || found[0].Check != check || found[0].Kind != kind || found[0].Namespace != ns || found[0].Name != name || found[0].Field != field {
		t.Fatalf("want exactly one violation [%s] %s %s/%s %s; got %d:\n%s", check, kind, ns, name, field, len(found), list(found))
	}
	t.Logf("found: %s", found[0])
	return found[0]
}

// TestConvergedMeshHasNoViolations: the agent and the controllers, left alone, converge to a
// state Check finds nothing wrong with (and the state is the one the fixture means: every
// check has something to look at).
func TestConvergedMeshHasNoViolations(t *testing.T) {
	ctx := testContext(t)
	ns := meshFixture(t, ctx)
	startSystem(t, ns)
	converged(t, ctx, ns)

	var eps meshv1alpha1.MeshEndpointList
	var mss meshv1alpha1.MeshServiceList
	if err := env.Client.List(ctx, &eps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(ctx, &mss, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	route := &gwapiv1.HTTPRoute{}
	get(t, ctx, ns, "orders-db", route)
	if len(eps.Items) != 3 || len(mss.Items) != 2 || len(route.Status.Parents) != 1 {
		t.Fatalf("converged on %d MeshEndpoints, %d MeshServices and %d route status entries; the fixture means 3, 2 and 1",
			len(eps.Items), len(mss.Items), len(route.Status.Parents))
	}
	if c := findCondition(route.Status.Parents[0].Conditions, string(gwapiv1.RouteConditionResolvedRefs)); c == nil || c.Reason != string(gwapiv1.RouteReasonUnsupportedProtocol) {
		t.Fatalf("the route's ResolvedRefs is %+v; the fixture means UnsupportedProtocol", c)
	}
}

// TestMissingEndpointIsAViolation: with the agent down, a running pod's MeshEndpoint is
// deleted. The controller, still running, brings orders' status in line with the endpoints
// left; what remains is exactly the lost endpoint.
func TestMissingEndpointIsAViolation(t *testing.T) {
	ctx := testContext(t)
	ns := meshFixture(t, ctx)
	sys := startSystem(t, ns)
	converged(t, ctx, ns)

	sys.stopAgent()
	ep := &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-1"}}
	if err := env.Client.Delete(ctx, ep); err != nil {
		t.Fatal(err)
	}
	var found []Violation
	testenv.Eventually(t, "the controller settles on the endpoints left", func() error {
		found = Check(ctx, env.Client, in(ns))
		if slices.ContainsFunc(found, func(v Violation) bool { return v.Check == CheckMeshServices }) {
			return fmt.Errorf("still:\n%s", list(found))
		}
		return nil
	})
	exactly(t, found, CheckEndpoints, "MeshEndpoint", ns, "orders-1", FieldObject)
}

// TestMeshServicePortCountIsAViolation: a status written with a wrong endpoint count for port
// 8080 (by the controller's own field manager: only the count is wrong) is exactly that.
func TestMeshServicePortCountIsAViolation(t *testing.T) {
	ctx, ns := frozenMesh(t)

	ms := &meshv1alpha1.MeshService{}
	get(t, ctx, ns, "orders", ms)
	i := slices.IndexFunc(ms.Status.Ports, func(p meshv1alpha1.ServicePort) bool { return p.Port == 8080 })
	if i < 0 || ms.Status.Ports[i].Endpoints != 2 {
		t.Fatalf("orders' converged status: ports %+v; want 8080 with 2 endpoints", ms.Status.Ports)
	}
	ms.Status.Ports[i].Endpoints = 5
	if err := env.Client.Status().Update(ctx, ms, client.FieldOwner(controller.FieldManager)); err != nil {
		t.Fatal(err)
	}
	v := exactly(t, Check(ctx, env.Client, in(ns)), CheckMeshServices, "MeshService", ns, "orders", "status.ports[8080].endpoints")
	if v.Want != "2" || v.Got != "5" {
		t.Errorf("want 2, got 5; the violation says want %s, got %s", v.Want, v.Got)
	}
}

// TestUnlistedAccessPolicyIsAViolation: an AccessPolicy governing orders' port 8080, applied
// while the controller is down, is exactly the listing the status lacks.
func TestUnlistedAccessPolicyIsAViolation(t *testing.T) {
	ctx, ns := frozenMesh(t)

	p := &configv1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}, Spec: configv1.AccessPolicySpec{
		TargetRef: &configv1.TargetRef{Kind: configv1.KindService, Name: "orders"}, Ports: []int32{8080}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	v := exactly(t, Check(ctx, env.Client, in(ns)), CheckMeshServices, "MeshService", ns, "orders", "status.ports[8080].accessPolicies")
	if want := `["` + ns + `/api"]`; v.Want != want || v.Got != "absent" {
		t.Errorf("want %s, got absent; the violation says want %s, got %s", want, v.Want, v.Got)
	}
}

// TestGeneratedServicePortsAreAViolation: the generated Service's TCP port renumbered (by the
// controller's own field manager: only the ports are wrong) is exactly that.
func TestGeneratedServicePortsAreAViolation(t *testing.T) {
	ctx, ns := frozenMesh(t)

	svc := &corev1.Service{}
	get(t, ctx, ns, "orders", svc)
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 9000 })
	if i < 0 {
		t.Fatalf("the generated Service has no port 9000: %+v", svc.Spec.Ports)
	}
	svc.Spec.Ports[i].Port = 9001
	if err := env.Client.Update(ctx, svc, client.FieldOwner(controller.FieldManager)); err != nil {
		t.Fatal(err)
	}
	v := exactly(t, Check(ctx, env.Client, in(ns)), CheckServices, "Service", ns, "orders", "spec.ports")
	if !strings.Contains(v.Want, `"port":9000`) || !strings.Contains(v.Got, `"port":9001`) {
		t.Errorf("the violation's want should hold port 9000 and its got 9001: %s", v)
	}
}

// TestRouteConditionIsAViolation: the mesh's ResolvedRefs entry of a route patched to True (by
// the controller's own field manager: only the condition is wrong) is exactly that.
func TestRouteConditionIsAViolation(t *testing.T) {
	ctx, ns := frozenMesh(t)

	route := &gwapiv1.HTTPRoute{}
	get(t, ctx, ns, "orders-db", route)
	c := findCondition(route.Status.Parents[0].Conditions, string(gwapiv1.RouteConditionResolvedRefs))
	c.Status, c.Reason, c.Message = metav1.ConditionTrue, string(gwapiv1.RouteReasonResolvedRefs), "all backends resolved"
	if err := env.Client.Status().Update(ctx, route, client.FieldOwner(controller.FieldManager)); err != nil {
		t.Fatal(err)
	}
	v := exactly(t, Check(ctx, env.Client, in(ns)), CheckRoutes, string(routes.HTTPRoute), ns, "orders-db", "status.parents[Service orders].conditions[ResolvedRefs]")
	if !strings.HasPrefix(v.Want, "False UnsupportedProtocol") || !strings.HasPrefix(v.Got, "True ResolvedRefs") {
		t.Errorf("want False UnsupportedProtocol, got True ResolvedRefs: %s", v)
	}
}

// TestForeignFieldManagerIsAViolation: a MeshService status applied by a field manager of no
// mesh component, with the values it already had (so every other check is content), is exactly
// that writer.
func TestForeignFieldManagerIsAViolation(t *testing.T) {
	ctx, ns := frozenMesh(t)

	ms := &meshv1alpha1.MeshService{}
	get(t, ctx, ns, "orders", ms)
	apply := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": meshv1alpha1.GroupVersion.String(), "kind": "MeshService",
		"metadata": map[string]any{"namespace": ns, "name": "orders"},
		"status":   map[string]any{"endpointsSummary": ms.Status.EndpointsSummary},
	}}
	if err := env.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(apply), client.FieldOwner("intruder"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	v := exactly(t, Check(ctx, env.Client, in(ns)), CheckFieldManagers, "MeshService", ns, "orders", "metadata.managedFields[intruder]")
	if !strings.Contains(v.Got, "f:status") {
		t.Errorf("the violation should say the intruder wrote the status: %s", v)
	}
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
