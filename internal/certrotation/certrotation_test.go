// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package certrotation

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/controller"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// env is this package's real kube-apiserver and etcd. The webhook configurations a test makes
// point at a server of this process by URL (https://localhost:<port>), with no caBundle: only the
// rotation can make the API server trust it.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Run(m, &env)
}

// deniedMarker is what the test's validating webhook answers: a ConfigMap create that fails with
// it was judged by the webhook server, over TLS the API server verified with the injected CA.
const deniedMarker = "denied by the rotation test's webhook"

// TestRotation starts a manager with the rotation, as cmd/manager wires it with --cert-rotation
// (the manager's client and cache options, the gated server, the narrowed Secret cache), as a
// user granted only what config/rbac grants the manager (manager-role, webhook-cert-role: its
// one Secret, by name): the rotator fills the Secret the install made empty
// (config/manager/webhook_cert_secret.yaml), injects its CA into both webhook configurations
// (named as config/default names them, which manager-role's update is restricted to), and the
// gated webhook server starts, and turns ready, only then. A real TLS client verifies the
// server's certificate against the injected CA for the Service's DNS name, and the API server
// itself calls the validating webhook through that CA.
func TestRotation(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "certrot")
	port := freePort(t)
	names := configurationNames{validating: DefaultValidatingWebhook, mutating: DefaultMutatingWebhook}
	webhookConfigurations(t, ns, port, names)
	certDir := t.TempDir()

	c := Config{Namespace: ns, SecretName: installSecret(t, ns), ServiceName: "aether-operator-webhook-service",
		ValidatingWebhooks: []string{names.validating}, MutatingWebhooks: []string{names.mutating},
		CertDir: certDir, ExtraDNSNames: []string{"localhost"}}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	rotation := New(c)
	mgr, server := newManager(t, asManager(t, ns), rotation, port, certDir)
	if err := rotation.Add(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	if err := server.StartedChecker()(nil); err == nil {
		t.Fatal("the webhook server reports started before the rotation made its certificate")
	}

	// The kubelet's part: it writes the mounted Secret's keys into the pod's volume.
	secret := &corev1.Secret{}
	testenv.Eventually(t, "the rotator fills Secret webhook-server-cert", func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.SecretName}, secret); err != nil {
			return err
		}
		for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
			if len(secret.Data[k]) == 0 {
				return fmt.Errorf("key %s is empty", k)
			}
		}
		return nil
	})
	for k, v := range secret.Data {
		if err := os.WriteFile(filepath.Join(certDir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-rotation.Ready():
	case <-time.After(2 * time.Minute):
		t.Fatal("the rotation never reported ready (certificate mounted and CA injected)")
	}

	ca := secret.Data["ca.crt"]
	for _, name := range []string{names.validating, names.mutating} {
		if err := caInjected(ctx, name, ca); err != nil {
			t.Error(err)
		}
	}
	testenv.Eventually(t, "the gated webhook server started", func() error { return server.StartedChecker()(nil) })
	if err := verifyServing(port, ca, c.DNSName()); err != nil {
		t.Errorf("a TLS client trusting only the injected CA: %v", err)
	}

	// The API server calls the validating webhook and trusts it through the injected CA: its
	// denial comes back; with a CA it does not trust, the call would fail (failurePolicy Fail)
	// with an x509 error instead.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "judged", Labels: map[string]string{"certrot-test": ns}}}
	err := env.Client.Create(ctx, cm)
	if err == nil || !strings.Contains(err.Error(), deniedMarker) {
		t.Errorf("creating a ConfigMap the webhook judges: got %v, want the webhook's denial %q", err, deniedMarker)
	}
}

// TestRotationNegativeControl: a webhook configuration the rotation was not told about keeps an
// empty caBundle, and the check TestRotation relies on says so; nothing serving fails the TLS
// check. Both prove the checks can fail.
func TestRotationNegativeControl(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "certrot-off")
	names := configurationNames{validating: ns + "-validating", mutating: ns + "-mutating"}
	webhookConfigurations(t, ns, freePort(t), names)
	err := caInjected(ctx, names.validating, []byte("any"))
	if err == nil || !strings.Contains(err.Error(), "has no caBundle") {
		t.Fatalf("caInjected on a configuration no rotation touched: %v, want it to report the missing caBundle", err)
	}
	t.Logf("the check fails as it should: %v", err)
	if err := verifyServing(freePort(t), []byte("not a CA"), "x.svc"); err == nil {
		t.Fatal("verifyServing passes with nothing serving and no CA")
	}
}

