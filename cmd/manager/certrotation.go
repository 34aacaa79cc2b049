// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"strings"

	"github.com/aether-mesh/aether-operator/internal/certrotation"
)

// rotationFlags configure the webhook certificate's rotation (internal/certrotation).
type rotationFlags struct {
	enabled                           bool
	secret, service                   string
	validatingWebhooks, mutatingHooks string
}

func (f *rotationFlags) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&f.enabled, "cert-rotation", false,
		"Keep the admission webhooks' serving certificate without cert-manager: make a CA and a certificate for the webhook Service, write them to the Secret --cert-rotation-secret in this namespace (POD_NAMESPACE), which the install makes empty (the manager only reads and updates it: it refuses to start without it), renew them before they expire, and inject the CA into the webhook configurations; the webhook server starts once the certificate is mounted at --webhook-cert-dir. config/default and the chart turn it on unless cert-manager issues the certificate.")
	fs.StringVar(&f.secret, "cert-rotation-secret", certrotation.DefaultSecretName,
		"The Secret the rotation writes the certificate and its CA to, mounted at --webhook-cert-dir: the one the install makes (config/default and the chart name it, with their name prefix), which the manager's Role reaches by name.")
	fs.StringVar(&f.service, "cert-rotation-service", certrotation.DefaultServiceName,
		"The webhook Service: the certificate is valid for <service>.<namespace>.svc.")
	fs.StringVar(&f.validatingWebhooks, "cert-rotation-validating-webhooks", certrotation.DefaultValidatingWebhook,
		"Comma-separated ValidatingWebhookConfigurations the rotation injects the CA into.")
	fs.StringVar(&f.mutatingHooks, "cert-rotation-mutating-webhooks", certrotation.DefaultMutatingWebhook,
		"Comma-separated MutatingWebhookConfigurations the rotation injects the CA into.")
}

// config returns the rotation's configuration, or nil when the rotation is off. namespace is
// POD_NAMESPACE, certDir --webhook-cert-dir.
func (f *rotationFlags) config(namespace, certDir string) (*certrotation.Config, error) {
	if !f.enabled {
		return nil, nil
	}
	c := certrotation.Config{Namespace: namespace, SecretName: f.secret, ServiceName: f.service, CertDir: certDir,
		ValidatingWebhooks: names(f.validatingWebhooks), MutatingWebhooks: names(f.mutatingHooks)}
	return &c, c.Check()
}

// names splits a comma-separated list, dropping empty items.
func names(list string) []string {
	var out []string
	for n := range strings.SplitSeq(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
