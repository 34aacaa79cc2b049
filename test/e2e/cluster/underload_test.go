//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// A service's callers under a steady load while the mesh under them changes: 100 requests a
// second, each in its own time (an open loop, over keep-alive connections, as hack/testapp's Load
// sends them), from a meshed pod to the service web's VIP through the node's Envoy. No request may
// fail while web's Deployment rolls its three pods (the two-phase drain end to end: the old pod's
// endpoint Draining at its deletion, Unhealthy a second before its SIGTERM, after its preStop
// sleep), nor while the node's agent is killed with SIGKILL and restarts (the Envoy keeps the
// configuration it has and serves on). The node Envoy's own hand-over under the same load is in
// handover_test.go. Each spec quotes what was sent, answered and failed.
//
// Negative controls (AETHER_FAULTS_BREAK): "rollout" deletes web's pods at once with no grace
// instead of rolling them; "agent-crash" kills the node's Envoy instead of its agent. Both lose
// requests, and their spec fails.
var _ = Describe("requests under load through the node's Envoy", Label("faults"), Ordered, func() {
	const (
		ns       = "underload"
		replicas = 3
		rate     = 100
	)
	ctx := context.Background()
	host := xds.FQDN("web", ns, "aether.internal") + ":8080"
	var url string
	selector := client.MatchingLabels{"app": "web"}

	BeforeAll(func() {
		freshNamespace(ctx, ns, "web", "caller")
		labels := map[string]string{"app": "web", registration.LabelManaged: registration.ManagedValue}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(replicas)),
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				// One new pod at a time, started before an old one stops; a pod counts once it has
				// been ready 2 s (the mesh's endpoint follows the pod's readiness by a probe of its own).
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: new(intstr.FromInt32(1)), MaxUnavailable: new(intstr.FromInt32(0))}},
				MinReadySeconds: 2,
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
						portspec.AnnotationPorts: "8080", portspec.AnnotationHealthPath: "/healthz"}},
					Spec: corev1.PodSpec{
						ServiceAccountName:            "web",
						TerminationGracePeriodSeconds: new(int64(15)),
						Containers: []corev1.Container{testServer(corev1.Container{
							Name: "app", Args: []string{"-http", "8080"},
							ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
								HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
							// The documented way to stop: a native preStop sleep, which the agent reads to
							// time the drain's second phase.
							Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}},
						})},
					},
				},
			},
		}
		Expect(k8s.Create(ctx, dep)).To(Succeed())
		awaitRollout(ctx, ns, "web", replicas)
		url = "http://" + meshVIP(ctx, ns, "web") + ":8080/under-load"
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	It("loses no request while web's Deployment rolls its pods", func() {
		const loadFor = 35 * time.Second
		l := startLoader(ctx, ns, "roll-load", "caller", "web", url, host, rate, loadFor)
		signal := "a rolling update (maxSurge 1, maxUnavailable 0)"
		rolled := time.Now()
		if breaking("rollout") {
			signal = "every pod deleted at once, no grace"
			Expect(k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), selector, client.GracePeriodSeconds(0))).To(Succeed())
		} else {
			dep := &appsv1.Deployment{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, dep)).To(Succeed())
			patch := client.MergeFrom(dep.DeepCopy())
			dep.Spec.Template.Annotations["aether.io/rolled-at"] = rolled.UTC().Format(time.RFC3339Nano)
			Expect(k8s.Patch(ctx, dep, patch)).To(Succeed())
		}
		awaitRollout(ctx, ns, "web", replicas)
		done := time.Now()
		Expect(done).To(BeTemporally("<", l.began.Add(loadFor)), "the rollout outlasted the load: it ended %s after the load began", done.Sub(l.began))
		result := l.result()
		record("rolling update of %d pods under %d requests/s (%s): rolled in %s; %s", replicas, rate, signal, done.Sub(rolled).Round(time.Millisecond), result)
		Expect(result.failed).To(BeZero(), "requests failed during %s:\n%s", signal, result.failures)
	})

	// The loader does not declare web: its node fetched web on demand, and the restarted agent
	// must carry it from its first configuration (its record of what the node fetched outlives
	// it), so the node's Envoy removes no cluster.
	It("loses no request while the node's agent is killed with SIGKILL and restarts", func() {
		const loadFor = 15 * time.Second
		l := startLoader(ctx, ns, "crash-load", "caller", "", url, host, rate, loadFor)
		victim, container, what := agentPod(), "agent", "the agent"
		if breaking("agent-crash") {
			victim, container, what = envoyPod(ctx), "envoy", "the node's Envoy"
		}
		envoy := nodeEnvoy(ctx)
		const removed = "cluster_manager.cluster_removed"
		removedBefore := envoy.stats(removed)[removed]
		restarts := containerRestarts(victim, container)
		killed := killContainer(victim, container)
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(victim), victim)).To(Succeed())
			g.Expect(containerRestarts(victim, container)).To(BeNumerically(">", restarts))
			g.Expect(containerReady(victim, container)).To(BeTrue())
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
		ready := time.Now()
		Expect(ready).To(BeTemporally("<", l.began.Add(loadFor)), "%s's restart outlasted the load", what)
		result := l.result()
		record("%s killed with SIGKILL under %d requests/s: ready again %s after the kill; %s", what, rate, ready.Sub(killed).Round(time.Millisecond), result)
		Expect(result.failed).To(BeZero(), "requests failed while %s restarted:\n%s", what, result.failures)
		if !breaking("agent-crash") {
			Expect(envoy.stats(removed)[removed]).To(Equal(removedBefore),
				"the node's Envoy removed clusters when the restarted agent's configuration came: it forgot what was fetched on demand")
		}
	})
})

