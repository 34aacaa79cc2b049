//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// The mesh's identities end to end on the real node, with nothing made by hand: a managed pod's
// agent registers it, the controller derives its MeshService (status.identity), the registrar
// (the SPIRE server's sidecar) writes the entry, the SPIRE agent issues the SVID, the identity
// gate lets the pod start, and the node agent serves the SVID by SDS to the node's Envoy from the
// Delegated Identity API. Removing the MeshService removes its entry.
var _ = Describe("Workload identities from SPIRE", Ordered, func() {
	const (
		ns          = "identity"
		trustDomain = "aether.internal"
	)
	ctx := context.Background()
	td := spiffeid.RequireTrustDomainFromString(trustDomain)
	idOf := func(sa string) string { return "spiffe://" + trustDomain + "/ns/" + ns + "/sa/" + sa }

	BeforeAll(func() {
		freshNamespace(ctx, ns, "web", "db")
	})
	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	It("holds each pod in its identity gate until the registrar's entry exists, then starts it", func() {
		// The registrar (the SPIRE server's sidecar) is paused (SIGSTOP) while the pods start, so
		// no entry of theirs can exist: the gates hold. Resumed, it catches up from its watch and
		// writes the entries; the gates let the pods start.
		for _, sa := range []string{"web", "db"} { // an earlier run's, which the registrar removes
			Eventually(func() string { return spireServer("entry", "show", "-spiffeID", idOf(sa)) }, time.Minute, time.Second).
				ShouldNot(ContainSubstring("Entry ID"))
		}
		registrar := registrarPID()
		Expect(syscall.Kill(registrar, syscall.SIGSTOP)).To(Succeed())
		resumed := false
		resume := func() {
			if !resumed {
				Expect(syscall.Kill(registrar, syscall.SIGCONT)).To(Succeed())
				resumed = true
			}
		}
		DeferCleanup(resume)
		for _, sa := range []string{"web", "db"} {
			Expect(k8s.Create(ctx, meshPod(ns, sa+"-0", sa))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, sa := range []string{"web", "db"} {
				p := &corev1.Pod{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa + "-0"}, p)).To(Succeed())
				gate := initStatus(p, "aether-identity-ready")
				g.Expect(gate).NotTo(BeNil())
				g.Expect(gate.State.Running).NotTo(BeNil(), "the gate of %s runs", p.Name)
				// Its waiting line, every 10 s: it has asked SPIRE and got nothing.
				g.Expect(containerLog(ctx, p, "aether-identity-ready")).To(ContainSubstring("still no X.509 SVID"))
			}
		}, 2*time.Minute, time.Second).Should(Succeed())
		for _, sa := range []string{"web", "db"} {
			Expect(spireServer("entry", "show", "-spiffeID", idOf(sa))).NotTo(ContainSubstring("Entry ID"), "no entry for %s while the registrar is paused", sa)
			p := &corev1.Pod{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa + "-0"}, p)).To(Succeed())
			Expect(p.Status.Phase).To(Equal(corev1.PodPending), "pod %s is held", p.Name)
		}

		resumedAt := time.Now()
		resume()
		Eventually(func(g Gomega) {
			for _, sa := range []string{"web", "db"} {
				p := &corev1.Pod{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa + "-0"}, p)).To(Succeed())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			}
		}, 3*time.Minute, time.Second).Should(Succeed())
		for _, sa := range []string{"web", "db"} {
			p := &corev1.Pod{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa + "-0"}, p)).To(Succeed())
			Expect(p.Spec.InitContainers).NotTo(BeEmpty())
			Expect(p.Spec.InitContainers[0].Name).To(Equal("aether-identity-ready"), "the gate is first among the init containers")
			gate := initStatus(p, "aether-identity-ready")
			Expect(gate).NotTo(BeNil())
			Expect(gate.State.Terminated).NotTo(BeNil())
			Expect(gate.State.Terminated.ExitCode).To(BeZero())
			// Seconds: the kubelet's timestamps have no finer grain.
			Expect(gate.State.Terminated.FinishedAt.Time).To(BeTemporally(">=", resumedAt.Truncate(time.Second)),
				"the gate of %s finished before the registrar could write its entry", p.Name)
			Expect(containerLog(ctx, p, "aether-identity-ready")).To(ContainSubstring("got "+idOf(sa)), "the gate says which SVID it got")
			Expect(spireServer("entry", "show", "-spiffeID", idOf(sa))).To(ContainSubstring("Entry ID"))
		}
	})

	It("registers one entry per MeshService identity and node running its pods, marked as the registrar's and parented to that node's SPIRE agent only", func() {
		node := &corev1.Node{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "node-a"}, node)).To(Succeed())
		// k8s_psat's ID of node-a's agent (config/spire's cluster "aether"): not the node agents'
		// alias, which every node's agent holds.
		agent := "spiffe://" + trustDomain + "/spire/agent/k8s_psat/aether/" + string(node.UID)
		for _, sa := range []string{"web", "db"} {
			ms := &meshv1alpha1.MeshService{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa}, ms)).To(Succeed())
			Expect(ms.Status.Identity).To(Equal(idOf(sa)))
			entry := spireServer("entry", "show", "-spiffeID", ms.Status.Identity)
			Expect(regexp.MustCompile(`(?m)^Entry ID\s*:`).FindAllString(entry, -1)).To(HaveLen(1), entry)
			Expect(entry).To(MatchRegexp(`(?m)^Entry ID\s*: aether-operator\.[0-9a-f]{32}$`))
			Expect(entry).To(MatchRegexp(`(?m)^Parent ID\s*: ` + regexp.QuoteMeta(agent) + `$`))
			Expect(entry).To(MatchRegexp(`(?m)^Selector\s*: k8s:ns:` + ns + `$`))
			Expect(entry).To(MatchRegexp(`(?m)^Selector\s*: k8s:sa:` + sa + `$`))
		}
	})

	It("serves each pod's SVID by SDS from the node agent, chaining to the served bundle, and the two SVIDs shake hands only with the pinned identity", func() {
		dialCtx, cancelDial := context.WithTimeout(ctx, time.Minute)
		defer cancelDial()
		c, err := xdstest.Dial(dialCtx, agentXDSSocket(ctx), "node-a")
		Expect(err).NotTo(HaveOccurred())
		defer c.Close()
		bundleSecret := xds.TrustBundleSecret(trustDomain)
		secrets := map[string]string{"web": xds.CertificateSecret(idOf("web")), "db": xds.CertificateSecret(idOf("db"))}
		awaitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		Expect(c.Await(awaitCtx, func(s xdstest.State) error {
			for _, name := range []string{bundleSecret, secrets["web"], secrets["db"]} {
				if s.Secret(name) == nil {
					return fmt.Errorf("no secret %s yet (asked: %q)", name, s.Requested[xdstest.Secrets])
				}
			}
			return nil
		})).To(Succeed())
		served := c.State()
		bundle, err := x509bundle.Parse(td, served.Secret(bundleSecret).GetValidationContext().GetTrustedCa().GetInlineBytes())
		Expect(err).NotTo(HaveOccurred())
		svids := map[string]*x509svid.SVID{}
		for sa, name := range secrets {
			sv := parseSVID(served.Secret(name))
			ms := &meshv1alpha1.MeshService{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa}, ms)).To(Succeed())
			Expect(sv.Certificates[0].URIs).To(HaveLen(1))
			Expect(sv.Certificates[0].URIs[0].String()).To(Equal(ms.Status.Identity))
			id, _, err := x509svid.Verify(sv.Certificates, bundle)
			Expect(err).NotTo(HaveOccurred(), "the SVID of %s chains to the served bundle", sa)
			Expect(id.String()).To(Equal(ms.Status.Identity))
			svids[sa] = sv
		}
		web, db := spiffeid.RequireFromString(idOf("web")), spiffeid.RequireFromString(idOf("db"))
		Expect(spiffetest.Handshake(svids["web"], svids["db"], bundle, web)).To(Succeed(), "db's SVID dialing web's, pinning web")
		Expect(spiffetest.Handshake(svids["web"], svids["db"], bundle, db)).To(MatchError(ContainSubstring("unexpected ID")),
			"db's SVID dialing web's while pinning db must fail")
	})

	It("removes a MeshService's entry with the MeshService", func() {
		Expect(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0"}}, client.GracePeriodSeconds(0))).To(Succeed())
		Expect(k8s.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}})).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &meshv1alpha1.MeshService{}))
		}, 2*time.Minute, time.Second).Should(BeTrue(), "the MeshService db goes with its pod and ServiceAccount")
		Eventually(func() string {
			return spireServer("entry", "show", "-spiffeID", idOf("db"))
		}, time.Minute, time.Second).ShouldNot(ContainSubstring("Entry ID"), "db's entry goes with its MeshService")
		Expect(spireServer("entry", "show", "-spiffeID", idOf("web"))).To(ContainSubstring("Entry ID"), "web's entry stays")
	})
})

