// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/aether-mesh/aether-operator/internal/apiauth/apiauthtest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// TestMetricsRefuseAnUnauthenticatedScrape starts the agent's metrics server as the agent does
// (MetricsOptions with its defaults), speaking to the API server as the agent's ServiceAccount
// under the shipped RBAC: a scrape without a token gets 401, one with the token of a
// ServiceAccount that may not get /metrics 403, and one bound to the shipped metrics-reader
// ClusterRole the metrics. A client certificate of the API server's client CA (a user's, as
// kubectl aether proxy-config presents) authenticates too, the CA read with the agent's own
// rights: 403 without the role, the metrics with it.
func TestMetricsRefuseAnUnauthenticatedScrape(t *testing.T) {
	ctx := testContext(t)
	installShippedRBAC(t, ctx)
	ns := namespace(t, ctx)

	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	if err := free.Close(); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.AgentConfig(testNode), ctrl.Options{
		Scheme: env.Scheme, Metrics: MetricsOptions(addr, true, ""), HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	admin := kubernetes.NewForConfigOrDie(env.Config)
	tokenOf := func(name string, reader bool) string {
		t.Helper()
		token, err := env.ServiceAccountToken(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if reader {
			binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "aether-operator-metrics-reader"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}}
			if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return token
	}
	// The server's certificate is self-signed: the test checks who may scrape, not the certificate.
	scraper := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := scraper.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	expect := func(who, token string, want int, wantBody string) {
		t.Helper()
		testenv.Eventually(t, who+" answered "+fmt.Sprint(want), func() error {
			code, body, err := scrape(token)
			if err != nil {
				return err
			}
			if code != want || !strings.Contains(body, wantBody) {
				return fmt.Errorf("HTTP %d: %.200s", code, body)
			}
			return nil
		})
	}
	expect("a scrape without a token", "", http.StatusUnauthorized, "")
	expect("a ServiceAccount without metrics-reader", tokenOf("nosy", false), http.StatusForbidden, "")
	expect("a ServiceAccount with metrics-reader", tokenOf("prometheus", true), http.StatusOK, "# HELP")

	for _, c := range []struct {
		user   string
		reader bool
		want   int
	}{{ns + "-nosy-user", false, http.StatusForbidden}, {ns + "-reading-user", true, http.StatusOK}} {
		if c.reader {
			binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: c.user},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "aether-operator-metrics-reader"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: c.user}}}
			if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := env.UserConfig(c.user)
		if err != nil {
			t.Fatal(err)
		}
		user := apiauthtest.Client(t, cfg)
		testenv.Eventually(t, "user "+c.user+"'s certificate answered "+fmt.Sprint(c.want), func() error {
			resp, err := user.Get("https://" + addr + "/metrics")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != c.want {
				return fmt.Errorf("HTTP %d", resp.StatusCode)
			}
			return nil
		})
	}
}
