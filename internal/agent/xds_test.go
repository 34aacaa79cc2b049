// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacnetworkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/aether-mesh/aether-operator/api/config/v1"
	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/accesslog"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/testlog"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// testNetNSTemplate stands in for the CNI plugin in these tests (the paths need not exist: no
// Envoy reads them here).
const testNetNSTemplate = "/var/run/netns/test-{{.Namespace}}-{{.Name}}"

// xdsAgent is an agent serving xDS for a node of a test's own.
type xdsAgent struct {
	node    string
	address string // where it serves xDS
	// proxylessAddress is where it serves proxyless gRPC clients (startProxylessAgent); empty
	// when it does not.
	proxylessAddress string
	options          Options
	mgr              ctrl.Manager
	// caller is the pod the test's processes run as, for the proxyless socket (actAs); serverLogs
	// are the xDS server's log lines.
	caller     *actingPod
	serverLogs *testlog.Lines
	// clock is the agent's clock, which times drain phase 2; the test steps it.
	clock *clocktesting.FakeClock
}

// actingPod is the pod UID the agent's sockets read for every process of the test (the test and
// the clients it starts): the seam at the one step a test cannot make real for several pods at
// once, a process's pod (internal/xdsserver's TestProxylessCallerFromItsCgroup and
// TestNodeSocketServesOnlyTheNodeEnvoy read real processes in real cgroups). What the agent does
// with the UID (which pod of its node it is, whether the announced node ID is that pod's, whether
// it is the node Envoy's) is real. Until the test acts as a pod its processes are the node's own,
// which the node's socket serves (testNodeEnvoy).
type actingPod struct{ uid atomic.Pointer[string] }

func (a *actingPod) podOf(int32) (string, error) {
	if uid := a.uid.Load(); uid != nil {
		return *uid, nil
	}
	return "", fmt.Errorf("the test acts as no pod yet: %w", proxyless.ErrNoPod)
}

// testNodeEnvoy are the callers an agent of the tests serves on its node's socket: the node's own
// processes (the test's, acting as no pod), and the pods of namespace ns labelled as the node
// Envoy's DaemonSet labels its pods (config/envoy).
func testNodeEnvoy(ns string) xdsserver.NodeEnvoy {
	return xdsserver.NodeEnvoy{Host: true, Namespace: ns, Pods: labels.SelectorFromSet(labels.Set{testEnvoyLabel: testEnvoyLabelValue})}
}

// The node Envoy's pods' label, config/envoy's.
const testEnvoyLabel, testEnvoyLabelValue = "app.kubernetes.io/name", "aether-envoy"

// actAs makes the test's processes, from their next connection to either socket, processes of
// pod.
func (a *xdsAgent) actAs(pod *corev1.Pod) {
	uid := string(pod.UID)
	a.caller.uid.Store(&uid)
}

// startXDSAgent creates a node of the test's own (so no other test's pods are on it) and runs an
// agent for it with the cluster view and xDS serving on a unix socket in a temporary directory,
// until the test ends; configure, if given, changes its xDS options first.
func startXDSAgent(t *testing.T, ns string, configure ...func(*XDSOptions)) *xdsAgent {
	return startXDSAgentServing(t, ns, false, configure...)
}

// startXDSAgentServing is startXDSAgent, serving proxyless gRPC clients too on a second socket
// when serveProxyless.
func startXDSAgentServing(t *testing.T, ns string, serveProxyless bool, configure ...func(*XDSOptions)) *xdsAgent {
	t.Helper()
	return startXDSAgentWith(t, ns, serveProxyless, func(o *Options) {
		for _, c := range configure {
			c(o.XDS)
		}
	})
}

// startXDSAgentWith is startXDSAgentServing with change making any change to the agent's options
// first (CNI hand-over, say).
func startXDSAgentWith(t *testing.T, ns string, serveProxyless bool, change func(*Options)) *xdsAgent {
	t.Helper()
	return startXDSAgentAs(t, ns, env.Config, metricsserver.Options{BindAddress: "0"}, serveProxyless, change)
}

