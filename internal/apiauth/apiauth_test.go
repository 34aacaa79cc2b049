// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apiauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/aether-mesh/aether-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Run(m, &env)
}

// probePath is what the test's server serves, behind the filter.
const probePath = "/probe/answer"

// TestFilterLetsOnlyWhomTheAPIServerAllows: a server with Options(addr, "", true), its handler
// at /probe/, answers a request with no credentials 401; a bearer token of a ServiceAccount with
// no grant 403, one granted get on /probe/* the handler's answer; a client certificate the API
// server's client CA signed (a user of the API server, envtest's AddUser) without a grant 403,
// granted the answer; a certificate of another CA, with the granted user's name, 401. With
// clientCerts off (Options(addr, "", false)) the granted certificate is 401: the negative control
// of the certificate path.
func TestFilterLetsOnlyWhomTheAPIServerAllows(t *testing.T) {
	ctx := t.Context()
	withCerts, withoutCerts := serve(t, true), serve(t, false)
	ns, err := env.Namespace(ctx, "apiauth")
	if err != nil {
		t.Fatal(err)
	}
	grant(t, "granted-sa", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "granted"})
	grant(t, "granted-user", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "granted-user"})

	anonymous := caller(t, &rest.Config{})
	tokenOf := func(name string) *http.Client {
		t.Helper()
		cs := kubernetes.NewForConfigOrDie(env.Config)
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return caller(t, &rest.Config{BearerToken: tr.Status.Token})
	}
	certOf := func(name string) (*http.Client, *rest.Config) {
		t.Helper()
		kubeconfig, err := env.UserKubeconfig(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		return caller(t, cfg), cfg
	}
	grantedCert, grantedCfg := certOf("granted-user")
	ungrantedCert, _ := certOf("ungranted-user")

	for _, c := range []struct {
		who    string
		server string
		client *http.Client
		want   int
	}{
		{"no credentials", withCerts, anonymous, http.StatusUnauthorized},
		{"a token without the grant", withCerts, tokenOf("nosy"), http.StatusForbidden},
		{"a token with the grant", withCerts, tokenOf("granted"), http.StatusOK},
		{"a client certificate without the grant", withCerts, ungrantedCert, http.StatusForbidden},
		{"a client certificate with the grant", withCerts, grantedCert, http.StatusOK},
		{"a certificate of another CA, the granted user's name", withCerts, caller(t, foreignCert(t, "granted-user")), http.StatusUnauthorized},
		{"the granted certificate where certificates are off", withoutCerts, grantedCert, http.StatusUnauthorized},
		{"no credentials where certificates are off", withoutCerts, anonymous, http.StatusUnauthorized},
	} {
		// The API server's authorizer follows a new binding a moment later.
		testenv.Eventually(t, c.who+" answered "+fmt.Sprint(c.want), func() error {
			code, body, err := get(ctx, c.client, c.server)
			if err != nil {
				return err
			}
			if code != c.want || (c.want == http.StatusOK && body != "the answer") {
				return fmt.Errorf("HTTP %d: %.200s", code, body)
			}
			return nil
		})
	}
	if grantedCfg.CertData == nil && grantedCfg.CertFile == "" {
		t.Fatal("the granted user's kubeconfig holds no client certificate: the certificate cases proved nothing")
	}
}

// serve starts a metrics server with Options(addr, "", clientCerts) as the admin, its one extra
// handler at /probe/, and returns its base URL.
func serve(t *testing.T, clientCerts bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	opts := Options(addr, "", clientCerts)
	opts.ExtraHandlers = map[string]http.Handler{"/probe/": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "the answer")
	})}
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(opts, env.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the server: %v", err)
		}
	})
	return "https://" + addr
}

// grant binds a ClusterRole allowing get on /probe/* to subject.
func grant(t *testing.T, name string, subject rbacv1.Subject) {
	t.Helper()
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/probe/*"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}},
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

// caller is an HTTPS client presenting cfg's credentials (Transport).
func caller(t *testing.T, cfg *rest.Config) *http.Client {
	t.Helper()
	rt, err := Transport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: rt, Timeout: 10 * time.Second}
}

// foreignCert is a client certificate for user name signed by a CA of its own, which the API
// server does not trust.
func foreignCert(t *testing.T, name string) *rest.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{TLSClientConfig: rest.TLSClientConfig{
		CertData: pemBlock("CERTIFICATE", der), KeyData: pemBlock("EC PRIVATE KEY", keyDER)}}
}

func get(ctx context.Context, c *http.Client, base string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+probePath, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
