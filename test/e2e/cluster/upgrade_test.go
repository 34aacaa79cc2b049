//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"encoding/json"
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

// An upgrade of the agent under load (docs/install.md, "Upgrade"): the agent's DaemonSet is changed as an
// upgrade changes it, a new image tag (the same binaries under docker.io/aether/operator:upgrade)
// and a changed value (--capture-resync), and rolls while the load creates, deletes and
// re-annotates pods and the probe times changes through the mesh. Nothing is lost (the
// invariant holds: every MeshEndpoint and status), a captured pod's dials stay captured and
// carried by the node's Envoy all along (capture is never absent: the old agent leaves the tables,
// the new one adopts them; Envoy keeps its configuration while the agent's xDS stream is down), and
// the new agent serves the node's listeners over xDS.
//
// Negative control: AETHER_FAULTS_BREAK=upgrade-capture deletes the dialer's table as the rollout
// starts (what an agent that dropped the tables as it stopped would leave): its dials go
// uncaptured until the new agent repairs it, and the spec fails.
var _ = Describe("agent upgrade under load", Label("faults"), Ordered, func() {
	const ns = "upgrade"
	const upgraded = "docker.io/aether/operator:upgrade"
	ctx := context.Background()
	var target string
	var meshed string // web's answer to a dial the mesh carried: "peer <the node Envoy's address> at web-0"

	BeforeAll(func() {
		freshNamespace(ctx, ns, append([]string{"web", "client", "canary"}, defaultLoad.Accounts...)...)
		web := createWeb(ctx, ns)
		target = web.Spec.ClusterIP + ":8080"
		// The dialer does not declare web: its node fetches web on demand, and the upgraded agent
		// carries it from its first configuration (the record of what the node fetched outlives
		// the agent: docs/architecture.md, "Distribution"), so no dial waits for a fetch.
		Expect(k8s.Create(ctx, testPod(ns, "dialer", asManaged, withPorts("9000=tcp"), withServiceAccount("client"),
			withContainers(tcpApp, dialing("client", target, "200ms"))))).To(Succeed())
		meshed = meshAnswers(ctx, runningPod(ctx, ns, "web-0"))[0]
		Expect(k8s.Create(ctx, managedPod(ns, "canary", "canary", portsHTTP))).To(Succeed())
		Eventually(func(g Gomega) {
			ms := &meshv1alpha1.MeshService{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, ms)).To(Succeed())
			g.Expect(ms.Status.VIP).To(Equal(web.Spec.ClusterIP))
			dials := dialLog(g, ns, "dialer", time.Now().Add(-2*time.Second))
			g.Expect(dials).NotTo(BeEmpty())
			g.Expect(dials[len(dials)-1].Answer).To(Equal(meshed), "the dialer is captured")
		}, 3*time.Minute, time.Second).Should(Succeed())
		holds()
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	It("rolls the agent to a new image and flags with nothing lost, capture never absent, xDS served after", func() {
		l := startLoad(ns, defaultLoad, 9)
		p := startProbe(ns, "canary", "canary")
		Eventually(l.Done, time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 3))
		old := agentPod()
		ctr("images", "tag", "--force", "docker.io/aether/operator:dev", upgraded)

		// What an upgrade changes: the image of the agent and of its installer, and a value.
		ds := &appsv1.DaemonSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: agentDaemonSet}, ds)).To(Succeed())
		patch := []map[string]any{
			{"op": "replace", "path": "/spec/template/spec/initContainers/0/image", "value": upgraded},
			{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": upgraded},
			{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--capture-resync=20s"},
		}
		data, err := json.Marshal(patch)
		Expect(err).NotTo(HaveOccurred())
		started := time.Now()
		Expect(k8s.Patch(ctx, ds, client.RawPatch(types.JSONPatchType, data))).To(Succeed())
		if breaking("upgrade-capture") {
			uncapture(ns, "dialer")
		}

		agent := agentPodOtherThan(old.UID)
		Expect(agent.Spec.Containers[0].Image).To(Equal(upgraded))
		Expect(agent.Spec.Containers[0].Args).To(ContainElement("--capture-resync=20s"))
		ready := time.Now()
		ads := dialXDS(agent)
		listeners := awaitListeners(ads)
		ads.Close()
		served := time.Now()

		recovered(l, p, ready, 5)

		// Capture never absent: every dial from before the patch to 5 s after the new agent was
		// ready went to the pod's capture listener, and through the mesh to web.
		until := ready.Add(5 * time.Second)
		dials := dialsUntil(ns, "dialer", started.Add(-2*time.Second), until)
		var uncaptured []string
		for _, d := range dials {
			if d.Answer != meshed {
				uncaptured = append(uncaptured, d.At.Format(time.RFC3339Nano)+" "+d.Answer)
			}
		}
		Expect(uncaptured).To(BeEmpty(), "dials not captured across the upgrade:\n%s", strings.Join(uncaptured, "\n"))
		record("agent upgrade (image tag and --capture-resync changed, DaemonSet rolled): new agent ready %s after the patch, listeners served (%d, version %s) %s after it was ready; %d dials of %s all captured; %s; load: %s",
			ready.Sub(started).Round(time.Millisecond), len(listeners.Names), listeners.Version, served.Sub(ready).Round(time.Millisecond),
			len(dials), target, p.describe(started, ready), l.Summary())
	})
})
