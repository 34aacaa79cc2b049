// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/aether-mesh/aether-operator/internal/apiauth"
)

// The agent serves its metrics as the manager does: HTTPS, each request's bearer token checked by
// the API server (TokenReview) and the caller's right to get /metrics with it
// (SubjectAccessReview; the metrics-reader ClusterRole grants it). The same server carries the
// pods' proxy configuration (--proxy-config: get on /proxy-config/<namespace>/<pod>, the
// proxy-config-reader ClusterRole), which people read with kubectl aether proxy-config: for them
// a client certificate the API server's client CA signed authenticates too, the CA read from
// where the API server publishes it for servers that delegate to it.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// get on the ConfigMap extension-apiserver-authentication, by name: kube-system's, which holds
// the client CA (apiauth.ClientCA). Cluster-wide, as a ClusterRole: a Role in kube-system would be
// moved into the operator's namespace by kustomize's namespace; the name restricts it to that one
// ConfigMap, and the agent reads it in kube-system only.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get,resourceNames=extension-apiserver-authentication

// MetricsOptions are the agent's metrics server options for addr ("0": none). The agent runs in
// the node's network namespace (hostNetwork), so addr is open on every address of the node:
// with secure (the default), a request must come over TLS (the certificate in certDir, tls.crt
// and tls.key, or a self-signed one when certDir is empty) with a bearer token or a client
// certificate the API server vouches for, whose holder may get the path, and anything else is
// refused before a byte is read (internal/apiauth). Without secure, plain HTTP to anyone who
// reaches the port: for a test bench only, and the proxy configuration is not served there.
func MetricsOptions(addr string, secure bool, certDir string) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return apiauth.Options(addr, certDir, true)
}
