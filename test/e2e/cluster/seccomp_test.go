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
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/seccomp"
)

// The node Envoy's seccomp profile (internal/seccomp, config/envoy) on a real node: the init
// container install-seccomp wrote it into the kubelet's <root dir>/seccomp/aether, the runtime
// loaded it into Envoy's container, and a process there that holds CAP_SYS_ADMIN (which the
// kernel asks of a new namespace) is refused one with EPERM: util-linux's unshare, which the
// official Envoy image carries too (make images' image has it for this spec). Under the runtime's
// default profile, which allows unshare to a container holding CAP_SYS_ADMIN, the same command
// succeeds. That Envoy still serves through its setns calls is what the traffic specs prove
// (envoy_test.go, traffic_test.go); here, that it runs unrestarted and ready under the profile.
var _ = Describe("the node Envoy's seccomp profile", Ordered, func() {
	ctx := context.Background()
	var pod corev1.Pod

	BeforeAll(func() {
		nodeEnvoy(ctx) // one Envoy pod, with its address
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace("aether-operator-system"), client.MatchingLabels{"app.kubernetes.io/name": "aether-envoy"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		pod = pods.Items[0]
	})

	It("is written by install-seccomp where the kubelet reads it, and named by Envoy's container", func() {
		var envoy *corev1.Container
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == "envoy" {
				envoy = &pod.Spec.Containers[i]
			}
		}
		Expect(envoy).NotTo(BeNil())
		Expect(envoy.SecurityContext).NotTo(BeNil())
		Expect(envoy.SecurityContext.SeccompProfile).To(Equal(&corev1.SeccompProfile{
			Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: new(seccomp.EnvoyLocalhostProfile)}), "the envoy container's seccomp profile")

		installer := initStatus(&pod, "install-seccomp")
		Expect(installer).NotTo(BeNil(), "the Envoy pod has no init container install-seccomp")
		Expect(installer.State.Terminated).NotTo(BeNil())
		Expect(installer.State.Terminated.ExitCode).To(BeZero())
		Expect(containerLog(ctx, &pod, "install-seccomp")).To(ContainSubstring("seccomp profile"), "install-seccomp says what it did")
		// The kubelet's root dir on this node is /var/lib/kubelet (hack/cluster/lib.sh).
		onNode, err := os.ReadFile(filepath.Join("/var/lib/kubelet/seccomp", seccomp.EnvoyLocalhostProfile))
		Expect(err).NotTo(HaveOccurred(), "the node's copy of the profile")
		Expect(string(onNode)).To(Equal(string(seccomp.Envoy())), "the node's profile is the agent binary's embedded one")
	})

	It("filters Envoy itself: its /proc/1/status says Seccomp 2, and Envoy runs ready, never restarted", func() {
		// The container's PID 1 is Envoy (its script execs it); the image has no cat: the
		// shell's own read.
		out, err := inEnvoy(pod.Name, "/bin/sh", "-c", `read -r comm < /proc/1/comm; echo "comm $comm"; `+statusFields("/proc/1/status"))
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("comm envoy"))
		Expect(out).To(MatchRegexp(`(?m)^Seccomp: 2$`), "Envoy's process is under a seccomp filter (mode 2)")

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&pod), &pod)).To(Succeed())
		for _, c := range pod.Status.ContainerStatuses {
			if c.Name == "envoy" {
				Expect(c.Ready).To(BeTrue(), "Envoy's /ready: it took the agent's configuration under the profile")
				Expect(c.RestartCount).To(BeZero(), "Envoy restarted under the profile")
			}
		}
	})

	It("refuses unshare with EPERM to a process that holds CAP_SYS_ADMIN", func() {
		// A process exec'd in the container gets the container's filter and capabilities: it
		// holds CAP_SYS_ADMIN, so the kernel itself would make it a new namespace.
		out, err := inEnvoy(pod.Name, "/bin/sh", "-c", statusFields("/proc/self/status"))
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`(?m)^Seccomp: 2$`))
		capEff := regexp.MustCompile(`(?m)^CapEff: ([0-9a-f]+)$`).FindStringSubmatch(out)
		Expect(capEff).NotTo(BeNil(), out)
		caps, err := strconv.ParseUint(capEff[1], 16, 64)
		Expect(err).NotTo(HaveOccurred())
		Expect(caps&(1<<21)).NotTo(BeZero(), "CapEff %s: CAP_SYS_ADMIN (bit 21) is the container's", capEff[1])

		for flag, what := range map[string]string{"-n": "network", "-m": "mount", "-U": "user"} {
			out, err := inEnvoy(pod.Name, "unshare", flag, "/bin/sh", "-c", "echo in a new namespace")
			Expect(out).NotTo(ContainSubstring("in a new namespace"), "unshare %s made a new %s namespace in Envoy's container", flag, what)
			Expect(err).To(HaveOccurred(), "unshare %s: %s", flag, out)
			Expect(out).To(ContainSubstring("unshare failed: Operation not permitted"), "unshare %s (a new %s namespace)", flag, what)
		}
	})
})

// statusFields is a shell command printing the Seccomp and CapEff lines of a /proc status file.
func statusFields(file string) string {
	return `while read -r k v; do case $k in Seccomp:|CapEff:) echo "$k $v";; esac; done < ` + file
}

// inEnvoy runs argv in the envoy container of the node Envoy's pod (kubectl exec): what it
// printed, and its error when it failed.
func inEnvoy(pod string, argv ...string) (string, error) {
	GinkgoHelper()
	a, err := assets()
	Expect(err).NotTo(HaveOccurred())
	args := append([]string{"--kubeconfig", filepath.Join(clusterState(), "pki", "admin.kubeconfig"), "--request-timeout=30s",
		"-n", "aether-operator-system", "exec", pod, "-c", "envoy", "--"}, argv...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(a, "kubectl"), args...).CombinedOutput()
	GinkgoWriter.Printf("kubectl exec %s -c envoy -- %s:\n%s", pod, strings.Join(argv, " "), out)
	return string(out), err
}