// TestRotationWithoutItsSecret: as the manager (config/rbac's grants, which create no Secret),
// in a namespace where the install's Secret is missing, Add fails naming the Secret, the manifest
// that makes it and the fix; nothing creates it. The same with the Secret made (installSecret)
// passes the same check: the negative control.
func TestRotationWithoutItsSecret(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "certrot-nosecret")
	c := Config{Namespace: ns, SecretName: "webhook-server-cert", ServiceName: DefaultServiceName,
		ValidatingWebhooks: []string{ns + "-validating"}, CertDir: t.TempDir()}
	cfg := asManager(t, ns)
	rotation := New(c)
	mgr, _ := newManager(t, cfg, rotation, freePort(t), c.CertDir)
	err := rotation.Add(ctx, mgr)
	want := "the Secret " + ns + "/webhook-server-cert, where --cert-rotation keeps the webhooks' certificate, does not exist: the install makes it, empty (config/manager/webhook_cert_secret.yaml"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Add without the Secret: %v; want an error saying %q", err, want)
	}
	t.Logf("refused as it should be: %v", err)
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.SecretName}, &corev1.Secret{}); err == nil {
		t.Error("Secret webhook-server-cert exists after the refusal: something created it")
	}
	// The same check, as the same user, once the install's Secret is there (a second rotator in
	// one process would clash with the first's controller name).
	installSecret(t, ns)
	manager, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := secretExists(ctx, manager, client.ObjectKey{Namespace: ns, Name: c.SecretName}); err != nil {
		t.Errorf("with the install's Secret: %v", err)
	}
}

// TestCheck: each missing piece is refused naming its flag and the fix.
func TestCheck(t *testing.T) {
	full := Config{Namespace: "ns", SecretName: "s", ServiceName: "svc", ValidatingWebhooks: []string{"v"}, CertDir: "/d"}
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"namespace": {func(c *Config) { c.Namespace = "" }, "POD_NAMESPACE"},
		"secret":    {func(c *Config) { c.SecretName = "" }, "--cert-rotation-secret"},
		"service":   {func(c *Config) { c.ServiceName = "" }, "--cert-rotation-service"},
		"cert dir":  {func(c *Config) { c.CertDir = "" }, "--webhook-cert-dir"},
		"webhooks":  {func(c *Config) { c.ValidatingWebhooks = nil }, "--cert-rotation-validating-webhooks"},
	} {
		t.Run(name, func(t *testing.T) {
			c := full
			tc.mutate(&c)
			if err := c.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	if err := full.Check(); err != nil {
		t.Errorf("a complete configuration: %v", err)
	}
}

// caInjected reports whether every webhook of the configuration named name (validating or
// mutating) carries ca as its caBundle.
func caInjected(ctx context.Context, name string, ca []byte) error {
	var bundles [][]byte
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, v); err == nil {
		for _, w := range v.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
	} else {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, m); err != nil {
			return fmt.Errorf("webhook configuration %s: %w", name, err)
		}
		for _, w := range m.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
	}
	for _, b := range bundles {
		if len(b) == 0 {
			return fmt.Errorf("webhook configuration %s has no caBundle: the API server cannot verify the webhook's certificate", name)
		}
		if !bytes.Equal(b, ca) {
			return fmt.Errorf("webhook configuration %s's caBundle is not the CA of Secret webhook-server-cert", name)
		}
	}
	return nil
}

