// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/proxyconfig"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// published is a node's snapshot as the agent's xDS server holds it (proxyconfig.Snapshots).
type published struct {
	node string
	res  xds.Resources
}

func (p published) Published(node string) (xds.Resources, map[string]string, bool) {
	return p.res, map[string]string{"listeners": "v1"}, node == p.node
}

// TestProxyConfig: proxy-config finds the pod, the ready agent of its node and the port of that
// agent's --metrics-bind-address, and shows what the agent's real endpoint (internal/proxyconfig
// over a snapshot the real builder built, node-p holding shop/payments-0 and web/frontend-0)
// answers for the pod: its capture listener, its identity's clusters with their SNI, its route
// configurations; nothing of web/frontend-0. Each way it cannot are clear errors: no such pod, a
// pod not in the mesh, no agent on the node, an agent not ready, a user who may read pods but not
// create pods/portforward (named in the error), then one who may port-forward but not get the
// pod's path (the path and the ClusterRole named); granting each makes the same user's call go
// further, and the last succeed (the negative controls of the refusals). (The agent's own check
// of the same credentials: TestAgentFetchSendsTheUsersCredentials.)
func TestProxyConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := xds.Build(xdstest.MixedHTTPPrimary())
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(proxyconfig.Handler("node-p", published{node: "node-p", res: res}, nil))
	defer server.Close()
	type call struct {
		agent string
		port  int
		path  string
	}
	var calls []call
	get := func(ctx context.Context, agent *corev1.Pod, port int, path string) (int, []byte, error) {
		calls = append(calls, call{agent.Namespace + "/" + agent.Name, port, path})
		resp, err := http.Get(server.URL + path)
		if err != nil {
			return 0, nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}

	ready := agentPod("aether-agent-p", "node-p", fixtureImage, "--node-name=node-p", "--metrics-bind-address=:19099")
	notReady := agentPod("aether-agent-q", "node-q", fixtureImage, "--node-name=node-q")
	pod := clientPod("payments-0", "node-p", nil, true)
	pod.Spec.ServiceAccountName = "payments"
	objects := []client.Object{ready, notReady, pod, clientPod("unmeshed-p", "node-p", nil, false),
		clientPod("meshed-q", "node-q", nil, true), clientPod("meshed-r", "node-r", nil, true)}
	for _, o := range objects {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range objects { // at once: no kubelet confirms a graceful deletion
			_ = env.Client.Delete(context.Background(), o, client.GracePeriodSeconds(0))
		}
	})
	ready.Status.Phase = corev1.PodRunning
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(ctx, ready); err != nil {
		t.Fatal(err)
	}

	report, err := ProxyConfig(ctx, env.Client, fixtureNamespace, "payments-0", get)
	if err != nil {
		t.Fatal(err)
	}
	if want := (call{agentNamespace + "/aether-agent-p", 19099, "/proxy-config/shop/payments-0"}); len(calls) != 1 || calls[0] != want {
		t.Errorf("the agent was asked %+v, want once %+v", calls, want)
	}
	var text bytes.Buffer
	if err := WriteProxyConfig(&text, report); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{
		"Pod:    shop/payments-0", "Node:   node-p (agent aether-system/aether-agent-p)",
		"capture_shop/payments-0", "inbound_shop/payments-0", "capture|shop/payments", "http → routes capture|shop/payments",
		"payments.shop.aether.internal:8080|shop/payments", "tcp:payments.shop.aether.internal:9000|shop/payments",
		"frontend.web.aether.internal:8080|shop/payments", "app|shop/payments-0:8080",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "web/frontend") {
		t.Errorf("the summary shows web/frontend-0's configuration:\n%s", out)
	}
	// A mesh cluster's row: EDS, one endpoint (frontend-0), the port as its SNI.
	if !containsRow(out, "frontend.web.aether.internal:8080|shop/payments", "EDS", "1", "8080") {
		t.Errorf("the summary's row of frontend:8080 is not EDS, 1 endpoint, SNI 8080:\n%s", out)
	}

	var raw bytes.Buffer
	if err := writeData(&raw, OutputJSON, report.Config); err != nil {
		t.Fatal(err)
	}
	var back proxyconfig.Config
	if err := json.Unmarshal(raw.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if decoded, err := back.Decode(); err != nil || len(decoded.Listeners) != 3 || len(decoded.Clusters) != len(report.Config.Clusters) {
		t.Errorf("-o json reads back into %d listeners and %d clusters (%v), want 3 and %d", len(decoded.Listeners), len(decoded.Clusters), err, len(report.Config.Clusters))
	}

	for name, want := range map[string]struct {
		code int
		msg  string
	}{
		"nope":       {ExitUsage, "pod shop/nope not found"},
		"unmeshed-p": {ExitFound, "pod shop/unmeshed-p is not in the mesh"},
		"meshed-r":   {ExitUsage, "no agent runs on node node-r"},
		"meshed-q":   {ExitUsage, "the agent aether-system/aether-agent-q on node node-q is not ready"},
	} {
		_, err := ProxyConfig(ctx, env.Client, fixtureNamespace, name, get)
		if exit, ok := errors.AsType[*ExitError](err); !ok || exit.Code != want.code || !strings.Contains(exit.Msg, want.msg) {
			t.Errorf("%s: %v; want exit %d saying %q", name, err, want.code, want.msg)
		}
	}

	// A user who may read pods, not port-forward.
	kubeconfig, err := env.UserKubeconfig("pod-reader")
	if err != nil {
		t.Fatal(err)
	}
	grant(t, ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "pod-reader"}}})
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	calls = nil
	_, err = ProxyConfig(ctx, reader, fixtureNamespace, "payments-0", get)
	if exit, ok := errors.AsType[*ExitError](err); !ok || exit.Code != ExitUsage ||
		!strings.Contains(exit.Msg, "you may not create pods/portforward in namespace aether-system") || len(calls) != 0 {
		t.Errorf("a user without pods/portforward: %v (the agent asked %d times); want exit 2 naming create pods/portforward, the agent never asked", err, len(calls))
	}
	grant(t, ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: "port-forward"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"create"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: "port-forward"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "port-forward"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "pod-reader"}}})
	// The API server's authorizer follows the new binding a moment later.
	testenv.Eventually(t, "the user granted create on pods/portforward is refused the pod's path", func() error {
		_, err := ProxyConfig(ctx, reader, fixtureNamespace, "payments-0", get)
		if exit, ok := errors.AsType[*ExitError](err); !ok || exit.Code != ExitUsage ||
			!strings.Contains(exit.Msg, "you may not get /proxy-config/shop/payments-0") || !strings.Contains(exit.Msg, "aether-operator-proxy-config-reader") {
			return fmt.Errorf("%v; want exit 2 naming get on /proxy-config/shop/payments-0 and the ClusterRole", err)
		}
		return nil
	})
	if len(calls) != 0 {
		t.Errorf("the agent was asked %d times for a user who may not get the path, want never", len(calls))
	}
	grant(t, ctx, shippedReaderRole(t, "pod-reader-proxy-config"),
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader-proxy-config"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-reader-proxy-config"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "pod-reader"}}})
	testenv.Eventually(t, "the user granted the shipped proxy-config-reader too reads the pod's configuration", func() error {
		_, err := ProxyConfig(ctx, reader, fixtureNamespace, "payments-0", get)
		return err
	})
	if len(calls) != 1 {
		t.Errorf("the agent was asked %d times for the granted user, want once", len(calls))
	}
}

