// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// env is this package's real kube-apiserver and etcd; the reconcilers under test run in a
// manager connected to it, started once for the package.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(false)))
	testenv.Run(m, &env, startManager)
}

// startManager runs the controllers under test against env until the package's tests end.
func startManager(e *testenv.Env) (stop func(), err error) {
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
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
	}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if skipped, err := SetupRouteControllers(mgr); err != nil || len(skipped) > 0 {
		return nil, fmt.Errorf("route controllers: skipped %v: %w", skipped, err)
	}
	return testenv.StartManager(mgr)
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

// endpoint creates a MeshEndpoint as the agent does (spec, then status.health through the status
// subresource). ports alternate number and protocol: 8080, "HTTP", 9000, "TCP".
func endpoint(t *testing.T, ctx context.Context, ns, name, service string, health meshv1alpha1.Health, primary int32, ports ...any) *meshv1alpha1.MeshEndpoint {
	t.Helper()
	ep := &meshv1alpha1.MeshEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: meshv1alpha1.MeshEndpointSpec{
			ServiceName: service, PodName: name, PodUID: "uid-" + name, NodeName: "node-a",
			Address: "127.0.0.1", PrimaryPort: primary,
		},
	}
	for i := 0; i < len(ports); i += 2 {
		ep.Spec.Ports = append(ep.Spec.Ports, meshv1alpha1.PortProtocol{Port: int32(ports[i].(int)), Protocol: meshv1alpha1.Protocol(ports[i+1].(string))})
	}
	ep.Spec.PortsSummary = meshv1alpha1.FormatPorts(ep.Spec.Ports)
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatalf("creating MeshEndpoint %s: %v", name, err)
	}
	ep.Status.Health = health
	if err := env.Client.Status().Update(ctx, ep); err != nil {
		t.Fatalf("setting the health of %s: %v", name, err)
	}
	return ep
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