// loader is a meshed pod sending a steady load of GETs (hack/testapp's Load) to a service.
type loader struct {
	pod   *corev1.Pod
	began time.Time // when the load began, once one request was answered
}

// loadResult is a loader's summary line, and its failures' lines.
type loadResult struct {
	sent, answered, failed int
	failures               string
}

func (r loadResult) String() string {
	return fmt.Sprintf("%d requests sent, %d answered, %d failed", r.sent, r.answered, r.failed)
}

var (
	loadBegan = regexp.MustCompile(`(?m)^load began (\S+):`)
	loadDone  = regexp.MustCompile(`(?m)^load done sent=(\d+) answered=(\d+) failed=(\d+)$`)
	loadFail  = regexp.MustCompile(`(?m)^load failed .*$`)
)

// startLoader starts pod ns/name, of ServiceAccount sa with upstream service declared ("": none,
// its node fetches the service on demand), sending rate GETs a second of url with Host host for
// loadFor once one is answered, and returns once the load began.
func startLoader(ctx context.Context, ns, name, sa, upstream, url, host string, rate int, loadFor time.Duration) *loader {
	GinkgoHelper()
	annotations := map[string]string{}
	if upstream != "" {
		annotations[portspec.AnnotationUpstreams] = upstream
	}
	p := testPod(ns, name, asManaged, withServiceAccount(sa), withPorts("8080"),
		withAnnotations(annotations), withContainers(
			corev1.Container{Name: "app", Args: []string{"-http", "8080"}},
			corev1.Container{Name: "load", Args: []string{"-get", url, "-get-host", host,
				"-load-rate", strconv.Itoa(rate), "-load-for", loadFor.String()}}))
	startPods(ctx, p)
	l := &loader{pod: p}
	Eventually(func(g Gomega) {
		m := loadBegan.FindStringSubmatch(logOf(g, p, "load"))
		g.Expect(m).NotTo(BeNil(), "the load has not begun: no request answered yet")
		var err error
		l.began, err = time.Parse(time.RFC3339Nano, m[1])
		g.Expect(err).NotTo(HaveOccurred())
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	return l
}

// result waits for the load to end and reads its summary.
func (l *loader) result() loadResult {
	GinkgoHelper()
	var r loadResult
	Eventually(func(g Gomega) {
		log := logOf(g, l.pod, "load")
		m := loadDone.FindStringSubmatch(log)
		g.Expect(m).NotTo(BeNil(), "the load has not ended")
		r.sent, _ = strconv.Atoi(m[1])
		r.answered, _ = strconv.Atoi(m[2])
		r.failed, _ = strconv.Atoi(m[3])
		for _, f := range loadFail.FindAllString(log, 20) {
			r.failures += f + "\n"
		}
	}, 2*time.Minute, time.Second).Should(Succeed())
	return r
}

// awaitRollout waits until Deployment ns/name runs replicas pods of its current template, every
// one ready and none other left (the old ones gone, not only terminating).
func awaitRollout(ctx context.Context, ns, name string, replicas int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		dep := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep)).To(Succeed())
		g.Expect(dep.Status.ObservedGeneration).To(Equal(dep.Generation))
		g.Expect(dep.Status.UpdatedReplicas).To(Equal(replicas))
		g.Expect(dep.Status.AvailableReplicas).To(Equal(replicas))
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(dep.Spec.Selector.MatchLabels))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(int(replicas)), "pods of %s, old ones included", name)
	}, 3*time.Minute, 200*time.Millisecond).Should(Succeed())
}

// envoyPod is the node's one Envoy pod.
func envoyPod(ctx context.Context) *corev1.Pod {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(operatorNamespace), client.MatchingLabels{"app.kubernetes.io/name": "aether-envoy"})).To(Succeed())
	Expect(pods.Items).To(HaveLen(1), "the node's Envoy pods")
	return &pods.Items[0]
}