// shippedReaderRole is config/rbac/proxy_config_reader_role.yaml's ClusterRole, named name.
func shippedReaderRole(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "proxy_config_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	role.Name = name
	return role
}

// TestEndpointPort: the port proxy-config forwards to is the agent's --metrics-bind-address (its
// default without the flag), and an agent that serves no proxy configuration there says which
// flag and the fix.
func TestEndpointPort(t *testing.T) {
	for name, c := range map[string]struct {
		args []string
		port int
		err  string
	}{
		"defaults":          {nil, 9090, ""},
		"config/agent's":    {[]string{"--node-name=$(NODE_NAME)", "--metrics-bind-address=:19090"}, 19090, ""},
		"turned on by hand": {[]string{"--metrics-bind-address", "0.0.0.0:19091", "--proxy-config", "--metrics-secure=true"}, 19091, ""},
		"turned off":        {[]string{"--proxy-config=false"}, 0, "runs with --proxy-config=false: it serves no proxy configuration"},
		"insecure metrics":  {[]string{"--metrics-secure=false"}, 0, "runs with --metrics-secure=false: it serves no proxy configuration on a metrics endpoint without authentication"},
		"no metrics":        {[]string{"--metrics-bind-address=0"}, 0, "runs with --metrics-bind-address=0"},
		"bad address":       {[]string{"--metrics-bind-address=19090"}, 0, `--metrics-bind-address "19090" is not [host]:port`},
	} {
		port, err := endpointPort(agentPod("aether-agent-x", "node-x", fixtureImage, c.args...))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %d, %v; want an error saying %q", name, port, err, c.err)
		case c.err == "" && (err != nil || port != c.port):
			t.Errorf("%s: %d, %v; want %d", name, port, err, c.port)
		}
	}
}

// containsRow reports whether a line of out holds each cell, as whitespace-separated fields in order.
func containsRow(out string, cells ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(cells, " ") {
			return true
		}
	}
	return false
}

// grant creates the RBAC objects, removed when the test ends.
func grant(t *testing.T, ctx context.Context, objects ...client.Object) {
	t.Helper()
	for _, o := range objects {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}
