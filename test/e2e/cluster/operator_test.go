//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/manager"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// The operator as deployed in the cluster (hack/cluster/deploy.sh: config/base): its two manager
// replicas and their Lease, the node's agent, their credentials.

const (
	managerDeployment = "aether-operator-controller-manager"
	agentDaemonSet    = "aether-operator-agent"
	agentAccount      = "aether-operator-agent"
	managerAccount    = "aether-operator-controller-manager"
)

var (
	managerPods = client.MatchingLabels{"control-plane": "controller-manager", "app.kubernetes.io/name": "aether-operator"}
	agentPods   = client.MatchingLabels{"app.kubernetes.io/name": "aether-agent"}
)

// adminConfig is the cluster admin's client configuration (hack/cluster/pki).
func adminConfig() *rest.Config {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(clusterState(), "pki", "admin.kubeconfig"))
	Expect(err).NotTo(HaveOccurred())
	return cfg
}

// managerLease reads the managers' Lease.
func managerLease(g Gomega) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: manager.LeaseName}, lease)).To(Succeed())
	return lease
}

// holderPod is the pod of the Lease's holder: client-go's identity is "<hostname>_<uuid>", and
// a pod's hostname is its name.
func holderPod(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return pod
}

// leaderPod is the leading manager's pod and the Lease that says so.
func leaderPod() (*corev1.Pod, *coordinationv1.Lease) {
	GinkgoHelper()
	var (
		lease *coordinationv1.Lease
		pod   = &corev1.Pod{}
	)
	Eventually(func(g Gomega) {
		lease = managerLease(g)
		g.Expect(holderPod(lease)).NotTo(BeEmpty(), "no replica holds Lease %s", manager.LeaseName)
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: holderPod(lease)}, pod)).To(Succeed())
		g.Expect(pod.DeletionTimestamp).To(BeNil())
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	return pod, lease
}

// newLeader waits, within, for a holder of the Lease other than before's, and returns the Lease
// then (its acquireTime is when the new holder took it).
func newLeader(before *coordinationv1.Lease, within time.Duration) *coordinationv1.Lease {
	GinkgoHelper()
	var lease *coordinationv1.Lease
	Eventually(func(g Gomega) {
		lease = managerLease(g)
		g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())), "nobody holds Lease %s", manager.LeaseName)
		g.Expect(*lease.Spec.HolderIdentity).NotTo(Equal(*before.Spec.HolderIdentity), "%s still holds Lease %s", holderPod(before), manager.LeaseName)
		g.Expect(lease.Spec.AcquireTime).NotTo(BeNil())
	}, within, 100*time.Millisecond).Should(Succeed())
	return lease
}

// leaderChange says whether the leader changed between two reads of the Lease.
func leaderChange(before, after *coordinationv1.Lease) string {
	if *before.Spec.HolderIdentity == *after.Spec.HolderIdentity {
		return "kept (" + holderPod(after) + ")"
	}
	return "changed from " + holderPod(before) + " to " + holderPod(after)
}

// managerContainer is the manager's container in d.
func managerContainer(d *appsv1.Deployment) *corev1.Container {
	GinkgoHelper()
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "manager" })
	Expect(i).To(BeNumerically(">=", 0), "deployment %s has no container manager", d.Name)
	return &d.Spec.Template.Spec.Containers[i]
}

// deployedElection is the leader election the deployed managers run: their --leader-elect*
// arguments, parsed by the binary's own flags (manager.Election.BindFlags).
func deployedElection() manager.Election {
	GinkgoHelper()
	d := &appsv1.Deployment{}
	Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: managerDeployment}, d)).To(Succeed())
	var election manager.Election
	flags := flag.NewFlagSet("manager", flag.ContinueOnError)
	election.BindFlags(flags)
	var args []string
	for _, arg := range managerContainer(d).Args {
		if strings.HasPrefix(arg, "--leader-elect") {
			args = append(args, arg)
		}
	}
	Expect(flags.Parse(args)).To(Succeed())
	Expect(election.Check()).To(Succeed())
	return election
}

