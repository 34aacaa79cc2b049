//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/csinode"
	"github.com/aether-mesh/aether-operator/internal/webhook"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// A namespace that enforces Pod Security's restricted level, as most production clusters' do:
// a restricted mesh pod starts there and its identity gate gets the pod's SVID through the
// csi.aether.io volume of SPIRE's agent sockets (the node plugin binds it read-only); the same
// pod with the socket as a hostPath, as the gate once mounted it, is refused by the API server.
var _ = Describe("Pod Security: a mesh pod in a restricted namespace", Ordered, func() {
	const ns = "restricted"
	ctx := context.Background()
	id := "spiffe://aether.internal/ns/" + ns + "/sa/web"

	BeforeAll(func() {
		freshNamespace(ctx, ns, "web")
		namespace := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, namespace)).To(Succeed())
		namespace.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
		Expect(k8s.Update(ctx, namespace)).To(Succeed())
	})
	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	// restricted is a mesh pod that meets the restricted level itself: non-root, the runtime's
	// seccomp profile, no privilege escalation, no capabilities.
	restricted := func(name string, opts ...podOption) *corev1.Pod {
		p := meshPod(ns, name, "web")
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: new(int64(65532)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: new(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		for _, o := range opts {
			o(p)
		}
		return p
	}

	It("starts the pod, its gate having got the pod's SVID through the csi.aether.io volume", func() {
		p := restricted("web-0")
		Expect(k8s.Create(ctx, p)).To(Succeed(), "the restricted namespace admits the mesh pod with its gate")
		var socket *corev1.Volume
		for i := range p.Spec.Volumes {
			if p.Spec.Volumes[i].Name == webhook.WorkloadSocketVolume {
				socket = &p.Spec.Volumes[i]
			}
		}
		Expect(socket).NotTo(BeNil(), "the gate's socket volume")
		Expect(socket.CSI).NotTo(BeNil(), "the gate's socket volume is a CSI volume: %+v", socket.VolumeSource)
		Expect(socket.CSI.Driver).To(Equal(csinode.DriverName))
		Expect(socket.CSI.VolumeAttributes).To(HaveKeyWithValue(csinode.VolumeAttribute, csinode.VolumeSPIREAgentSockets))

		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}, 3*time.Minute, time.Second).Should(Succeed())
		gate := initStatus(p, webhook.GateContainer)
		Expect(gate).NotTo(BeNil())
		Expect(gate.State.Terminated).NotTo(BeNil())
		Expect(gate.State.Terminated.ExitCode).To(BeZero())
		Expect(containerLog(ctx, p, webhook.GateContainer)).To(ContainSubstring("got "+id), "the gate says which SVID it got")
	})

	It("refuses the same pod with SPIRE's socket as a hostPath (the control)", func() {
		p := restricted("web-1", withVolumes(corev1.Volume{Name: webhook.WorkloadSocketVolume, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: workloadidentity.NodeWorkloadSocketDir, Type: new(corev1.HostPathDirectory)}}}))
		err := k8s.Create(ctx, p)
		Expect(err).To(HaveOccurred(), "a hostPath volume was admitted in a restricted namespace")
		Expect(err.Error()).To(ContainSubstring(`violates PodSecurity "restricted:latest"`))
		Expect(err.Error()).To(ContainSubstring(`volume "` + webhook.WorkloadSocketVolume + `" uses restricted volume type "hostPath"`))
	})
})
