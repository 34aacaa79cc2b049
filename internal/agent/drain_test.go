// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestTwoPhaseDrain: a terminating pod's endpoint is Draining at the deletion request and
// Unhealthy 1 s before the kubelet's SIGTERM (the deletion request plus the longest preStop sleep,
// capped at 2 s short of the grace period); the Draining and Closing conditions carry when. The
// agent's clock is a fake one, stepped by the test: phase 2 comes when the clock reaches its time,
// not a millisecond before.
func TestTwoPhaseDrain(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	node := "node-" + ns
	if _, err := createNode(node)(env); err != nil {
		t.Fatal(err)
	}
	fake := clocktesting.NewFakeClock(time.Now())
	stop, err := startAgentWith(env, env.Config, Options{NodeName: node, Health: testHealth, controllerName: "agent-" + ns, clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	// A pod beside them whose listener counts the prober's rounds: each round probes it once.
	witnessIP := newPodIP()
	witnessPort, probes, _ := listenTCPCounting(t, witnessIP)
	createTerminablePod(t, ctx, ns, "witness", node, witnessIP, witnessPort, 0, 0)
	healthIs(t, ns, "witness", meshv1alpha1.HealthHealthy)

	for _, tc := range []struct {
		name           string
		preStop, grace int64  // seconds; 0: none, the default
		deleteGrace    *int64 // the delete's grace period (kubectl delete --grace-period); nil: the pod's
		closeAfter     time.Duration
	}{
		{name: "prestop-10s-grace-30s", preStop: 10, grace: 30, closeAfter: 9 * time.Second},
		{name: "prestop-10s-default-grace", preStop: 10, closeAfter: 9 * time.Second},
		// The API refuses a preStop sleep not shorter than the pod's grace period; a delete's
		// grace period can still be shorter than the sleep. Capped: 28 s - 1 s.
		{name: "prestop-40s-delete-grace-30s", preStop: 40, grace: 45, deleteGrace: new(int64(30)), closeAfter: 27 * time.Second},
		{name: "prestop-29s-grace-30s", preStop: 29, grace: 30, closeAfter: 27 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ip := newPodIP()
			port, _ := listenTCP(t, ip)
			pod := createTerminablePod(t, ctx, ns, tc.name, node, ip, port, tc.preStop, tc.grace)
			healthIs(t, ns, tc.name, meshv1alpha1.HealthHealthy)
			// The package's MeshService controller writes its verdict on the endpoint too; on a
			// loaded machine it landed during phase 2's probe rounds below, a write that is not
			// the prober's. Once written it stays through the drain (it follows the pod, not
			// the health), so the agent is the endpoint's only writer from here.
			verdictIs(t, ns, tc.name, metav1.ConditionTrue)
			fake.SetTime(time.Now()) // the agent's clock is now again, whatever an earlier case stepped it to
			request := deleteAndRequestTime(t, ctx, pod, tc.deleteGrace)

			draining := awaitDrain(t, ctx, ns, tc.name, meshv1alpha1.HealthDraining)
			if got := conditionTime(draining, meshv1alpha1.EndpointConditionDraining); got.Sub(request).Abs() > time.Second {
				t.Errorf("Draining at %v, %v from the deletion request %v (want within 1s)", got, got.Sub(request), request)
			}
			testenv.Eventually(t, "the pod's phase 2 timer armed", func() error {
				if !fake.HasWaiters() {
					return fmt.Errorf("no timer on the clock")
				}
				return nil
			})

			// A millisecond before: the timer has not fired, nothing is written.
			fake.SetTime(request.Add(tc.closeAfter - time.Millisecond))
			if !fake.HasWaiters() {
				t.Fatalf("the phase 2 timer fired at %v, before %v after the deletion request", tc.closeAfter-time.Millisecond, tc.closeAfter)
			}
			fake.SetTime(request.Add(tc.closeAfter))
			closing := awaitDrain(t, ctx, ns, tc.name, meshv1alpha1.HealthUnhealthy)
			if got := conditionTime(closing, meshv1alpha1.EndpointConditionClosing); got.Sub(request) != tc.closeAfter {
				t.Errorf("Closing at %v, %v after the deletion request, want %v", got, got.Sub(request), tc.closeAfter)
			}
			if got := conditionTime(closing, meshv1alpha1.EndpointConditionDraining); !got.Equal(conditionTime(draining, meshv1alpha1.EndpointConditionDraining)) {
				t.Errorf("Draining's time moved at phase 2: %v", got)
			}
			// The prober leaves the endpoint alone in phase 2 too, though its port still answers:
			// three whole rounds later nothing was written to it.
			probeRounds(t, probes, 4)
			after, err := getEndpoint(ctx, ns, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != closing.ResourceVersion || after.Status.Health != meshv1alpha1.HealthUnhealthy {
				t.Errorf("the prober wrote an endpoint in drain phase 2: resourceVersion %s → %s, health %q; conditions %s → %s",
					closing.ResourceVersion, after.ResourceVersion, after.Status.Health, conditionsSummary(closing), conditionsSummary(after))
			}
			awaitEndpointGone(t, ctx, ns, tc.name, pod)
		})
	}

	t.Run("no-prestop", func(t *testing.T) {
		ip := newPodIP()
		port, _ := listenTCP(t, ip)
		pod := createTerminablePod(t, ctx, ns, "no-prestop", node, ip, port, 0, 30)
		healthIs(t, ns, "no-prestop", meshv1alpha1.HealthHealthy)
		deleteAndRequestTime(t, ctx, pod, nil)
		ep := awaitDrain(t, ctx, ns, "no-prestop", meshv1alpha1.HealthUnhealthy)
		if d, c := conditionTime(ep, meshv1alpha1.EndpointConditionDraining), conditionTime(ep, meshv1alpha1.EndpointConditionClosing); !d.Equal(c) {
			t.Errorf("without a preStop sleep both phases are one write: Draining at %v, Closing at %v", d, c)
		}
		if fake.HasWaiters() {
			t.Error("a timer was armed for a pod without a preStop sleep")
		}
		awaitEndpointGone(t, ctx, ns, "no-prestop", pod)
	})

	t.Run("force-delete", func(t *testing.T) {
		ip := newPodIP()
		port, _ := listenTCP(t, ip)
		// Held by a finalizer, so the force-deleted pod is still there to be read.
		pod := createTerminablePod(t, ctx, ns, "forced", node, ip, port, 10, 30, "test.aether.io/hold")
		healthIs(t, ns, "forced", meshv1alpha1.HealthHealthy)
		deleteAndRequestTime(t, ctx, pod, new(int64(0)))
		ep := awaitDrain(t, ctx, ns, "forced", meshv1alpha1.HealthUnhealthy)
		if d, c := conditionTime(ep, meshv1alpha1.EndpointConditionDraining), conditionTime(ep, meshv1alpha1.EndpointConditionClosing); !d.Equal(c) {
			t.Errorf("a force delete skips the window: Draining at %v, Closing at %v", d, c)
		}
		if fake.HasWaiters() {
			t.Error("a timer was armed for a force-deleted pod")
		}
		releasePods(t, ns, "forced")
		awaitEndpointGone(t, ctx, ns, "forced", nil)
	})

	t.Run("removed-during-the-window", func(t *testing.T) {
		ip := newPodIP()
		port, _ := listenTCP(t, ip)
		pod := createTerminablePod(t, ctx, ns, "removed", node, ip, port, 10, 30)
		healthIs(t, ns, "removed", meshv1alpha1.HealthHealthy)
		fake.SetTime(time.Now())
		deleteAndRequestTime(t, ctx, pod, nil)
		awaitDrain(t, ctx, ns, "removed", meshv1alpha1.HealthDraining)
		testenv.Eventually(t, "the pod's phase 2 timer armed", func() error {
			if !fake.HasWaiters() {
				return fmt.Errorf("no timer on the clock")
			}
			return nil
		})
		awaitEndpointGone(t, ctx, ns, "removed", pod)
		testenv.Eventually(t, "the removed pod's timer cancelled", func() error {
			if fake.HasWaiters() {
				return fmt.Errorf("a timer is still on the clock")
			}
			return nil
		})
	})
}

// TestCloseAt: the phase 2 time of a terminating pod, from its deletion stamp and spec alone.
func TestCloseAt(t *testing.T) {
	request := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sleep := func(s int64) corev1.Container {
		return corev1.Container{Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: s}}}}
	}
	exec := corev1.Container{Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "20"}}}}}
	for _, tc := range []struct {
		name       string
		containers []corev1.Container
		grace      int64
		want       time.Duration // after the request; -1: at once
	}{
		{"longest sleep of all containers", []corev1.Container{sleep(3), sleep(10), {}}, 30, 9 * time.Second},
		{"capped 2 s short of the grace period", []corev1.Container{sleep(40)}, 30, 27 * time.Second},
		{"a shortened grace period caps too", []corev1.Container{sleep(10)}, 5, 2 * time.Second},
		{"no preStop: at once", []corev1.Container{{}}, 30, -1},
		{"an exec preStop's length is unknown: at once", []corev1.Container{exec}, 30, -1},
		{"force delete: at once", []corev1.Container{sleep(10)}, 0, -1},
		{"a 1 s sleep leaves no lead: at once", []corev1.Container{sleep(1)}, 30, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deletion := metav1.NewTime(request.Add(time.Duration(tc.grace) * time.Second))
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deletion, DeletionGracePeriodSeconds: &tc.grace},
				Spec: corev1.PodSpec{Containers: tc.containers}}
			at, now := closeAt(pod)
			switch {
			case tc.want < 0 && !now:
				t.Errorf("closeAt = %v after the request, want at once", at.Sub(request))
			case tc.want >= 0 && (now || at.Sub(request) != tc.want):
				t.Errorf("closeAt = %v after the request (at once: %v), want %v", at.Sub(request), now, tc.want)
			}
		})
	}
}

