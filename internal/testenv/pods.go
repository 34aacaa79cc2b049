// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// podHosts numbers the loopback addresses that stand in for pod IPs (nothing dials them).
var podHosts atomic.Int32

// PodIP is a loopback address no earlier call returned, standing in for a pod's IP (nothing dials
// it): 127.0.0.2, 127.0.0.3, ...
func PodIP() string {
	n := podHosts.Add(1)
	return fmt.Sprintf("127.0.%d.%d", n/250, n%250+1)
}

// CreatePod creates a mesh-managed pod (aether.io/managed) of ServiceAccount sa bound to node
// and, when ip is not empty, gives it that IP through the status subresource, as a kubelet would
// (none runs here).
func (e *Env) CreatePod(t testing.TB, ctx context.Context, ns, name, sa, node, ip string, annotations map[string]string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations,
			Labels: map[string]string{registration.LabelManaged: registration.ManagedValue}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	if err := e.Client.Create(ctx, pod); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	if ip != "" {
		e.SetPodIP(t, ctx, pod, ip)
	}
	return pod
}

// SetPodIP sets the pod's IP, and its phase Running, through the status subresource.
func (e *Env) SetPodIP(t testing.TB, ctx context.Context, pod *corev1.Pod, ip string) {
	t.Helper()
	pod.Status.PodIP, pod.Status.PodIPs, pod.Status.Phase = ip, []corev1.PodIP{{IP: ip}}, corev1.PodRunning
	if err := e.Client.Status().Update(ctx, pod); err != nil {
		t.Fatalf("setting the IP of pod %s: %v", pod.Name, err)
	}
}

// EndpointOf is the MeshEndpoint the node agent writes for pod (registration.Registration).
func EndpointOf(t testing.TB, pod *corev1.Pod) *meshv1alpha1.MeshEndpoint {
	t.Helper()
	spec, err := registration.Registration(pod, nil)
	if err != nil {
		t.Fatalf("registering pod %s: %v", pod.Name, err)
	}
	return &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}, Spec: spec}
}
