//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"maps"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// The specs' pods all run the test server (hack/testapp), loaded on the node as testServerImage.
// testPod builds every one of them; the options say how a spec's pod differs.
const testServerImage = "docker.io/aether/testserver:dev"

// podOption shapes a pod testPod builds.
type podOption func(*corev1.Pod)

// testPod is pod ns/name, deleted quickly (a 1 s grace period), shaped by opts in order.
func testPod(ns, name string, opts ...podOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: new(int64(1))},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// podBuilder is testPod in ns with defaults applied before each pod's own options: the pods of
// one spec.
func podBuilder(ns string, defaults ...podOption) func(name string, opts ...podOption) *corev1.Pod {
	return func(name string, opts ...podOption) *corev1.Pod {
		return testPod(ns, name, append(slices.Clone(defaults), opts...)...)
	}
}

// testServer is c running the test server (never pulled: the image is loaded on the node).
func testServer(c corev1.Container) corev1.Container {
	c.Image, c.ImagePullPolicy = testServerImage, corev1.PullNever
	return c
}

// withContainers adds containers, each running the test server.
func withContainers(containers ...corev1.Container) podOption {
	return func(p *corev1.Pod) {
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, testServer(c))
		}
	}
}

// withLabels adds labels.
func withLabels(labels map[string]string) podOption {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		maps.Copy(p.Labels, labels)
	}
}

// asManaged labels the pod as the mesh's (aether.io/managed: "true").
var asManaged = withLabels(map[string]string{registration.LabelManaged: registration.ManagedValue})

// withAnnotations adds annotations.
func withAnnotations(annotations map[string]string) podOption {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		maps.Copy(p.Annotations, annotations)
	}
}

// withPorts declares the pod's ports (endpoint.aether.io/ports).
func withPorts(ports string) podOption {
	return withAnnotations(map[string]string{portspec.AnnotationPorts: ports})
}

// withServiceAccount runs the pod as ServiceAccount sa: its MeshService, when managed.
func withServiceAccount(sa string) podOption {
	return func(p *corev1.Pod) { p.Spec.ServiceAccountName = sa }
}

// withHostNetwork runs the pod in the node's network namespace.
func withHostNetwork(p *corev1.Pod) { p.Spec.HostNetwork = true }

// withRestartNever never restarts the pod's containers.
func withRestartNever(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }

// withDefaultGracePeriod leaves the grace period to the API server's default (30 s).
func withDefaultGracePeriod(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil }

// withVolumes adds volumes.
func withVolumes(volumes ...corev1.Volume) podOption {
	return func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, volumes...) }
}

// tcpApp is the application of the capture specs' pods. Their ports, "9000=tcp", leave the
// default HTTP port 8080 their primary, which the agent probes (GET /): it serves HTTP there, so
// that the endpoint is healthy (the node's Envoy sends nothing to an unhealthy one: it closes the
// connection). On TCP port 9000, their default TCP port (what <VIP>:18082 reaches), it speaks
// first and closes: "peer <the caller's address> at <its pod's name>". A dial the mesh carried is
// answered with the node Envoy's address as the caller (meshAnswers): the destination's inbound
// listener hands the connection to the application from the Envoy's own pod; one that reached a
// pod directly, through kube-proxy, with the dialler's.
var tcpApp = peerApp("app", "9000", "-http", "8080")

// peerApp is container name answering on TCP port "peer <the caller's address> at <its pod's
// name>" (tcpApp's answer), with the test server's other flags args.
func peerApp(name, port string, args ...string) corev1.Container {
	return corev1.Container{Name: name, Args: append(args, "-peer", ":"+port, "-peer-name", "$(POD_NAME)"),
		Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}
}

// meshAnswers are the answers a dial gets when the mesh carries it to tcpApp in one of pods:
// "peer <a node Envoy's address> at <that pod's name>", for every Envoy running (two during the
// node Envoy's handover) and every pod.
func meshAnswers(ctx context.Context, pods ...*corev1.Pod) []string {
	GinkgoHelper()
	var envoys corev1.PodList
	Expect(k8s.List(ctx, &envoys, client.InNamespace(operatorNamespace), client.MatchingLabels{"app.kubernetes.io/name": "aether-envoy"})).To(Succeed())
	var out []string
	for _, e := range envoys.Items {
		if e.Status.PodIP == "" {
			continue
		}
		for _, p := range pods {
			out = append(out, "peer "+e.Status.PodIP+" at "+p.Name)
		}
	}
	Expect(out).NotTo(BeEmpty(), "no node Envoy runs with an address")
	return out
}

