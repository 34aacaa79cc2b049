//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/cni"
)

// The CNI plugin on the real node: the agent's DaemonSet installed it (hack/cluster/up.sh writes
// only the node's primary conflist; deploy.sh points the DaemonSet's CNI hostPaths at the node's
// CNI dirs under the cluster's state), the kubelet's sandboxes go through it, and the agent
// records each meshed pod's network namespace. This test runs on the node (in its network
// namespace, on the host's file system), so it reads the node's files as the runtime does.
var _ = Describe("the CNI plugin on a real node", Ordered, func() {
	const ns = "cni"
	ctx := context.Background()
	state := os.Getenv("AETHER_CLUSTER_DIR")
	if state == "" {
		state = "/tmp/aether-cluster"
	}
	conflist := filepath.Join(state, "cni", "net.d", "10-aether.conflist")
	plugin := filepath.Join(state, "cni", "bin", cni.PluginType)
	var meshed, plain *corev1.Pod

	BeforeAll(func() {
		freshNamespace(ctx, ns, "meshed")
	})

	It("is installed by the agent's DaemonSet: chained last into the node's conflist, its binary in the CNI bin dir", func() {
		var list struct {
			CNIVersion string            `json:"cniVersion"`
			Plugins    []json.RawMessage `json:"plugins"`
		}
		Eventually(func(g Gomega) {
			data, err := os.ReadFile(conflist)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(json.Unmarshal(data, &list)).To(Succeed())
			g.Expect(len(list.Plugins)).To(BeNumerically(">", 1))
		}, time.Minute, time.Second).Should(Succeed())
		var types []string
		for _, p := range list.Plugins {
			var head struct {
				Type string `json:"type"`
			}
			Expect(json.Unmarshal(p, &head)).To(Succeed())
			types = append(types, head.Type)
		}
		// up.sh's plugins, in their order, and ours last, once.
		Expect(types).To(Equal([]string{"bridge", "portmap", "loopback", cni.PluginType}))
		var entry cni.Entry
		Expect(json.Unmarshal(list.Plugins[len(list.Plugins)-1], &entry)).To(Succeed())
		Expect(entry.AgentSocket).To(Equal(cni.DefaultSocket))
		Expect(entry.Kubeconfig).To(Equal(cni.DefaultKubeconfig))
		Expect(entry.IgnoredNamespaces).To(ContainElements("kube-system", "aether-operator-system"))

		info, err := os.Stat(plugin)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Mode().Perm() & 0o111).NotTo(BeZero())
		about := exec.Command(plugin)
		about.Env = []string{} // no CNI_COMMAND: it says what it is
		out, err := about.CombinedOutput()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("CNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0"))
		kubeconfig, err := os.Stat(cni.DefaultKubeconfig)
		Expect(err).NotTo(HaveOccurred(), "the agent keeps the plugin's kubeconfig for when it is unreachable")
		Expect(kubeconfig.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		// It speaks as the plugin's own ServiceAccount (get pods only), never as the agent.
		pluginCfg, err := clientcmd.BuildConfigFromFlags("", cni.DefaultKubeconfig)
		Expect(err).NotTo(HaveOccurred())
		who, err := kubernetes.NewForConfigOrDie(pluginCfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(who.Status.UserInfo.Username).To(Equal("system:serviceaccount:" + operatorNamespace + ":aether-operator-cni"))
	})

	It("hands a managed pod started by the kubelet to the agent, which records its network namespace; an unmanaged one passes", func() {
		before := cniRequests("ADD", "managed")
		pod := podBuilder(ns, withPorts("8080"), withContainers(corev1.Container{Name: "app", Args: []string{"-http", "8080"}}))
		meshed = pod("meshed", asManaged, withServiceAccount("meshed"))
		plain = pod("plain")
		startPods(ctx, meshed, plain)

		// The agent's registry on the host: the meshed pod's namespace, pinned by containerd.
		recorded := readRegistry()
		Expect(recorded).To(HaveKey(meshed.UID), "the meshed pod's network namespace was not handed over")
		Expect(recorded[meshed.UID].NetNS).To(MatchRegexp(`^/var/run/netns/cni-[0-9a-f-]{36}$`))
		Expect(recorded[meshed.UID].ContainerID).NotTo(BeEmpty())
		Expect(recorded[meshed.UID].NetNS).To(BeAnExistingFile())
		Expect(recorded).NotTo(HaveKey(plain.UID), "an unmanaged pod was handed over")
		Expect(cniRequests("ADD", "managed")).To(BeNumerically(">", before))
	})

	It("forgets the pod's network namespace when the kubelet deletes its sandbox", func() {
		Expect(k8s.Delete(ctx, meshed)).To(Succeed())
		Eventually(func() map[types.UID]registryEntry { return readRegistry() }, time.Minute, time.Second).
			ShouldNot(HaveKey(meshed.UID))
		Expect(k8s.Delete(ctx, plain)).To(Succeed())
	})
})

// registryEntry is one pod of the agent's netns registry (internal/agent's state file).
type registryEntry struct {
	NetNS       string `json:"netns"`
	ContainerID string `json:"containerID"`
}

// netnsRegistry is the agent's netns registry on the host (internal/agent's state file).
var netnsRegistry = filepath.Join(cni.DefaultRunDir, "netns.json")

// readRegistry reads netnsRegistry, by pod UID.
func readRegistry() map[types.UID]registryEntry {
	GinkgoHelper()
	data, err := os.ReadFile(netnsRegistry)
	Expect(err).NotTo(HaveOccurred())
	var state struct {
		Pods map[types.UID]registryEntry `json:"pods"`
	}
	Expect(json.Unmarshal(data, &state)).To(Succeed())
	return state.Pods
}

// cniRequests reads the agent's aether_agent_cni_requests_total{command, result} from its metrics
// endpoint (scrapeAgent).
func cniRequests(command, result string) float64 {
	GinkgoHelper()
	node := &corev1.Node{}
	Expect(k8s.Get(context.Background(), client.ObjectKey{Name: "node-a"}, node)).To(Succeed())
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	var value float64
	Eventually(func(g Gomega) {
		body := scrapeAgent(g, ip)
		series := regexp.MustCompile(fmt.Sprintf(`(?m)^aether_agent_cni_requests_total\{command="%s",result="%s"\} (\S+)$`, command, result)).FindSubmatch(body)
		g.Expect(series).NotTo(BeNil(), "no series %s/%s in the agent's metrics", command, result)
		v, err := strconv.ParseFloat(strings.TrimSpace(string(series[1])), 64)
		g.Expect(err).NotTo(HaveOccurred())
		value = v
	}, 30*time.Second, time.Second).Should(Succeed())
	return value
}
