// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apiauth

import (
	"crypto/tls"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// Transport is an HTTPS transport that presents, to a server of Options, the credentials config
// presents to the API server: its client certificate (from the kubeconfig, or an exec plugin)
// in the handshake, its bearer token (static, from a file, or an exec or auth-provider plugin's)
// in each request. It does not verify the server's certificate, which is self-signed (no
// --metrics-cert-dir) and tells nothing: it is meant for a connection the API server has already
// authorized to its end, a port-forward to the server's pod. Impersonation (--as) is not passed
// on: the server sees the caller as the caller.
func Transport(config *rest.Config) (http.RoundTripper, error) {
	tlsConfig, err := rest.TLSConfigFor(config)
	if err != nil {
		return nil, err
	}
	if tlsConfig == nil { // a plain-HTTP kubeconfig: no certificate to present
		tlsConfig = &tls.Config{}
	}
	tlsConfig.InsecureSkipVerify = true //nolint:gosec // see above: the port-forward is what the API server authorized
	tlsConfig.RootCAs, tlsConfig.ServerName = nil, ""
	tlsConfig.NextProtos = []string{"http/1.1"}
	base := &http.Transport{TLSClientConfig: tlsConfig, TLSHandshakeTimeout: 10 * time.Second}
	creds := rest.CopyConfig(config)
	creds.Impersonate = rest.ImpersonationConfig{}
	return rest.HTTPWrappersForConfig(creds, base)
}
