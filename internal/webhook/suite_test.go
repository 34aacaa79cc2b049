// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// The node agent's identity, as config/admission's policy names it.
const (
	agentNamespace = "aether-operator-system"
	agentName      = "aether-operator-agent"
	agentUser      = "system:serviceaccount:" + agentNamespace + ":" + agentName
)

// env is this package's real kube-apiserver and etcd, with config/webhook installed and pointed
// at the webhook server this test process runs, and config/admission applied.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.RunWith(m, testenv.Options{Webhooks: true}, &env, startWebhookServer, installPolicyAndAgent)
}

// startWebhookServer serves the pod validator where the API server was told to call it.
func startWebhookServer(e *testenv.Env) (func(), error) {
	host, port, certDir := e.Webhook()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          crwebhook.NewServer(crwebhook.Options{Host: host, Port: port, CertDir: certDir}),
	})
	if err != nil {
		return nil, err
	}
	SetupWithManager(mgr, handlerIgnored)
	return testenv.StartManager(mgr)
}

// installPolicyAndAgent applies config/admission with the real kubectl, and gives the agent's
// ServiceAccount the agent's ClusterRole from config/rbac/agent.
func installPolicyAndAgent(e *testenv.Env) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := testenv.RepoRoot()
	for _, dir := range []string{filepath.Join(root, "config", "admission", "agent-node-authority.yaml"), filepath.Join(root, "config", "rbac", "agent", "role.yaml")} {
		if out, stderr, err := e.Kubectl(ctx, "apply", "-f", dir); err != nil {
			return nil, fmt.Errorf("kubectl apply -f %s: %w\n%s%s", dir, err, out, stderr)
		}
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: agentName}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: agentName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agent-role"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agentNamespace, Name: agentName}},
		},
	} {
		if err := e.Client.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
	}
	return func() {}, nil
}
