//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// Meshing an application in place: a Deployment web already has its own Service web (ClusterIP,
// selecting app=web, port 8080) and clients that use it. Labelling its pod template
// aether.io/managed: "true" rolls it into the mesh; the controller adopts the Service read-only
// (its cluster IP becomes the VIP, the Service is never written), a meshed client's dial to that
// cluster IP on the declared port is captured in its own network namespace and carried by the
// node's Envoy to web's pod (which then sees the node's Envoy calling, not the client), and a
// client outside the mesh still reaches the pods through kube-proxy.
var _ = Describe("meshing an application that already has a Service", Ordered, func() {
	const ns = "adopt"
	ctx := context.Background()
	var users *corev1.Service
	var deploy *appsv1.Deployment

	// The application answers each connection on 8080 with "peer <caller's IP> at <its pod>": who
	// reached it, and where. Declared 8080=tcp, its health is a TCP connect.
	app := testServer(peerApp("app", "8080"))
	// logSays waits until the container's log holds a line starting with line.
	logSays := func(p *corev1.Pod, container, line string) {
		GinkgoHelper()
		logs := clientset().CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: container})
		Eventually(func(g Gomega) {
			out, err := logs.DoRaw(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect("\n" + string(out)).To(ContainSubstring("\n" + line))
		}, time.Minute, time.Second).Should(Succeed())
	}
	// outsider is an unmeshed pod (ServiceAccount default, no label) dialling target every second.
	outsider := func(name, target string) *corev1.Pod {
		return testPod(ns, name, withContainers(dialing("client", target, "1s")))
	}

	BeforeAll(func() {
		freshNamespace(ctx, ns, "web", "client")
		users = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
		}
		Expect(k8s.Create(ctx, users)).To(Succeed())
		replicas := int32(1)
		deploy = &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"},
						Annotations: map[string]string{"endpoint.aether.io/ports": "8080=tcp"}},
					Spec: corev1.PodSpec{ServiceAccountName: "web", TerminationGracePeriodSeconds: new(int64(1)),
						Containers: []corev1.Container{app}},
				},
			},
		}
		Expect(k8s.Create(ctx, deploy)).To(Succeed())
	})

	It("serves clients through kube-proxy before it is meshed", func() {
		before := outsider("outsider-before", users.Spec.ClusterIP+":8080")
		Expect(k8s.Create(ctx, before)).To(Succeed())
		podsRunning(ctx, before)
		// Only the application answers "peer <the caller's address>" (kube-proxy may rewrite the
		// caller's address, so it is not compared).
		logSays(before, "client", users.Spec.ClusterIP+":8080 peer ")
	})

	It("adopts the Service read-only once the pod template is labelled managed: its cluster IP is the VIP", func() {
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
		patch := client.MergeFrom(deploy.DeepCopy())
		deploy.Spec.Template.Labels["aether.io/managed"] = "true"
		Expect(k8s.Patch(ctx, deploy, patch)).To(Succeed())

		ms := &meshv1alpha1.MeshService{}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, ms)).To(Succeed())
			ready := meshCondition(ms.Status.Conditions, meshv1alpha1.ServiceConditionReady)
			service := meshCondition(ms.Status.Conditions, meshv1alpha1.ServiceConditionServiceReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s", ready.Message)
			g.Expect(service.Status).To(Equal(metav1.ConditionTrue), "ServiceReady: %s %s", service.Reason, service.Message)
			g.Expect(service.Reason).To(Equal(meshv1alpha1.ServiceReasonExistingService))
			g.Expect(service.Message).To(ContainSubstring("Service " + ns + "/web existed before the mesh"))
			g.Expect(ms.Status.VIP).To(Equal(users.Spec.ClusterIP))
		}, 3*time.Minute, time.Second).Should(Succeed())

		now := &corev1.Service{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(users), now)).To(Succeed())
		Expect(now.ResourceVersion).To(Equal(users.ResourceVersion), "the user's Service was written")
		Expect(now.OwnerReferences).To(BeEmpty())
	})

	It("captures a meshed client's dial to the existing cluster IP on the declared port, and the node's Envoy carries it to web", func() {
		target := users.Spec.ClusterIP + ":8080"
		meshed := testPod(ns, "meshed-client", asManaged, withPorts("9000=tcp"), withServiceAccount("client"), withContainers(
			tcpApp, dialing("client", target, "1s")))
		Expect(k8s.Create(ctx, meshed)).To(Succeed())
		podsRunning(ctx, meshed)
		// web's one pod, once the rollout into the mesh is over.
		var web corev1.Pod
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "web", "aether.io/managed": "true"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Status.PodIP).NotTo(BeEmpty())
			web = pods.Items[0]
		}, 2*time.Minute, time.Second).Should(Succeed())
		// Through the mesh web sees the node's Envoy calling; through kube-proxy it would see the
		// client's address, meshed.Status.PodIP.
		answers := meshAnswers(ctx, &web)
		Expect(answers).To(HaveLen(1), "one node Envoy")
		logSays(meshed, "client", target+" "+answers[0]+"\n")
	})

	It("still serves a client outside the mesh through kube-proxy, straight to the pods", func() {
		// The rollout is over: the Service selects meshed pods only.
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Labels).To(HaveKeyWithValue("aether.io/managed", "true"))
			g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
		}, 2*time.Minute, time.Second).Should(Succeed())
		after := outsider("outsider-after", users.Spec.ClusterIP+":8080")
		Expect(k8s.Create(ctx, after)).To(Succeed())
		podsRunning(ctx, after)
		logSays(after, "client", users.Spec.ClusterIP+":8080 peer ")
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
})

// meshCondition is the condition of type t among conds, or a zero one.
func meshCondition(conds []metav1.Condition, t string) metav1.Condition {
	for _, c := range conds {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}
