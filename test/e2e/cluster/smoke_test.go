//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

var _ = Describe("the operator on a real node", Ordered, func() {
	const ns = "smoke"
	ctx := context.Background()
	var deploy *appsv1.Deployment

	BeforeAll(func() {
		freshNamespace(ctx, ns, "payments")
		replicas := int32(2)
		deploy = &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "payments"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{
						Labels: map[string]string{"app": "payments", "aether.io/managed": "true"},
						Annotations: map[string]string{
							"endpoint.aether.io/port": "8080", "endpoint.aether.io/ports": "8080,9090=h2,9000=tcp",
							"endpoint.aether.io/health-path": "/healthz",
						},
					},
					Spec: corev1.PodSpec{
						ServiceAccountName:            "payments",
						TerminationGracePeriodSeconds: new(int64(10)),
						Containers: []corev1.Container{testServer(corev1.Container{
							Name: "app",
							Args: []string{"-http", "8080", "-h2c", "9090", "-tcp", "9000"},
							// The draining window: the endpoint is Draining while this runs.
							Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}},
						})},
					},
				},
			},
		}
		Expect(k8s.Create(ctx, deploy)).To(Succeed())
	})

	It("runs the manager from the image make images built: containerd holds the recorded digest, the pods its image ID", func() {
		// make images records the operator image's digest and the digest of its config (the image
		// ID) beside the archive that hack/cluster/up.sh imports; both must be what runs here.
		recorded := func(name string) string {
			data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "bin", "images", name))
			Expect(err).NotTo(HaveOccurred(), "make images records bin/images/%s", name)
			digest := strings.TrimSpace(string(data))
			Expect(digest).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`), name)
			return digest
		}
		digest, imageID := recorded("operator.digest"), recorded("operator.imageid")

		// The image containerd imported under the manifests' name is the manifest make images
		// built: ctr's import of the OCI archive keeps its digest.
		const name = "docker.io/aether/operator:dev"
		var target string
		for line := range strings.SplitSeq(ctr("images", "ls", "name=="+name), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == name {
				target = f[2]
			}
		}
		Expect(target).To(Equal(digest), "ctr images ls: the target of %s", name)

		// The kubelet reports the image ID (containerd's, the config's digest: an imported image
		// has no <repository>@<digest> reference, which only a pull from a registry adds).
		var ids map[string]string
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(operatorNamespace), managerPods)).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			ids = map[string]string{}
			for _, pod := range pods.Items {
				for _, c := range pod.Status.ContainerStatuses {
					if c.Name == "manager" && c.ImageID != "" {
						g.Expect(c.Image).To(Equal(name), "pod %s", pod.Name)
						ids[pod.Name] = c.ImageID
					}
				}
			}
			g.Expect(ids).To(HaveLen(len(pods.Items)), "every manager pod's container has started")
		}, time.Minute, time.Second).Should(Succeed())
		for pod, id := range ids {
			Expect(id).To(Equal(imageID), "pod %s's imageID", pod)
		}
	})

	It("runs the pods with kubelet-assigned IPs, and the agent registers them healthy by a real probe", func() {
		var pods corev1.PodList
		Eventually(func(g Gomega) {
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "payments"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(2))
			for _, p := range pods.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(p.Status.PodIP).NotTo(BeEmpty())
			}
		}, 2*time.Minute, time.Second).Should(Succeed())

		Eventually(func(g Gomega) {
			for _, p := range pods.Items {
				ep := &meshv1alpha1.MeshEndpoint{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Name}, ep)).To(Succeed())
				g.Expect(ep.Spec.Address).To(Equal(p.Status.PodIP))
				g.Expect(ep.Spec.PortsSummary).To(Equal("8080/HTTP,9000/TCP,9090/HTTP2"))
				g.Expect(ep.Spec.NodeName).To(Equal("node-a"))
				g.Expect(ep.Status.Health).To(Equal(meshv1alpha1.HealthHealthy))
			}
		}, time.Minute, time.Second).Should(Succeed())

		// The same health path answers from here, inside the node's network namespace.
		resp, err := http.Get(fmt.Sprintf("http://%s:8080/healthz", pods.Items[0].Status.PodIP))
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(string(body)).To(Equal("ok\n"))
	})

	It("derives the MeshService and a generated Service with a ClusterIP", func() {
		ms := readyMeshService(ctx, ns, "payments", meshv1alpha1.EndpointCounts{Ready: 2, Total: 2})
		// The authority's port is the port: payments serves HTTP on 8080 and 9090, not 80, so a
		// portless http:// reaches nothing and is answered 421 port-not-declared.
		Expect(ms.Status.DefaultHTTPPort).To(BeNil())
		Expect(*ms.Status.DefaultTCPPort).To(Equal(int32(9000)))
		Expect(ms.Status.Names).To(Equal([]string{"payments.smoke.aether.internal", "payments.smoke.svc.cluster.local", "payments.smoke"}))
		Expect(ms.Status.DialSurface).To(HaveLen(2*3 + 10))
		Expect(ms.Status.DialSurface).To(ContainElement(And(
			HaveField("Address", "http://<name>/"), HaveField("Outcome", meshv1alpha1.DialMisdirected),
			HaveField("Error", meshv1alpha1.DialErrorPortNotDeclared), HaveField("Port", BeNil()))))
		Expect(ms.Status.DialSurface).To(ContainElement(And(
			HaveField("Address", "Host: <name>:8080"), HaveField("Outcome", meshv1alpha1.DialReaches),
			HaveField("Port", HaveValue(Equal(int32(8080)))))))
		Expect(ms.Status.Identity).To(Equal("spiffe://aether.internal/ns/smoke/sa/payments"))

		svc := &corev1.Service{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "payments"}, svc)).To(Succeed())
		Expect(svc.Spec.ClusterIP).To(Equal(ms.Status.VIP))
		Expect(svc.Spec.ClusterIP).To(HavePrefix("10.96.0."))
		var names []string
		for _, p := range svc.Spec.Ports {
			names = append(names, p.Name)
		}
		Expect(names).To(ConsistOf("http", "https", "http-8080", "tcp-9000", "h2-9090", "mesh", "mesh-tcp"))
	})

	It("makes a gRPC-only service Ready: its primary is probed with grpc.health.v1", func() {
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"}})).To(Succeed())
		Expect(k8s.Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ledger"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{
						Labels: map[string]string{"app": "ledger", "aether.io/managed": "true"},
						// A gRPC server answers an h2c GET with 415: only the gRPC health probe
						// can make this endpoint Healthy.
						Annotations: map[string]string{"endpoint.aether.io/port": "9090", "endpoint.aether.io/ports": "9090=grpc"},
					},
					Spec: corev1.PodSpec{
						ServiceAccountName:            "ledger",
						TerminationGracePeriodSeconds: new(int64(10)),
						Containers:                    []corev1.Container{testServer(corev1.Container{Name: "app", Args: []string{"-grpc", "9090"}})},
					},
				},
			},
		})).To(Succeed())

		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "ledger"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			ep := &meshv1alpha1.MeshEndpoint{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: pods.Items[0].Name}, ep)).To(Succeed())
			g.Expect(ep.Spec.Ports).To(Equal([]meshv1alpha1.PortProtocol{
				{Port: 9090, Protocol: meshv1alpha1.ProtocolHTTP2, AppProtocol: meshv1alpha1.AppProtocolGRPC}}))
			g.Expect(ep.Spec.PortsSummary).To(Equal("9090/HTTP2"))
			g.Expect(ep.Status.Health).To(Equal(meshv1alpha1.HealthHealthy))
		}, 2*time.Minute, time.Second).Should(Succeed())

		ms := readyMeshService(ctx, ns, "ledger", meshv1alpha1.EndpointCounts{Ready: 1, Total: 1})
		Expect(ms.Status.Ports).To(ConsistOf(And(HaveField("Port", int32(9090)), HaveField("Protocol", meshv1alpha1.ProtocolHTTP2))))

		svc := &corev1.Service{}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, svc)).To(Succeed())
			g.Expect(svc.Spec.Ports).To(ContainElement(And(HaveField("Name", "h2-9090"), HaveField("Port", int32(9090)),
				HaveField("AppProtocol", HaveValue(Equal("kubernetes.io/h2c"))))))
		}, time.Minute, time.Second).Should(Succeed())
	})

	It("drains the endpoint of a pod being deleted, then removes it", func() {
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "payments"})).To(Succeed())
		scaled := deploy.DeepCopy()
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(deploy), scaled)).To(Succeed())
		scaled.Spec.Replicas = new(int32(1))
		Expect(k8s.Update(ctx, scaled)).To(Succeed())

		var gone string
		Eventually(func(g Gomega) {
			for _, p := range pods.Items {
				ep := &meshv1alpha1.MeshEndpoint{}
				if k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Name}, ep) == nil && ep.Status.Health == meshv1alpha1.HealthDraining {
					gone = p.Name
				}
			}
			g.Expect(gone).NotTo(BeEmpty())
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: gone}, &meshv1alpha1.MeshEndpoint{}))
		}, time.Minute, time.Second).Should(BeTrue())
	})

	It("never takes a pod of an ignored namespace, and judges none there", func() {
		// kube-public is among the defaults of --ignored-namespaces and of the webhook's
		// namespaceSelector: a managed pod whose annotations do not parse is admitted unjudged,
		// and neither it nor a valid one is ever registered.
		podIn := func(namespace, name, ports string, opts ...podOption) *corev1.Pod {
			return testPod(namespace, name, append([]podOption{asManaged, withPorts(ports),
				withContainers(corev1.Container{Name: "app", Args: []string{"-http", "8080"}})}, opts...)...)
		}
		ignored := []*corev1.Pod{
			podIn("kube-public", "ignored-valid", "8080"),
			podIn("kube-public", "ignored-broken", "8080,9000=tpc"),
		}
		for _, p := range ignored {
			Expect(k8s.Create(ctx, p)).To(Succeed(), "a pod of kube-public was judged")
			DeferCleanup(func() { _ = k8s.Delete(context.Background(), p) })
		}
		Eventually(func(g Gomega) {
			for _, p := range ignored {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.Status.PodIP).NotTo(BeEmpty())
			}
		}, 2*time.Minute, time.Second).Should(Succeed())
		// The agent reconciles its node's pods one at a time, in the order their changes came:
		// once a pod created after these has its MeshEndpoint, these were looked at with their IPs.
		control := podIn(ns, "after-ignored", "8080", withServiceAccount("payments"))
		Expect(k8s.Create(ctx, control)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(context.Background(), control) })
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKeyFromObject(control), &meshv1alpha1.MeshEndpoint{})
		}, 2*time.Minute, time.Second).Should(Succeed())
		for _, p := range ignored {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &meshv1alpha1.MeshEndpoint{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod %s/%s of an ignored namespace got a MeshEndpoint (%v)", p.Namespace, p.Name, err)
		}
	})

	It("denies a pod declaring 18082 at admission, with the reason", func() {
		bad := testPod(ns, "bad", asManaged, withPorts("8080,18082=tcp"), withServiceAccount("payments"), withDefaultGracePeriod,
			withContainers(corev1.Container{Name: "app"}))
		err := k8s.Create(ctx, bad)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`admission webhook "vpod.mesh.aether.io" denied the request: endpoint.aether.io/ports: "8080,18082=tcp": port 18082 is reserved: it is the mesh's TCP port`))
		Expect(strings.Count(err.Error(), "reserved")).To(Equal(1))
	})

	It("lets every namespace user read the mesh state, and nobody but the mesh write it", func() {
		// kube-controller-manager aggregates the shipped viewer roles into view, edit and admin.
		for _, role := range []string{"view", "edit"} {
			Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "smoke-" + role},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "smoke-" + role}},
			})).To(Succeed())
		}
		can := func(user, verb, resource string) bool {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Verb: verb, Group: meshv1alpha1.GroupVersion.Group, Resource: resource}}}
			Expect(k8s.Create(ctx, review)).To(Succeed())
			return review.Status.Allowed
		}
		for _, user := range []string{"smoke-view", "smoke-edit"} {
			Eventually(func(g Gomega) {
				g.Expect(can(user, "list", "meshservices")).To(BeTrue(), user+" lists meshservices")
				g.Expect(can(user, "get", "meshendpoints")).To(BeTrue(), user+" gets meshendpoints")
			}, time.Minute, time.Second).Should(Succeed())
			for _, res := range []string{"meshendpoints", "meshservices"} {
				for _, verb := range []string{"create", "update", "patch", "delete"} {
					Expect(can(user, verb, res)).To(BeFalse(), user+" may "+verb+" "+res)
				}
			}
		}
	})
})

// readyMeshService waits until MeshService ns/name counts want and is Ready, and returns it.
func readyMeshService(ctx context.Context, ns, name string, want meshv1alpha1.EndpointCounts) *meshv1alpha1.MeshService {
	GinkgoHelper()
	ms := &meshv1alpha1.MeshService{}
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ms)).To(Succeed())
		g.Expect(ms.Status.Endpoints).To(Equal(want))
		g.Expect(ms.Status.Conditions).To(ContainElement(And(
			HaveField("Type", meshv1alpha1.ServiceConditionReady), HaveField("Status", metav1.ConditionTrue))))
	}, time.Minute, time.Second).Should(Succeed())
	return ms
}
