// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/cachewait"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// testNode is the node of the agent that runs for the whole package.
const testNode = "node-a"

var (
	env *testenv.Env
	// loopbackHost hands out distinct loopback addresses to stand in for pod IPs.
	loopbackHost atomic.Int32
)

// testHealth probes fast so tests do not wait.
var testHealth = HealthOptions{Interval: 150 * time.Millisecond, Timeout: 300 * time.Millisecond, FailureThreshold: 2, SuccessThreshold: 1}

func TestMain(m *testing.M) {
	// The binary started again as a proxyless gRPC client (proxyless_sni_test.go) runs no tests.
	if code, ok := proxylessClientProcess(); ok {
		os.Exit(code)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	loopbackHost.Store(10)
	// A stopping agent waits this long for a deleted DaemonSet's replacement (Uninstalling); the
	// tests that delete one wait it out.
	replaceWindow = 2 * time.Second
	testenv.Run(m, &env, createNode(testNode), startAgent(testNode), startMeshServiceController, stopBenchMesh)
}

func createNode(name string) func(*testenv.Env) (func(), error) {
	return func(e *testenv.Env) (func(), error) {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			LabelRegion: "eu-west-1", LabelZone: "eu-west-1a",
		}}}
		return func() {}, e.Client.Create(context.Background(), node)
	}
}

// startAgent runs the agent's loops for node, in-process, against the real API server.
func startAgent(node string) func(*testenv.Env) (func(), error) { return startNamedAgent(node, "") }

// startNamedAgent is startAgent with the pod controller named controllerName (empty: the default),
// so a test can count this agent's reconciles alone (see reconciles).
func startNamedAgent(node, controllerName string) func(*testenv.Env) (func(), error) {
	return func(e *testenv.Env) (func(), error) {
		return startAgentWith(e, e.Config, Options{NodeName: node, Health: testHealth, controllerName: controllerName})
	}
}

// startAgentWith starts an agent with options o, speaking to the API server with cfg's
// credentials.
func startAgentWith(e *testenv.Env, cfg *rest.Config, o Options) (func(), error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  CacheOptions(o.NodeName),
		Client:                 ClientOptions(),
		NewClient:              cachewait.NewClient,
		// Tests start more agents in this process.
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := Setup(mgr, o); err != nil {
		return nil, err
	}
	return testenv.StartManager(mgr)
}

// isolatedFromTheController is a namespace the package's MeshService controller does not see (its
// cache's field selector): a test there writes the controller's Verified condition itself.
const isolatedFromTheController = "isolated-verdicts"

// startMeshServiceController runs the MeshService controller too, to show health feeding it, and
// the route controllers, whose status the view's Routes reads.
func startMeshServiceController(e *testenv.Env) (func(), error) {
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme: e.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: cache.Options{DefaultFieldSelector: fields.OneTermNotEqualSelector("metadata.namespace", isolatedFromTheController)},
	})
	if err != nil {
		return nil, err
	}
	if err := (&controller.MeshServiceReconciler{Client: mgr.GetClient(), MeshDomain: "aether.internal"}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	skipped, err := controller.SetupRouteControllers(mgr)
	if err != nil {
		return nil, err
	}
	if len(skipped) > 0 {
		return nil, fmt.Errorf("the test API server serves no %v: the Gateway API CRDs are missing", skipped)
	}
	return testenv.StartManager(mgr)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func namespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	prefix := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	ns, err := env.Namespace(ctx, prefix[:min(len(prefix), 40)])
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// newPodIP is a fresh loopback address to stand in for a pod IP (tests send traffic only to
// loopback): 127.0.0.12 onwards, then 127.0.1.2 and so on (never .0, .1 or above .251).
func newPodIP() string {
	n := loopbackHost.Add(1)
	return fmt.Sprintf("127.0.%d.%d", n/250, n%250+2)
}

// createPod creates a pod bound to node and sets its IP through the status subresource, as a
// kubelet would.
func createPod(t testing.TB, ctx context.Context, ns, name, node, ip string, managed bool, annotations map[string]string, finalizers ...string) *corev1.Pod {
	t.Helper()
	return createPodAs(t, ctx, ns, name, "payments", node, ip, managed, annotations, finalizers...)
}

// createPodAs is createPod for a pod of ServiceAccount sa (its mesh service's name).
func createPodAs(t testing.TB, ctx context.Context, ns, name, sa, node, ip string, managed bool, annotations map[string]string, finalizers ...string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations, Finalizers: finalizers},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	if managed {
		pod.Labels = map[string]string{LabelManaged: "true"}
	}
	return createRunning(t, ctx, pod, ip)
}

// createRunning creates pod and sets its IP and phase Running through the status subresource,
// as a kubelet would.
func createRunning(t testing.TB, ctx context.Context, pod *corev1.Pod, ip string) *corev1.Pod {
	t.Helper()
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	pod.Status.Phase = corev1.PodRunning
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// listenTCP binds a TCP listener on ip (loopback) at a free port, accepting and closing
// connections, until stop is called.
func listenTCP(t *testing.T, ip string) (port int, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	stop = func() { _ = l.Close() }
	t.Cleanup(stop)
	return l.Addr().(*net.TCPAddr).Port, stop
}

// listenHTTP serves 200 on path (404 elsewhere) on ip at a free port until stop is called.
func listenHTTP(t *testing.T, ip, path string) (port int, stop func()) {
	t.Helper()
	return serveHTTP(t, net.JoinHostPort(ip, "0"), path)
}

// serveHTTP serves 200 on path (404 elsewhere) at addr until stop is called or the test ends,
// and returns the port it listens on.
func serveHTTP(t *testing.T, addr, path string) (port int, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	stop = func() { _ = srv.Close() }
	t.Cleanup(stop)
	return l.Addr().(*net.TCPAddr).Port, stop
}

func getEndpoint(ctx context.Context, ns, name string) (*meshEndpoint, error) {
	ep := &meshEndpoint{}
	return ep, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ep)
}

// registeredEndpoint waits, as what, until the agent has registered ns/name (Registered=True),
// and returns the endpoint as it read then.
func registeredEndpoint(t *testing.T, ctx context.Context, ns, name, what string) *meshEndpoint {
	t.Helper()
	var ep *meshEndpoint
	testenv.Eventually(t, what, func() (err error) {
		if ep, err = getEndpoint(ctx, ns, name); err != nil {
			return err
		}
		if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Registered = %+v", c)
		}
		return nil
	})
	return ep
}

// reconciles is how many reconciles the pod controller named controllerName has finished, whatever
// their result.
func reconciles(t *testing.T, controllerName string) float64 {
	t.Helper()
	n, err := testenv.Counter("controller_runtime_reconcile_total", "controller", controllerName)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dedicatedAgent creates a node of the test's own and starts an agent for it whose controller
// is named after the node; it returns the node's name and a function that stops that agent and
// starts a new one (a restart), returning the new controller's name. Every agent is stopped
// when the test ends.
func dedicatedAgent(t *testing.T, ns string) (node string, restart func() string) {
	t.Helper()
	node = "node-" + ns // its own node, so the test can run again in the same API server
	if _, err := createNode(node)(env); err != nil {
		t.Fatal(err)
	}
	generation := 0
	var stop func()
	start := func() string {
		generation++
		controllerName := fmt.Sprintf("agent-%s-%d", ns, generation)
		var err error
		if stop, err = startNamedAgent(node, controllerName)(env); err != nil {
			t.Fatal(err)
		}
		return controllerName
	}
	start()
	t.Cleanup(func() { stop() })
	return node, func() string { stop(); return start() }
}
