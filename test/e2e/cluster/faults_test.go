//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/routes"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
	"github.com/aether-mesh/aether-operator/test/invariant"
)

// The fault suite (issue 16): each spec breaks one thing on the real node while a load of pod
// creations, deletions and annotation changes runs (load_test.go), measures how long the mesh is
// held back (a probe times a change from a pod's annotations to its MeshService's status), and
// then checks the invariant "nothing lost" (test/invariant) within settleBound. Where a fault
// could make the mesh rewrite what did not change (a relist, a restart, a failover), the API
// server's audit log (audit_test.go) counts the writes, and the objects no load touches (the
// steady service, its pods, its route) must not be written at all.
//
// Label faults: make test-faults runs these, on a cluster of their own (make test-e2e leaves
// them out). Ordered, ContinueOnFailure: one state built once (BeforeAll), every fault tried
// even when an earlier one failed.
//
// Each spec's recovery can be broken on purpose, to see the spec fail (its negative control):
// AETHER_FAULTS_BREAK=<name> (make test-faults AETHER_FAULTS_BREAK=takeover), one of breaks.
var _ = Describe("faults on a real node", Label("faults"), Ordered, ContinueOnFailure, func() {
	const ns = "faults"
	ctx := context.Background()
	// steady are the objects no load or probe changes, "<namespace>/<name>": the steady service's
	// pods and MeshEndpoints, its MeshService and generated Service, its route. No fault's
	// recovery may write any of them.
	steady := map[string]bool{}
	for _, name := range []string{"steady-0", "steady-1", "steady-dialer", "steady", "steady-tcp"} {
		steady[ns+"/"+name] = true
	}
	var dialTarget string // the steady service's VIP on the mesh's TCP port, which the dialer dials
	// steadyAnswers are what a dial of the steady service through the mesh is answered: tcpApp's
	// "peer <the address of the pod that answered>", one of steady-0, steady-1, steady-dialer.
	var steadyAnswers []string
	// nameTarget is the same port by the service's mesh name, which the dialer's name-client dials:
	// each dial resolves it through the mesh DNS the agent serves in the pod.
	nameTarget := "steady." + ns + ".aether.internal:18082"

	BeforeAll(func() {
		if name := os.Getenv(breakEnv); name != "" {
			Expect(breaks).To(HaveKey(name), "%s=%s names no break", breakEnv, name)
		}
		freshNamespace(ctx, ns, append([]string{"steady", "canary"}, defaultLoad.Accounts...)...)
		for _, name := range []string{"steady-0", "steady-1"} {
			Expect(k8s.Create(ctx, managedPod(ns, name, "steady", portsHTTPTCP))).To(Succeed())
		}
		Expect(k8s.Create(ctx, managedPod(ns, "canary", "canary", portsHTTP))).To(Succeed())

		// The dialer, a pod of the steady service: its client dials the service's VIP on the
		// mesh's TCP port every 200 ms, which only the mesh answers (no Service has that port):
		// the node's Envoy carries it to a pod of the service, whose application names itself and
		// its caller, the node's Envoy
		// (as in capture_test.go). A log line per dial says whether it was captured and carried.
		dialTarget = tcpVIP(ctx, ns, "steady", 3*time.Minute) + ":18082"
		dialer := managedPod(ns, "steady-dialer", "steady", portsHTTPTCP)
		for _, c := range []corev1.Container{
			dialing("client", dialTarget, "200ms"), dialing("name-client", nameTarget, "200ms"),
		} {
			dialer.Spec.Containers = append(dialer.Spec.Containers, testServer(c))
		}
		Expect(k8s.Create(ctx, dialer)).To(Succeed())

		// The steady route: to the steady service's raw TCP port, which an HTTPRoute cannot
		// carry (ResolvedRefs False, UnsupportedProtocol).
		Expect(k8s.Create(ctx, meshRoute(ns, "steady-tcp", "steady", 9000))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(routeCondition(g, ns, "steady-tcp", gwapiv1.RouteConditionResolvedRefs)).To(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", string(gwapiv1.RouteReasonUnsupportedProtocol))))
		}, 2*time.Minute, time.Second).Should(Succeed())

		Eventually(func(g Gomega) {
			for _, name := range []string{"steady-0", "steady-1", "steady-dialer", "canary"} {
				ep := &meshv1alpha1.MeshEndpoint{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ep)).To(Succeed())
				g.Expect(ep.Status.Health).To(Equal(meshv1alpha1.HealthHealthy), "MeshEndpoint %s", name)
			}
		}, 3*time.Minute, time.Second).Should(Succeed())
		steadyAnswers = meshAnswers(ctx, runningPod(ctx, ns, "steady-0"), runningPod(ctx, ns, "steady-1"), runningPod(ctx, ns, "steady-dialer"))
		managersReady()
		holds()
	})

	AfterEach(reportFailure)

	AfterAll(func() {
		AddReportEntry("fault suite figures", ReportEntryVisibilityAlways, report())
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	It("denies a token bound to the agent's pod a MeshEndpoint of another node (config/admission)", func() {
		l := startLoad(ns, defaultLoad, 6)
		Eventually(l.Done, time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 3))
		agent := agentPod()
		asAgent := clientWithToken(podToken(agent, agentAccount))

		// Every write dry-run: admission (the policy too) judges it; nothing is kept either way.
		ep := &meshv1alpha1.MeshEndpoint{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "steady-0"}, ep)).To(Succeed())
		other := &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policy-other-node"}, Spec: ep.Spec}
		other.Spec.NodeName = "node-b"
		writeOther := func() error { return asAgent.Create(ctx, other.DeepCopy(), client.DryRunAll) }
		if breaking("node-policy") {
			withoutNodePolicy(writeOther)
		}
		own := &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policy-own-node"}, Spec: ep.Spec}
		Expect(asAgent.Create(ctx, own, client.DryRunAll)).To(Succeed(), "the token speaks for node-a: a MeshEndpoint of node-a is admitted")

		err := writeOther()
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating a MeshEndpoint of node-b with the token of node-a's agent: want Forbidden, got %v", err)
		Expect(err.Error()).To(ContainSubstring("the node agent of node node-a may write only MeshEndpoints of pods on its own node; this one names node node-b"))

		moved := ep.DeepCopy()
		moved.Spec.NodeName = "node-b"
		err = asAgent.Update(ctx, moved, client.DryRunAll)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "moving MeshEndpoint steady-0 to node-b with the token of node-a's agent: want Forbidden, got %v", err)
		record("the per-node policy: node-a's agent token refused a MeshEndpoint of node-b (create and update): %s", firstLine(err.Error()))

		l.Stop()
		holds()
	})

	It("keeps an HTTPRoute's UnsupportedProtocol through a manager failover without a status write", func() {
		route := &gwapiv1.HTTPRoute{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "steady-tcp"}, route)).To(Succeed())
		version, status := route.ResourceVersion, route.Status.DeepCopy()
		l := startLoad(ns, defaultLoad, 7)
		p := startProbe(ns, "canary", "canary")
		Eventually(l.Done, time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 5))
		if breaking("route-status") {
			staleRouteStatus(ns, "steady-tcp")
		}

		// A graceful failover (a rollout, a drain): the leader's pod is deleted; it releases the
		// Lease as it stops, and the other replica takes over.
		leader, before := leaderPod()
		deleted := time.Now()
		Expect(k8s.Delete(ctx, leader)).To(Succeed())
		after := newLeader(before, time.Minute)
		gap := after.Spec.AcquireTime.Sub(deleted)

		routeUnwritten(ns, route, version, status)

		Eventually(l.DoneAfter, time.Minute, 200*time.Millisecond).WithArguments(after.Spec.AcquireTime.Time).Should(BeNumerically(">=", 5))
		l.Stop()
		p.Stop()
		record("graceful failover (leader pod deleted): %s took over %s after the delete; HTTPRoute steady-tcp kept resourceVersion %s (UnsupportedProtocol); %s; load: %s",
			holderPod(after), gap.Round(time.Millisecond), version, p.describe(deleted, after.Spec.AcquireTime.Time), l.Summary())
		managersReady()
		holds()
	})

	It("takes over within TakeoverBound when the leading manager is killed with SIGKILL", func() {
		election := deployedElection()
		bound := election.TakeoverBound()
		l := startLoad(ns, defaultLoad, 1)
		p := startProbe(ns, "canary", "canary")
		Eventually(l.Done, time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 5))
		if breaking("takeover") {
			withoutElection()
		}

		route := &gwapiv1.HTTPRoute{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "steady-tcp"}, route)).To(Succeed())
		version, status := route.ResourceVersion, route.Status.DeepCopy()
		leader, before := leaderPod()
		killed := killContainer(leader, "manager")
		after := newLeader(before, bound+time.Minute)
		acquired := after.Spec.AcquireTime.Time
		gap, unled := acquired.Sub(killed), acquired.Sub(before.Spec.RenewTime.Time)
		Expect(gap).To(BeNumerically("<=", bound), "the new leader took over %s after the kill; TakeoverBound is %s", gap, bound)
		routeUnwritten(ns, route, version, status)

		// The mesh follows changes again, and the load went on past the takeover.
		Eventually(p.DoneAfter, time.Minute, 200*time.Millisecond).WithArguments(acquired).Should(BeNumerically(">=", 1), p.Waiting)
		Eventually(l.DoneAfter, time.Minute, 200*time.Millisecond).WithArguments(acquired).Should(BeNumerically(">=", 5))
		l.Stop()
		p.Stop()
		who := "the other replica"
		if holderPod(after) == leader.Name {
			who = "the killed pod's restarted container"
		}
		record("kill -9 of the leader: %s took over %s after the kill (%s after the last renewal; TakeoverBound %s: lease %s, retry %s); HTTPRoute steady-tcp unwritten; %s; load: %s",
			who, gap.Round(time.Millisecond), unled.Round(time.Millisecond), bound, election.LeaseDuration, election.RetryPeriod,
			p.describe(killed, acquired), l.Summary())
		managersReady()
		holds()
	})

	It("reconnects the manager and the agent when kube-apiserver restarts", func() {
		l := startLoad(ns, defaultLoad, 2)
		p := startProbe(ns, "canary", "canary")
		Eventually(l.Done, time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 5))
		_, before := leaderPod()
		restartsBefore := managerRestarts()

		if breaking("reconnect") {
			withoutAgent()
		}
		// Stopped gracefully (SIGTERM), as a restart by hand or by a static pod's kubelet stops it:
		// it stops serving at once, then waits up to a minute for its watches before it exits, a
		// longer outage than the leader's renew deadline.
		stopped := time.Now()
		down := restartComponent("kube-apiserver")
		back := time.Now()
		// Both watch again (their watches, restarted, are in the audit log), and a change made
		// after the restart goes through both (the probe).
		Eventually(func(g Gomega) {
			watches := map[string]int{}
			for _, r := range audited(back.Add(-time.Second), time.Now()) {
				if r.Verb == "watch" && r.Resource == "meshendpoints" {
					watches[r.User]++
				}
			}
			g.Expect(watches).To(HaveKey(managerUser), "the manager watches MeshEndpoints again")
			g.Expect(watches).To(HaveKey(agentUser), "the agent watches MeshEndpoints again")
		}, reconnectBound, time.Second).Should(Succeed())
		Eventually(p.DoneAfter, reconnectBound, 200*time.Millisecond).WithArguments(back).Should(BeNumerically(">=", 1),
			func() string {
				return fmt.Sprintf("no change made after the API server came back reached the MeshService within %s: %s", reconnectBound, p.Waiting())
			})
		Eventually(l.DoneAfter, time.Minute, 200*time.Millisecond).WithArguments(back).Should(BeNumerically(">=", 5))
		l.Stop()
		p.Stop()
		_, after := leaderPod()
		window := audited(stopped, time.Now())
		managersReady()
		// A manager that lost its lease exits (that is what stops its controllers), once: a
		// restart during the outage waits for the API server instead of exiting again, which
		// would double the kubelet's restart delay each time (up to five minutes).
		restartsAfter := managerRestarts()
		for pod, n := range restartsAfter {
			if was, known := restartsBefore[pod]; known {
				Expect(n-was).To(BeNumerically("<=", 1), "manager %s restarted %d times in a %s outage: it exits at start while the API server is down", pod, n-was, down.Round(time.Second))
			}
		}
		record("kube-apiserver restart: down %s (stop to /readyz); leader %s; manager restarts %v → %v; relists after it: manager %s, agent %s; %s; load: %s",
			down.Round(time.Millisecond), leaderChange(before, after), restartsBefore, restartsAfter, joinKeys(relists(window, managerUser)), joinKeys(relists(window, agentUser)),
			p.describe(stopped, back), l.Summary())
		holds()
	})

	It("relists after etcd is compacted and the watches expire, without a write storm", func() {
		l := startLoad(ns, defaultLoad, 3)
		p := startProbe(ns, "canary", "canary")
		started := time.Now()
		// A window of load before the fault, to compare the write rates with.
		Eventually(l.Done, time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 25))
		fault := time.Now()

		// The API server killed (SIGKILL), etcd compacted while it is down, past every
		// resourceVersion its clients hold, and the API server started again: every watch they
		// resume is answered 410 Gone (too old a resourceVersion), and they relist.
		restartComponent("--kill", "--stop", "kube-apiserver")
		revision := compactEtcd()
		restartComponent("--start", "kube-apiserver")
		back := time.Now()
		down := back.Sub(fault)
		if breaking("write-storm") {
			plantedManagerWrite(ns, "steady")
		}
		Eventually(func(g Gomega) {
			window := audited(fault, time.Now())
			g.Expect(relists(window, managerUser)).To(HaveKey("meshendpoints"), "the manager relists MeshEndpoints")
			g.Expect(relists(window, agentUser)).To(HaveKey("pods"), "the agent relists its pods")
		}, reconnectBound, time.Second).Should(Succeed())
		recovered(l, p, back, 15)
		settled := time.Now()

		// No write storm: a relist makes each controller reconcile everything it holds, and
		// nothing may be written that did not change. The bound: no write, by either, to any
		// steady object (a rewrite of everything would write them all).
		beforeWindow, afterWindow := audited(started, fault), audited(fault, settled)
		for _, user := range []string{managerUser, agentUser} {
			wrote := touching(meshWrites(afterWindow, user), steady)
			Expect(wrote).To(BeEmpty(), "%s wrote steady objects after the relist:\n%s", user, lines(wrote))
		}
		// The writes per change the load and the probe made (each change is a pod's: its
		// MeshEndpoint, its service's MeshService and Service follow), before and after.
		perChange := func(rs []request, user string, from, to time.Time) string {
			n, changes := len(meshWrites(rs, user)), l.DoneBetween(from, to)+p.DoneBetween(from, to)
			return fmt.Sprintf("%d for %d changes (%.1f each)", n, changes, float64(n)/float64(max(changes, 1)))
		}
		record("etcd compacted at revision %d while kube-apiserver was down (killed and started again, %s): relists manager %s, agent %s; writes with the load before the fault, in %s: manager %s, agent %s; from the fault until the invariant held, in %s: manager %s, agent %s; steady objects written: none; %s; load: %s",
			revision, down.Round(time.Millisecond), joinKeys(relists(afterWindow, managerUser)), joinKeys(relists(afterWindow, agentUser)),
			fault.Sub(started).Round(time.Second), perChange(beforeWindow, managerUser, started, fault), perChange(beforeWindow, agentUser, started, fault),
			settled.Sub(fault).Round(time.Second), perChange(afterWindow, managerUser, fault, settled), perChange(afterWindow, agentUser, fault, settled),
			p.describe(fault, back), l.Summary())
		managersReady()
	})

	It("re-registers after an agent restart what appeared and removes what vanished, and rewrites nothing else", func() {
		l := startLoad(ns, defaultLoad, 4)
		p := startProbe(ns, "canary", "canary")
		started := time.Now()
		Eventually(l.Done, time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 5))
		// The endpoints as they are now: the settled ones the load does not touch from here on
		// must not be written by the agent's restart.
		var eps meshv1alpha1.MeshEndpointList
		Expect(k8s.List(ctx, &eps, client.InNamespace(ns))).To(Succeed())

		old := agentPod()
		deleted := time.Now()
		Expect(k8s.Delete(ctx, old)).To(Succeed())
		agent := agentPodOtherThan(old.UID)
		ready := time.Now()
		if breaking("agent-rewrite") {
			plantedAgentWrite(agent, ns, "steady-0")
		}
		recovered(l, p, ready, 5)
		settled := time.Now()

		touched := l.Touched(started, settled)
		touched[ns+"/canary"] = true
		// Untouched: settled (Healthy) when the agent went, and not changed by the load since.
		untouched := map[string]bool{}
		for _, ep := range eps.Items {
			if key := ep.Namespace + "/" + ep.Name; !touched[key] && ep.Status.Health == meshv1alpha1.HealthHealthy {
				untouched[key] = true
			}
		}
		window := audited(deleted, settled)
		wrote := touching(meshWrites(window, agentUser), untouched)
		Expect(wrote).To(BeEmpty(), "the agent wrote MeshEndpoints whose pods did not change:\n%s", lines(wrote))
		agentWrites := meshWrites(window, agentUser)
		gcDeletes := 0
		for _, r := range meshWrites(window, garbageCollector) {
			if r.Resource == "meshendpoints" && r.Verb == "delete" {
				gcDeletes++
			}
		}
		record("agent restart (pod deleted, DaemonSet recreated): ready again %s after the delete; its writes until the invariant held: %s (%d pods changed by the load, %d endpoints untouched and not written); garbage collector's deletes of MeshEndpoints: %d; %s; load: %s",
			ready.Sub(deleted).Round(time.Millisecond), joinKeys(countByVerb(agentWrites)), len(touched)-1, len(untouched), gcDeletes,
			p.describe(deleted, ready), l.Summary())
	})

	It("keeps every dial captured and the xDS listeners unchanged when the agent crashes", func() {
		// No load here: the listeners must not change, so nothing in the mesh does.
		agent := agentPod()
		restarts := containerRestarts(agent, "agent")
		// The mesh settles first: the earlier specs' pods may still be terminating, starting, or
		// re-registering after their last annotation change, and each of those changes the
		// listeners when it completes. Settled: every pod of the namespace is Ready and none is
		// terminating, every meshed one has its MeshEndpoint Verified for its current spec, no
		// listener is of a pod that is gone (a deleted pod's listeners stay for its drain tail,
		// which a restarted agent does not keep), and the served listeners' version holds for 3 s.
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
			for _, p := range pods.Items {
				g.Expect(p.DeletionTimestamp).To(BeNil(), "pod %s is terminating", p.Name)
				g.Expect(podReady(&p)).To(BeTrue(), "pod %s is not Ready", p.Name)
				if p.Labels[registration.LabelManaged] != registration.ManagedValue {
					continue
				}
				var ep meshv1alpha1.MeshEndpoint
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&p), &ep)).To(Succeed(), "pod %s has no MeshEndpoint", p.Name)
				g.Expect(ep.Spec.PodUID == string(p.UID) && registration.Verified(&ep)).To(BeTrue(),
					"the MeshEndpoint of pod %s is not Verified for its current spec", p.Name)
			}
		}, 2*time.Minute, time.Second).Should(Succeed())
		ads := dialXDS(agent)
		listeners := awaitListeners(ads)
		Eventually(func(g Gomega) {
			listeners = awaitListeners(ads)
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods)).To(Succeed())
			for _, name := range listeners.Names {
				for _, kind := range []func(string) string{xds.CaptureListener, xds.ProxyListener, xds.InboundListener} {
					if key, ok := strings.CutPrefix(name, kind("")); ok {
						g.Expect(slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return xds.PodKey(p.Namespace, p.Name) == key })).
							To(BeTrue(), "listener %s is of a pod that is gone: its drain tail runs", name)
					}
				}
			}
			g.Consistently(func() string { return ads.State().Versions[xdstest.Listeners] }, 3*time.Second, 200*time.Millisecond).
				Should(Equal(listeners.Version))
		}, 3*time.Minute, time.Second).Should(Succeed())
		ads.Close()
		inputs := meshObjects()
		// The mesh name resolves (the agent's mesh DNS answers in the dialer's namespace) before
		// the kill, so that the gap measured below is the restart's.
		Eventually(func(g Gomega) {
			names := containerDialLog(g, ns, "steady-dialer", "name-client", time.Now().Add(-2*time.Second))
			g.Expect(names).NotTo(BeEmpty())
			g.Expect(steadyAnswers).To(ContainElement(names[len(names)-1].Answer))
		}, time.Minute, time.Second).Should(Succeed())

		killed := killContainer(agent, "agent")
		if breaking("capture") {
			uncapture(ns, "steady-dialer")
		}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(agent), agent)).To(Succeed())
			g.Expect(containerRestarts(agent, "agent")).To(BeNumerically(">", restarts))
			g.Expect(containerReady(agent, "agent")).To(BeTrue())
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
		ready := time.Now()

		// The ADS stream resumes, on the same socket: the listeners are the ones served before,
		// at the same version (a hash of their content), so the node's Envoy changes none.
		resumed := dialXDS(agent)
		again := awaitListeners(resumed)
		resumed.Close()
		if again.Version != listeners.Version {
			Fail(fmt.Sprintf("the listeners' version changed across the agent's restart (%s to %s):\n%s\nthe mesh's objects that changed meanwhile (none: the agent built other listeners from the same mesh):\n%s",
				listeners.Version, again.Version, listenerChanges(listeners, again), objectChanges(inputs, meshObjects())))
		}

		// The dialer dialled all along, every dial captured: from before the kill until well
		// after the new agent serves.
		until := ready.Add(5 * time.Second)
		dials := dialsUntil(ns, "steady-dialer", killed.Add(-2*time.Second), until)
		captured := 0
		for i, d := range dials {
			Expect(steadyAnswers).To(ContainElement(d.Answer), "the dial at %s was not captured and carried to the steady service", d.At.Format(time.RFC3339Nano))
			if i > 0 {
				Expect(d.At.Sub(dials[i-1].At)).To(BeNumerically("<", 1500*time.Millisecond), "no dial answered between %s and %s",
					dials[i-1].At.Format(time.RFC3339Nano), d.At.Format(time.RFC3339Nano))
			}
			captured++
		}
		// The pod's mesh DNS: down from the kill until the new agent serves it again (queries are
		// refused at once meanwhile, never left to time out). Bound: the agent's restart to Ready,
		// plus 2 s (its View's sync and the DNS table's first build follow its readiness).
		dnsLost := dnsOutage(ns, "steady-dialer", "name-client", steadyAnswers, killed, until)
		Expect(dnsLost).To(BeNumerically("<", ready.Sub(killed)+2*time.Second),
			"the mesh name %s went unanswered for %s across the agent's restart (Ready %s after the kill)", nameTarget, dnsLost, ready.Sub(killed))
		record("agent crash (kill -9 of its process, container restarted): ready again %s after the kill; %d dials of %s from 2 s before the kill to 5 s after, all captured; listeners version %s (%d listeners) before and after; the mesh name %s unanswered for at most %s",
			ready.Sub(killed).Round(time.Millisecond), captured, dialTarget, listeners.Version, len(listeners.Names), nameTarget, dnsLost.Round(time.Millisecond))
		holds()
	})

	It("admits a pod with a bad annotation while the manager is down; the agent refuses it; the manager's return changes nothing else", func() {
		l := startLoad(ns, defaultLoad, 5)
		p := startProbe(ns, "canary", "canary")
		Eventually(l.Done, time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 5))
		var refused float64
		Eventually(func(g Gomega) { refused = agentMetric(g, "aether_agent_refused_pods_total", "") }, 30*time.Second, time.Second).Should(Succeed())
		if breaking("fail-open") {
			webhookFailurePolicy(admissionregistrationv1.Fail)
		}

		stopped := time.Now()
		DeferCleanup(scaleManager, int32(2)) // back to two whatever happens below
		scaleManager(0)
		bad := managedPod(ns, "bad-annotation", "canary", "8080,9000=tpc")
		Expect(k8s.Create(ctx, bad)).To(Succeed(), "with no manager, the webhooks' failurePolicy Ignore admits the pod")
		DeferCleanup(func() { _ = k8s.Delete(context.Background(), bad) })
		var event string
		Eventually(func(g Gomega) {
			var events eventsv1.EventList
			g.Expect(k8s.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			e := eventRegarding(events.Items, bad.UID, meshv1alpha1.EndpointReasonInvalidAnnotation)
			g.Expect(e).NotTo(BeNil(), "no InvalidAnnotation Event on pod %s", bad.Name)
			g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
			g.Expect(e.Note).To(ContainSubstring("tpc"))
			event = e.Note
		}, time.Minute, time.Second).Should(Succeed())
		Eventually(func(g Gomega) float64 { return agentMetric(g, "aether_agent_refused_pods_total", "") }, 30*time.Second, time.Second).
			Should(Equal(refused+1), "aether_agent_refused_pods_total")
		err := k8s.Get(ctx, client.ObjectKeyFromObject(bad), &meshv1alpha1.MeshEndpoint{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the refused pod has a MeshEndpoint (%v)", err)

		scaleManager(2)
		back := time.Now()
		recovered(l, p, back, 5)
		settled := time.Now()
		wrote := touching(meshWrites(audited(back, settled), managerUser), steady)
		Expect(wrote).To(BeEmpty(), "the returning manager wrote steady objects:\n%s", lines(wrote))
		err = k8s.Get(ctx, client.ObjectKeyFromObject(bad), &meshv1alpha1.MeshEndpoint{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the refused pod got a MeshEndpoint once the manager returned (%v)", err)
		record("manager scaled to 0 for %s: pod with ports 8080,9000=tpc admitted, refused by the agent (Warning InvalidAnnotation %q, aether_agent_refused_pods_total +1); back: no steady object written; %s; load: %s",
			back.Sub(stopped).Round(time.Second), event, p.describe(stopped, back), l.Summary())
	})
})

// settleBound is how long the invariant may take to hold once a fault is over and the load has
// stopped: the last pods the load created start, and the agent and the manager catch up.
const settleBound = 90 * time.Second

// reconnectBound is how long a change made after a component came back may take to reach the
// mesh: client-go's reflectors back off while the API server is away (up to 30 s between
// tries), and a leader that could not renew for --leader-elect-renew-deadline restarts.
const reconnectBound = 90 * time.Second

// figure is what a fault spec measured: its account of the fault, and how long the invariant
// then took to hold.
type figure struct {
	spec, text string
	settle     time.Duration
}

// figures are the suite's measurements, one per fault spec, reported at its end.
var figures []*figure

// currentFigure is the running spec's figure.
func currentFigure() *figure {
	spec := CurrentSpecReport().LeafNodeText
	if n := len(figures); n > 0 && figures[n-1].spec == spec {
		return figures[n-1]
	}
	figures = append(figures, &figure{spec: spec})
	return figures[len(figures)-1]
}

// record sets the running spec's account, and adds it to the spec's report.
func record(format string, args ...any) {
	currentFigure().text = fmt.Sprintf(format, args...)
	AddReportEntry("figures", ReportEntryVisibilityAlways, currentFigure().text)
}

// report is every figure, a line each.
func report() string {
	lines := make([]string, len(figures))
	for i, f := range figures {
		lines[i] = fmt.Sprintf("%s: %s; the invariant held after %s of checking", f.spec, f.text, f.settle.Round(10*time.Millisecond))
	}
	return strings.Join(lines, "\n")
}

// recovered waits until, after since, a change of the probe has reached the mesh (within
// reconnectBound) and the load has made n changes; then it stops both and checks the invariant.
// managerRestarts maps each manager pod to its containers' restarts.
func managerRestarts() map[string]int32 {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(context.Background(), &pods, client.InNamespace(operatorNamespace), managerPods)).To(Succeed())
	out := map[string]int32{}
	for _, p := range pods.Items {
		out[p.Name] = restarts(&p)
	}
	return out
}

func recovered(l *load, p *probe, since time.Time, n int) {
	GinkgoHelper()
	Eventually(p.DoneAfter, reconnectBound, 200*time.Millisecond).WithArguments(since).Should(BeNumerically(">=", 1), p.Waiting)
	Eventually(l.DoneAfter, time.Minute, 200*time.Millisecond).WithArguments(since).Should(BeNumerically(">=", n))
	l.Stop()
	p.Stop()
	holds()
}

// holds checks the invariant over the whole cluster within settleBound, and fails with every
// violation left.
func holds() {
	GinkgoHelper()
	found, took := invariant.Within(context.Background(), k8s, invariant.Options{}, settleBound)
	text := make([]string, len(found))
	for i, v := range found {
		text[i] = "  " + v.String()
	}
	Expect(found).To(BeEmpty(), "the invariant does not hold %s after the fault (bound %s):\n%s", took.Round(time.Millisecond), settleBound, strings.Join(text, "\n"))
	GinkgoWriter.Printf("the invariant holds (%s)\n", took.Round(time.Millisecond))
	currentFigure().settle = took
}

// meshRoute is an HTTPRoute parented to the mesh Service service (GAMMA) whose one backend is
// that service's port.
func meshRoute(ns, name, service string, port int32) *gwapiv1.HTTPRoute {
	return &gwapiv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwapiv1.HTTPRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{
				Group: new(gwapiv1.Group("")), Kind: new(gwapiv1.Kind("Service")), Name: gwapiv1.ObjectName(service)}}},
			Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{
				BackendObjectReference: gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(service), Port: new(port)}}}}}},
		},
	}
}

