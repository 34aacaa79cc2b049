//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// The mesh DNS on the real node: a meshed pod's container dials its service by its mesh name,
// <service>.<namespace>.aether.internal:18082, with the test server's -dial (Go's resolver, which
// reads the pod's resolv.conf: this cluster has no cluster DNS, so the kubelet's resolv.conf names
// no nameserver and the resolver asks 127.0.0.1:53). Capture redirects the query to the agent's
// mesh DNS in the pod's namespace, which answers the VIP; the dial to VIP:18082 is then captured
// like any VIP dial, and the node's Envoy carries it to the service's default TCP port in one of
// its pods (tcpApp answers "peer <the node Envoy's address> at <that pod>").
// A meshed pod that opts out (aether.io/mesh-dns: "false") has capture but no DNS rule, and an
// unmeshed pod no table at all: their DNS is untouched.
var _ = Describe("mesh DNS on a real node", Ordered, func() {
	const ns = "meshdns"
	ctx := context.Background()
	var caught, optedOut, plain *corev1.Pod

	pod := podBuilder(ns, withPorts("9000=tcp"), withServiceAccount("payments"))

	BeforeAll(func() {
		// The seed gives payments its VIP: the mesh DNS answers the name with it.
		seedService(ctx, ns, "payments")
	})

	It("resolves the service's mesh name in a meshed pod, and the dial by that name is captured", func() {
		target := "payments." + ns + ".aether.internal:18082"
		dialer := dialing("client", target, "1s")
		caught = pod("caught", asManaged, withContainers(tcpApp, dialer))
		optedOut = pod("opted-out", asManaged, withAnnotations(map[string]string{portspec.AnnotationMeshDNS: portspec.MeshDNSOff}),
			withContainers(tcpApp, dialer))
		plain = pod("plain", withContainers(tcpApp, dialer))
		startPods(ctx, caught, optedOut, plain)

		logs := func(p *corev1.Pod) string {
			out, err := clientset().CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "client"}).DoRaw(ctx)
			Expect(err).NotTo(HaveOccurred())
			return string(out)
		}
		// The service payments' pods, all three of this spec's meshed pods: the name took the dial
		// to payments' VIP, the one the chain Envoy matched belongs to, on its default TCP port.
		answers := meshAnswers(ctx, runningPod(ctx, ns, "seed"), caught, optedOut)
		Eventually(func() string { return logs(caught) }, time.Minute, time.Second).Should(answeredBy(target, answers))
		// The pods whose DNS is left alone cannot resolve the mesh name (no cluster DNS here):
		// their dials fail to resolve, and never reach the VIP.
		for _, p := range []*corev1.Pod{optedOut, plain} {
			Eventually(func() string { return logs(p) }, time.Minute, time.Second).Should(ContainSubstring(target+" error"),
				"pod %s", p.Name)
			Expect(logs(p)).NotTo(ContainSubstring(target+" peer "), "pod %s", p.Name)
		}
	})

	It("has the DNS rules in the meshed pod's table only: none in the opted-out pod's, no table in the unmeshed pod's", func() {
		recorded := readRegistry()
		Expect(recorded).To(HaveKey(caught.UID))
		Expect(recorded).To(HaveKey(optedOut.UID))
		Eventually(func() []string { return dnsRules(recorded[caught.UID].NetNS) }, 30*time.Second, time.Second).
			Should(ConsistOf("udp dport 53 redirect to :18054", "tcp dport 53 redirect to :18054"))
		Expect(aetherChains(recorded[optedOut.UID].NetNS)).To(ContainElement(capture.ChainOutput))
		Expect(dnsRules(recorded[optedOut.UID].NetNS)).To(BeEmpty(), "the opted-out pod's DNS is redirected")

		Expect(recorded).NotTo(HaveKey(plain.UID))
		plainNetNS := netnsHolding(plain.Status.PodIP)
		Expect(plainNetNS).NotTo(BeEmpty())
		Expect(aetherChains(plainNetNS)).To(BeNil(), "an unmeshed pod's network namespace has table inet aether")
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
})

// dnsRules are the rules of table inet aether's output chain, in the namespace pinned at path,
// that redirect DNS (port 53), by their text (the comment capture keeps on each rule).
func dnsRules(path string) []string {
	GinkgoHelper()
	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	conn, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	Expect(err).NotTo(HaveOccurred())
	rules, err := conn.GetRules(&nftables.Table{Name: capture.TableName, Family: nftables.TableFamilyINet},
		&nftables.Chain{Name: capture.ChainOutput})
	Expect(err).NotTo(HaveOccurred())
	out := []string{}
	for _, r := range rules {
		if text, _ := userdata.GetString(r.UserData, userdata.TypeComment); strings.Contains(text, "dport 53 ") {
			out = append(out, text)
		}
	}
	return out
}