// managersReady waits until the manager's Deployment runs its replicas, all ready, and one of
// them leads.
func managersReady() {
	GinkgoHelper()
	managersRolledOut()
	leaderPod()
}

// managersRolledOut waits until the manager's Deployment runs its replicas, all updated and
// ready.
func managersRolledOut() {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: managerDeployment}, d)).To(Succeed())
		want := *d.Spec.Replicas
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(want))
		g.Expect(d.Status.ReadyReplicas).To(Equal(want))
		g.Expect(d.Status.Replicas).To(Equal(want), "old replicas still run")
	}, 3*time.Minute, time.Second).Should(Succeed())
}

// scaleManager scales the manager's Deployment to replicas and waits: for none of its pods to
// be left at 0, else for them all to be ready and one to lead.
func scaleManager(replicas int32) {
	GinkgoHelper()
	ctx := context.Background()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: managerDeployment}}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	Expect(k8s.Patch(ctx, d, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	if replicas > 0 {
		managersReady()
		return
	}
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(operatorNamespace), managerPods)).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
}

// agentPod is the node's running, ready agent.
func agentPod() *corev1.Pod {
	GinkgoHelper()
	return agentPodOtherThan("")
}

// agentPodOtherThan waits for the node's agent to run, ready, in a pod other than old's UID.
func agentPodOtherThan(old types.UID) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(context.Background(), &pods, client.InNamespace(operatorNamespace), agentPods)).To(Succeed())
		var live []*corev1.Pod
		for i := range pods.Items {
			if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.UID != old {
				live = append(live, p)
			}
		}
		g.Expect(live).To(HaveLen(1), "the node's agent pods")
		pod = live[0]
		g.Expect(containerReady(pod, "agent")).To(BeTrue(), "agent pod %s is not ready", pod.Name)
	}, 3*time.Minute, 200*time.Millisecond).Should(Succeed())
	return pod
}

// containerRestarts is how often pod's container name restarted.
func containerRestarts(pod *corev1.Pod, name string) int32 {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name {
			return s.RestartCount
		}
	}
	return 0
}

// containerReady reports whether pod's container name runs and is ready.
func containerReady(pod *corev1.Pod, name string) bool {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name {
			return s.Ready && s.State.Running != nil
		}
	}
	return false
}