// conditionsSummary is ep's conditions as type=status/reason@time, for a failure message.
func conditionsSummary(ep *meshEndpoint) string {
	var out []string
	for _, c := range ep.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s@%s", c.Type, c.Status, c.Reason, c.LastTransitionTime.Format(time.RFC3339)))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// verdictIs waits until ns/name's endpoint carries the MeshService controller's verdict on its
// current generation, Verified with status want.
func verdictIs(t *testing.T, ns, name string, want metav1.ConditionStatus) {
	t.Helper()
	testenv.Eventually(t, name+" Verified="+string(want), func() error {
		ep, err := getEndpoint(testContext(t), ns, name)
		if err != nil {
			return err
		}
		if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionVerified); c == nil || c.Status != want ||
			c.ObservedGeneration != ep.Generation {
			return fmt.Errorf("Verified is %+v on generation %d", c, ep.Generation)
		}
		return nil
	})
}

// createTerminablePod creates a meshed pod of ServiceAccount payments on node at ip serving TCP
// on port, whose container
// sleeps preStop seconds in its preStop hook (none when 0) and whose grace period is grace
// seconds (the default when 0).
func createTerminablePod(t *testing.T, ctx context.Context, ns, name, node, ip string, port int, preStop, grace int64, finalizers ...string) *corev1.Pod {
	t.Helper()
	return createTerminablePodAnnotated(t, ctx, ns, name, node, ip,
		map[string]string{portspec.AnnotationProtocol: "tcp", portspec.AnnotationPort: strconv.Itoa(port)}, preStop, grace, finalizers...)
}

