//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
)

// A pod's traffic leaves from the pod, on the real node: a pod in capture mode all dials a server
// on the node's own address (a host-network pod that answers with the caller's address) and is
// seen as itself, never redirected to the proxy and never re-opened from the node; in the same
// pod, a dial of its service's VIP is still captured (127.0.0.1:18001, where the node's Envoy
// listens) and carried to the service: on the mesh's TCP port 18082, which no Service has, so that
// only the mesh can answer it (tcpApp, on the default TCP port 9000 of one of the service's pods).
var _ = Describe("a pod's traffic leaves from the pod", Ordered, func() {
	const (
		ns       = "egress"
		peerPort = "19099"
	)
	ctx := context.Background()
	var nodeAddr, vip string

	// The node's server runs in the node's network namespace; every other pod is meshed.
	pod := podBuilder(ns, withServiceAccount("egress"))
	ports := map[string]string{"endpoint.aether.io/ports": "9000=tcp"}

	BeforeAll(func() {
		freshNamespace(ctx, ns, "egress")

		// The server on the node's own address: a host-network pod's IP is the node's.
		server := pod("node-server", withHostNetwork, withContainers(corev1.Container{Name: "server", Args: []string{"-peer", ":" + peerPort}}))
		Expect(k8s.Create(ctx, server)).To(Succeed())
		podsRunning(ctx, server)
		nodeAddr = server.Status.PodIP

		// A first pod of the service gives it a VIP with TCP port 9000.
		Expect(k8s.Create(ctx, pod("seed", asManaged, withAnnotations(ports), withContainers(tcpApp)))).To(Succeed())
		ms := &meshv1alpha1.MeshService{}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "egress"}, ms)).To(Succeed())
			g.Expect(ms.Status.VIP).NotTo(BeEmpty())
		}, 2*time.Minute, time.Second).Should(Succeed())
		vip = ms.Status.VIP
	})

	It("reaches the node's address from its own address in capture mode all, and a mesh VIP through the proxy", func() {
		toNode, toVIP := net.JoinHostPort(nodeAddr, peerPort), net.JoinHostPort(vip, "18082")
		annotations := map[string]string{model.AnnotationCaptureMode: string(model.CaptureAll), "endpoint.aether.io/ports": "9000=tcp"}
		caller := pod("caller", asManaged, withAnnotations(annotations), withContainers(tcpApp,
			dialing("to-node", toNode, "1s"), dialing("to-vip", toVIP, "1s")))
		Expect(k8s.Create(ctx, caller)).To(Succeed())
		podsRunning(ctx, caller)

		logsOf := func(container string) func() (string, error) {
			return func() (string, error) {
				out, err := clientset().CoreV1().Pods(ns).GetLogs(caller.Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
				return string(out), err
			}
		}
		// Each client prints "<target> <answer>" once a second.
		Eventually(logsOf("to-node"), time.Minute, time.Second).Should(
			ContainSubstring(toNode+" peer "+caller.Status.PodIP+"\n"),
			"the node's server must see the pod (%s), not the node (%s) nor a redirect to the proxy", caller.Status.PodIP, nodeAddr)
		Eventually(logsOf("to-vip"), time.Minute, time.Second).Should(
			answeredBy(toVIP, meshAnswers(ctx, runningPod(ctx, ns, "seed"), caller)), "a dial of the mesh's VIP is captured in mode all, and carried by the mesh")
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
})