// podReady reports whether pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// accountToken is a token of ServiceAccount account of the operator's namespace; bound to pod
// when not nil, as the kubelet's projected tokens are (with the
// authentication.kubernetes.io/node-name claim of the pod's node).
func accountToken(account string, pod *corev1.Pod) string {
	GinkgoHelper()
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))}}
	if pod != nil {
		request.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	token, err := clientset().CoreV1().ServiceAccounts(operatorNamespace).CreateToken(context.Background(), account, request, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return token.Status.Token
}

// podToken is a token of account bound to pod.
func podToken(pod *corev1.Pod, account string) string {
	GinkgoHelper()
	return accountToken(account, pod)
}

// clientWithToken is a client of the cluster that authenticates with token alone.
func clientWithToken(token string) client.Client {
	GinkgoHelper()
	cfg := rest.AnonymousClientConfig(adminConfig())
	cfg.BearerToken = token
	c, err := client.New(cfg, client.Options{Scheme: testenv.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// eventRegarding is the Event among events about the object of UID uid with reason, or nil.
func eventRegarding(events []eventsv1.Event, uid types.UID, reason string) *eventsv1.Event {
	for i := range events {
		if events[i].Regarding.UID == uid && events[i].Reason == reason {
			return &events[i]
		}
	}
	return nil
}

// listenerSet is what an ADS client holds of the listeners: their version, names and content.
type listenerSet struct {
	Version   string
	Names     []string
	Resources map[string]proto.Message
}

// dialXDS opens an ADS stream to agent's xDS socket as the node's Envoy (node ID node-a).
func dialXDS(agent *corev1.Pod) *xdstest.Client {
	GinkgoHelper()
	c, err := xdstest.Dial(context.Background(), xdsSocket(agent), "node-a")
	Expect(err).NotTo(HaveOccurred())
	return c
}

// awaitListeners waits until c holds listeners and returns them.
func awaitListeners(c *xdstest.Client) listenerSet {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got listenerSet
	Expect(c.Await(ctx, func(s xdstest.State) error {
		if s.Versions[xdstest.Listeners] == "" || len(s.Resources[xdstest.Listeners]) == 0 {
			return fmt.Errorf("no listeners yet")
		}
		got.Version = s.Versions[xdstest.Listeners]
		got.Resources = maps.Clone(s.Resources[xdstest.Listeners])
		got.Names = slices.Sorted(maps.Keys(got.Resources))
		return nil
	})).To(Succeed())
	return got
}

// listenerChanges says how after differs from before: the listeners added and removed, and for
// each one changed the difference of its content (so a failure names what moved, not only that
// the version did).
func listenerChanges(before, after listenerSet) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(before.Resources)) {
		if _, ok := after.Resources[name]; !ok {
			fmt.Fprintf(&b, "removed: %s\n", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(after.Resources)) {
		old, ok := before.Resources[name]
		switch {
		case !ok:
			fmt.Fprintf(&b, "added: %s\n", name)
		case !proto.Equal(old, after.Resources[name]):
			fmt.Fprintf(&b, "changed: %s\n%s\n", name, cmp.Diff(old, after.Resources[name], protocmp.Transform()))
		}
	}
	return b.String()
}

// dialLine is one line of the test server's dial loop: when it was logged, and the answer.
type dialLine struct {
	At     time.Time // the kubelet's stamp: when the dial ended
	Answer string
	Took   time.Duration // a failed dial's duration, from its "(after <duration>)"; 0 when answered
}

// Began is when the dial began: its stamp less what it took.
func (d dialLine) Began() time.Time { return d.At.Add(-d.Took) }

// failedAfter is the suffix the test server's dial loop puts on a failed dial: how long it took.
var failedAfter = regexp.MustCompile(` \(after ([^)]+)\)$`)

// dialsUntil waits until pod ns/name's dial loop has logged a dial after until, and returns its
// dials since since.
func dialsUntil(ns, name string, since, until time.Time) []dialLine {
	GinkgoHelper()
	var dials []dialLine
	Eventually(func(g Gomega) {
		dials = dialLog(g, ns, name, since)
		g.Expect(dials).NotTo(BeEmpty())
		g.Expect(dials[len(dials)-1].At).To(BeTemporally(">", until))
	}, time.Minute, time.Second).Should(Succeed())
	return dials
}

// dialLog reads the dial loop of pod ns/name's container client since since (the kubelet's
// timestamps), each line "<target> <answer>".
func dialLog(g Gomega, ns, name string, since time.Time) []dialLine {
	return containerDialLog(g, ns, name, "client", since)
}

// containerDialLog is dialLog of the pod's container named container.
func containerDialLog(g Gomega, ns, name, container string, since time.Time) []dialLine {
	opts := &corev1.PodLogOptions{Container: container, Timestamps: true, SinceTime: &metav1.Time{Time: since.Add(-time.Second)}}
	raw, err := clientset().CoreV1().Pods(ns).GetLogs(name, opts).DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	var out []dialLine
	lines := bufio.NewScanner(strings.NewReader(string(raw)))
	for lines.Scan() {
		stamp, line, ok := strings.Cut(lines.Text(), " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		g.Expect(ok && err == nil).To(BeTrue(), "a log line without its timestamp: %q", lines.Text())
		if at.Before(since) {
			continue
		}
		_, answer, _ := strings.Cut(line, " ")
		d := dialLine{At: at, Answer: answer}
		if m := failedAfter.FindStringSubmatch(answer); m != nil {
			d.Took, err = time.ParseDuration(m[1])
			g.Expect(err).NotTo(HaveOccurred(), "a failed dial's duration: %q", lines.Text())
		}
		out = append(out, d)
	}
	return out
}