// startXDSAgentAs is startXDSAgentWith as the user of cfg, with metrics as its manager's metrics
// server.
func startXDSAgentAs(t *testing.T, ns string, cfg *rest.Config, metrics metricsserver.Options, serveProxyless bool, change func(*Options)) *xdsAgent {
	t.Helper()
	node := "node-" + ns
	if _, err := createNode(node)(env); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	listen := func(path string) net.Listener {
		addr, err := xdsserver.ParseAddress("unix://" + filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		listener, err := xdsserver.Listen(addr)
		if err != nil {
			t.Fatal(err)
		}
		return listener
	}
	caller, serverLogs := &actingPod{}, &testlog.Lines{}
	// The access-log server as the agent binary wires it: on the xDS server, told every build's
	// mesh, counting on the agent's registry.
	accessLog := accesslog.New(accesslog.Options{NodeID: node, Log: serverLogs.Logger(0).WithName("access-log-" + ns), Lines: true})
	serverOptions := xdsserver.Options{Listener: listen("xds.sock"), PodOfProcess: caller.podOf, NodeEnvoy: testNodeEnvoy(ns),
		Log: serverLogs.Logger(1).WithName("xds-" + ns), AccessLog: accessLog}
	if serveProxyless {
		serverOptions.ProxylessListener = listen("proxyless/xds.sock")
	}
	view, err := NewView(env.Config, env.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	template, err := ParseNetNSPathTemplate(testNetNSTemplate)
	if err != nil {
		t.Fatal(err)
	}
	server := xdsserver.New(serverOptions)
	fake := clocktesting.NewFakeClock(time.Now())
	o := Options{NodeName: node, Health: testHealth, View: view, controllerName: "agent-" + ns, clock: fake, XDS: &XDSOptions{
		Server: server, MeshDomain: "aether.internal", CaptureMode: model.CaptureSurface, NetNS: NewNetNS(), NetNSPathTemplate: template,
		AccessLog: accessLog,
	}}
	change(&o)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: env.Scheme, Metrics: metrics, HealthProbeBindAddress: "0",
		Cache: CacheOptions(node), Controller: config.Controller{SkipNameValidation: new(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr, o); err != nil {
		t.Fatal(err)
	}
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return &xdsAgent{node: node, address: server.Address(), proxylessAddress: server.ProxylessAddress(), options: o, mgr: mgr,
		caller: caller, serverLogs: serverLogs, clock: fake}
}

// dial opens a real ADS stream to the agent as its node's Envoy, until the test ends.
func (a *xdsAgent) dial(t *testing.T, ctx context.Context) *xdstest.Client {
	t.Helper()
	c, err := xdstest.Dial(ctx, a.address, a.node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// listenHTTPAt serves 200 on path at ip:port until the test ends (pods of one service declare
// the same port).
func listenHTTPAt(t *testing.T, ip string, port int, path string) (stop func()) {
	t.Helper()
	_, stop = serveHTTP(t, net.JoinHostPort(ip, strconv.Itoa(port)), path)
	return stop
}

func buildsTotal(t *testing.T) float64 {
	t.Helper()
	n, err := testenv.Counter("aether_agent_xds_builds_total", "result", BuildBuilt)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestXDSServing: an agent with xDS on serves its node's snapshot on its socket to a real ADS
// client (node ID = the node's name) from the start, and rebuilds when a pod of its node comes
// and goes healthy. (What the snapshot holds is the builder's: TestXDSEndpointsFollowHealth.)
func TestXDSServing(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a := startXDSAgent(t, ns)
	c := a.dial(t, ctx)
	if err := c.Await(ctx, func(s xdstest.State) error {
		for _, typ := range []string{xdstest.Clusters, xdstest.Listeners} {
			if len(s.Received(typ)) == 0 || s.Versions[typ] == "" {
				return fmt.Errorf("no %s response accepted yet", typ)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("the agent served no snapshot for node %s: %v", a.node, err)
	}
	if v := a.options.XDS.Server.Versions(a.node); v[xdstest.Listeners] != c.State().Versions[xdstest.Listeners] {
		t.Errorf("the client accepted LDS %s, the server serves %v", c.State().Versions[xdstest.Listeners], v)
	}

	before := buildsTotal(t)
	ip := newPodIP()
	port, stop := listenHTTP(t, ip, "/healthz")
	createPod(t, ctx, ns, "a", a.node, ip, true, map[string]string{
		portspec.AnnotationPort: strconv.Itoa(port), portspec.AnnotationHealthPath: "/healthz"})
	healthIs(t, ns, "a", meshv1alpha1.HealthHealthy)
	testenv.Eventually(t, "a rebuild after pod a turned healthy", func() error {
		if n := buildsTotal(t); n <= before {
			return fmt.Errorf("aether_agent_xds_builds_total{result=built} still %v", n)
		}
		return nil
	})
	before = buildsTotal(t)
	stop()
	healthIs(t, ns, "a", meshv1alpha1.HealthUnhealthy)
	testenv.Eventually(t, "a rebuild after pod a's health flipped", func() error {
		if n := buildsTotal(t); n <= before {
			return fmt.Errorf("aether_agent_xds_builds_total{result=built} still %v", n)
		}
		return nil
	})
	if err := Setup(a.mgr, Options{NodeName: a.node, XDS: a.options.XDS}); err != errNoView {
		t.Errorf("Setup with xDS and no view: %v, want %v", err, errNoView)
	}
}

// TestXDSMeshLister: the model the publisher builds from its caches: the cluster's services; the
// node's locality; and, of the node's pods, the meshed ones with a verified MeshEndpoint, each
// with its MeshService's identity, its endpoint's address and ports, its netns (the one recorded,
// else the template's) and its capture mode (its annotation's, else the agent's; an invalid
// annotation gets a Warning Event naming the value and the valid modes). Without a template, a
// pod with no recorded netns is left out.
func TestXDSMeshLister(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a := startXDSAgent(t, ns)
	annotated := func(mode string) map[string]string {
		out := map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9000=tcp"}
		if mode != "" {
			out[model.AnnotationCaptureMode] = mode
		}
		return out
	}
	createPod(t, ctx, ns, "scoped", a.node, newPodIP(), true, annotated("scoped"))
	invalid := createPod(t, ctx, ns, "invalid", a.node, newPodIP(), true, annotated("everything"))
	recorded := createPod(t, ctx, ns, "recorded", a.node, newPodIP(), true, annotated(""))
	createPod(t, ctx, ns, "unmanaged", a.node, newPodIP(), false, annotated(""))
	if err := a.options.XDS.NetNS.Record(recorded.UID, "/run/netns/cni-recorded"); err != nil {
		t.Fatal(err)
	}

	p := newPublisher(a.mgr.GetCache(), a.mgr.GetClient(), logr.Discard(), a.options)
	want := map[string]struct {
		netns   string
		capture model.CaptureMode
	}{
		"scoped":   {"/var/run/netns/test-" + ns + "-scoped", model.CaptureScoped},
		"invalid":  {"/var/run/netns/test-" + ns + "-invalid", model.CaptureSurface},
		"recorded": {"/run/netns/cni-recorded", model.CaptureSurface},
	}
	var mesh model.Mesh
	// The pods come from the node's cache, the service from the cluster view: each catches up on
	// its own, so both are waited for.
	testenv.Eventually(t, "the three meshed pods and their service in the model", func() error {
		var err error
		if mesh, err = p.mesh(ctx); err != nil {
			return err
		}
		if len(mesh.Pods) != len(want) {
			return fmt.Errorf("%d pods in the model, want %d: %+v", len(mesh.Pods), len(want), mesh.Pods)
		}
		if !slices.ContainsFunc(mesh.Services, func(s model.Service) bool { return s.Namespace == ns && s.Name == "payments" && s.Endpoints == 3 }) {
			return fmt.Errorf("the model lacks service %s/payments with its 3 endpoints", ns)
		}
		return nil
	})
	ms := &meshv1alpha1.MeshService{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "payments"}, ms); err != nil {
		t.Fatal(err)
	}
	for _, pod := range mesh.Pods {
		w := want[pod.Name]
		ep, err := getEndpoint(ctx, ns, pod.Name)
		if err != nil {
			t.Fatal(err)
		}
		if pod.Namespace != ns || pod.Service != "payments" || pod.Identity == "" || pod.Identity != ms.Status.Identity ||
			pod.NetNS != w.netns || pod.Capture != w.capture || pod.Address != ep.Spec.Address || pod.Primary != 8080 ||
			!slices.Equal(pod.Ports, ep.Spec.Ports) || pod.UID != ep.Spec.PodUID {
			t.Errorf("pod %s: %+v; want netns %s, capture %s, identity %s and its endpoint's address and ports", pod.Name, pod, w.netns, w.capture, ms.Status.Identity)
		}
	}
	if !slices.IsSortedFunc(mesh.Pods, func(x, y model.LocalPod) int { return strings.Compare(x.Name, y.Name) }) {
		t.Error("the model's pods are not sorted")
	}
	if mesh.Domain != "aether.internal" || mesh.Node.Name != a.node || mesh.Node.Locality != (meshv1alpha1.Locality{Region: "eu-west-1", Zone: "eu-west-1a"}) {
		t.Errorf("mesh domain %q, node %+v", mesh.Domain, mesh.Node)
	}
	// The issuer is the agent's (--identity-issuer): spire unless told none, and then the build
	// of the same caches has no raw-TCP cluster (payments declares 9000=tcp).
	if mesh.Issuer != workloadidentity.SPIRE {
		t.Errorf("the model's identity issuer is %q by default, want spire", mesh.Issuer)
	}
	noIssuer := a.options
	noIssuerXDS := *a.options.XDS
	noIssuerXDS.Issuer = workloadidentity.NoIssuer
	noIssuer.XDS = &noIssuerXDS
	without, err := newPublisher(a.mgr.GetCache(), a.mgr.GetClient(), logr.Discard(), noIssuer).mesh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for issuer, m := range map[workloadidentity.Issuer]model.Mesh{workloadidentity.SPIRE: mesh, workloadidentity.NoIssuer: without} {
		if m.Issuer != issuer {
			t.Errorf("the model's identity issuer is %q, want %q", m.Issuer, issuer)
		}
		res, err := xds.Build(m)
		if err != nil {
			t.Fatal(err)
		}
		tcp := slices.ContainsFunc(res.Clusters, func(c *clusterv3.Cluster) bool { return strings.HasPrefix(c.GetName(), "tcp:") })
		if tcp != issuer.Issues() {
			t.Errorf("issuer %s: a raw-TCP cluster in the node's configuration: %v", issuer, tcp)
		}
	}

	testenv.Eventually(t, "the Warning Event on the invalid capture mode", func() error {
		var events eventsv1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		var notes []string
		for _, e := range events.Items {
			if e.Regarding.UID == invalid.UID && e.Reason == ReasonInvalidCaptureMode && e.Type == corev1.EventTypeWarning {
				notes = append(notes, e.Note)
			}
		}
		wantNote := `aether.io/capture-mode: capture mode "everything" is none of "scoped", "surface", "all"; the agent's mode "surface" (--capture-mode) applies`
		if len(notes) != 1 || notes[0] != wantNote {
			return fmt.Errorf("events %q, want one saying %q", notes, wantNote)
		}
		return nil
	})

	// Without the template, only the pod whose netns was recorded has a proxy.
	noTemplate := a.options
	xdsOptions := *a.options.XDS
	xdsOptions.NetNSPathTemplate = nil
	noTemplate.XDS = &xdsOptions
	mesh, err = newPublisher(a.mgr.GetCache(), a.mgr.GetClient(), logr.Discard(), noTemplate).mesh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(mesh.Pods) != 1 || mesh.Pods[0].Name != "recorded" {
		t.Errorf("without a netns template the model holds %+v, want the recorded pod alone", mesh.Pods)
	}
	a.options.XDS.NetNS.Forget(recorded.UID)
	if mesh, err = newPublisher(a.mgr.GetCache(), a.mgr.GetClient(), logr.Discard(), noTemplate).mesh(ctx); err != nil || len(mesh.Pods) != 0 {
		t.Errorf("after Forget, without a template: %+v, %v; want no pod", mesh.Pods, err)
	}
}

// TestXDSEndpointsFollowHealth (needs internal/xds's Build): a real ADS client, as the node's
// Envoy, gets the load assignment of the service's port listing a healthy pod; when that pod's
// health flips, an EDS update says so, and no listener update comes with it: the first LDS
// response after the flip is the one carrying a pod created afterwards (same service, same port,
// so only its own listeners are new).
func TestXDSEndpointsFollowHealth(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a := startXDSAgent(t, ns)
	ipA, ipB := newPodIP(), newPodIP()
	port, stopA := listenHTTP(t, ipA, "/healthz")
	listenHTTPAt(t, ipB, port, "/healthz")
	annotations := map[string]string{portspec.AnnotationPort: strconv.Itoa(port), portspec.AnnotationHealthPath: "/healthz"}
	createPod(t, ctx, ns, "a", a.node, ipA, true, annotations)
	healthIs(t, ns, "a", meshv1alpha1.HealthHealthy)

	assignment := xds.LoadAssignment(xds.FQDN("payments", ns, "aether.internal"), int32(port))
	listenerA := xds.CaptureListener(xds.PodKey(ns, "a"))
	c := a.dial(t, ctx)
	// Bounded: until the builder lands this is where the test stops.
	built, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if err := c.Await(built, func(s xdstest.State) error {
		lb := xdstest.LbEndpoint(s.LoadAssignment(assignment), ipA)
		if lb.GetHealthStatus().String() != "HEALTHY" {
			return fmt.Errorf("load assignment %s: pod a (%s) is %v, want HEALTHY: %v", assignment, ipA, lb.GetHealthStatus(), s.LoadAssignment(assignment))
		}
		if _, ok := s.Resources[xdstest.Listeners][listenerA]; !ok {
			return fmt.Errorf("no listener %s", listenerA)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ldsBefore := len(c.State().Received(xdstest.Listeners))

	stopA()
	healthIs(t, ns, "a", meshv1alpha1.HealthUnhealthy)
	if err := c.Await(ctx, func(s xdstest.State) error {
		if lb := xdstest.LbEndpoint(s.LoadAssignment(assignment), ipA); lb != nil && lb.GetHealthStatus().String() == "HEALTHY" {
			return fmt.Errorf("load assignment %s still lists pod a HEALTHY", assignment)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	createPod(t, ctx, ns, "b", a.node, ipB, true, annotations)
	listenerB := xds.CaptureListener(xds.PodKey(ns, "b"))
	if err := c.Await(ctx, func(s xdstest.State) error {
		if _, ok := s.Resources[xdstest.Listeners][listenerB]; !ok {
			return fmt.Errorf("no listener %s", listenerB)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lds := c.State().Received(xdstest.Listeners)[ldsBefore:]
	if !slices.Contains(lds[0].Names, listenerB) {
		t.Errorf("LDS responses after the health flip: %+v; the first should carry %s (an earlier one came from the flip)", lds, listenerB)
	}
}

// servedRoute reports whether a route configuration the client accepted has a route named name.
func servedRoute(s xdstest.State, name string) bool {
	for _, m := range s.Resources[xdstest.Routes] {
		rc, ok := m.(*routev3.RouteConfiguration)
		if !ok {
			continue
		}
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if r.GetName() == name {
					return true
				}
			}
		}
	}
	return false
}

// TestXDSServesAcceptedRoutes: a route the controller accepts reaches the node's Envoy (the
// publisher lists View.Routes, and a route's status change triggers a rebuild): the served route
// configuration carries its rule; once the route changes to a spec the controller refuses, the
// served configuration no longer does.
func TestXDSServesAcceptedRoutes(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a := startXDSAgent(t, ns)
	createPod(t, ctx, ns, "a", a.node, newPodIP(), true, map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9000=tcp"})
	c := a.dial(t, ctx)
	route := meshHTTPRoute(ns, "split", "payments", 8080, "payments", 8080, 1)
	if err := env.Client.Create(ctx, route); err != nil {
		t.Fatal(err)
	}
	rule := xds.GatewayRoute(string(model.HTTPRoute), ns, "split", 0, 0)
	if err := c.Await(ctx, func(s xdstest.State) error {
		if !servedRoute(s, rule) {
			return fmt.Errorf("no served route configuration has route %s", rule)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r := &gwapiv1.HTTPRoute{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(route), r); err != nil {
			return err
		}
		r.Spec.Rules[0].BackendRefs[0].Port = new(gwapiv1.PortNumber(9000)) // a TCP port: UnsupportedProtocol
		return env.Client.Update(ctx, r)
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Await(ctx, func(s xdstest.State) error {
		if servedRoute(s, rule) {
			return fmt.Errorf("route %s is still served", rule)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// servedInboundRBAC are, per chain of the served inbound listener of pod namespace/name, the RBAC
// policy names its RBAC filter carries (nil: no filter).
func servedInboundRBAC(s xdstest.State, namespace, name string) map[string][]string {
	out := map[string][]string{}
	for _, m := range s.Resources[xdstest.Listeners] {
		l, ok := m.(*listenerv3.Listener)
		if !ok || l.GetName() != xds.InboundListener(xds.PodKey(namespace, name)) {
			continue
		}
		for _, fc := range append(slices.Clone(l.GetFilterChains()), l.GetDefaultFilterChain()) {
			for _, f := range fc.GetFilters() {
				r := &rbacnetworkv3.RBAC{}
				if f.GetName() == xds.NetworkRBACFilter && f.GetTypedConfig().UnmarshalTo(r) == nil {
					out[fc.GetName()] = slices.Sorted(maps.Keys(r.GetRules().GetPolicies()))
				}
			}
		}
	}
	return out
}

// TestXDSServesAccessPolicies: the agent watches AccessPolicies whatever else is on: one that
// governs the TCP port of the node's pod puts its rule on the pod's inbound chain for that port,
// within a rebuild, and only there; deleted, the chain is open again.
func TestXDSServesAccessPolicies(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a := startXDSAgent(t, ns)
	createPod(t, ctx, ns, "a", a.node, newPodIP(), true, map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9000=tcp"})
	c := a.dial(t, ctx)
	if err := c.Await(ctx, func(s xdstest.State) error {
		if _, ok := servedInboundRBAC(s, ns, "a")[xds.InboundTCPChain(9000)]; ok {
			return fmt.Errorf("chain %s carries an RBAC filter before any policy", xds.InboundTCPChain(9000))
		}
		for _, m := range s.Resources[xdstest.Listeners] {
			if l, ok := m.(*listenerv3.Listener); ok && l.GetName() == xds.InboundListener(xds.PodKey(ns, "a")) {
				return nil
			}
		}
		return fmt.Errorf("pod a has no inbound listener yet")
	}); err != nil {
		t.Fatal(err)
	}
	policy := &configv1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments-tcp"}, Spec: configv1.AccessPolicySpec{
		TargetRef: &configv1.TargetRef{Kind: "Service", Name: "payments"}, Ports: []int32{9000},
		Rules: []configv1.AccessRule{{From: []configv1.AccessSource{{Namespace: "web"}}}},
	}}
	if err := env.Client.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{xds.InboundTCPChain(9000): {ns + "/payments-tcp#0"}}
	if err := c.Await(ctx, func(s xdstest.State) error {
		if got := servedInboundRBAC(s, ns, "a"); !maps.EqualFunc(got, want, slices.Equal) {
			return fmt.Errorf("pod a's inbound RBAC filters: %v, want %v", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, policy); err != nil {
		t.Fatal(err)
	}
	if err := c.Await(ctx, func(s xdstest.State) error {
		if got := servedInboundRBAC(s, ns, "a"); len(got) > 0 {
			return fmt.Errorf("pod a's inbound RBAC filters after the policy's deletion: %v, want none", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestXDSHopHTTP3: an agent with HopHTTP3 (--hop-http3) serves a meshed pod's inbound QUIC
// listener beside its inbound listener; one without it (the default) serves the inbound listener
// alone.
func TestXDSHopHTTP3(t *testing.T) {
	ctx := testContext(t)
	for _, on := range []bool{true, false} {
		ns := namespace(t, ctx)
		a := startXDSAgent(t, ns, func(o *XDSOptions) { o.HopHTTP3 = on })
		createPod(t, ctx, ns, "a", a.node, newPodIP(), true, map[string]string{portspec.AnnotationPort: "8080"})
		c := a.dial(t, ctx)
		if err := c.Await(ctx, func(s xdstest.State) error {
			names := map[string]bool{}
			for _, m := range s.Resources[xdstest.Listeners] {
				if l, ok := m.(*listenerv3.Listener); ok {
					names[l.GetName()] = true
				}
			}
			pod := xds.PodKey(ns, "a")
			if !names[xds.InboundListener(pod)] {
				return fmt.Errorf("pod a has no inbound listener yet")
			}
			if quic := names[xds.InboundQUICListener(pod)]; quic != on {
				return fmt.Errorf("with HopHTTP3 %v, pod a's inbound QUIC listener served: %v", on, quic)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}
