//go:build e2e

// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// The documented install paths (hack/install/install.sh, quoted by docs/install.md): the one
// hack/cluster/deploy.sh installed serves admission with the certificate the manager rotates
// itself, and the API server accepts every path's objects in a server-side dry run, the
// cert-manager paths with cert-manager's CRDs (from the github.com/cert-manager/cert-manager
// module) installed and refused without them.
var _ = Describe("the install paths", Ordered, func() {
	const (
		ns      = "aether-operator-system"
		service = "aether-operator-webhook-service"
	)
	ctx := context.Background()

	It("serves admission with the certificate the manager rotates: the Secret the install made, its CA in both webhook configurations, verified by a TLS client", func() {
		installed, err := os.ReadFile(filepath.Join(clusterState(), "install"))
		Expect(err).NotTo(HaveOccurred(), "hack/cluster/deploy.sh records the path it installed")
		By("installed by " + strings.TrimSpace(string(installed)))

		dep := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "aether-operator-controller-manager"}, dep)).To(Succeed())
		Expect(dep.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--cert-rotation=true"), "the manager keeps its own certificate")

		// The Secret the install made (config/manager/webhook_cert_secret.yaml, or the chart's), which
		// the manager mounts and --cert-rotation-secret names.
		secretName := ""
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == "webhook-certs" && v.Secret != nil {
				secretName = v.Secret.SecretName
			}
		}
		Expect(dep.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--cert-rotation-secret="+secretName), "the rotation writes the Secret the manager mounts")
		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: secretName}, secret)).To(Succeed())
		ca := secret.Data["ca.crt"]
		Expect(ca).NotTo(BeEmpty(), "Secret "+secretName+" holds the rotator's CA")
		dnsName := service + "." + ns + ".svc"
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(ca)).To(BeTrue(), "ca.crt is PEM")
		block, _ := pem.Decode(secret.Data["tls.crt"])
		Expect(block).NotTo(BeNil(), "tls.crt is PEM")
		cert, err := x509.ParseCertificate(block.Bytes)
		Expect(err).NotTo(HaveOccurred())
		_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: dnsName})
		Expect(err).NotTo(HaveOccurred(), "tls.crt is valid for %s under ca.crt", dnsName)

		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "aether-operator-validating-webhook-configuration"}, vwc)).To(Succeed())
		for _, w := range vwc.Webhooks {
			Expect(w.ClientConfig.CABundle).To(Equal(ca), "validating webhook %s's caBundle is the rotator's CA", w.Name)
		}
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "aether-operator-mutating-webhook-configuration"}, mwc)).To(Succeed())
		for _, w := range mwc.Webhooks {
			Expect(w.ClientConfig.CABundle).To(Equal(ca), "mutating webhook %s's caBundle is the rotator's CA", w.Name)
		}

		// Each ready replica serves that certificate: a TLS client trusting only the injected CA
		// verifies it for the Service's name, as the API server does.
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		for _, p := range pods.Items {
			Expect(p.Status.PodIP).NotTo(BeEmpty(), "manager pod %s has an IP", p.Name)
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(p.Status.PodIP, "9443"),
				&tls.Config{RootCAs: roots, ServerName: dnsName, MinVersion: tls.VersionTLS12})
			Expect(err).NotTo(HaveOccurred(), "manager pod %s's webhook server, verified against the injected CA", p.Name)
			Expect(conn.Close()).To(Succeed())
		}
	})

	It("accepts every documented install path in a server-side dry run; the cert-manager paths only with cert-manager's CRDs", func() {
		crdDir := strings.TrimSpace(run("hack/install/cert-manager-crds.sh"))
		var crds []string
		for _, f := range []string{"cert-manager.io_certificates.yaml", "cert-manager.io_issuers.yaml"} {
			crds = append(crds, filepath.Join(crdDir, f))
		}

		By("without cert-manager's CRDs, its path is refused: the dry run is the API server's")
		kubectl("delete", "crd", "certificates.cert-manager.io", "issuers.cert-manager.io", "--ignore-not-found", "--wait")
		out, err := installScript("--dry-run", "kustomize-cert-manager")
		Expect(err).To(HaveOccurred(), "the cert-manager path dry-runs without cert-manager's CRDs:\n%s", out)
		// kubectl names the kind when its discovery no longer lists cert-manager's types ("no matches
		// for kind \"Certificate\""), the resource when its cached discovery still does and the
		// API server answers the POST with NotFound ("post certificates.cert-manager.io"): the CRDs
		// were deleted just now, and which one comes depends on that cache.
		Expect(out).To(MatchRegexp(`no matches for kind "Certificate"|post certificates\.cert-manager\.io`),
			"the refusal names cert-manager's Certificate")

		By("cert-manager's CRDs from " + crdDir)
		args := []string{"apply", "--server-side"}
		for _, f := range crds {
			args = append(args, "-f", f)
		}
		kubectl(args...)
		kubectl(append([]string{"wait", "--for", "condition=Established", "--timeout=60s"}, args[2:]...)...)

		paths := strings.Fields(run("hack/install/install.sh", "--list"))
		Expect(paths).To(ConsistOf("helm", "helm-cert-manager", "kustomize", "kustomize-spire", "kustomize-cert-manager"))
		for _, path := range paths {
			out, err := installScript("--dry-run", path)
			Expect(err).NotTo(HaveOccurred(), "install path %s, dry run:\n%s", path, out)
			Expect(out).To(ContainSubstring("(server dry run)"), "install path %s: kubectl applied with the server's dry run", path)
			GinkgoWriter.Printf("install path %s: %d objects accepted (server dry run)\n", path, strings.Count(out, "(server dry run)"))
		}
	})
})

// installScript runs hack/install/install.sh with args, with the cluster's kubectl and helm, and
// returns what it printed.
func installScript(args ...string) (string, error) {
	GinkgoHelper()
	a, err := assets()
	Expect(err).NotTo(HaveOccurred())
	helmDir := strings.TrimSpace(lastLine(run("hack/build-helm.sh")))
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "install", "install.sh"), args...)
	cmd.Env = append(os.Environ(), "HELM="+filepath.Join(helmDir, "helm"), "KUBECTL="+filepath.Join(a, "kubectl"),
		"KUBECTL_ARGS=--kubeconfig "+filepath.Join(clusterState(), "pki", "admin.kubeconfig"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubectl runs the cluster's kubectl as its admin; it fails the spec if the command fails.
func kubectl(args ...string) string {
	GinkgoHelper()
	a, err := assets()
	Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(filepath.Join(a, "kubectl"), append([]string{"--kubeconfig", filepath.Join(clusterState(), "pki", "admin.kubeconfig")}, args...)...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// run runs a script of the repository and returns its stdout; it fails the spec if it fails.
func run(script string, args ...string) string {
	GinkgoHelper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), script), args...)
	cmd.Dir = testenv.RepoRoot()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "%s %s:\n%s", script, strings.Join(args, " "), stderr.String())
	return string(out)
}
