//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/google/nftables"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/capture"
	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/routes"
)

// The fault specs' negative controls. Each spec proves it can fail: with AETHER_FAULTS_BREAK
// naming its break, the spec breaks its own recovery on purpose (or plants what a broken recovery
// would leave), and must then fail. Never set in CI; every break undoes itself when its spec ends.
//
//	make test-faults AETHER_FAULTS_BREAK=takeover

// breakEnv names the one recovery to break.
const breakEnv = "AETHER_FAULTS_BREAK"

// breaks are the breaks, by name: what each does, and the spec it must fail.
var breaks = map[string]string{
	"node-policy":     "the per-node policy's binding deleted: the agent's token may write another node's MeshEndpoint",
	"route-status":    "the steady route's status planted stale, as the controller: the failover spec sees it written",
	"takeover":        "the managers run with --leader-elect=false: nobody holds the Lease, nobody takes over",
	"reconnect":       "the agent taken off the node before the API server restarts, and kept off: it never watches again",
	"write-storm":     "a write of the steady MeshService's status, as the manager, after the relist: the storm bound sees it",
	"agent-rewrite":   "a write of a steady MeshEndpoint's status, as the restarted agent: the rewrite bound sees it",
	"capture":         "the dialer's table inet aether deleted while the agent restarts: its dials go uncaptured",
	"fail-open":       "the pod webhook's failurePolicy set to Fail: with the manager down, the bad pod is not admitted",
	"handover":        "the old proxy killed with SIGKILL instead of drained: the connections it holds are reset",
	"upgrade-capture": "the dialer's table inet aether deleted as the agent's rollout starts: its dials go uncaptured",
	"rollout":         "web's pods deleted at once with no grace instead of rolled: the load's requests fail",
	"agent-crash":     "the node's Envoy killed with SIGKILL instead of the agent: the load's requests fail",
}

// breaking reports whether this spec's recovery is to be broken (break name).
func breaking(name string) bool {
	GinkgoHelper()
	Expect(breaks).To(HaveKey(name))
	if os.Getenv(breakEnv) != name {
		return false
	}
	AddReportEntry("negative control", ReportEntryVisibilityAlways, fmt.Sprintf("%s=%s: %s; this spec must fail", breakEnv, name, breaks[name]))
	return true
}

// withoutNodePolicy deletes the per-node policy's binding until the spec ends, and waits until
// the API server no longer applies it: until write, a write the policy denies, succeeds.
func withoutNodePolicy(write func() error) {
	GinkgoHelper()
	ctx := context.Background()
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "aether-operator-aether-agent-node-authority"}, binding)).To(Succeed())
	DeferCleanup(func() {
		restored := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: binding.Name, Labels: binding.Labels, Annotations: binding.Annotations}, Spec: binding.Spec}
		Expect(k8s.Create(context.Background(), restored)).To(Succeed())
		Eventually(write, 30*time.Second, 200*time.Millisecond).ShouldNot(Succeed(), "the restored policy applies again")
	})
	Expect(k8s.Delete(ctx, binding)).To(Succeed())
	Eventually(write, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "the policy no longer applies")
}

// staleRouteStatus rewrites, as the controller's field manager, the message of the mesh's
// ResolvedRefs condition of route ns/name: the controller then writes it back.
func staleRouteStatus(ns, name string) {
	GinkgoHelper()
	route := &gwapiv1.HTTPRoute{}
	Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, route)).To(Succeed())
	for i := range route.Status.Parents {
		if route.Status.Parents[i].ControllerName != routes.ControllerName {
			continue
		}
		for j := range route.Status.Parents[i].Conditions {
			if route.Status.Parents[i].Conditions[j].Type == string(gwapiv1.RouteConditionResolvedRefs) {
				route.Status.Parents[i].Conditions[j].Message = "planted by AETHER_FAULTS_BREAK=route-status"
			}
		}
	}
	Expect(k8s.Status().Update(context.Background(), route, client.FieldOwner(controller.FieldManager))).To(Succeed())
}

