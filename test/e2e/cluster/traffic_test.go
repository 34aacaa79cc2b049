//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// Traffic of every kind through the node's Envoy, end to end: a meshed client pod's containers
// dial the service web (one pod, HTTP on 8080, gRPC on 9091, raw TCP on 9000) at its VIP, each in
// its protocol, and a service whose one pod of two resets every request. Each request goes through
// capture, the node Envoy's capture listener in the client's namespace, mTLS with both pods' SPIRE
// SVIDs (by SDS from the agent) and the inbound listener in the server's namespace, to the
// application; each client logs the application's answer (hack/testapp), which the specs read.
var _ = Describe("traffic through the node's Envoy", Ordered, func() {
	const ns = "mesh-traffic"
	ctx := context.Background()
	pod := podBuilder(ns, asManaged)
	var (
		web, flaky, caller *corev1.Pod
		webVIP, flakyVIP   string
		admin              envoyAdmin
	)
	webName := xds.FQDN("web", ns, "aether.internal")
	flakyName := xds.FQDN("flaky", ns, "aether.internal")
	callerID := "spiffe://aether.internal/ns/" + ns + "/sa/caller"
	healthz := withAnnotations(map[string]string{portspec.AnnotationHealthPath: "/healthz"})

	BeforeAll(func() {
		freshNamespace(ctx, ns, "web", "flaky", "caller")
		admin = nodeEnvoy(ctx)
		web = pod("web-0", withServiceAccount("web"), withPorts("8080,9091=grpc,9000=tcp"),
			withContainers(peerApp("app", "9000", "-http", "8080", "-grpc", "9091")))
		// flaky's two pods are both healthy (the agent probes /healthz), and one of them resets
		// every request it is sent before it answers.
		flaky = pod("flaky-steady", withServiceAccount("flaky"), withPorts("8080"), healthz,
			withContainers(corev1.Container{Name: "app", Args: []string{"-http", "8080"}}))
		resetter := pod("flaky-resetter", withServiceAccount("flaky"), withPorts("8080"), healthz,
			withContainers(corev1.Container{Name: "app", Args: []string{"-http", "8080", "-reset-requests"}}))
		startPods(ctx, web, flaky, resetter)
		webVIP, flakyVIP = meshVIP(ctx, ns, "web"), meshVIP(ctx, ns, "flaky")
		Eventually(func(g Gomega) {
			ms := &meshv1alpha1.MeshService{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flaky"}, ms)).To(Succeed())
			g.Expect(ms.Status.Endpoints.Ready).To(Equal(int32(2)), "flaky's endpoints: both pods, healthy")
		}, 2*time.Minute, time.Second).Should(Succeed())

		// The caller declares both services its upstreams, so its clusters are carried up front.
		every := func(name string, args ...string) corev1.Container {
			return corev1.Container{Name: name, Args: append(args, "-dial-every", "1s")}
		}
		caller = pod("caller", withServiceAccount("caller"), withPorts("8080"),
			withAnnotations(map[string]string{portspec.AnnotationUpstreams: "web,flaky"}), withContainers(
				corev1.Container{Name: "app", Args: []string{"-http", "8080"}},
				every("whoami", "-get", "http://"+webVIP+":8080"+testapp.WhoamiPath, "-get-host", webName+":8080"),
				every("grpc", "-grpc-health", webVIP+":9091", "-get-host", webName+":9091"),
				every("websocket", "-websocket", "http://"+webVIP+":8080/chat", "-get-host", webName+":8080"),
				every("tcp", "-dial", webVIP+":9000"),
				every("by-name", "-get", "http://"+webName+":8080/by-name"),
				every("not-http", "-get", "http://"+webVIP+":8080/", "-get-host", webName+":9000"),
				// flaky's GETs, 20 a second for 10 s once one is answered: each one the resetting
				// pod takes is retried on the other.
				corev1.Container{Name: "gets", Args: []string{"-get", "http://" + flakyVIP + ":8080/", "-get-host", flakyName + ":8080",
					"-load-rate", "20", "-load-for", "10s"}}))
		startPods(ctx, caller)
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	It("carries HTTP, gRPC, a WebSocket and raw TCP to the application, each in its protocol", func() {
		envoys := meshAnswers(ctx, web)
		Eventually(func(g Gomega) {
			g.Expect(logOf(g, caller, "grpc")).To(ContainSubstring(webVIP+":9091 grpc SERVING\n"), "the gRPC health check through the mesh")
			g.Expect(logOf(g, caller, "websocket")).To(ContainSubstring("http://"+webVIP+":8080/chat websocket 101 echo over the upgraded stream\n"),
				"the WebSocket through the mesh")
			g.Expect(logOf(g, caller, "tcp")).To(answeredBy(webVIP+":9000", envoys), "the raw TCP dial through the mesh")
		}, 2*time.Minute, time.Second).Should(Succeed(), "the node Envoy's view:\n%s", admin.diagnosis("-"))
	})

	It("gives the application the caller's SPIFFE ID in x-forwarded-client-cert, and its pod's IP to the callee's side of the hop", func() {
		// The application's answer: who called (the connection's source, the node Envoy's inbound
		// hand-over) and the headers the destination's proxy set: XFCC from the certificate it
		// verified, the caller's.
		var line string
		Eventually(func(g Gomega) {
			m := regexp.MustCompile(`(?m)^http://\S+ 200 (whoami .*)$`).FindStringSubmatch(logOf(g, caller, "whoami"))
			g.Expect(m).NotTo(BeNil(), "no answer of %s through the mesh", testapp.WhoamiPath)
			line = m[1]
		}, 2*time.Minute, time.Second).Should(Succeed(), "the node Envoy's view:\n%s", admin.diagnosis("-"))
		// Envoy's XFCC: By (the inbound's own certificate), Hash (of the caller's), URI (the caller's).
		Expect(line).To(MatchRegexp(`xfcc By=spiffe://aether\.internal/ns/%s/sa/web;(Hash=[0-9a-f]+;)?URI=%s$`, ns, regexp.QuoteMeta(callerID)),
			"the application reads the caller's identity from the certificate the mesh verified")

		// The hop itself: the caller's proxy opened its connection to web-0's inbound listener
		// (<pod IP>:18008) from the caller's network namespace, so it arrives from the caller pod's
		// IP, as the kernel of web-0's namespace has it (ss there). The connection stays in the
		// caller's pool (idle 30 s) between the requests of one a second.
		inbound := netnsHolding(web.Status.PodIP)
		Expect(inbound).NotTo(BeEmpty())
		var peers string
		Eventually(func(g Gomega) {
			out, err := exec.Command("nsenter", "--net="+inbound, "ss", "-Htn", "state", "established", "sport", "=", ":18008").CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "ss in web-0's namespace: %s", out)
			peers = string(out)
			g.Expect(peers).To(MatchRegexp(`(?m)\s%s:\d+\s*$`, regexp.QuoteMeta(caller.Status.PodIP)),
				"no connection to web-0's inbound listener comes from the caller pod's IP %s", caller.Status.PodIP)
		}, 30*time.Second, time.Second).Should(Succeed())

		// Negative control: the same request from outside the mesh, to the pod itself, carries no
		// caller identity (and the application sees the outsider's own address).
		outsider := testPod(ns, "outsider", withRestartNever, withContainers(
			corev1.Container{Name: "client", Args: []string{"-get", "http://" + web.Status.PodIP + ":8080" + testapp.WhoamiPath}}))
		startPods(ctx, outsider)
		Eventually(func(g Gomega) string { return logOf(g, outsider, "client") }, time.Minute, time.Second).Should(
			ContainSubstring(" 200 whoami peer "+outsider.Status.PodIP+" xff - xfcc -\n"), "a request from outside the mesh has no XFCC")
		AddReportEntry("who calls", fmt.Sprintf("the application's answer through the mesh: %q; web-0's inbound connections (ss in its namespace):\n%s", line, peers))
	})

	It("answers a request for a raw-TCP port with 421 and its x-aether-error, and reaches the service by its mesh name", func() {
		Eventually(func(g Gomega) {
			g.Expect(logOf(g, caller, "not-http")).To(MatchRegexp(`(?m)^http://%s:8080/ 421 x-aether-error=port-not-http `, regexp.QuoteMeta(webVIP)),
				"Host %s:9000 names web's raw-TCP port: the mesh's own answer", webName)
			// By name: the pod's resolver asks the mesh DNS (capture takes the query), which answers
			// the VIP; Host is the name the client dialled.
			g.Expect(logOf(g, caller, "by-name")).To(ContainSubstring("http://" + webName + ":8080/by-name 200 testapp at " + webName + ":8080, HTTP/1.1 /by-name\n"))
		}, 2*time.Minute, time.Second).Should(Succeed(), "the node Envoy's view:\n%s", admin.diagnosis("-"))
	})

	It("retries a GET the application reset on the other pod, and never a POST", func() {
		cluster := xds.SourceCluster(xds.HTTPCluster(flakyName, 8080), callerID)
		stats := clusterStatsPrefix(cluster)
		retries := stats + ".upstream_rq_retry"
		resets := func(g Gomega) float64 {
			// The labels in either order (the exposition sorts them by name).
			service, outcome := `service="`+ns+`/flaky"`, `outcome="app-reset"`
			return agentMetric(g, "aether_agent_request_outcomes_total", service+".*"+outcome+"|"+outcome+".*"+service)
		}
		// The GETs: every one answered, some of them after a retry, each retry prompted by the
		// resetting pod's proxy answering x-aether-outcome: app-reset.
		var summary string
		Eventually(func(g Gomega) string {
			summary = lastMatch(logOf(g, caller, "gets"), `load done .*`)
			return summary
		}, 2*time.Minute, time.Second).ShouldNot(BeEmpty(), "the GETs did not finish:\n%s", containerLog(ctx, caller, "gets"))
		Expect(summary).To(MatchRegexp(`^load done sent=\d+ answered=\d+ failed=0$`), "a GET the resetting pod took was not retried:\n%s", containerLog(ctx, caller, "gets"))
		var getRetries int
		var getResets float64
		Eventually(func(g Gomega) {
			getRetries, getResets = admin.stats(stats)[retries], resets(g)
			g.Expect(getRetries).To(BeNumerically(">", 0), "the caller's cluster %s retried nothing", cluster)
			g.Expect(getResets).To(BeNumerically(">", 0), "flaky's proxy answered no x-aether-outcome: app-reset")
		}, 30*time.Second, time.Second).Should(Succeed())

		// The POSTs: the ones the resetting pod takes fail, with the caller's proxy's 503, and the
		// retry count does not move.
		poster := pod("poster", withServiceAccount("caller"), withPorts("8080"),
			withAnnotations(map[string]string{portspec.AnnotationUpstreams: "flaky"}), withContainers(
				corev1.Container{Name: "app", Args: []string{"-http", "8080"}},
				corev1.Container{Name: "posts", Args: []string{"-get", "http://" + flakyVIP + ":8080/", "-get-host", flakyName + ":8080",
					"-get-method", "POST", "-load-rate", "20", "-load-for", "5s"}}))
		startPods(ctx, poster)
		var posts string
		Eventually(func(g Gomega) string {
			posts = logOf(g, poster, "posts")
			return lastMatch(posts, `load done .*`)
		}, 2*time.Minute, time.Second).ShouldNot(BeEmpty(), "the POSTs did not finish:\n%s", containerLog(ctx, poster, "posts"))
		failed := regexp.MustCompile(`(?m)^load failed \S+ (.*)$`).FindAllStringSubmatch(posts, -1)
		Expect(failed).NotTo(BeEmpty(), "no POST failed: the resetting pod took none, or the mesh retried them:\n%s", posts)
		for _, f := range failed {
			Expect(f[1]).To(HavePrefix("POST 503 "), "a POST the resetting pod took")
		}
		var after map[string]int
		var postResets float64
		Eventually(func(g Gomega) {
			after, postResets = admin.stats(stats), resets(g)
			g.Expect(postResets).To(BeNumerically(">=", getResets+float64(len(failed))), "flaky's proxy's app-reset answers to the POSTs")
		}, 30*time.Second, time.Second).Should(Succeed())
		Expect(after[retries]).To(Equal(getRetries), "the caller's proxy retried a POST (cluster %s)", cluster)
		AddReportEntry("resets", fmt.Sprintf("GETs: %s, %d retries, %v app-reset answers; POSTs: %s, %d failed with 503, retries still %d, app-reset answers %v",
			summary, getRetries, getResets, lastMatch(posts, `load done .*`), len(failed), after[retries], postResets))
	})
})

// meshVIP waits until MeshService ns/service is Ready (an endpoint healthy) with a VIP, and
// returns the VIP.
func meshVIP(ctx context.Context, ns, service string) string {
	GinkgoHelper()
	ms := &meshv1alpha1.MeshService{}
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: service}, ms)).To(Succeed())
		g.Expect(ms.Status.VIP).NotTo(BeEmpty())
		g.Expect(meshCondition(ms.Status.Conditions, "Ready").Status).To(Equal(metav1.ConditionTrue), "MeshService %s is not Ready", service)
	}, 2*time.Minute, time.Second).Should(Succeed())
	return ms.Status.VIP
}

// lastMatch is the last match of pattern (multi-line) in s, or "".
func lastMatch(s, pattern string) string {
	all := regexp.MustCompile(`(?m)`+pattern+`$`).FindAllString(s, -1)
	if len(all) == 0 {
		return ""
	}
	return strings.TrimSpace(all[len(all)-1])
}
