// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The node agent's identity, as config/admission's policy names it, and the claim a bound
// service-account token of a pod carries its node in.
const (
	AgentNamespace = "aether-operator-system"
	AgentName      = "aether-operator-agent"
	AgentUser      = "system:serviceaccount:" + AgentNamespace + ":" + AgentName
	NodeClaim      = "authentication.kubernetes.io/node-name"
)

// InstallNodeAuthority applies config/admission's node-authority policy and the agent's
// ClusterRole (config/rbac/agent) with the real kubectl, and creates the agent's ServiceAccount
// bound to that role: what a test needs to speak as the agent through AgentClient, under the
// same admission as in a cluster. It may run more than once. Its signature fits Run's starts.
func InstallNodeAuthority(e *Env) (stop func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := RepoRoot()
	for _, file := range []string{filepath.Join(root, "config", "admission", "agent-node-authority.yaml"), filepath.Join(root, "config", "rbac", "agent", "role.yaml")} {
		if out, stderr, err := e.Kubectl(ctx, "apply", "-f", file); err != nil {
			return nil, fmt.Errorf("kubectl apply -f %s: %w\n%s%s", file, err, out, stderr)
		}
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: AgentNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: AgentNamespace, Name: AgentName}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: AgentName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agent-role"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: AgentNamespace, Name: AgentName}},
		},
	} {
		if err := e.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
	}
	return func() {}, nil
}

// AgentClient is a client speaking as the node agent of node, with that node's claim (none when
// node is empty), as InstallNodeAuthority set it up.
func (e *Env) AgentClient(node string) (client.Client, error) {
	return client.New(e.AgentConfig(node), client.Options{Scheme: e.Scheme})
}

// AgentConfig is a rest config speaking as the node agent of node, with that node's claim (none
// when node is empty): for running a whole agent under the agent's own authority.
func (e *Env) AgentConfig(node string) *rest.Config {
	extra := map[string][]string{}
	if node != "" {
		extra[NodeClaim] = []string{node}
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: AgentUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + AgentNamespace, "system:authenticated"}, Extra: extra}
	return cfg
}