// routeCondition is the condition of type t in the mesh's status entry of route ns/name.
func routeCondition(g Gomega, ns, name string, t gwapiv1.RouteConditionType) *metav1.Condition {
	route := &gwapiv1.HTTPRoute{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, route)).To(Succeed())
	i := slices.IndexFunc(route.Status.Parents, func(p gwapiv1.RouteParentStatus) bool { return p.ControllerName == routes.ControllerName })
	g.Expect(i).To(BeNumerically(">=", 0), "HTTPRoute %s has no status of %s", name, routes.ControllerName)
	c := meta.FindStatusCondition(route.Status.Parents[i].Conditions, string(t))
	g.Expect(c).NotTo(BeNil(), "HTTPRoute %s has no %s condition", name, t)
	return c
}

// routeUnwritten checks that route (read before a failover, at version with status) was not
// written by the new leader: once its route controller has gone through its queue, which held
// the route since its caches warmed up (a route created now gets its status), the route is
// still at version.
func routeUnwritten(ns string, route *gwapiv1.HTTPRoute, version string, status *gwapiv1.HTTPRouteStatus) {
	GinkgoHelper()
	ctx := context.Background()
	Expect(k8s.Create(ctx, meshRoute(ns, "failover-probe", "steady", 8080))).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(routeCondition(g, ns, "failover-probe", gwapiv1.RouteConditionResolvedRefs)).To(HaveField("Status", metav1.ConditionTrue))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	Expect(k8s.Delete(ctx, meshRoute(ns, "failover-probe", "steady", 8080))).To(Succeed())
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(route), route)).To(Succeed())
	Expect(route.ResourceVersion).To(Equal(version), "HTTPRoute %s was written across the failover: its status now %+v", route.Name, route.Status)
	Expect(route.Status).To(Equal(*status))
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// meshObjects are the resource versions of what the agent builds the node's listeners from, by
// kind and key: every MeshService and MeshEndpoint, and every pod of the node but the agent's own
// (its restart is the fault).
func meshObjects() map[string]string {
	GinkgoHelper()
	ctx := context.Background()
	out := map[string]string{}
	var services meshv1alpha1.MeshServiceList
	Expect(k8s.List(ctx, &services)).To(Succeed())
	for _, s := range services.Items {
		out["MeshService "+s.Namespace+"/"+s.Name] = s.ResourceVersion
	}
	var endpoints meshv1alpha1.MeshEndpointList
	Expect(k8s.List(ctx, &endpoints)).To(Succeed())
	for _, e := range endpoints.Items {
		out["MeshEndpoint "+e.Namespace+"/"+e.Name] = e.ResourceVersion
	}
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods)).To(Succeed())
	for _, p := range pods.Items {
		if p.Labels["app.kubernetes.io/name"] != agentPods["app.kubernetes.io/name"] {
			out["Pod "+p.Namespace+"/"+p.Name] = p.ResourceVersion
		}
	}
	return out
}

