//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// The node proxy's handover on the real node, as config/envoy's DaemonSet replaces the node's
// Envoy (maxSurge 1, maxUnavailable 0): its image changes to a new tag, as an upgrade changes it; a new
// Envoy pod starts beside the old one and binds every listener in every meshed pod's network
// namespace beside the old one's, with SO_REUSEPORT (the agent sets enable_reuse_port on every
// listener), so the kernel spreads new connections over both; once the new one is ready the old
// pod is deleted, and its preStop drains it (envoy-helper's envoy-drain: POST
// /drain_listeners?graceful, then the drain time) before it stops. Meanwhile three containers of a
// meshed pod dial their service's VIP:18082 in loops, every dial carried by the mesh to the
// service's application, which holds each connection 1 s before it answers: requests in flight
// through both Envoys, on both sides of the mesh (the capture listener and the inbound one); and
// another meshed pod sends the service 100 HTTP requests a second over keep-alive connections. No
// dial and no request may fail.
//
// Negative control: AETHER_FAULTS_BREAK=handover kills the old Envoy with SIGKILL once the new one
// is ready (no drain): the connections it holds are reset, and the spec fails on the failed dials.
var _ = Describe("node proxy handover under a dial loop", Label("faults"), Ordered, func() {
	const (
		ns           = "handover"
		envoyDaemon  = "aether-operator-envoy"
		holdsAnswers = "1s"
	)
	ctx := context.Background()
	var target, vip string
	var answers []string      // what a dial carried by the mesh is answered (meshAnswers)
	var servers []*corev1.Pod // the service's pods, whose application answers
	clients := []string{"client-0", "client-1", "client-2"}
	// app is tcpApp holding each connection before it answers.
	app := peerApp("app", "9000", "-http", "8080", "-answer-delay", holdsAnswers)
	envoyPods := func(g Gomega) []corev1.Pod {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(operatorNamespace), client.MatchingLabels{"app.kubernetes.io/name": "aether-envoy"})).To(Succeed())
		return pods.Items
	}

	BeforeAll(func() {
		freshNamespace(ctx, ns, "handover", "caller")
		seed := testPod(ns, "seed", asManaged, withPorts("9000=tcp"), withServiceAccount("handover"), withContainers(app))
		Expect(k8s.Create(ctx, seed)).To(Succeed())
		vip = tcpVIP(ctx, ns, "handover", 3*time.Minute)
		target = vip + ":18082"

		pod := testPod(ns, "proxied", asManaged, withPorts("9000=tcp"), withServiceAccount("handover"), withContainers(app))
		for _, name := range clients {
			pod.Spec.Containers = append(pod.Spec.Containers, testServer(dialing(name, target, "100ms")))
		}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		servers = []*corev1.Pod{runningPod(ctx, ns, "seed"), runningPod(ctx, ns, "proxied")}
		answers = meshAnswers(ctx, servers...)
		Eventually(func(g Gomega) {
			for _, name := range clients {
				steadilyCarried(g, ns, "proxied", name, answers, 3*time.Second)
			}
		}, 3*time.Minute, time.Second).Should(Succeed())
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	It("drains the old Envoy while the new one, bound beside it with SO_REUSEPORT, takes every new connection: no dial fails", func() {
		var old corev1.Pod
		Eventually(func(g Gomega) {
			pods := envoyPods(g)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(podReady(&pods[0])).To(BeTrue())
			old = pods[0]
		}, time.Minute, time.Second).Should(Succeed())

		// A steady load of HTTP requests beside the dial loops, from a pod of another service: 100 a
		// second to the service's HTTP port (its primary, 8080), for longer than the hand-over takes.
		const loadFor = 45 * time.Second
		l := startLoader(ctx, ns, "loader", "caller", "handover", "http://"+vip+":8080/under-handover",
			xds.FQDN("handover", ns, "aether.internal")+":8080", 100, loadFor)

		// What an upgrade of the node's Envoy changes: its image, to a new tag (here the same
		// image, tagged anew on the node).
		ds := &appsv1.DaemonSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: envoyDaemon}, ds)).To(Succeed())
		patch := client.MergeFrom(ds.DeepCopy())
		envoy := slices.IndexFunc(ds.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "envoy" })
		Expect(envoy).To(BeNumerically(">=", 0), "the DaemonSet %s has no container envoy", envoyDaemon)
		image := ds.Spec.Template.Spec.Containers[envoy].Image
		next := image + "-handover-" + strconv.FormatInt(time.Now().Unix(), 10)
		ctr("images", "tag", "--force", image, next)
		started := time.Now()
		ds.Spec.Template.Spec.Containers[envoy].Image = next
		Expect(k8s.Patch(ctx, ds, patch)).To(Succeed())

		var replacement corev1.Pod
		Eventually(func(g Gomega) {
			for _, p := range envoyPods(g) {
				if p.UID != old.UID && podReady(&p) {
					replacement = p
				}
			}
			g.Expect(replacement.Name).NotTo(BeEmpty(), "no new Envoy pod is ready")
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
		ready := time.Now()
		// Either Envoy may carry a dial now: the answers name the one that carried it.
		answers = meshAnswers(ctx, servers...)
		Expect(answers).To(HaveLen(2*len(servers)), "two node Envoys, the old and the new")
		signal := "the DaemonSet's rollout (preStop: drain, then SIGTERM)"
		if breaking("handover") {
			killContainer(&old, "envoy")
			signal = "SIGKILL, no drain"
		}
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(&old), &corev1.Pod{}))
		}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), "the old Envoy pod %s is still there", old.Name)
		gone := time.Now()

		until := gone.Add(3 * time.Second)
		var dials []dialLine
		for _, name := range clients {
			var these []dialLine
			Eventually(func(g Gomega) {
				these = containerDialLog(g, ns, "proxied", name, started.Add(-2*time.Second))
				g.Expect(these).NotTo(BeEmpty())
				g.Expect(these[len(these)-1].At).To(BeTemporally(">", until))
			}, time.Minute, time.Second).Should(Succeed())
			dials = append(dials, these...)
		}
		var failed []string
		for _, d := range dials {
			if !slices.Contains(answers, d.Answer) {
				failed = append(failed, d.At.Format(time.RFC3339Nano)+" "+d.Answer)
			}
		}
		Expect(failed).To(BeEmpty(), "%d of %d dials failed across the handover (patched %s, the new Envoy %s ready %s, the old one %s gone %s, stopped by %s):\n%s",
			len(failed), len(dials), started.Format(time.RFC3339Nano), replacement.Name, ready.Format(time.RFC3339Nano), old.Name, gone.Format(time.RFC3339Nano),
			signal, strings.Join(failed, "\n"))
		Expect(gone).To(BeTemporally("<", l.began.Add(loadFor)), "the hand-over outlasted the load")
		result := l.result()
		record("node Envoy handover (DaemonSet rolled to image %s, maxSurge 1; three dial loops through the mesh, each answer held %s; %d HTTP requests/s): the new Envoy ready %s after the patch, the old one gone %s after that (%s); %d dials of %s from 2 s before the patch to 3 s after, none failed; load: %s",
			next, holdsAnswers, 100, ready.Sub(started).Round(time.Millisecond), gone.Sub(ready).Round(time.Millisecond), signal, len(dials), target, result)
		Expect(result.failed).To(BeZero(), "HTTP requests failed across the hand-over (stopped by %s):\n%s", signal, result.failures)
	})
})

// lastLine is s's last non-empty line.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
