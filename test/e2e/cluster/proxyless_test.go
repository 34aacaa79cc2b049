//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/proxyless"
)

// Proxyless gRPC on a real node: a client pod (the test server in client mode) annotated
// aether.io/proxyless: "grpc" gets its bootstrap from the pod webhook and its configuration from
// the node agent's proxyless socket, and balances its RPCs over the three pods of a gRPC service,
// reaching each at <pod IP>:18008 over mTLS, where the node's Envoy's inbound listener terminates
// it and hands the RPC to the pod's gRPC server. Both ends' SVIDs are SPIRE's: the client's files
// from the webhook's aether-identity sidecar (where its bootstrap reads them), the server's by SDS
// to Envoy, each verified against the mesh's bundle and pinned to the other's SPIFFE ID.
var _ = Describe("proxyless gRPC", Ordered, func() {
	const ns = "proxyless"
	ctx := context.Background()
	var payments *appsv1.Deployment

	// clientPod is a proxyless gRPC client of payments, with the client's identity; env adds to
	// its container's environment.
	clientPod := func(name string, env ...corev1.EnvVar) *corev1.Pod {
		return testPod(ns, name, asManaged,
			withAnnotations(map[string]string{"aether.io/proxyless": "grpc", "endpoint.aether.io/health-path": "/healthz"}),
			withServiceAccount("client"), withContainers(corev1.Container{Name: "app",
				Args: []string{"-proxyless-client", "xds:///payments." + ns + ".aether.internal:9090", "-client-port", "8080"},
				Env:  env,
			}))
	}

	BeforeAll(func() {
		freshNamespace(ctx, ns, "payments", "client")
		payments = &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(3)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "payments"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{
						Labels:      map[string]string{"app": "payments", "aether.io/managed": "true"},
						Annotations: map[string]string{"endpoint.aether.io/port": "9090", "endpoint.aether.io/ports": "9090=grpc"},
					},
					Spec: corev1.PodSpec{
						ServiceAccountName:            "payments",
						TerminationGracePeriodSeconds: new(int64(10)),
						Containers:                    []corev1.Container{testServer(corev1.Container{Name: "app", Args: []string{"-grpc", "9090"}})},
					},
				},
			},
		}
		Expect(k8s.Create(ctx, payments)).To(Succeed())

		Expect(k8s.Create(ctx, clientPod("client"))).To(Succeed())
	})

	// spread asks the client for n RPCs and returns how many each pod IP answered.
	spread := func(g Gomega, clientIP string, n int) map[string]int {
		resp, err := http.Get(fmt.Sprintf("http://%s:8080/spread?n=%d", clientIP, n))
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "the client: %s", body)
		counts := map[string]int{}
		g.Expect(json.Unmarshal(body, &counts)).To(Succeed())
		return counts
	}
	paymentsIPs := func(g Gomega) []string {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "payments"})).To(Succeed())
		var ips []string
		for _, p := range pods.Items {
			ep := &meshv1alpha1.MeshEndpoint{}
			if p.DeletionTimestamp == nil && k8s.Get(ctx, client.ObjectKeyFromObject(&p), ep) == nil && ep.Status.Health == meshv1alpha1.HealthHealthy {
				ips = append(ips, p.Status.PodIP)
			}
		}
		slices.Sort(ips)
		return ips
	}
	clientIP := func(g Gomega) string {
		pod := &corev1.Pod{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "client"}, pod)).To(Succeed())
		g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
		return pod.Status.PodIP
	}

	It("injects the client's bootstrap and the agent's socket", func() {
		pod := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "client"}, pod)).To(Succeed())
		Expect(pod.Spec.Containers[0].Env).To(ContainElement(HaveField("Name", proxyless.EnvBootstrap)))
		Expect(pod.Spec.Containers[0].VolumeMounts).To(ContainElement(And(
			HaveField("MountPath", proxyless.SocketDir), HaveField("ReadOnly", true))))
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "client"}, pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		}, 2*time.Minute, time.Second).Should(Succeed())
	})

	It("balances the client's RPCs over the service's three pods", func() {
		Eventually(func(g Gomega) {
			ips := paymentsIPs(g)
			g.Expect(ips).To(HaveLen(3))
			counts := spread(g, clientIP(g), 60)
			for _, ip := range ips {
				g.Expect(counts).To(HaveKeyWithValue(ip, BeNumerically(">", 0)), "RPCs %v", counts)
			}
			g.Expect(counts).To(HaveLen(3))
		}, 2*time.Minute, time.Second).Should(Succeed())
	})

	// A pod of the same node whose container sets AETHER_POD_NAME=client itself (the webhook keeps
	// it, with a warning) gets a bootstrap announcing the client's node ID: it mounts the same
	// socket, and its gRPC client claims the client's configuration. The agent learns the caller's
	// pod from the connection (peer credentials, the process's cgroup) and refuses the stream: the
	// impostor's RPCs never reach payments, the agent logs a line naming the claimed ID and the
	// impostor's pod, and the client itself is still served.
	It("serves nothing to a pod that claims the client's node ID, and logs both", func() {
		impostor := clientPod("impostor", corev1.EnvVar{Name: proxyless.EnvPodName, Value: "client"})
		Expect(k8s.Create(ctx, impostor)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(context.Background(), impostor) })
		var impostorIP string
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(impostor), impostor)).To(Succeed())
			g.Expect(impostor.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(impostor.Status.PodIP).NotTo(BeEmpty())
			impostorIP = impostor.Status.PodIP
		}, 2*time.Minute, time.Second).Should(Succeed())
		bootstrap := ""
		for _, e := range impostor.Spec.Containers[0].Env {
			if e.Name == proxyless.EnvBootstrap {
				bootstrap = e.Value
			}
		}
		Expect(bootstrap).To(ContainSubstring(`"id":"$(`+proxyless.EnvPodNamespace+`)/$(`+proxyless.EnvPodName+`)"`),
			"the injected bootstrap names the pod by its own env, which the impostor set to the client's name")

		claimed, impostorID := proxyless.NodeID(ns, "client"), proxyless.NodeID(ns, "impostor")
		agent := agentPod()
		Eventually(func(g Gomega) {
			// Its first RPC makes its channel connect to the agent.
			if resp, err := (&http.Client{Timeout: time.Minute}).Get(fmt.Sprintf("http://%s:8080/spread?n=1", impostorIP)); err == nil {
				_ = resp.Body.Close()
			}
			raw, err := clientset().CoreV1().Pods(agent.Namespace).GetLogs(agent.Name, &corev1.PodLogOptions{Container: "agent"}).DoRaw(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			var refusal string
			for line := range strings.Lines(string(raw)) {
				if strings.Contains(line, "claims another pod's node ID") && strings.Contains(line, `"`+claimed+`"`) &&
					strings.Contains(line, `"`+impostorID+`"`) {
					refusal = line
				}
			}
			g.Expect(refusal).NotTo(BeEmpty(), "no agent log line names the claimed ID %s and the impostor's pod %s", claimed, impostorID)
		}, 2*time.Minute, time.Second).Should(Succeed())

		// It gets nothing: its RPCs fail (each within the client's 5 s deadline), however often it
		// asks; the client is still served.
		impatient := &http.Client{Timeout: time.Minute}
		for range 3 {
			resp, err := impatient.Get(fmt.Sprintf("http://%s:8080/spread?n=5", impostorIP))
			Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			Expect(resp.StatusCode).NotTo(Equal(http.StatusOK), "the impostor's RPCs were answered: %s", body)
		}
		Eventually(func(g Gomega) {
			answered := 0
			for _, n := range spread(g, clientIP(g), 10) {
				answered += n
			}
			g.Expect(answered).To(Equal(10))
		}, 2*time.Minute, time.Second).Should(Succeed())
	})

	It("moves every RPC to the one pod left when the service scales to one", func() {
		scaled := payments.DeepCopy()
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(payments), scaled)).To(Succeed())
		scaled.Spec.Replicas = new(int32(1))
		Expect(k8s.Update(ctx, scaled)).To(Succeed())
		Eventually(func(g Gomega) {
			ips := paymentsIPs(g)
			g.Expect(ips).To(HaveLen(1))
			counts := spread(g, clientIP(g), 30)
			g.Expect(counts).To(Equal(map[string]int{ips[0]: 30}))
		}, 2*time.Minute, time.Second).Should(Succeed())
	})
})
