// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The agent serves its metrics as the manager does: HTTPS, each request's bearer token checked by
// the API server (TokenReview) and the caller's right to get /metrics with it
// (SubjectAccessReview; the metrics-reader ClusterRole grants it).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// MetricsOptions are the agent's metrics server options for addr ("0": none). The agent runs in
// the node's network namespace (hostNetwork), so addr is open on every address of the node:
// with secure (the default), a scrape must come over TLS (the certificate in certDir, tls.crt and
// tls.key, or a self-signed one when certDir is empty) with a token whose holder may get
// /metrics, and anything else is refused before a byte of metrics is read. Without secure, plain
// HTTP to anyone who reaches the port: for a test bench only.
func MetricsOptions(addr string, secure bool, certDir string) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	// HTTP/2 stays off (CVE-2023-44487, rapid reset), as on the manager's servers.
	http1Only := func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		CertDir:        certDir,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		TLSOpts:        []func(*tls.Config){http1Only},
	}
}
