// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/webhook"
)

// localWebhook is where the local manager serves its webhooks, and the CA the API server trusts.
type localWebhook struct {
	port    int
	certDir string
	caPEM   []byte
}

// newLocalWebhook generates a CA and a serving certificate for 127.0.0.1 into dir/webhook-certs
// (tls.crt, tls.key), and picks a free loopback port.
func newLocalWebhook(dir string) (*localWebhook, error) {
	certDir := filepath.Join(dir, "webhook-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "aether local webhook CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serving := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, serving, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return nil, err
	}
	return &localWebhook{port: port, certDir: certDir, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}, nil
}

// managerArgs are the manager's flags for serving there.
func (w *localWebhook) managerArgs() []string {
	return []string{"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(w.port), "--webhook-cert-dir=" + w.certDir}
}

// install creates config/webhook's configuration, pointed at the local manager with the local CA
// instead of the in-cluster Service and cert-manager, and applies config/admission's policy.
func (w *localWebhook) install(ctx context.Context, env *testenv.Env) error {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "webhook", "validating.yaml"))
	if err != nil {
		return err
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(raw, cfg); err != nil {
		return fmt.Errorf("config/webhook/validating.yaml: %w", err)
	}
	cfg.Annotations = nil // no cert-manager here
	for i := range cfg.Webhooks {
		// Each validator at its own path: the pod validator's, the EndpointPolicy validator's.
		path := webhook.PodPath
		if svc := cfg.Webhooks[i].ClientConfig.Service; svc != nil && svc.Path != nil {
			path = *svc.Path
		}
		url := fmt.Sprintf("https://127.0.0.1:%d%s", w.port, path)
		cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.caPEM}
	}
	if err := env.Client.Create(ctx, cfg); err != nil {
		return fmt.Errorf("installing the webhook configuration: %w", err)
	}
	if raw, err = os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "webhook", "mutating.yaml")); err != nil {
		return err
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(raw, mutating); err != nil {
		return fmt.Errorf("config/webhook/mutating.yaml: %w", err)
	}
	mutating.Annotations = nil
	injectURL := fmt.Sprintf("https://127.0.0.1:%d%s", w.port, webhook.InjectPath)
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &injectURL, CABundle: w.caPEM}
	}
	if err := env.Client.Create(ctx, mutating); err != nil {
		return fmt.Errorf("installing the mutating webhook configuration: %w", err)
	}
	policy := filepath.Join(testenv.RepoRoot(), "config", "admission", "agent-node-authority.yaml")
	if out, stderr, err := env.Kubectl(ctx, "apply", "-f", policy); err != nil {
		return fmt.Errorf("applying %s: %w\n%s%s", policy, err, out, stderr)
	}
	return nil
}
