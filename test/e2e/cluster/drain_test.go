//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// The two-phase drain on a real node: a meshed pod that sleeps 10 s in preStop, with the default
// grace period (30 s), is deleted. Its MeshEndpoint is Draining at once and Unhealthy 1 s before
// the kubelet's SIGTERM (9 s after the deletion request), read from the lastTransitionTime of its
// Draining and Closing conditions against the request's time (the pod's deletionTimestamp minus
// its deletionGracePeriodSeconds). A force delete (grace period 0) skips the window.
//
// Tolerance: every stamp is in whole seconds (the API's), so a latency under 1 s reads as 0 or
// 1 s. Draining must be stamped 0–1 s after the request; Closing 8–10.5 s after it (the agent
// fires at 9 s; a slow write on a loaded node may cross into the 10th second; never earlier
// than 8 s, which would mean the window was cut short).
var _ = Describe("draining a terminating pod in two phases", Ordered, func() {
	const ns = "drain"
	ctx := context.Background()

	BeforeAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
		}, 2*time.Minute, time.Second).Should(BeTrue())
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaving"}})).To(Succeed())
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	// sleepingPod is a meshed test server that sleeps 10 s in its preStop hook (the native sleep
	// action), with the default grace period; it returns once its endpoint is Healthy.
	sleepingPod := func(name string) *corev1.Pod {
		GinkgoHelper()
		pod := managedPod(ns, name, "leaving", portsHTTP)
		pod.Spec.TerminationGracePeriodSeconds = nil // the default, 30 s
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 10}}}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			ep := &meshv1alpha1.MeshEndpoint{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), ep)).To(Succeed())
			g.Expect(ep.Status.Health).To(Equal(meshv1alpha1.HealthHealthy))
		}, 3*time.Minute, time.Second).Should(Succeed())
		return pod
	}
	// transition is when ep's condition typ turned True (zero while it has not).
	transition := func(ep *meshv1alpha1.MeshEndpoint, typ string) time.Time {
		c := meshCondition(ep.Status.Conditions, typ)
		if c.Status != metav1.ConditionTrue {
			return time.Time{}
		}
		return c.LastTransitionTime.Time
	}

	It("marks the endpoint Draining at the deletion request and Unhealthy 1 s before SIGTERM", func() {
		pod := sleepingPod("graceful")
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed(), "the pod sleeps 10 s in preStop: it is still there")
		Expect(pod.DeletionTimestamp).NotTo(BeNil())
		Expect(pod.DeletionGracePeriodSeconds).To(HaveValue(Equal(int64(30))))
		request := pod.DeletionTimestamp.Add(-30 * time.Second)

		ep := &meshv1alpha1.MeshEndpoint{}
		var draining time.Time
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), ep)).To(Succeed())
			draining = transition(ep, meshv1alpha1.EndpointConditionDraining)
			g.Expect(draining).NotTo(BeZero(), "Draining=True")
		}, 5*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(draining.Sub(request)).To(And(BeNumerically(">=", 0), BeNumerically("<=", time.Second)),
			"Draining stamped %v, the deletion request %v", draining, request)
		Expect(transition(ep, meshv1alpha1.EndpointConditionClosing)).To(BeZero(), "Closing at phase 1: %+v", ep.Status.Conditions)

		var closing time.Time
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), ep)).To(Succeed())
			closing = transition(ep, meshv1alpha1.EndpointConditionClosing)
			g.Expect(closing).NotTo(BeZero(), "Closing=True")
			g.Expect(ep.Status.Health).To(Equal(meshv1alpha1.HealthUnhealthy))
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(closing.Sub(request)).To(And(BeNumerically(">=", 8*time.Second), BeNumerically("<=", 10500*time.Millisecond)),
			"Closing stamped %v, %v after the deletion request %v (want 8–10.5 s)", closing, closing.Sub(request), request)
		Expect(transition(ep, meshv1alpha1.EndpointConditionDraining)).To(Equal(draining), "Draining's stamp moved at phase 2")
		AddReportEntry("two-phase drain", ReportEntryVisibilityAlways, fmt.Sprintf(
			"preStop sleep 10 s, default grace: Draining stamped %v and Closing (Unhealthy) %v after the deletion request (whole-second stamps)",
			draining.Sub(request), closing.Sub(request)))

		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &meshv1alpha1.MeshEndpoint{}))
		}, time.Minute, time.Second).Should(BeTrue(), "the endpoint goes with its pod")
	})

	It("skips the window on a force delete (grace period 0)", func() {
		pod := sleepingPod("forced")
		deleted := time.Now()
		Expect(k8s.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		// The pod object is gone at once; its endpoint must go well before the 9 s a graceful
		// delete of this pod keeps it Draining.
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &meshv1alpha1.MeshEndpoint{}))
		}, 5*time.Second, 100*time.Millisecond).Should(BeTrue(), "the force-deleted pod's endpoint removed within 5 s")
		Expect(time.Since(deleted)).To(BeNumerically("<", 8*time.Second))
	})
})
