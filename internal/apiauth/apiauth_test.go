// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package apiauth_test

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
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/aether-mesh/aether-operator/internal/apiauth/apiauthtest"
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
	probe := map[string]http.Handler{"/probe/": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "the answer")
	})}
	withCerts, withoutCerts := apiauthtest.Serve(t, env.Config, true, probe), apiauthtest.Serve(t, env.Config, false, probe)
	ns, err := env.Namespace(ctx, "apiauth")
	if err != nil {
		t.Fatal(err)
	}
	grant(t, "granted-sa", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "granted"})
	grant(t, "granted-user", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "granted-user"})

	anonymous := apiauthtest.Client(t, &rest.Config{})
	tokenOf := func(name string) *http.Client {
		t.Helper()
		token, err := env.ServiceAccountToken(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return apiauthtest.Client(t, &rest.Config{BearerToken: token})
	}
	certOf := func(name string) *http.Client {
		t.Helper()
		cfg, err := env.UserConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		return apiauthtest.Client(t, cfg)
	}
	grantedCert, ungrantedCert := certOf("granted-user"), certOf("ungranted-user")

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
		{"a certificate of another CA, the granted user's name", withCerts, apiauthtest.Client(t, foreignCert(t, "granted-user")), http.StatusUnauthorized},
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
		CertData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyData:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}}
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