// createTerminablePodAnnotated is createTerminablePod for a pod of these annotations.
func createTerminablePodAnnotated(t *testing.T, ctx context.Context, ns, name, node, ip string, annotations map[string]string, preStop, grace int64, finalizers ...string) *corev1.Pod {
	t.Helper()
	container := corev1.Container{Name: "app", Image: "registry.example/app:1"}
	if preStop > 0 {
		container.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStop}}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers, Labels: map[string]string{LabelManaged: "true"},
			Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "payments", Containers: []corev1.Container{container}},
	}
	if grace > 0 {
		pod.Spec.TerminationGracePeriodSeconds = &grace
	}
	return createRunning(t, ctx, pod, ip)
}

// deleteAndRequestTime deletes pod (with grace seconds when set) and returns the deletion
// request's time as the API server recorded it: deletionTimestamp minus the grace period.
func deleteAndRequestTime(t *testing.T, ctx context.Context, pod *corev1.Pod, grace *int64) time.Time {
	t.Helper()
	var opts []client.DeleteOption
	if grace != nil {
		opts = append(opts, client.GracePeriodSeconds(*grace))
	}
	if err := env.Client.Delete(ctx, pod, opts...); err != nil {
		t.Fatal(err)
	}
	deleted := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), deleted); err != nil {
		t.Fatal(err)
	}
	if deleted.DeletionTimestamp == nil || deleted.DeletionGracePeriodSeconds == nil {
		t.Fatalf("pod %s deleted but not terminating: %+v", pod.Name, deleted.ObjectMeta)
	}
	return deleted.DeletionTimestamp.Add(-time.Duration(*deleted.DeletionGracePeriodSeconds) * time.Second)
}

// awaitDrain waits until ns/name's endpoint has health want with the drain conditions of its
// phase: Draining=True, and Closing=True when want is Unhealthy (absent before).
func awaitDrain(t *testing.T, ctx context.Context, ns, name string, want meshv1alpha1.Health) *meshEndpoint {
	t.Helper()
	var ep *meshEndpoint
	testenv.Eventually(t, name+" "+string(want)+" with its drain conditions", func() error {
		var err error
		if ep, err = getEndpoint(ctx, ns, name); err != nil {
			return err
		}
		closing := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionClosing)
		switch {
		case ep.Status.Health != want:
			return fmt.Errorf("health %q", ep.Status.Health)
		case conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionDraining) == nil:
			return fmt.Errorf("no Draining condition: %+v", ep.Status.Conditions)
		case want == meshv1alpha1.HealthUnhealthy && closing == nil:
			return fmt.Errorf("no Closing condition: %+v", ep.Status.Conditions)
		case want == meshv1alpha1.HealthDraining && closing != nil:
			t.Fatalf("Closing before phase 2: %+v", closing)
		}
		return nil
	})
	return ep
}

// conditionTime is the lastTransitionTime of ep's condition of type typ (zero without one).
func conditionTime(ep *meshEndpoint, typ string) time.Time {
	if c := conditions.Find(ep.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// awaitEndpointGone finishes pod's deletion as a kubelet does once its containers stopped (a
// delete with a zero grace period; pod nil: already going) and waits for its endpoint to go.
func awaitEndpointGone(t *testing.T, ctx context.Context, ns, name string, pod *corev1.Pod) {
	t.Helper()
	if pod != nil {
		if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, name+"'s MeshEndpoint removed with its pod", func() error {
		if _, err := getEndpoint(ctx, ns, name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}
