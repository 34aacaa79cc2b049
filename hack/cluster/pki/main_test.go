// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestSPIREAgentVerifiesKubelet: config/spire's SPIRE agent verifies the kubelet's serving
// certificate (no skip_kubelet_verification) against the ServiceAccount's ca.crt, which on the
// cluster tier is this PKI's CA (the controller manager's --root-ca-file, published as
// kube-root-ca.crt); and the kubelet's serving certificate this PKI issues passes that check
// as SPIRE's k8s workload attestor makes it: a TLS handshake to the node's IP (KUBELET_HOST is
// status.hostIP), the CA as the only root. Negative control: the same handshake with a
// self-signed certificate, as a kubelet makes one for itself, fails.
func TestSPIREAgentVerifiesKubelet(t *testing.T) {
	attestor := k8sWorkloadAttestor(t)
	if strings.Contains(attestor, "skip_kubelet_verification") {
		t.Errorf("config/spire/agent.yaml: the k8s WorkloadAttestor sets skip_kubelet_verification; the kubelet's certificate must be verified:\n%s", attestor)
	}
	const saCA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	if m := regexp.MustCompile(`kubelet_ca_path = "([^"]*)"`).FindStringSubmatch(attestor); m == nil || m[1] != saCA {
		t.Errorf("config/spire/agent.yaml: the k8s WorkloadAttestor's kubelet_ca_path is %v, want %s (the cluster CA)", m, saCA)
	}
	lib, err := os.ReadFile(filepath.Join("..", "lib.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lib), `--root-ca-file "$P/ca.crt"`) {
		t.Error(`hack/cluster/lib.sh: kube-controller-manager does not publish this PKI's CA (--root-ca-file "$P/ca.crt") as the pods' ca.crt`)
	}

	dir := t.TempDir()
	if err := run(dir, "node-a", "127.0.0.1", "10.96.0.1"); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := tls.LoadX509KeyPair(filepath.Join(dir, "kubelet-serving.crt"), filepath.Join(dir, "kubelet-serving.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, kubelet, ca); err != nil {
		t.Fatalf("the SPIRE agent would refuse the cluster tier's kubelet: %v", err)
	}

	// Negative control: a kubelet's own self-signed certificate.
	selfDir := t.TempDir()
	self, err := issue(nil, &x509.Certificate{IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		t.Fatal(err)
	}
	if err := write(selfDir, "self", self); err != nil {
		t.Fatal(err)
	}
	selfSigned, err := tls.LoadX509KeyPair(filepath.Join(selfDir, "self.crt"), filepath.Join(selfDir, "self.key"))
	if err != nil {
		t.Fatal(err)
	}
	err = handshake(t, selfSigned, ca)
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); !ok {
		t.Fatalf("negative control: a self-signed kubelet certificate gave %v, want x509's unknown authority", err)
	}
	t.Logf("negative control, as expected: %v", err)
}

// k8sWorkloadAttestor is the WorkloadAttestor "k8s" block of config/spire's agent.conf.
func k8sWorkloadAttestor(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "spire", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(raw), "\n---")
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal([]byte(first), &cm); err != nil {
		t.Fatal(err)
	}
	conf := cm.Data["agent.conf"]
	start := strings.Index(conf, `WorkloadAttestor "k8s"`)
	if start < 0 {
		t.Fatalf("config/spire/agent.yaml: no WorkloadAttestor \"k8s\" in agent.conf:\n%s", conf)
	}
	block, _, _ := strings.Cut(conf[start:], "\n      }\n")
	return block
}

// handshake serves cert on 127.0.0.1 and connects to it as SPIRE's k8s workload attestor
// connects to a kubelet named by IP: the CA bundle caPEM as the only roots, the IP as the name.
func handshake(t *testing.T, cert tls.Certificate, caPEM []byte) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("no certificate in the CA bundle")
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := c.Get("https://" + l.Addr().String() + "/pods")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
