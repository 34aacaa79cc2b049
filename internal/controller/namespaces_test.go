// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// ignoredNamespace is in the test manager's --ignored-namespaces.
const ignoredNamespace = "ignored-by-controller"

// TestIgnoredNamespaceEndpointsNeverCount: a MeshEndpoint in a namespace the mesh never takes is
// not counted even when it matches a real managed pod (Verified=False NamespaceIgnored), and no
// MeshService is made for it; the same pod and endpoint elsewhere join (the positive control).
func TestIgnoredNamespaceEndpointsNeverCount(t *testing.T) {
	ctx := testContext(t)
	// The namespace is fixed (the manager's flag names it): the test may run again in it.
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ignoredNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ignoredNamespace, Name: "system"}},
	} {
		if err := env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	annotations := declaring(8080, []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP}})
	// The pod's IP names it too: unique, should the test run again in the namespace.
	ip := testenv.PodIP()
	ep := testenv.EndpointOf(t, env.CreatePod(t, ctx, ignoredNamespace, "system-"+strings.ReplaceAll(ip, ".", "-"), "system", "node-a", ip, annotations))
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	got := verdict(t, ctx, ep, metav1.ConditionFalse, meshv1alpha1.EndpointReasonNamespaceIgnored)
	if c := condition(got.Status.Conditions, meshv1alpha1.EndpointConditionVerified); c.Message == "" {
		t.Errorf("NamespaceIgnored without a message")
	}
	if _, err := getMeshService(ctx, ignoredNamespace, "system"); !apierrors.IsNotFound(err) {
		t.Errorf("a MeshService was made in ignored namespace %s (%v)", ignoredNamespace, err)
	}

	ns := namespaceWithSA(t, ctx, "system")
	endpoint(t, ctx, ns, "system-0", "system", meshv1alpha1.HealthHealthy, 8080, 8080, "HTTP")
	serviceReady(t, ctx, ns, "system", 1)
}