// steadilyCarried checks that the dial log of container in pod ns/name holds, over the last
// window, at least three dials, every one answered with one of answers: the mesh carries the
// pod's dials steadily. While a spec's pods start, the node's Envoy is sent new listeners for each
// (a connection still in a listener's filters when that listener is replaced is closed), so a
// spec that counts failed dials starts from here.
func steadilyCarried(g Gomega, ns, name, container string, answers []string, window time.Duration) {
	dials := containerDialLog(g, ns, name, container, time.Now().Add(-window))
	g.Expect(len(dials)).To(BeNumerically(">=", 3), "dials of %s/%s in the last %s", name, container, window)
	for _, d := range dials {
		g.Expect(answers).To(ContainElement(d.Answer), "%s/%s's dial at %s", name, container, d.At.Format(time.RFC3339Nano))
	}
}

// runningPod waits until pod ns/name runs with an IP, and returns it.
func runningPod(ctx context.Context, ns, name string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	podsRunning(ctx, p)
	return p
}

// answeredBy matches a dial log (lines "<target> <answer>") holding a line of target answered
// with one of answers.
func answeredBy(target string, answers []string) OmegaMatcher {
	var lines []OmegaMatcher
	for _, a := range answers {
		lines = append(lines, ContainSubstring(target+" "+a+"\n"))
	}
	return Or(lines...)
}

// dialing is a container name that dials target every period and logs "<target> <answer>".
func dialing(name, target, every string) corev1.Container {
	return corev1.Container{Name: name, Args: []string{"-dial", target, "-dial-every", every}}
}

// seedService makes ns afresh with the service account sa and starts there the meshed pod seed
// of sa's service, the test server on TCP 9000 (its default TCP port), which gives the service
// its VIP; it returns the VIP.
func seedService(ctx context.Context, ns, sa string) string {
	GinkgoHelper()
	freshNamespace(ctx, ns, sa)
	Expect(k8s.Create(ctx, testPod(ns, "seed", withPorts("9000=tcp"), withServiceAccount(sa), asManaged, withContainers(tcpApp)))).To(Succeed())
	return tcpVIP(ctx, ns, sa, 2*time.Minute)
}

// createWeb creates web in ns: the Service web (ClusterIP, port 8080, selecting app=web) and its
// one meshed pod web-0 (service account web), answering "peer <caller> at web-0" on 8080 (peerApp).
// It returns the Service, with its cluster IP.
func createWeb(ctx context.Context, ns string) *corev1.Service {
	GinkgoHelper()
	web := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "tcp", Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
	}
	Expect(k8s.Create(ctx, web)).To(Succeed())
	Expect(k8s.Create(ctx, testPod(ns, "web-0", withLabels(map[string]string{"app": "web"}), asManaged, withPorts("8080=tcp"),
		withServiceAccount("web"), withContainers(peerApp("app", "8080"))))).To(Succeed())
	return web
}

// tcpVIP waits, up to within, until MeshService ns/service has a VIP and 9000 as its default TCP
// port (so that the VIP's 18082 reaches something), and returns the VIP.
func tcpVIP(ctx context.Context, ns, service string, within time.Duration) string {
	GinkgoHelper()
	ms := &meshv1alpha1.MeshService{}
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: service}, ms)).To(Succeed())
		g.Expect(ms.Status.VIP).NotTo(BeEmpty())
		g.Expect(ms.Status.DefaultTCPPort).To(HaveValue(Equal(int32(9000))))
	}, within, time.Second).Should(Succeed())
	return ms.Status.VIP
}

// startPods creates pods and waits until every one runs with an IP.
func startPods(ctx context.Context, pods ...*corev1.Pod) {
	GinkgoHelper()
	for _, p := range pods {
		Expect(k8s.Create(ctx, p)).To(Succeed())
	}
	podsRunning(ctx, pods...)
}

// podsRunning waits until every one of pods runs with an IP, and reads each into its pod.
func podsRunning(ctx context.Context, pods ...*corev1.Pod) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		for _, p := range pods {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.PodIP).NotTo(BeEmpty())
		}
	}, 2*time.Minute, time.Second).Should(Succeed())
}
