// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command pki writes a single-node cluster's PKI into a directory: a CA, the API server's
// serving and kubelet-client certificates, the service-account signing key, the kubelet's
// serving certificate, and a kubeconfig (with a client certificate) for the admin, the
// controller manager, the scheduler, the kubelet and kube-proxy.
//
//	pki -dir state/pki -node-name node-a -node-ip 10.99.0.2
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

var serial int64

func issue(ca *keyPair, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial++
	tmpl.SerialNumber = big.NewInt(serial)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, der: der}, nil
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func pemKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func write(dir, name string, kp *keyPair) error {
	key, err := pemKey(kp.key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pemCert(kp.der), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), key, 0o600)
}

func kubeconfig(dir, name, server string, ca, client *keyPair) error {
	key, err := pemKey(client.key)
	if err != nil {
		return err
	}
	b64 := base64.StdEncoding.EncodeToString
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: aether
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: aether
  context: {cluster: aether, user: %s}
current-context: aether
`, server, b64(pemCert(ca.der)), name, b64(pemCert(client.der)), b64(key), name)
	return os.WriteFile(filepath.Join(dir, name+".kubeconfig"), []byte(cfg), 0o600)
}

func run(dir, nodeName, nodeIP, serviceIP string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := issue(nil, &x509.Certificate{Subject: pkix.Name{CommonName: "aether-cluster-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature})
	if err != nil {
		return err
	}
	if err := write(dir, "ca", ca); err != nil {
		return err
	}
	server := func(cn string, dns []string, ips ...string) *x509.Certificate {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		for _, ip := range ips {
			c.IPAddresses = append(c.IPAddresses, net.ParseIP(ip))
		}
		return c
	}
	client := func(cn string, orgs ...string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: orgs},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	}
	certs := map[string]*x509.Certificate{
		"apiserver": server("kube-apiserver", []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local", "localhost"}, "127.0.0.1", nodeIP, serviceIP),
		"apiserver-kubelet-client": client("kube-apiserver-kubelet-client", "system:masters"),
		// Signed by the cluster CA, with the node's name and IP: the SPIRE agent verifies it when it
		// asks the kubelet at status.hostIP for a caller's pod (config/spire's kubelet_ca_path is
		// the pods' ca.crt, this CA: lib.sh's --root-ca-file). A self-signed one would be refused.
		"kubelet-serving": server(nodeName, []string{nodeName}, nodeIP),
		"sa":              client("service-accounts"),
	}
	issued := map[string]*keyPair{}
	for name, tmpl := range certs {
		kp, err := issue(ca, tmpl)
		if err != nil {
			return err
		}
		issued[name] = kp
		if err := write(dir, name, kp); err != nil {
			return err
		}
	}
	pub, err := x509.MarshalPKIXPublicKey(&issued["sa"].key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return err
	}
	url := "https://" + net.JoinHostPort(nodeIP, "6443")
	for name, subject := range map[string]*x509.Certificate{
		"admin":                   client("aether-admin", "system:masters"),
		"kube-controller-manager": client("system:kube-controller-manager"),
		"kube-scheduler":          client("system:kube-scheduler"),
		"kubelet":                 client("system:node:"+nodeName, "system:nodes"),
		"kube-proxy":              client("system:kube-proxy"),
	} {
		kp, err := issue(ca, subject)
		if err != nil {
			return err
		}
		if err := kubeconfig(dir, name, url, ca, kp); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	dir := flag.String("dir", "", "directory to write into (required)")
	nodeName := flag.String("node-name", "node-a", "the node's name")
	nodeIP := flag.String("node-ip", "", "the node's IP, where the API server listens (required)")
	serviceIP := flag.String("service-ip", "10.96.0.1", "the kubernetes Service's cluster IP")
	flag.Parse()
	if *dir == "" || net.ParseIP(*nodeIP) == nil {
		fmt.Fprintln(os.Stderr, "pki: -dir and a valid -node-ip are required")
		os.Exit(2)
	}
	if err := run(*dir, *nodeName, *nodeIP, *serviceIP); err != nil {
		fmt.Fprintf(os.Stderr, "pki: %v\n", err)
		os.Exit(1)
	}
}