// withoutElection redeploys the managers with --leader-elect=false until the spec ends.
func withoutElection() {
	GinkgoHelper()
	DeferCleanup(func() {
		setManagerArg("--leader-elect=false", "--leader-elect")
		managersReady()
	})
	setManagerArg("--leader-elect", "--leader-elect=false")
}

// setManagerArg replaces the manager's argument from by to (if it has it) and waits for the
// rollout.
func setManagerArg(from, to string) {
	GinkgoHelper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: managerDeployment}, d)).To(Succeed())
	c := managerContainer(d)
	if i := slices.Index(c.Args, from); i >= 0 {
		c.Args[i] = to
		Expect(k8s.Update(ctx, d)).To(Succeed())
	}
	managersRolledOut()
}

// withoutAgent takes the agent off the node (its DaemonSet's nodeSelector matches no node), and
// keeps it off until the spec ends.
func withoutAgent() {
	GinkgoHelper()
	ctx := context.Background()
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: agentDaemonSet}}
	DeferCleanup(func() {
		Expect(k8s.Patch(context.Background(), ds, client.RawPatch(types.StrategicMergePatchType,
			[]byte(`{"spec":{"template":{"spec":{"nodeSelector":{"faults.aether.io/nowhere":null}}}}}`)))).To(Succeed())
		agentPod()
	})
	Expect(k8s.Patch(ctx, ds, client.RawPatch(types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"nodeSelector":{"faults.aether.io/nowhere":"true"}}}}}`)))).To(Succeed())
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(operatorNamespace), agentPods)).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}, 2*time.Minute, time.Second).Should(Succeed())
}

// plantedManagerWrite writes MeshService ns/name's status (an empty merge patch: no change, one
// request) with a token of the manager's ServiceAccount.
func plantedManagerWrite(ns, name string) {
	GinkgoHelper()
	asManager := clientWithToken(accountToken(managerAccount, nil))
	ms := &meshv1alpha1.MeshService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(asManager.Status().Patch(context.Background(), ms, client.RawPatch(types.MergePatchType, []byte(`{}`)))).To(Succeed())
}

// plantedAgentWrite writes MeshEndpoint ns/name's status (an empty merge patch) with a token
// bound to agent's pod.
func plantedAgentWrite(agent *corev1.Pod, ns, name string) {
	GinkgoHelper()
	asAgent := clientWithToken(podToken(agent, agentAccount))
	ep := &meshv1alpha1.MeshEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(asAgent.Status().Patch(context.Background(), ep, client.RawPatch(types.MergePatchType, []byte(`{}`)))).To(Succeed())
}

// uncapture deletes table inet aether from pod ns/name's network namespace (from the agent's
// registry on the node).
func uncapture(ns, name string) {
	GinkgoHelper()
	pod := &corev1.Pod{}
	Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
	recorded := readRegistry()
	Expect(recorded).To(HaveKey(pod.UID))
	f, err := os.Open(recorded[pod.UID].NetNS)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	conn, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	Expect(err).NotTo(HaveOccurred())
	conn.DelTable(&nftables.Table{Name: capture.TableName, Family: nftables.TableFamilyINet})
	Expect(conn.Flush()).To(Succeed())
}

// webhookFailurePolicy sets the pod validating webhook's failurePolicy until the spec ends.
func webhookFailurePolicy(policy admissionregistrationv1.FailurePolicyType) {
	GinkgoHelper()
	ctx := context.Background()
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "aether-operator-validating-webhook-configuration"}, config)).To(Succeed())
	i := slices.IndexFunc(config.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == "vpod.mesh.aether.io" })
	Expect(i).To(BeNumerically(">=", 0))
	set := func(p admissionregistrationv1.FailurePolicyType) {
		patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": fmt.Sprintf("/webhooks/%d/failurePolicy", i), "value": p}})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Patch(context.Background(), config, client.RawPatch(types.JSONPatchType, patch))).To(Succeed())
	}
	previous := *config.Webhooks[i].FailurePolicy
	DeferCleanup(func() { set(previous) })
	set(policy)
}