// agentXDSSocket is the node agent's xDS socket as the node's Envoy reaches it (xdsSocket): this
// process reads the node's file system directly (it runs on the host's, in the node's network
// namespace).
func agentXDSSocket(ctx context.Context) string {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace("aether-operator-system"),
		client.MatchingLabels{"app.kubernetes.io/name": "aether-agent"})).To(Succeed())
	Expect(pods.Items).To(HaveLen(1))
	return xdsSocket(&pods.Items[0])
}

// registrarPID is the process ID, on the node, of the SPIRE registrar (the operator image's
// /manager --spire-registrar-only, the SPIRE server's sidecar).
func registrarPID() int {
	GinkgoHelper()
	out, err := exec.Command("pgrep", "-f", "--", "--spire-registrar-only").Output()
	Expect(err).NotTo(HaveOccurred(), "pgrep found no registrar process")
	fields := strings.Fields(string(out))
	Expect(fields).To(HaveLen(1), "registrar processes: %q", out)
	pid, err := strconv.Atoi(fields[0])
	Expect(err).NotTo(HaveOccurred())
	return pid
}

// meshPod is a managed test server pod of ServiceAccount sa (the service), serving HTTP on 8080
// and TCP on 9000.
func meshPod(ns, name, sa string) *corev1.Pod {
	return testPod(ns, name, asManaged, withPorts("8080,9000=tcp"), withServiceAccount(sa), withDefaultGracePeriod,
		withContainers(corev1.Container{Name: "app", Args: []string{"-http", "8080", "-tcp", "9000"}}))
}

// initStatus is the status of p's init container name, nil when the kubelet has not reported it.
func initStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.InitContainerStatuses {
		if p.Status.InitContainerStatuses[i].Name == name {
			return &p.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// containerLog is the log of p's container name (an init container too).
func containerLog(ctx context.Context, p *corev1.Pod, name string) string {
	GinkgoHelper()
	return logOf(Default, p, name)
}

// logOf is containerLog inside a poll: an error (the container restarting, its log not yet
// there) fails g, and the poll tries again.
func logOf(g Gomega, p *corev1.Pod, name string) string {
	out, err := clientset().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: name}).DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred(), "the log of container %s of pod %s/%s", name, p.Namespace, p.Name)
	return string(out)
}

// parseSVID reads an SVID secret as the node's Envoy would: its chain and key, inline PEM.
func parseSVID(secret *tlsv3.Secret) *x509svid.SVID {
	GinkgoHelper()
	cert := secret.GetTlsCertificate()
	sv, err := x509svid.Parse(cert.GetCertificateChain().GetInlineBytes(), cert.GetPrivateKey().GetInlineBytes())
	Expect(err).NotTo(HaveOccurred(), "the secret %s", secret.GetName())
	return sv
}