// verifyServing dials the webhook server on 127.0.0.1:port as the API server does: TLS, trusting
// only ca, checking the certificate is for serverName.
func verifyServing(port int, ca []byte, serverName string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return errors.New("the CA is not PEM")
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return conn.Close()
}

type configurationNames struct{ validating, mutating string }

// webhookConfigurations makes a validating and a mutating configuration, named names, whose
// one webhook each judges ConfigMaps labelled certrot-test=<ns> (so that no other test's objects
// reach them), served at https://localhost:port, without a caBundle.
func webhookConfigurations(t *testing.T, ns string, port int, names configurationNames) {
	t.Helper()
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"certrot-test": ns}}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	url := func(path string) *string { u := fmt.Sprintf("https://localhost:%d%s", port, path); return &u }
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: names.validating},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.certrot.aether.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/validate")},
			Rules: rules, ObjectSelector: selector, FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: names.mutating},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.certrot.aether.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/mutate")},
			Rules: rules, ObjectSelector: selector, FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
	for _, o := range []client.Object{v, m} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

// newManager returns a manager on cfg, with the client and cache options cmd/manager gives its
// own (read-your-writes, the narrowed Secret cache), whose webhook server, on 127.0.0.1:port
// with certDir, is gated by rotation as cmd/manager gates it; the server answers /validate with a
// denial and /mutate with an admission.
func newManager(t *testing.T, cfg *rest.Config, rotation *Rotation, port int, certDir string) (ctrl.Manager, crwebhook.Server) {
	t.Helper()
	server := rotation.Gate(crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir}))
	opts := ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, WebhookServer: server,
		Client: controller.ClientOptions(), Cache: controller.CacheOptions()}
	rotation.RestrictCache(&opts.Cache)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	mgr.GetWebhookServer().Register("/validate", &crwebhook.Admission{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Denied(deniedMarker)
	})})
	mgr.GetWebhookServer().Register("/mutate", &crwebhook.Admission{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})})
	return mgr, server
}

// asManager returns the config of a user granted what config/rbac grants the manager's
// ServiceAccount: the ClusterRole manager-role (role.yaml, from the markers) and, in ns, the Role
// webhook-cert-role (webhook_cert_role.yaml), each read from its manifest.
func asManager(t *testing.T, ns string) *rest.Config {
	t.Helper()
	ctx := t.Context()
	user := "certrot-manager-" + ns
	clusterRole := &rbacv1.ClusterRole{}
	readManifest(t, "role.yaml", clusterRole)
	clusterRole.Name = user
	role := &rbacv1.Role{}
	readManifest(t, "webhook_cert_role.yaml", role)
	role.Namespace = ns
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	for _, o := range []client.Object{clusterRole, role,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole.Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	kubeconfig, err := env.UserKubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// readManifest decodes config/rbac/<file> (one object, after an optional ---) into obj.
func readManifest(t *testing.T, file string, obj client.Object) {
	t.Helper()
	readConfig(t, filepath.Join("rbac", file), obj)
}

// readConfig decodes config/<file> (one object, after an optional ---) into obj.
func readConfig(t *testing.T, file string, obj client.Object) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(string(b), "---\n")), obj); err != nil {
		t.Fatalf("config/%s: %v", file, err)
	}
}

// installSecret makes, in ns, the certificate's Secret as the install makes it
// (config/manager/webhook_cert_secret.yaml: empty), and returns its name.
func installSecret(t *testing.T, ns string) string {
	t.Helper()
	s := &corev1.Secret{}
	readConfig(t, "manager/webhook_cert_secret.yaml", s)
	s.Namespace = ns
	if err := env.Client.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return s.Name
}

// start runs mgr until the test ends.
func start(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	stop, err := testenv.StartManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// namespace makes a namespace for one test.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := env.Namespace(t.Context(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
