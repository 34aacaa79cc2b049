// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/meshservice"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// adoptable is a namespace of its own with ServiceAccount web, a user's Service web created in it
// (usersService), and the endpoint of pod web-0 behind that Service.
func adoptable(t *testing.T, ctx context.Context) (string, *corev1.Service) {
	t.Helper()
	ns := namespaceWithSA(t, ctx, "web")
	users := usersService(ns, "web", "web")
	if err := env.Client.Create(ctx, users); err != nil {
		t.Fatal(err)
	}
	appEndpoint(t, ctx, ns, "web-0", "web", "web")
	return ns, users
}

// usersService is a Service a user wrote before the workload joined the mesh: ClusterIP,
// selecting app=<app>, port 8080.
func usersService(ns, name, app string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// appEndpoint is endpoint() for a pod that also carries the label app=<app>: the pod a user's
// Service selects.
func appEndpoint(t *testing.T, ctx context.Context, ns, name, service, app string) *meshv1alpha1.MeshEndpoint {
	t.Helper()
	pod := env.CreatePod(t, ctx, ns, name, service, "node-a", testenv.PodIP(), declaring(8080, []meshv1alpha1.PortProtocol{{Port: 8080, Protocol: "HTTP"}}))
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Labels["app"] = app
	if err := env.Client.Patch(ctx, pod, patch); err != nil {
		t.Fatal(err)
	}
	ep := testenv.EndpointOf(t, pod)
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	setHealth(t, ctx, ep, healthy)
	return verdict(t, ctx, ep, metav1.ConditionTrue, meshv1alpha1.EndpointReasonPodMatches)
}

// serviceReadyReason waits until MeshService name's ServiceReady has reason and returns it.
func serviceReadyReason(t *testing.T, ctx context.Context, ns, name, reason string) *meshv1alpha1.MeshService {
	t.Helper()
	var ms *meshv1alpha1.MeshService
	testenv.Eventually(t, "ServiceReady "+reason, func() (err error) {
		if ms, err = getMeshService(ctx, ns, name); err != nil {
			return err
		}
		if c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionServiceReady); c.Reason != reason || ms.Status.ObservedGeneration != ms.Generation {
			return fmt.Errorf("ServiceReady %s %s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	return ms
}

// TestExistingServiceAdopted: a user's ClusterIP Service that selects exactly the service's pods
// is used read-only: its cluster IP is the VIP, ServiceReady=True ExistingService names it and
// what its ports reach, and across 50 reconciles (each driven by a change of the MeshService and
// awaited on the controller's reconcile count) its resourceVersion and managedFields never move.
// The negative control: a change of the Service by its owner is seen by the same comparison.
func TestExistingServiceAdopted(t *testing.T) {
	ctx := testContext(t)
	ns, users := adoptable(t, ctx)
	appEndpoint(t, ctx, ns, "web-1", "web", "web")

	ms := serviceReadyReason(t, ctx, ns, "web", meshv1alpha1.ServiceReasonExistingService)
	c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionServiceReady)
	if c.Status != metav1.ConditionTrue || ms.Status.VIP != users.Spec.ClusterIP || users.Spec.ClusterIP == "" {
		t.Fatalf("ServiceReady %s, vip %q, want True and the Service's cluster IP %q", c.Status, ms.Status.VIP, users.Spec.ClusterIP)
	}
	for _, want := range []string{"Service " + ns + "/web existed before the mesh", "cluster IP " + users.Spec.ClusterIP,
		"never writes it", "8080/TCP to the pods' port 8080", "<name>:18081", "<name>:8080"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("ServiceReady's message lacks %q: %s", want, c.Message)
		}
	}
	if len(ms.Status.Names) != 3 || ms.Status.LocalName != "web" {
		t.Errorf("names %v, local name %q: the Kubernetes names reach the adopted VIP, so they are the mesh's", ms.Status.Names, ms.Status.LocalName)
	}
	testenv.Settle(t, "meshservice", 0)

	read := func() *corev1.Service {
		svc, err := getService(ctx, ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	before := read()
	if before.ResourceVersion != users.ResourceVersion {
		t.Fatalf("the user's Service was written while it was adopted: resourceVersion %s → %s", users.ResourceVersion, before.ResourceVersion)
	}
	for i := range 50 {
		count := reconciles(t)
		fresh, err := getMeshService(ctx, ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(fresh.DeepCopy())
		fresh.Annotations["touched"] = fmt.Sprint(i)
		if err := env.Client.Patch(ctx, fresh, patch); err != nil {
			t.Fatal(err)
		}
		testenv.Settle(t, "meshservice", count+1)
		after := read()
		if after.ResourceVersion != before.ResourceVersion || !equality.Semantic.DeepEqual(after.ManagedFields, before.ManagedFields) ||
			!equality.Semantic.DeepEqual(after.Spec, before.Spec) || len(after.OwnerReferences) != 0 {
			t.Fatalf("reconcile %d wrote the adopted Service: resourceVersion %s → %s, managedFields %+v → %+v, owners %+v",
				i+1, before.ResourceVersion, after.ResourceVersion, before.ManagedFields, after.ManagedFields, after.OwnerReferences)
		}
	}
	if ms, err := getMeshService(ctx, ns, "web"); err != nil || ms.Status.VIP != users.Spec.ClusterIP {
		t.Errorf("after 50 reconciles: vip %q (%v), want %s", ms.Status.VIP, err, users.Spec.ClusterIP)
	}

	// Negative control: the Service's owner labels it; the comparison above sees that write.
	before.Labels = map[string]string{"team": "web"}
	if err := env.Client.Update(ctx, before); err != nil {
		t.Fatal(err)
	}
	if after := read(); after.ResourceVersion == users.ResourceVersion {
		t.Errorf("negative control: a write to the Service left its resourceVersion at %s", after.ResourceVersion)
	}
}

// TestIncompatibleServiceStaysNameConflict: a user's Service that the mesh cannot use read-only
// stays ServiceReady=False NameConflict, with no VIP, a message that says what makes it
// incompatible and how to fix it, and the Service untouched. The control, a compatible one, is
// adopted (TestExistingServiceAdopted).
func TestIncompatibleServiceStaysNameConflict(t *testing.T) {
	cases := map[string]struct {
		edit func(svc *corev1.Service)
		// other is an unmeshed pod of another ServiceAccount labelled app=web.
		other bool
		want  []string
	}{
		"selects other pods": {other: true, want: []string{"its selector app=web also selects pods not of this service: 1, " +
			"for example pod intruder running as ServiceAccount intruder", "fix the selector", "give the service's workload another ServiceAccount"}},
		"selects none of the endpoints": {edit: func(svc *corev1.Service) { svc.Spec.Selector = map[string]string{"app": "elsewhere"} },
			want: []string{"its selector app=elsewhere does not select pod web-0, an endpoint of this service", "fix the selector"}},
		"headless": {edit: func(svc *corev1.Service) { svc.Spec.ClusterIP = corev1.ClusterIPNone },
			want: []string{"it is headless (clusterIP: None)"}},
		"ExternalName": {edit: func(svc *corev1.Service) {
			svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "web.example.internal"}
		}, want: []string{"it is of type ExternalName"}},
		"NodePort": {edit: func(svc *corev1.Service) { svc.Spec.Type = corev1.ServiceTypeNodePort },
			want: []string{"it is of type NodePort: it exposes the pods beyond the cluster", "rename that Service (for example web-public)"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			ns := namespaceWithSA(t, ctx, "web")
			users := usersService(ns, "web", "web")
			if tc.edit != nil {
				tc.edit(users)
			}
			if err := env.Client.Create(ctx, users); err != nil {
				t.Fatal(err)
			}
			if tc.other {
				intruder := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "intruder", Labels: map[string]string{"app": "web"}},
					Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "intruder",
						Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
				}
				if err := env.Client.Create(ctx, intruder); err != nil {
					t.Fatal(err)
				}
			}
			appEndpoint(t, ctx, ns, "web-0", "web", "web")
			ms := serviceReadyReason(t, ctx, ns, "web", meshv1alpha1.ServiceReasonNameConflict)
			c := condition(ms.Status.Conditions, meshv1alpha1.ServiceConditionServiceReady)
			if c.Status != metav1.ConditionFalse || ms.Status.VIP != "" {
				t.Errorf("ServiceReady %s, vip %q: want False and no VIP", c.Status, ms.Status.VIP)
			}
			for _, want := range append(tc.want, "Service "+ns+"/web exists and is not the mesh's", "the mesh cannot use it read-only") {
				if !strings.Contains(c.Message, want) {
					t.Errorf("the message lacks %q:\n%s", want, c.Message)
				}
			}
			after, err := getService(ctx, ns, "web")
			if err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != users.ResourceVersion {
				t.Errorf("the user's Service was modified (resourceVersion %s → %s)", users.ResourceVersion, after.ResourceVersion)
			}
		})
	}
}

// TestAdoptedServiceDeleted: when the Service the mesh used read-only is deleted, the controller
// generates its own (a new VIP, owned by the MeshService) and says so in an ExistingServiceDeleted
// Event. A user's Service of that name can then no longer be made: the API server refuses the
// create (AlreadyExists), so a generated Service is never shadowed.
func TestAdoptedServiceDeleted(t *testing.T) {
	ctx := testContext(t)
	ns, users := adoptable(t, ctx)
	adopted := serviceReadyReason(t, ctx, ns, "web", meshv1alpha1.ServiceReasonExistingService)
	oldVIP := adopted.Status.VIP

	if err := env.Client.Delete(ctx, users); err != nil {
		t.Fatal(err)
	}
	var generated *corev1.Service
	testenv.Eventually(t, "the generated Service and its VIP in status", func() error {
		ms := serviceReadyReason(t, ctx, ns, "web", meshv1alpha1.ServiceReasonServiceApplied)
		svc, err := getService(ctx, ns, "web")
		if err != nil {
			return err
		}
		if svc.UID == users.UID || !meshservice.IsGenerated(svc, ms.UID, FieldManager) || ms.Status.VIP != svc.Spec.ClusterIP {
			return fmt.Errorf("Service uid %s (the user's was %s), owners %+v, clusterIP %s, status vip %s", svc.UID, users.UID,
				svc.OwnerReferences, svc.Spec.ClusterIP, ms.Status.VIP)
		}
		generated = svc
		return nil
	})
	message := expectEvent(t, ctx, ns, "web", meshv1alpha1.ServiceReasonExistingServiceDeleted)
	if want := fmt.Sprintf("the VIP moved from %s to %s", oldVIP, generated.Spec.ClusterIP); !strings.Contains(message, want) {
		t.Errorf("the Event says %q, want it to contain %q", message, want)
	}

	err := env.Client.Create(ctx, usersService(ns, "web", "web"))
	if !apierrors.IsAlreadyExists(err) {
		t.Errorf("creating a user's Service over the generated one: %v, want AlreadyExists", err)
	}
}
