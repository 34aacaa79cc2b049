//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"net"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// Serving on a Unix socket, end to end: a meshed nonroot app that serves nothing on TCP, only on
// a socket in its csi.aether.io volume, turns Healthy through the agent's probe over that
// socket; admission denies a socket volume without an fsGroup, naming the fix; and a pod the
// webhook never saw, whose socket lies on an emptyDir, is refused by the agent (not_csi) and
// never promoted.
var _ = Describe("serving on a Unix socket", Ordered, func() {
	const (
		ns      = "uds-serve"
		sa      = "uds-app"
		fsGroup = 3000
		appUser = 1000
		port    = 9000
	)
	ctx := context.Background()

	// csiVolume is the pod's socket carrier; emptyDirVolume is what it no longer may be.
	csiVolume := corev1.Volume{Name: "uds", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "csi.aether.io"}}}
	emptyDirVolume := corev1.Volume{Name: "uds", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}

	// withFSGroup runs the pod's containers as a nonroot user, with fsGroup as its volumes' group
	// (nil: none).
	withFSGroup := func(fsGroup *int64) podOption {
		return func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{
				RunAsUser: ptr.To[int64](appUser), RunAsGroup: ptr.To[int64](appUser), RunAsNonRoot: new(true), FSGroup: fsGroup,
			}
		}
	}
	// udsPod is a meshed pod declaring TCP port 9000 as its primary, delivered to uds/app.sock,
	// whose app serves only on that socket (the volume mounted at /run/app): nothing listens on
	// a TCP port, so only a probe over the socket can find it healthy.
	udsPod := podBuilder(ns, asManaged, withServiceAccount(sa),
		withAnnotations(map[string]string{
			portspec.AnnotationPort:      strconv.Itoa(port),
			portspec.AnnotationProtocol:  "tcp",
			portspec.AnnotationUDSSocket: "uds/app.sock",
		}),
		withContainers(corev1.Container{
			Name: "app", Args: []string{"-uds", "/run/app/app.sock"},
			VolumeMounts: []corev1.VolumeMount{{Name: "uds", MountPath: "/run/app"}},
		}))

	// endpoint reads pod's MeshEndpoint.
	endpoint := func(g Gomega, pod *corev1.Pod) *meshv1alpha1.MeshEndpoint {
		ep := &meshv1alpha1.MeshEndpoint{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), ep)).To(Succeed(), "pod %s has no MeshEndpoint", pod.Name)
		g.Expect(ep.Spec.PodUID).To(Equal(string(pod.UID)), "MeshEndpoint %s is of another pod", pod.Name)
		return ep
	}
	// tcpRefused expects nothing to listen on the pod's primary port: a TCP-only probe fails.
	tcpRefused := func(pod *corev1.Pod) {
		GinkgoHelper()
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)), 5*time.Second)
		if err == nil {
			_ = conn.Close()
		}
		Expect(err).To(HaveOccurred(), "something listens on %s:%d: a probe over TCP would pass too, so health proves nothing of the socket", pod.Status.PodIP, port)
	}

	BeforeAll(func() { freshNamespace(ctx, ns, sa) })

	It("probes a nonroot app on its csi.aether.io socket, and its endpoint turns Healthy", func() {
		pod := udsPod("socket-app", withFSGroup(ptr.To[int64](fsGroup)), withVolumes(csiVolume))
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(context.Background(), pod) })
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "the pod's FailedMount events: %v", failedMounts(ctx, ns, pod.Name))
			g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
		}, 2*time.Minute, time.Second).Should(Succeed())

		By("nothing listens on the declared TCP port")
		tcpRefused(pod)

		By("the agent registers the pod and its probe over the socket finds it healthy")
		Eventually(func(g Gomega) {
			ep := endpoint(g, pod)
			g.Expect(ep.Status.Health).To(Equal(meshv1alpha1.HealthHealthy),
				"MeshEndpoint %s: the agent's probe of /run/aether/uds/%s/app.sock did not pass", pod.Name, pod.UID)
		}, 2*time.Minute, time.Second).Should(Succeed())
		tcpRefused(pod) // still: Healthy came from the socket
	})

	It("denies a csi.aether.io socket volume without an fsGroup at admission, naming the fix", func() {
		pod := udsPod("no-fsgroup", withFSGroup(nil), withVolumes(csiVolume))
		err := k8s.Create(ctx, pod)
		Expect(err).To(HaveOccurred(), "a pod with a csi.aether.io volume and no fsGroup was admitted")
		Expect(err.Error()).To(ContainSubstring(`admission webhook "vpod.mesh.aether.io" denied the request: ` +
			`spec.securityContext.fsGroup: unset, and volume "uds" is a csi.aether.io volume, whose socket directory the ` +
			`fsGroup owns (set spec.securityContext.fsGroup to a group the app runs with, for example 65532; there is no ` +
			`world-writable fallback)`))
	})

	It("refuses, as not_csi, a socket on an emptyDir admitted while the webhook was down, and never promotes the pod", func() {
		var before float64
		Eventually(func(g Gomega) {
			before = agentMetric(g, "aether_agent_uds_resolve_failures_total", `^reason="not_csi"$`)
		}, 30*time.Second, time.Second).Should(Succeed())

		By("admission denies the emptyDir while the webhook is up")
		pod := udsPod("emptydir-app", withFSGroup(ptr.To[int64](fsGroup)), withVolumes(emptyDirVolume))
		err := k8s.Create(ctx, pod.DeepCopy(), client.DryRunAll)
		Expect(err).To(HaveOccurred(), "the webhook admitted a socket on an emptyDir")
		Expect(err.Error()).To(ContainSubstring(`volume "uds" is an emptyDir (no longer a socket carrier)`))

		By("with the manager scaled to 0, the webhook's failurePolicy Ignore admits it")
		d := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: managerDeployment}, d)).To(Succeed())
		replicas := ptr.Deref(d.Spec.Replicas, 1)
		DeferCleanup(scaleManager, replicas) // back whatever happens below
		scaleManager(0)
		Eventually(func() error { return k8s.Create(ctx, pod) }, time.Minute, time.Second).Should(Succeed(),
			"with no manager, the pod webhook's failurePolicy Ignore admits the pod")
		DeferCleanup(func() { _ = k8s.Delete(context.Background(), pod) })
		scaleManager(replicas)

		By("the agent refuses the socket delivery: not_csi")
		Eventually(func(g Gomega) float64 {
			return agentMetric(g, "aether_agent_uds_resolve_failures_total", `^reason="not_csi"$`)
		}, 2*time.Minute, time.Second).Should(BeNumerically(">", before), `aether_agent_uds_resolve_failures_total{reason="not_csi"}`)

		By("the pod runs, nothing listens on its TCP port, and its endpoint is probed Unhealthy, never Healthy")
		podsRunning(ctx, pod)
		tcpRefused(pod)
		Eventually(func(g Gomega) {
			ep := endpoint(g, pod)
			g.Expect(ep.Status.Health).To(Equal(meshv1alpha1.HealthUnhealthy), "MeshEndpoint %s", pod.Name)
		}, 2*time.Minute, time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(endpoint(g, pod).Status.Health).NotTo(Equal(meshv1alpha1.HealthHealthy),
				"MeshEndpoint %s was promoted: its socket on an emptyDir was delivered to", pod.Name)
		}, 10*time.Second, time.Second).Should(Succeed())
	})
})
