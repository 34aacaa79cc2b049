//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
)

// Uninstall under a dial loop (docs/install.md, "Uninstall"): an application web with its own Service
// (ClusterIP, port 8080, answering "peer <caller>"), meshed, so its cluster IP is the VIP; two
// meshed dialers dial that cluster IP every 200 ms, captured and carried by the node's Envoy, so
// that web sees the node's Envoy calling (meshAnswers). The agent's
// DaemonSet is deleted, as the uninstall procedure's first step: each agent, stopping, takes table
// inet aether out of every pod it captured. After that every formerly meshed pod's dial reaches
// web directly (kube-proxy: web sees another caller than itself), a dial fails only if it was in
// flight as its pod's table went (in the uninstall's window), and no network namespace of
// the node holds table inet aether. The DaemonSet is created again when the spec ends (the pods
// of this namespace stay uncaptured: they are deleted with it).
//
// Label faults: it takes the agent off the node, so it runs in the fault suite's own cluster.
var _ = Describe("uninstall under a dial loop", Label("faults"), Ordered, func() {
	const ns = "uninstall"
	ctx := context.Background()
	dialers := []string{"dialer-0", "dialer-1"}
	var target string // web's cluster IP (the VIP) and port
	var meshed string // web's answer to a dial the mesh carried: "peer <the node Envoy's address> at web-0"
	// direct says whether answer is web's to a dial that reached it without the mesh.
	direct := func(answer string) bool { return strings.HasPrefix(answer, "peer ") && answer != meshed }

	BeforeAll(func() {
		freshNamespace(ctx, ns, "web", "client")
		web := createWeb(ctx, ns)
		target = web.Spec.ClusterIP + ":8080"
		for _, name := range dialers {
			Expect(k8s.Create(ctx, testPod(ns, name, asManaged, withPorts("9000=tcp"), withServiceAccount("client"), withContainers(
				tcpApp, dialing("client", target, "200ms"))))).To(Succeed())
		}
		meshed = meshAnswers(ctx, runningPod(ctx, ns, "web-0"))[0]
		Eventually(func(g Gomega) {
			ms := &meshv1alpha1.MeshService{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, ms)).To(Succeed())
			g.Expect(ms.Status.VIP).To(Equal(web.Spec.ClusterIP), "web's VIP is its Service's cluster IP")
		}, 3*time.Minute, time.Second).Should(Succeed())
		// Captured: each dialer's dials are carried by the mesh, steadily (each takes a second: a
		// server-first client on 8080, which other pods declare HTTP, waits out the listener's
		// inspectors).
		Eventually(func(g Gomega) {
			for _, name := range dialers {
				steadilyCarried(g, ns, name, "client", []string{meshed}, 5*time.Second)
			}
		}, 3*time.Minute, time.Second).Should(Succeed())
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	It("restores every meshed pod when the agent's DaemonSet is deleted: dials go directly, no table inet aether remains", func() {
		// The meshed pods' namespaces, from the agent's registry, before it goes with the agent.
		recorded := readRegistry()
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		netns := map[string]string{}
		for _, p := range pods.Items {
			Expect(recorded).To(HaveKey(p.UID), "pod %s was not handed over to the agent", p.Name)
			netns[p.Name] = recorded[p.UID].NetNS
			Expect(aetherChains(netns[p.Name])).NotTo(BeEmpty(), "pod %s is not captured before the uninstall", p.Name)
		}

		ds := &appsv1.DaemonSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: agentDaemonSet}, ds)).To(Succeed())
		DeferCleanup(restoreDaemonSet, ds)
		agent := agentPod()
		agentLog := followLog(agent, "agent")

		deleted := time.Now()
		Expect(k8s.Delete(ctx, ds)).To(Succeed())
		Eventually(func(g Gomega) {
			var agents corev1.PodList
			g.Expect(k8s.List(ctx, &agents, client.InNamespace(operatorNamespace), agentPods)).To(Succeed())
			g.Expect(agents.Items).To(BeEmpty(), "agent pods left")
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
		gone := time.Now()

		var log string
		Eventually(agentLog, 30*time.Second, 200*time.Millisecond).Should(Receive(&log))
		Expect(log).To(ContainSubstring("Removed the capture of the node's pods"), "the stopping agent's log:\n%s", tail(log, 20))

		// No table inet aether in any pod's namespace of the node, meshed or not.
		for name, path := range netns {
			Expect(aetherChains(path)).To(BeNil(), "pod %s's network namespace %s still holds table inet aether", name, path)
		}
		entries, err := os.ReadDir("/var/run/netns")
		Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "cni-") {
				Expect(aetherChains(filepath.Join("/var/run/netns", e.Name()))).To(BeNil(), "network namespace %s still holds table inet aether", e.Name())
			}
		}
		_, err = os.Stat(netnsRegistry)
		Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "the agent's registry %s is still there (%v)", netnsRegistry, err)

		// The dial loops, from before the delete until 3 s after the agent is gone: every dial
		// answered (captured, then direct), and every one after the agent is gone reached web
		// directly. A dial in flight as its pod's table is deleted fails: the table is the
		// namespace's only nat chain, so the redirection's address translation goes with it, and
		// the connection to the node's Envoy hangs until the dial's 3 s timeout. Such dials are
		// counted and reported, allowed only if they were in flight between the delete and the
		// agent's exit (a failed dial's line is stamped when it ends, and says how long it took):
		// through the node's Envoy a dial takes a while (the mTLS hop), so one begun just before
		// the delete can still be in flight when the tables go.
		until := gone.Add(3 * time.Second)
		var firstDirect []string
		failed := 0
		for _, name := range dialers {
			var dials []dialLine
			Eventually(func(g Gomega) {
				dials = dialLog(g, ns, name, deleted.Add(-2*time.Second))
				g.Expect(dials).NotTo(BeEmpty())
				g.Expect(dials[len(dials)-1].At).To(BeTemporally(">", until))
			}, time.Minute, time.Second).Should(Succeed())
			Expect(dials[0].Answer).To(Equal(meshed), "dialer %s was not captured before the delete (at %s); its dials:\n%s",
				name, deleted.Format(time.RFC3339Nano), dialLines(dials))
			first := time.Time{}
			for _, d := range dials {
				if answered := d.Answer == meshed || direct(d.Answer); !answered {
					// In flight while the tables came out: begun before the agent was gone, and
					// not over before the delete (its line is stamped when it ended).
					began := d.Began()
					Expect(!began.After(gone) && !d.At.Before(deleted)).To(BeTrue(),
						"dialer %s: the dial from %s to %s failed, not in flight during the uninstall's window (%s to %s): %s\nits dials:\n%s",
						name, began.Format(time.RFC3339Nano), d.At.Format(time.RFC3339Nano), deleted.Format(time.RFC3339Nano), gone.Format(time.RFC3339Nano), d.Answer, dialLines(dials))
					failed++
					continue
				}
				if d.At.After(gone) {
					Expect(direct(d.Answer)).To(BeTrue(), "dialer %s: the dial at %s, after the agent was gone, did not reach web directly: %s", name, d.At.Format(time.RFC3339Nano), d.Answer)
				}
				if first.IsZero() && direct(d.Answer) {
					first = d.At
				}
			}
			firstDirect = append(firstDirect, name+" "+first.Sub(deleted).Round(time.Millisecond).String())
		}
		record("agent DaemonSet deleted: its pod gone %s after the delete; every meshed pod's table inet aether removed (%d pods, none left on the node); first direct dial of %s after the delete (%s); %d dials in flight as the tables came out failed, none begun outside that window",
			gone.Sub(deleted).Round(time.Millisecond), len(netns), target, strings.Join(firstDirect, ", "), failed)
	})
})

