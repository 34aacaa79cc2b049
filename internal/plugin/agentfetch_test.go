// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/aether-operator/internal/apiauth/apiauthtest"
	"github.com/aether-mesh/aether-operator/internal/proxyconfig"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdstest"
)

// TestAgentFetchSendsTheUsersCredentials: the leg of proxy-config after the port-forward, against
// the agent's endpoint as the agent serves it (proxyconfig.Handler behind apiauth.Options with
// client certificates, the agent's MetricsOptions): AgentFetch with the kubeconfig of a user
// whose client certificate the API server's client CA signed, granted the shipped
// proxy-config-reader, reads the pod's configuration, and so does ProxyConfig end to end for that
// user; with a ServiceAccount's bearer token, granted the same, too. The same user's certificate
// without the grant is answered 403, and ProxyConfig says so with the path and the ClusterRole
// when the agent refuses what the API server allowed a moment before (the grant gone); no
// credentials 401. (The port-forward itself needs a kubelet: the cluster tier's plugin test.)
func TestAgentFetchSendsTheUsersCredentials(t *testing.T) {
	ctx := t.Context()
	res, err := xds.Build(xdstest.MixedHTTPPrimary())
	if err != nil {
		t.Fatal(err)
	}
	// The endpoint as the agent serves it (MetricsOptions: client certificates too).
	base := apiauthtest.Serve(t, env.Config, true, map[string]http.Handler{proxyconfig.Path: proxyconfig.Handler("node-p", published{node: "node-p", res: res}, nil)})
	path := proxyconfig.PodPath(fixtureNamespace, "payments-0")

	readerRole := shippedReaderRole(t, "fetch-proxy-config-reader")
	grant(t, ctx, readerRole)
	bindings := map[string]*rbacv1.ClusterRoleBinding{}
	bind := func(subject rbacv1.Subject) {
		t.Helper()
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fetch-" + strings.ToLower(subject.Kind) + "-" + subject.Name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readerRole.Name}, Subjects: []rbacv1.Subject{subject}}
		grant(t, ctx, b)
		bindings[subject.Name] = b
	}
	operator, err := env.UserConfig("fetch-operator")
	if err != nil {
		t.Fatal(err)
	}
	bind(rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "fetch-operator"})
	stranger, err := env.UserConfig("fetch-stranger")
	if err != nil {
		t.Fatal(err)
	}
	token, err := env.ServiceAccountToken(ctx, fixtureNamespace, "fetch-bot")
	if err != nil {
		t.Fatal(err)
	}
	bind(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: fixtureNamespace, Name: "fetch-bot"})
	bot := &rest.Config{Host: env.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}

	for _, c := range []struct {
		who  string
		cfg  *rest.Config
		want int
	}{
		{"no credentials", &rest.Config{}, http.StatusUnauthorized},
		{"a certificate without the grant", stranger, http.StatusForbidden},
		{"a certificate with the grant", operator, http.StatusOK},
		{"a token with the grant", bot, http.StatusOK},
	} {
		testenv.Eventually(t, c.who+" answered "+fmt.Sprint(c.want), func() error {
			status, body, err := AgentFetch(ctx, c.cfg, base+path)
			if err != nil {
				return err
			}
			if status != c.want || (c.want == http.StatusOK) != strings.Contains(string(body), "capture_shop/payments-0") {
				return fmt.Errorf("HTTP %d: %.200s", status, body)
			}
			return nil
		})
	}

	// ProxyConfig end to end for the granted user, the port-forward aside.
	agent := agentPod("aether-agent-fetch", "node-p", fixtureImage, "--node-name=node-p", "--metrics-bind-address=:19099")
	pod := clientPod("payments-0", "node-p", nil, true)
	for _, o := range []client.Object{agent, pod} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o, client.GracePeriodSeconds(0)) })
	}
	agent.Status.Phase = corev1.PodRunning
	agent.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(ctx, agent); err != nil {
		t.Fatal(err)
	}
	grant(t, ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fetch-operator-pods"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"create"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fetch-operator-pods"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fetch-operator-pods"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "fetch-operator"}}})
	reader, err := client.New(operator, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	viaAgent := func(ctx context.Context, _ *corev1.Pod, _ int, path string) (int, []byte, error) {
		return AgentFetch(ctx, operator, base+path)
	}
	testenv.Eventually(t, "proxy-config for the granted user", func() error {
		report, err := ProxyConfig(ctx, reader, fixtureNamespace, "payments-0", viaAgent)
		if err != nil {
			return err
		}
		if report.Config.Pod != fixtureNamespace+"/payments-0" || len(report.Config.Listeners) == 0 {
			return fmt.Errorf("the report is of %q with %d listeners", report.Config.Pod, len(report.Config.Listeners))
		}
		return nil
	})
	// The agent refuses (403) what ProxyConfig's own review allowed: here the review is asked of
	// a user still granted, the agent sent the stranger's certificate.
	asStranger := func(ctx context.Context, _ *corev1.Pod, _ int, path string) (int, []byte, error) {
		return AgentFetch(ctx, stranger, base+path)
	}
	_, err = ProxyConfig(ctx, reader, fixtureNamespace, "payments-0", asStranger)
	if exit, ok := errors.AsType[*ExitError](err); !ok || exit.Code != ExitUsage || !strings.Contains(exit.Msg, "you may not get "+path) {
		t.Errorf("the agent's 403: %v; want exit 2 naming get on %s", err, path)
	}
}
