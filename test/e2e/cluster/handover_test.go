//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The node proxy's handover on the real kernel, in a captured pod's own network namespace: two
// processes of the test server stand in for the old and the new node proxy, both bound with
// SO_REUSEPORT on 127.0.0.1:18001 (where capture redirects, and where the agent's listeners
// bind with enable_reuse_port), each holding every connection 1 s before it answers (requests in
// flight; each logs what it accepts and answers). Three containers of the pod dial its service's
// VIP:18082 in loops, captured into either. Once both have answered and the old one holds a
// connection, the old one is drained (SIGTERM with -drain: it closes its listener, so the kernel
// sends every new connection to the new one, answers what it holds, and exits) while the dials
// go on: no dial fails. config/envoy's DaemonSet replaces the node's Envoy the same way (maxSurge
// 1: the new pod binds beside the old; the old one's preStop drains its listeners).
//
// Negative control: AETHER_FAULTS_BREAK=handover kills the old one with SIGKILL instead (no
// drain): the connections it holds are reset, and the spec fails on the failed dials.
var _ = Describe("node proxy handover under a dial loop", Label("faults"), Ordered, func() {
	const ns = "handover"
	ctx := context.Background()
	var target string
	proxy := func(name string) corev1.Container {
		return testServer(corev1.Container{Name: name,
			Args: []string{"-original-dst", "127.0.0.1:18001", "-reuse-port", "-answer-delay", "1s", "-drain"}})
	}
	pod := &corev1.Pod{}
	clients := []string{"client-0", "client-1", "client-2"}

	BeforeAll(func() {
		freshNamespace(ctx, ns, "handover")
		Expect(k8s.Create(ctx, managedPod(ns, "seed", "handover", "9000=tcp"))).To(Succeed())
		target = tcpVIP(ctx, ns, "handover", 3*time.Minute) + ":18082"

		pod = managedPod(ns, "proxied", "handover", "9000=tcp")
		// Never restarted: the old proxy, once stopped, stays stopped.
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		pod.Spec.Containers = append(pod.Spec.Containers, proxy("proxy-old"), proxy("proxy-new"))
		for _, name := range clients {
			pod.Spec.Containers = append(pod.Spec.Containers, testServer(corev1.Container{Name: name,
				Args: []string{"-dial", target, "-dial-every", "100ms"}}))
		}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, name := range clients {
				dials := containerDialLog(g, ns, "proxied", name, time.Now().Add(-3*time.Second))
				g.Expect(dials).NotTo(BeEmpty())
				g.Expect(dials[len(dials)-1].Answer).To(Equal("original-dst "+target), "the pod's dials are captured")
			}
		}, 3*time.Minute, time.Second).Should(Succeed())
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	It("drains the old proxy while the new one, bound beside it with SO_REUSEPORT, takes every new connection: no dial fails", func() {
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		for _, name := range []string{"proxy-old", "proxy-new"} {
			Expect(containerRunning(pod, name)).To(BeTrue(), "container %s is not running: both must bind 127.0.0.1:18001", name)
		}
		signal := syscall.SIGTERM
		if breaking("handover") {
			signal = syscall.SIGKILL
		}
		pid := containerPID(pod, "proxy-old")
		// Both serve (the kernel spreads the connections over the two sockets), and the old one
		// holds a connection: the handover has something to lose.
		Eventually(func(g Gomega) {
			oldAccepted, oldAnswered := connectionLog(g, ns, pod.Name, "proxy-old")
			newAccepted, _ := connectionLog(g, ns, pod.Name, "proxy-new")
			g.Expect(oldAccepted).To(BeNumerically(">=", 2), "connections proxy-old accepted")
			g.Expect(newAccepted).To(BeNumerically(">=", 2), "connections proxy-new accepted")
			g.Expect(oldAccepted-oldAnswered).To(BeNumerically(">=", 1), "connections in flight in proxy-old")
		}, time.Minute, 100*time.Millisecond).Should(Succeed())
		stopped := time.Now()
		Expect(syscall.Kill(pid, signal)).To(Succeed())
		var old corev1.ContainerStateTerminated
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			for _, s := range pod.Status.ContainerStatuses {
				if s.Name == "proxy-old" {
					g.Expect(s.State.Terminated).NotTo(BeNil(), "proxy-old has not stopped")
					old = *s.State.Terminated
				}
			}
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
		gone := time.Now()
		Expect(containerRunning(pod, "proxy-new")).To(BeTrue(), "the new proxy stopped too")

		until := gone.Add(3 * time.Second)
		var dials []dialLine
		for _, name := range clients {
			var these []dialLine
			Eventually(func(g Gomega) {
				these = containerDialLog(g, ns, "proxied", name, stopped.Add(-2*time.Second))
				g.Expect(these).NotTo(BeEmpty())
				g.Expect(these[len(these)-1].At).To(BeTemporally(">", until))
			}, time.Minute, time.Second).Should(Succeed())
			dials = append(dials, these...)
		}
		var failed []string
		for _, d := range dials {
			if d.Answer != "original-dst "+target {
				failed = append(failed, d.At.Format(time.RFC3339Nano)+" "+d.Answer)
			}
		}
		newAccepted, _ := connectionLog(Default, ns, pod.Name, "proxy-new")
		Expect(failed).To(BeEmpty(), "%d of %d dials failed across the handover (signal %s to the old proxy, exit code %d):\n%s",
			len(failed), len(dials), signal, old.ExitCode, strings.Join(failed, "\n"))
		Expect(old.ExitCode).To(BeZero(), "the old proxy did not drain cleanly: %s", old.Message)
		logs, err := clientset().CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "proxy-old"}).DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(logs)).To(ContainSubstring("testserver: drained"))
		record("node proxy handover (two test servers on 127.0.0.1:18001 with SO_REUSEPORT, 1 s in flight each, three dial loops): the old one drained and exited %s after SIGTERM; %d dials of %s from 2 s before to 3 s after, none failed; the old one's last line: %s; the new one accepted %d connections",
			gone.Sub(stopped).Round(time.Millisecond), len(dials), target, strings.TrimSpace(lastLine(string(logs))), newAccepted)
	})
})

// connectionLog counts the lines "accepted connection" and "answered connection" in the log of
// pod's container (a test server with -drain).
func connectionLog(g Gomega, ns, pod, container string) (accepted, answered int) {
	raw, err := clientset().CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	return strings.Count(string(raw), "accepted connection "), strings.Count(string(raw), "answered connection ")
}

// containerRunning says whether pod's container name runs.
func containerRunning(pod *corev1.Pod, name string) bool {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name {
			return s.State.Running != nil
		}
	}
	return false
}

// lastLine is s's last non-empty line.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
