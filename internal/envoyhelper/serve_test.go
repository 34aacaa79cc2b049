// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package envoyhelper

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/envoytest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Run(m, &env)
}

// TestStatsOnlyForAReader: envoy-helper as the node Envoy's pod runs it (Serve, its identity the
// pod's ServiceAccount under the RBAC config/default ships) beside a live Envoy: the ready
// address answers the kubelet's probe without credentials, with Envoy's /ready and nothing more
// (GET /stats/prometheus there is 404); the stats address answers a scrape without a token 401,
// one with the token of a ServiceAccount not bound to metrics-reader 403, and one bound to the
// shipped metrics-reader Envoy's statistics.
func TestStatsOnlyForAReader(t *testing.T) {
	ctx := t.Context()
	admin := envoytest.AdminAddress()
	envoy := envoytest.Start(t, adminBootstrap(admin), admin, envoytest.Options{})
	installShippedRBAC(t)
	ready, stats := testenv.FreeLoopbackAddress(t), testenv.FreeLoopbackAddress(t)
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(sctx, Options{Admin: envoy.Admin, ReadyAddress: ready, StatsAddress: stats, Config: asEnvoyPod()})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	probe := func(path string) (int, string, error) { return get(ctx, http.DefaultClient, "http://"+ready+path, "") }
	testenv.Eventually(t, "the kubelet's probe answered LIVE without credentials", func() error {
		code, body, err := probe("/ready")
		if err != nil {
			return err
		}
		if code != http.StatusOK || strings.TrimSpace(body) != "LIVE" {
			return fmt.Errorf("HTTP %d %q", code, body)
		}
		return nil
	})
	if code, body, err := probe(StatsPath); err != nil || code != http.StatusNotFound || strings.Contains(body, "envoy_") {
		t.Errorf("GET %s on the ready address: %d %.100q %v; want 404 and no statistics", StatsPath, code, body, err)
	}

	ns, err := env.Namespace(ctx, "envoyhelper")
	if err != nil {
		t.Fatal(err)
	}
	scraper := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
	for _, c := range []struct {
		who   string
		token string
		want  int
	}{
		{"a scrape without a token", "", http.StatusUnauthorized},
		{"a ServiceAccount without metrics-reader", tokenOf(t, ns, "nosy", false), http.StatusForbidden},
		{"a ServiceAccount with metrics-reader", tokenOf(t, ns, "prometheus", true), http.StatusOK},
	} {
		testenv.Eventually(t, c.who+" answered "+fmt.Sprint(c.want), func() error {
			code, body, err := get(ctx, scraper, "https://"+stats+StatsPath+"?usedonly", c.token)
			if err != nil {
				return err
			}
			if code != c.want || (c.want == http.StatusOK) != strings.Contains(body, "envoy_server_") {
				return fmt.Errorf("HTTP %d: %.200s", code, body)
			}
			return nil
		})
	}
}

// adminBootstrap is an Envoy with its admin endpoint only, at admin.
func adminBootstrap(admin string) []byte {
	host, port, _ := net.SplitHostPort(admin)
	return fmt.Appendf(nil, "node: {id: envoyhelper-test, cluster: test}\nadmin:\n  address:\n    socket_address: {address: %s, port_value: %s}\n", host, port)
}

// asEnvoyPod is the identity of the node Envoy's pod, config/envoy's ServiceAccount (impersonated).
func asEnvoyPod() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:aether-operator-system:aether-operator-envoy",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:aether-operator-system", "system:authenticated"}}
	return cfg
}

// installShippedRBAC applies config/default's ServiceAccounts and RBAC, as built.
func installShippedRBAC(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	out, stderr, err := env.Kubectl(ctx, "kustomize", filepath.Join(testenv.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, stderr)
	}
	var keep [][]byte
	for doc := range bytes.SplitSeq([]byte(out), []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if slices.Contains([]string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"}, meta.Kind) {
			keep = append(keep, doc)
		}
	}
	file := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(file, bytes.Join(keep, []byte("\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := env.Kubectl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply the shipped RBAC: %v\n%s%s", err, out, stderr)
	}
}

// tokenOf is a token of a new ServiceAccount name in ns, bound to the shipped metrics-reader
// when reader.
func tokenOf(t *testing.T, ns, name string, reader bool) string {
	t.Helper()
	token, err := env.ServiceAccountToken(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if reader {
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "aether-operator-metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
		if err := env.Client.Create(t.Context(), binding); err != nil {
			t.Fatal(err)
		}
	}
	return token
}

func get(ctx context.Context, c *http.Client, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
