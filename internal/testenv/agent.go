// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
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

// AgentTokenConfig is a rest config speaking as the node agent of node with a real bound
// service-account token, as the agent's pod on that node holds: a pod of the agent's
// ServiceAccount bound to node (created once per node, never run: there is no kubelet) and a
// TokenRequest bound to that pod. The API server's own token authenticator then derives the
// authentication.kubernetes.io/node-name claim from the pod's node, where AgentConfig has the
// claim asserted by impersonation. node's Node must exist (the token carries its UID) and
// InstallNodeAuthority must have run (the ServiceAccount).
func (e *Env) AgentTokenConfig(ctx context.Context, node string) (*rest.Config, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: AgentNamespace, Name: "agent-" + node},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: AgentName,
			Containers: []corev1.Container{{Name: "agent", Image: "agent"}}},
	}
	if err := e.Client.Create(ctx, pod); apierrors.IsAlreadyExists(err) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return nil, fmt.Errorf("the agent's pod on node %s: %w", node, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("creating the agent's pod on node %s: %w", node, err)
	}
	if pod.Spec.NodeName != node || pod.Spec.ServiceAccountName != AgentName {
		return nil, fmt.Errorf("pod %s/%s is on node %q with ServiceAccount %q, want %s and %s", pod.Namespace, pod.Name,
			pod.Spec.NodeName, pod.Spec.ServiceAccountName, node, AgentName)
	}
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: new(int64(3600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: AgentNamespace, Name: AgentName}}
	if err := e.Client.SubResource("token").Create(ctx, sa, request); err != nil {
		return nil, fmt.Errorf("requesting a token of %s bound to pod %s: %w", AgentUser, pod.Name, err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = request.Status.Token
	return cfg, nil
}
