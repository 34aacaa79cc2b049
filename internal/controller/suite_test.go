// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/cachewait"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// env is this package's real kube-apiserver and etcd, with config/admission's node-authority
// policy; the reconcilers under test run in a manager connected to it, started once for the
// package.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(false)))
	testenv.Run(m, &env, testenv.InstallNodeAuthority, startManager)
}

// startManager runs the controllers under test against env until the package's tests end.
func startManager(e *testenv.Env) (stop func(), err error) {
	cacheOptions := CacheOptions() // the manager's own: managed pods only, trimmed
	cacheOptions.DefaultFieldSelector = outsideIsolated()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Cache:                  cacheOptions,
		Client:                 ClientOptions(), // the manager's own: reads see its earlier writes
		NewClient:              cachewait.NewClient,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	if err := (&MeshServiceReconciler{
		Client:     mgr.GetClient(),
		Recorder:   mgr.GetEventRecorder("aether-controller"),
		MeshDomain: "aether.internal",
		Ignored:    registration.IgnoredNamespaces{ignoredNamespace: true},
	}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&EndpointPolicyReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&AccessPolicyReconciler{Client: mgr.GetClient(), TrustDomain: "aether.internal"}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if skipped, err := SetupRouteControllers(mgr); err != nil || len(skipped) > 0 {
		return nil, fmt.Errorf("route controllers: skipped %v: %w", skipped, err)
	}
	return testenv.StartManager(mgr)
}

// isolatedNamespaces are out of the package manager's sight (its cache's field selector): a test
// there runs a reconciler of its own (called directly, or in a manager of its own) alone.
var isolatedNamespaces = []string{"isolated-reads", "isolated-burst", "isolated-trickle", "isolated-noissuer", "isolated-verdict", "isolated-prompt", "isolated-lagging", "isolated-headless"}

// outsideIsolated selects every object outside isolatedNamespaces.
func outsideIsolated() fields.Selector {
	var outside []fields.Selector
	for _, ns := range isolatedNamespaces {
		outside = append(outside, fields.OneTermNotEqualSelector("metadata.namespace", ns))
	}
	return fields.AndSelectors(outside...)
}

// isolated creates isolated namespace ns (one of isolatedNamespaces) with ServiceAccount sa.
func isolated(t *testing.T, ctx context.Context, ns, sa string) string {
	t.Helper()
	if !slices.Contains(isolatedNamespaces, ns) {
		t.Fatalf("namespace %s is not one of the isolated ones %v", ns, isolatedNamespaces)
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// namespaceWithSA makes a namespace for one test, with a ServiceAccount of the given name.
func namespaceWithSA(t *testing.T, ctx context.Context, sa string) string {
	t.Helper()
	prefix := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	ns, err := env.Namespace(ctx, prefix[:min(len(prefix), 40)])
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// endpoint creates a managed pod on node-a whose annotations declare primary and ports, and its
// MeshEndpoint as the agent derives it (registration.Registration), then sets its health through
// the status subresource. It returns the endpoint once the controller has verified it against
// the pod (Verified=True). ports alternate number and protocol: 8080, "HTTP", 9000, "TCP".
func endpoint(t *testing.T, ctx context.Context, ns, name, service string, health meshv1alpha1.Health, primary int32, ports ...any) *meshv1alpha1.MeshEndpoint {
	t.Helper()
	var want []meshv1alpha1.PortProtocol
	for i := 0; i < len(ports); i += 2 {
		want = append(want, meshv1alpha1.PortProtocol{Port: int32(ports[i].(int)), Protocol: meshv1alpha1.Protocol(ports[i+1].(string))})
	}
	pod := env.CreatePod(t, ctx, ns, name, service, "node-a", testenv.PodIP(), declaring(primary, want))
	ep := testenv.EndpointOf(t, pod)
	if ep.Spec.PrimaryPort != primary || !slices.Equal(ep.Spec.Ports, want) {
		t.Fatalf("the pod's annotations %v declare %s (primary %d), want %s (primary %d)", pod.Annotations,
			ep.Spec.PortsSummary, ep.Spec.PrimaryPort, meshv1alpha1.FormatPorts(want), primary)
	}
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatalf("creating MeshEndpoint %s: %v", name, err)
	}
	setHealth(t, ctx, ep, health)
	return verdict(t, ctx, ep, metav1.ConditionTrue, meshv1alpha1.EndpointReasonPodMatches)
}

// declaring is the annotations that declare primary and ports, written by the grammar's own formatter.
func declaring(primary int32, ports []meshv1alpha1.PortProtocol) map[string]string {
	return map[string]string{portspec.AnnotationPort: fmt.Sprint(primary), portspec.AnnotationPorts: portspec.FormatPortsAnnotation(ports)}
}

// setHealth sets the endpoint's health with a merge patch of that field alone, which keeps the
// controller's Verified condition whenever it lands.
func setHealth(t *testing.T, ctx context.Context, ep *meshv1alpha1.MeshEndpoint, health meshv1alpha1.Health) {
	t.Helper()
	patch := client.MergeFrom(ep.DeepCopy())
	ep.Status.Health = health
	if err := env.Client.Status().Patch(ctx, ep, patch); err != nil {
		t.Fatalf("setting the health of %s: %v", ep.Name, err)
	}
}

// verdict waits until the endpoint carries Verified with status and reason, and returns it.
func verdict(t *testing.T, ctx context.Context, ep *meshv1alpha1.MeshEndpoint, status metav1.ConditionStatus, reason string) *meshv1alpha1.MeshEndpoint {
	t.Helper()
	fresh := &meshv1alpha1.MeshEndpoint{}
	testenv.Eventually(t, fmt.Sprintf("MeshEndpoint %s Verified=%s %s", ep.Name, status, reason), func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ep), fresh); err != nil {
			return err
		}
		if c := condition(fresh.Status.Conditions, meshv1alpha1.EndpointConditionVerified); c.Status != status || c.Reason != reason {
			return fmt.Errorf("Verified=%s %s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	return fresh
}

func getMeshService(ctx context.Context, ns, name string) (*meshv1alpha1.MeshService, error) {
	ms := &meshv1alpha1.MeshService{}
	return ms, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ms)
}

func condition(conds []metav1.Condition, t string) metav1.Condition {
	for _, c := range conds {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}