// restoreDaemonSet creates the agent's DaemonSet again as it was (ds, read before its deletion),
// and waits for its agent to be ready: the next spec finds the node as the suite made it.
func restoreDaemonSet(ds *appsv1.DaemonSet) {
	GinkgoHelper()
	ctx := context.Background()
	Eventually(func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(ds), &appsv1.DaemonSet{})
		if err == nil {
			return errors.New("the deleted DaemonSet is still there")
		}
		return client.IgnoreNotFound(err)
	}, 2*time.Minute, time.Second).Should(Succeed())
	again := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: ds.Name, Labels: ds.Labels,
		Annotations: ds.Annotations}, Spec: ds.Spec}
	Expect(k8s.Create(ctx, again)).To(Succeed())
	agentPodOtherThan(types.UID(""))
}

// followLog streams the log of pod's container until the container ends, then sends it whole.
func followLog(pod *corev1.Pod, container string) <-chan string {
	GinkgoHelper()
	stream, err := clientset().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, Follow: true}).
		Stream(context.Background())
	Expect(err).NotTo(HaveOccurred())
	out := make(chan string, 1)
	go func() {
		defer GinkgoRecover()
		defer func() { _ = stream.Close() }()
		data, _ := io.ReadAll(stream)
		out <- string(data)
	}()
	return out
}

// dialLines is dials as a failure message shows them, one per line.
func dialLines(dials []dialLine) string {
	var b strings.Builder
	for _, d := range dials {
		fmt.Fprintf(&b, "  %s %s\n", d.At.Format(time.RFC3339Nano), d.Answer)
	}
	return b.String()
}

// tail is s's last n lines.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
