//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/nftables"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aether-mesh/aether-operator/internal/capture"
)

// Capture on the real node: the kubelet starts a managed pod, the CNI plugin hands it to the
// agent, and the agent programs table inet aether in the pod's network namespace (surface mode,
// the default) before the pod's containers start. Inside that pod one container dials its
// MeshService's VIP on the mesh's TCP port 18082; capture redirects it to 127.0.0.1:18001, where
// the node's Envoy listens in the pod's namespace, and Envoy, matching the connection's original
// destination (the VIP and 18082) to the service's chain, carries it over mTLS to the service's
// default TCP port, 9000, in one of its pods, whose application answers (tcpApp: "peer <the node
// Envoy's address> at <the pod>"). 18082 is no port of any Service: nothing but the mesh answers
// there. An
// unmanaged pod's namespace holds no table.
var _ = Describe("capture on a real node", Ordered, func() {
	const ns = "capture"
	ctx := context.Background()
	var vip string
	var caught, plain *corev1.Pod

	pod := podBuilder(ns, withPorts("9000=tcp"), withServiceAccount("capture"))

	BeforeAll(func() {
		// A first pod of the service gives it a VIP, which the pod under test is then told to dial.
		// 9000=tcp is its default TCP port, so 18082 reaches something: the VIP's 18082 is in the
		// dial surface that surface mode captures.
		vip = seedService(ctx, ns, "capture")
	})

	It("catches a dial to the pod's own service VIP:18082 on 127.0.0.1:18001 in the same pod, and the node's Envoy carries it to the service by its original destination", func() {
		target := vip + ":18082"
		caught = pod("caught", asManaged, withContainers(tcpApp, dialing("client", target, "1s")))
		plain = pod("plain", withContainers(tcpApp))
		startPods(ctx, caught, plain)

		// The client prints "<target> <answer>" once a second; the listener may start after it.
		// The service's pods: seed and caught itself.
		answers := meshAnswers(ctx, runningPod(ctx, ns, "seed"), caught)
		logs := clientset().CoreV1().Pods(ns).GetLogs(caught.Name, &corev1.PodLogOptions{Container: "client"})
		Eventually(func(g Gomega) {
			out, err := logs.DoRaw(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(answeredBy(target, answers))
		}, time.Minute, time.Second).Should(Succeed())
	})

	It("has table inet aether in the managed pod's network namespace, and none in an unmanaged pod's", func() {
		recorded := readRegistry()
		Expect(recorded).To(HaveKey(caught.UID), "the managed pod's network namespace was not handed over")
		Eventually(func() []string { return aetherChains(recorded[caught.UID].NetNS) }, 30*time.Second, time.Second).
			Should(ContainElement(capture.ChainOutput))

		Expect(recorded).NotTo(HaveKey(plain.UID))
		plainNetNS := netnsHolding(plain.Status.PodIP)
		Expect(plainNetNS).NotTo(BeEmpty(), "no network namespace under /var/run/netns holds the unmanaged pod's address %s", plain.Status.PodIP)
		Expect(plainNetNS).NotTo(Equal(recorded[caught.UID].NetNS))
		Expect(aetherChains(plainNetNS)).To(BeNil(), "an unmanaged pod's network namespace has table inet aether")
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
})

// clientset is a typed client of the cluster, for what controller-runtime's client cannot read
// (a container's log).
func clientset() *kubernetes.Clientset {
	GinkgoHelper()
	state := os.Getenv("AETHER_CLUSTER_DIR")
	if state == "" {
		state = "/tmp/aether-cluster"
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(state, "pki", "admin.kubeconfig"))
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return cs
}

// aetherChains reads the network namespace pinned at path over netlink and returns the chains of
// its table inet aether, or nil when it has no such table.
func aetherChains(path string) []string {
	GinkgoHelper()
	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	conn, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	Expect(err).NotTo(HaveOccurred())
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	Expect(err).NotTo(HaveOccurred())
	found := false
	for _, t := range tables {
		found = found || t.Name == capture.TableName
	}
	if !found {
		return nil
	}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	Expect(err).NotTo(HaveOccurred())
	names := []string{}
	for _, c := range chains {
		if c.Table.Name == capture.TableName {
			names = append(names, c.Name)
		}
	}
	return names
}

// netnsHolding is the path of the pod network namespace (pinned by the runtime under
// /var/run/netns, as cni-<uuid>) that holds address ip, or "".
func netnsHolding(ip string) string {
	GinkgoHelper()
	entries, err := os.ReadDir("/var/run/netns")
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "cni-") {
			continue
		}
		out, err := exec.Command("ip", "-netns", e.Name(), "-o", "addr", "show").CombinedOutput()
		if err != nil {
			continue // a sandbox torn down while we looked
		}
		if strings.Contains(string(out), " "+ip+"/") {
			return filepath.Join("/var/run/netns", e.Name())
		}
	}
	return ""
}
