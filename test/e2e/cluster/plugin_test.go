//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/aether-mesh/aether-operator/internal/plugin"
	"github.com/aether-mesh/aether-operator/internal/proxyconfig"
	"github.com/aether-mesh/aether-operator/internal/xds"
)

// kubectl aether on the real node: the plugin's commands (plugin.NewCommand, what the
// kubectl-aether binary runs) against the cluster as its admin.
var _ = Describe("kubectl aether on a real node", Ordered, func() {
	const ns = "plugin"
	ctx := context.Background()

	aether := func(args ...string) (string, error) { return kubectlAether(ctx, args...) }

	BeforeAll(func() {
		freshNamespace(ctx, ns, "shop", "other")
		pod := podBuilder(ns, asManaged, withPorts("8080,9000=tcp"),
			withContainers(corev1.Container{Name: "app", Args: []string{"-http", "8080", "-tcp", "9000"}}))
		startPods(ctx, pod("shop-0", withServiceAccount("shop")), pod("other-0", withServiceAccount("other")))
	})

	// proxy-config reads the agent's endpoint on its metrics port through a port-forward of the API
	// server (pods/portforward to the agent's hostNetwork pod), presenting the admin kubeconfig's
	// client certificate, which the agent has checked against the cluster's client CA and
	// authorized by a SubjectAccessReview: what the node's agent publishes for the pod, its
	// capture listener and its identity's clusters, and not the other pod's.
	It("proxy-config prints the pod's capture listener and its clusters, read from its node's agent", func() {
		var out string
		Eventually(func(g Gomega) {
			var err error
			out, err = aether("proxy-config", "shop-0", "-n", ns)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring(xds.CaptureListener(xds.PodKey(ns, "shop-0"))))
			// Its identity's cluster of its own service's raw-TCP port 9000: EDS, one endpoint (the
			// pod itself), the port as its SNI.
			g.Expect(out).To(MatchRegexp(`(?m)^` + regexp.QuoteMeta(xds.TCPCluster(xds.FQDN("shop", ns, "aether.internal"), 9000)+"|"+ns+"/shop") + `\s+EDS\s+1\s+9000$`))
			g.Expect(out).To(ContainSubstring(xds.AppCluster(xds.PodKey(ns, "shop-0"), 8080)))
		}, 2*time.Minute, 2*time.Second).Should(Succeed())
		GinkgoWriter.Println(out)
		Expect(out).NotTo(ContainSubstring(xds.PodKey(ns, "other-0")), "the other pod's listeners or clusters")
		Expect(out).NotTo(ContainSubstring("|"+ns+"/other"), "the other identity's clusters")

		raw, err := aether("proxy-config", ns+"/shop-0", "-o", "json")
		Expect(err).NotTo(HaveOccurred(), raw)
		var config proxyconfig.Config
		Expect(json.Unmarshal([]byte(raw), &config)).To(Succeed())
		res, err := config.Decode()
		Expect(err).NotTo(HaveOccurred())
		var listeners []string
		for _, l := range res.Listeners {
			listeners = append(listeners, l.GetName())
		}
		Expect(listeners).To(ContainElement(xds.CaptureListener(xds.PodKey(ns, "shop-0"))))
		Expect(raw).NotTo(ContainSubstring("PRIVATE KEY"))
	})

	It("proxy-config says a pod outside the mesh is not in it", func() {
		plain := testPod(ns, "plain", withContainers(corev1.Container{Name: "app", Args: []string{"-http", "8080"}}))
		startPods(ctx, plain)
		out, err := aether("proxy-config", "plain", "-n", ns)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("pod %s/plain is not in the mesh", ns)), out)
	})

	AfterAll(func() {
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
})

// kubectlAether runs kubectl aether (plugin.NewCommand, what the kubectl-aether binary runs) with
// args as the cluster's admin, and returns its output and error.
func kubectlAether(ctx context.Context, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append(args, "--kubeconfig", filepath.Join(clusterState(), "pki", "admin.kubeconfig")))
	err := cmd.ExecuteContext(ctx)
	return out.String() + errOut.String(), err
}
