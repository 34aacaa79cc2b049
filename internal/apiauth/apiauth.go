// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package apiauth serves the node components' HTTP endpoints (the agent's metrics and the pods'
// proxy configuration, envoy-helper's Envoy statistics) as the manager serves its metrics: over
// HTTPS, every request authenticated by the API server (a bearer token by a TokenReview; where
// asked, a client certificate signed by the CA the API server itself trusts for clients) and
// authorized by it (a SubjectAccessReview: the request's verb on its path, a non-resource URL
// that a ClusterRole grants, as metrics-reader grants get on /metrics). A request the API server
// does not vouch for is answered 401, one it does not allow 403, before its handler runs.
//
// It is controller-runtime's metrics filter (filters.WithAuthenticationAndAuthorization) with
// client certificates added, for people: kubectl aether proxy-config sends the user's own
// credentials, and a kubeconfig often holds a certificate and no token.
//
// It imports no other package of this repository.
package apiauth

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The API server's verdicts on the caller's identity and rights are cached this long, as the
// manager's metrics filter caches them: a revoked binding takes effect within DenyTTL/AllowTTL.
const (
	TokenTTL = time.Minute
	AllowTTL = 5 * time.Minute
	DenyTTL  = 30 * time.Second
)

// Options are metrics-server options serving addr over HTTPS with every request authenticated
// and authorized by the API server: the certificate in certDir (tls.crt and tls.key, reloaded on
// change), or a self-signed one when certDir is empty; HTTP/1.1 only (CVE-2023-44487, HTTP/2's
// rapid reset, as on the manager's servers). With clientCerts, a client certificate the API
// server's client CA signed authenticates too (ClientCA), besides a bearer token.
func Options(addr, certDir string, clientCerts bool) metricsserver.Options {
	tlsOpts := []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	if clientCerts {
		// Asked for, not required (Prometheus sends a token), and not verified by the TLS layer:
		// the authenticator verifies the chain against the cluster's client CA.
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.ClientAuth = tls.RequestClientCert })
	}
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		CertDir:        certDir,
		FilterProvider: Filter(clientCerts),
		TLSOpts:        tlsOpts,
	}
}

// Filter is the metrics server's filter: TokenReview (and, with clientCerts, the cluster's
// client CA) to authenticate, SubjectAccessReview to authorize, both made with the server's own
// identity (the rest config the manager gives it), which needs create on tokenreviews and
// subjectaccessreviews, and with clientCerts get on ConfigMap
// kube-system/extension-apiserver-authentication.
func Filter(clientCerts bool) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
		cs, err := kubernetes.NewForConfigAndClient(config, httpClient)
		if err != nil {
			return nil, err
		}
		authn := authenticatorfactory.DelegatingAuthenticatorConfig{
			Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
			CacheTTL:                 TokenTTL,
			TokenAccessReviewClient:  cs.AuthenticationV1(),
			TokenAccessReviewTimeout: 10 * time.Second,
			WebhookRetryBackoff:      backoff(),
		}
		if clientCerts {
			authn.ClientCertificateCAContentProvider = NewClientCA(cs.CoreV1())
		}
		authenticator, _, err := authn.New()
		if err != nil {
			return nil, fmt.Errorf("the authenticator of the API server's callers: %w", err)
		}
		authz, err := authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: cs.AuthorizationV1(),
			AllowCacheTTL:             AllowTTL,
			DenyCacheTTL:              DenyTTL,
			WebhookRetryBackoff:       backoff(),
		}.New()
		if err != nil {
			return nil, fmt.Errorf("the authorizer of the API server's callers: %w", err)
		}
		return func(log logr.Logger, next http.Handler) (http.Handler, error) {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// An error is credentials that do not authenticate (a certificate of another CA, a
				// token the API server could not review): 401, as the API server answers them.
				res, ok, err := authenticator.AuthenticateRequest(r)
				if err != nil {
					log.V(1).Info("Refused a request: its credentials do not authenticate", "path", r.URL.Path, "error", err.Error())
				}
				if err != nil || !ok {
					http.Error(w, "Unauthorized: send a bearer token or a client certificate the API server accepts", http.StatusUnauthorized)
					return
				}
				attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
				decision, reason, err := authz.Authorize(r.Context(), attrs)
				if err != nil {
					log.Error(err, "Authorizing a request failed", "user", res.User.GetName(), "path", r.URL.Path)
					http.Error(w, "Authorization failed", http.StatusInternalServerError)
					return
				}
				if decision != authorizer.DecisionAllow {
					log.V(4).Info("Refused a request", "user", res.User.GetName(), "path", r.URL.Path, "reason", reason)
					http.Error(w, fmt.Sprintf("Forbidden: user %s may not %s %s", res.User.GetName(), attrs.Verb, r.URL.Path), http.StatusForbidden)
					return
				}
				next.ServeHTTP(w, r)
			}), nil
		}, nil
	}
}

// backoff is the retry of a review call, as k8s.io/apiserver's options default it.
func backoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}
