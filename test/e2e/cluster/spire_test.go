//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/hack/testapp"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// SPIRE on the real node, deployed from config/spire (hack/cluster/deploy.sh): the node's SPIRE
// agent attested by k8s_psat (its projected ServiceAccount token, checked by the server with a
// TokenReview), and the k8s workload attestor, through the real kubelet, telling a pod's
// ServiceAccount apart (the kubelet's serving certificate verified against the cluster CA): an
// entry made by hand for one ServiceAccount, parented to the node
// agents' alias (which selects every agent of the cluster by k8s_psat:cluster), gives that
// ServiceAccount's pod its X.509 SVID over the Workload API socket on the node, with the URI SAN
// spiffe://<td>/ns/<ns>/sa/<sa>; a pod of another ServiceAccount on the same socket gets none.
// The mesh's own registration (the registrar) is not needed for this: the rest of identity
// stands on it.
var _ = Describe("SPIRE on a real node", Ordered, func() {
	const (
		ns          = "spire"
		trustDomain = "aether.internal"
		// The cluster name config/spire's k8s_psat admits.
		psatCluster = "aether"
	)
	ctx := context.Background()
	alias := "spiffe://" + trustDomain + workloadidentity.NodeAliasPath
	socket := workloadidentity.NodeWorkloadSocketDir + "/" + workloadidentity.WorkloadSocketName
	// The entries this spec made, which it removes.
	var entryIDs []string

	BeforeAll(func() {
		freshNamespace(ctx, ns, "workload", "stranger")
	})

	It("has the node's agent attested by k8s_psat, as the node's UID", func() {
		node := &corev1.Node{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "node-a"}, node)).To(Succeed())
		out := spireServer("agent", "list", "-selector", "k8s_psat:agent_node_name:node-a")
		Expect(out).To(MatchRegexp(`(?m)^\s*Attestation type\s*: k8s_psat$`))
		// k8s_psat names an agent by its cluster and its node's UID, which the server read from
		// the API (the token's pod, then its node).
		Expect(out).To(MatchRegexp(`(?m)^\s*SPIFFE ID\s*: ` + regexp.QuoteMeta("spiffe://"+trustDomain+"/spire/agent/k8s_psat/"+psatCluster+"/"+string(node.UID)) + `$`))
	})

	It("gives the pod of a registered ServiceAccount its SVID over the Workload API, the kubelet's certificate verified, and a pod of another none", func() {
		// The node agents' alias: made here (and removed after) unless the registrar made it.
		if !strings.Contains(spireServer("entry", "show", "-spiffeID", alias), "Entry ID") {
			entryIDs = append(entryIDs, createdEntry(spireServer("entry", "create", "-node", "-spiffeID", alias,
				"-selector", "k8s_psat:cluster:"+psatCluster)))
		}
		want := "spiffe://" + trustDomain + "/ns/" + ns + "/sa/workload"
		entryIDs = append(entryIDs, createdEntry(spireServer("entry", "create", "-parentID", alias, "-spiffeID", want,
			"-selector", "k8s:ns:"+ns, "-selector", "k8s:sa:workload")))

		// The test server asks the socket every second: the agent syncs its entries every 5 s.
		fetcher := func(sa, timeout string) *corev1.Pod {
			return testPod(ns, sa, withServiceAccount(sa), withRestartNever,
				withVolumes(corev1.Volume{Name: "spire-agent-socket", VolumeSource: corev1.VolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: workloadidentity.NodeWorkloadSocketDir, Type: new(corev1.HostPathDirectory)}}}),
				withContainers(corev1.Container{
					Name:         "fetch",
					Args:         []string{"-fetch-svid", socket, "-fetch-timeout", timeout},
					VolumeMounts: []corev1.VolumeMount{{Name: "spire-agent-socket", MountPath: workloadidentity.NodeWorkloadSocketDir, ReadOnly: true}},
				}))
		}
		// Each pod ends once it has an SVID (Succeeded) or its time is up (Failed).
		finished := func(p *corev1.Pod) corev1.PodPhase {
			GinkgoHelper()
			Eventually(func(g Gomega) corev1.PodPhase {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				return p.Status.Phase
			}, 3*time.Minute, time.Second).Should(BeElementOf(corev1.PodSucceeded, corev1.PodFailed))
			return p.Status.Phase
		}
		workload := fetcher("workload", "2m")
		Expect(k8s.Create(ctx, workload)).To(Succeed())
		Expect(finished(workload)).To(Equal(corev1.PodSucceeded), "the workload's log:\n%s", podLog(ctx, workload))
		Expect(podLog(ctx, workload)).To(ContainSubstring(testapp.SVIDPrefix + " " + want + "\n"))
		// The agent found the pod through the kubelet, whose serving certificate (issued by the
		// cluster CA, hack/cluster/pki) it verified: the deployed configuration never skips that.
		agentConf := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "spire-system", Name: "spire-agent"}, agentConf)).To(Succeed())
		Expect(agentConf.Data["agent.conf"]).NotTo(ContainSubstring("skip_kubelet_verification"))
		Expect(agentConf.Data["agent.conf"]).To(ContainSubstring(`kubelet_ca_path = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"`))

		// Same node, same socket, attested as well (the agent found its pod through the kubelet),
		// and started only now, so that every one of its 10 s of attempts finds the agent holding
		// the workload's entry: no entry selects its ServiceAccount, so no identity.
		stranger := fetcher("stranger", "10s")
		Expect(k8s.Create(ctx, stranger)).To(Succeed())
		Expect(finished(stranger)).To(Equal(corev1.PodFailed), "the stranger's log:\n%s", podLog(ctx, stranger))
		log := podLog(ctx, stranger)
		Expect(log).To(ContainSubstring("no identity issued"))
		Expect(log).NotTo(ContainSubstring(testapp.SVIDPrefix + " "))
	})

	AfterAll(func() {
		for _, id := range entryIDs {
			spireServer("entry", "delete", "-entryID", id)
		}
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
})

// assets is the directory of kubectl (hack/build-binaries.sh's cache), found once.
var assets = sync.OnceValues(testenv.Assets)

// spireServer runs the spire-server command args in the SPIRE server's pod (kubectl exec), on its
// API socket, and returns what it printed; it fails the spec if the command fails.
func spireServer(args ...string) string {
	GinkgoHelper()
	assets, err := assets()
	Expect(err).NotTo(HaveOccurred())
	state := os.Getenv("AETHER_CLUSTER_DIR")
	if state == "" {
		state = "/tmp/aether-cluster"
	}
	argv := append([]string{"--kubeconfig", filepath.Join(state, "pki", "admin.kubeconfig"),
		"-n", "spire-system", "exec", "spire-server-0", "-c", "spire-server", "--",
		"/opt/spire/bin/spire-server"}, args...)
	argv = append(argv, "-socketPath", "/run/spire/server-sockets/api.sock")
	out, err := exec.Command(filepath.Join(assets, "kubectl"), argv...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "spire-server %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// createdEntry is the ID of the entry `spire-server entry create` said it created.
func createdEntry(out string) string {
	GinkgoHelper()
	id := regexp.MustCompile(`(?m)^Entry ID\s*: (\S+)$`).FindStringSubmatch(out)
	Expect(id).NotTo(BeNil(), "spire-server entry create said:\n%s", out)
	return id[1]
}

// podLog is the log of p's first container.
func podLog(ctx context.Context, p *corev1.Pod) string {
	GinkgoHelper()
	out, err := clientset().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(out)
}
