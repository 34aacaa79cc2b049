// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// The agent's TokenRequest right (serviceaccounts/token create) is not a marker here: it is a Role
// in the agent's own namespace, restricted by resourceNames to the CNI plugin's ServiceAccount
// and the agent's own (config/rbac/agent/token_role.yaml), which a marker cannot say beside a
// reason.

// Lifetimes of the tokens the agent asks for. The API server refuses less than ten minutes.
const (
	// PluginTokenLifetime bounds how long the CNI plugin's token works after the agent stopped
	// renewing it. The API server binds a token to a pod only when the pod runs as the token's
	// ServiceAccount, and no pod runs as the plugin's, so its lifetime is its only bound: an
	// hour covers an agent's restart or upgrade (when the plugin needs it) with room to spare.
	PluginTokenLifetime = time.Hour
	// ReaderTokenLifetime is the lifetime of the agent's token of its reader (ReaderAccount; held
	// in memory only): the API server's minimum.
	ReaderTokenLifetime = 10 * time.Minute
)

// ReaderAccount is the ServiceAccount of the agent's reader, beside the agent's own (agentAccount)
// in its namespace: <agentAccount>-reader, which may only get the agent's pods and DaemonSet
// (config/rbac/agent/reader.yaml). The agent asks for its tokens, never for its own
// ServiceAccount's: a TokenRequest may bind a token to any pod of its ServiceAccount, and one of
// the agent's own bound to another node's agent pod would carry that node's name claim, which
// the node-authority policy takes for that node's agent. No pod runs as the reader.
func ReaderAccount(agentAccount string) string { return agentAccount + "-reader" }

// ServiceAccountToken keeps a token of one ServiceAccount, asked of the TokenRequest API and
// asked again once four fifths of its lifetime have passed (as the kubelet renews projected
// tokens), so the token it hands out always has a fifth of its lifetime left. The token's
// audience is the API server's own (none is asked for): it is good for the API server alone.
type ServiceAccountToken struct {
	// Client asks for the tokens (the agent's own credentials).
	Client corev1client.ServiceAccountsGetter
	// Namespace and Name name the ServiceAccount.
	Namespace, Name string
	// BoundPod, when set, names a pod of Namespace, running as the ServiceAccount, that the token
	// is bound to (the API server refuses any other): it stops accepting the token once that pod
	// is deleted.
	BoundPod string
	// Lifetime is the token's requested lifetime.
	Lifetime time.Duration

	mu      sync.Mutex
	token   string
	renew   time.Time // when to ask for the next token
	expires time.Time
}

// Token returns a token with at least a fifth of its lifetime left, asking for a new one when the
// one held is older than four fifths of its lifetime.
func (s *ServiceAccountToken) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.token != "" && now.Before(s.renew) {
		return s.token, nil
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: new(int64(s.Lifetime / time.Second)),
	}}
	if s.BoundPod != "" {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: s.BoundPod}
	}
	got, err := s.Client.ServiceAccounts(s.Namespace).CreateToken(ctx, s.Name, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking the API server for a token of ServiceAccount %s/%s (TokenRequest): %w", s.Namespace, s.Name, err)
	}
	expires := got.Status.ExpirationTimestamp.Time
	s.token, s.expires = got.Status.Token, expires
	s.renew = now.Add(expires.Sub(now) * 4 / 5)
	return s.token, nil
}

// Current returns the token last handed out while it has not expired; false without one.
func (s *ServiceAccountToken) Current() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == "" || !time.Now().Before(s.expires) {
		return "", false
	}
	return s.token, true
}

// WithToken is cfg (the API server's address and CA) speaking with token alone: no client
// certificate, no impersonation, no token file.
func WithToken(cfg *rest.Config, token string) *rest.Config {
	out := rest.AnonymousClientConfig(cfg)
	out.BearerToken = token
	return out
}