// objectChanges lists the objects of after that are new or at another version than in before,
// and those of before that are gone, one a line ("none" if nothing changed).
func objectChanges(before, after map[string]string) string {
	var changed []string
	for key, version := range after {
		if old, ok := before[key]; !ok {
			changed = append(changed, key+" created")
		} else if old != version {
			changed = append(changed, key+" updated")
		}
	}
	for key := range before {
		if _, ok := after[key]; !ok {
			changed = append(changed, key+" deleted")
		}
	}
	if len(changed) == 0 {
		return "none"
	}
	slices.Sort(changed)
	return strings.Join(changed, "\n")
}

// dnsOutage is the longest time, from killed until the dial log of the pod's container reaches
// until, between two of its dials answered with one of want (a dial by name answers only once the
// name resolved): how long the pod's DNS was lost.
func dnsOutage(ns, pod, container string, want []string, killed, until time.Time) time.Duration {
	GinkgoHelper()
	var dials []dialLine
	Eventually(func(g Gomega) {
		dials = containerDialLog(g, ns, pod, container, killed.Add(-2*time.Second))
		g.Expect(dials).NotTo(BeEmpty())
		g.Expect(dials[len(dials)-1].At).To(BeTemporally(">", until))
	}, time.Minute, time.Second).Should(Succeed())
	var longest time.Duration
	var last time.Time
	for _, d := range dials {
		if !slices.Contains(want, d.Answer) {
			continue
		}
		if !last.IsZero() && d.At.Sub(last) > longest {
			longest = d.At.Sub(last)
		}
		last = d.At
	}
	Expect(last).To(BeTemporally(">", killed), "no dial of %s/%s by name was answered after the agent's restart", pod, container)
	return longest
}
