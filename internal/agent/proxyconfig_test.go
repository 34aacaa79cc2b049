// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/aether-mesh/aether-operator/internal/apiauth/apiauthtest"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/proxyconfig"
	"github.com/aether-mesh/aether-operator/internal/spiffetest"
	"github.com/aether-mesh/aether-operator/internal/testenv"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xdsserver/xdstest"
)

// TestProxyConfigServesThePodsPart: the real agent, with xDS serving and --proxy-config on its
// secure metrics server, answers GET /proxy-config/<ns>/<pod> (to the admin's client certificate)
// with what its node's published snapshot (built by the real builder from the API server's
// objects) holds for that pod: its capture listener, its identity's capture route configuration
// and clusters, and its own app cluster; nothing of the node's other pod (of another identity),
// which the same endpoint serves on its own path (the negative control: the answer is per pod,
// not empty). The snapshot also serves the pod's SVID by SDS, which a real ADS client receives;
// the endpoint's answer holds neither its name's secret nor its private key. A pod the agent does
// not mesh is a 404 saying so, before and after the build. (Who may read it:
// TestProxyConfigOnlyForItsReader.)
func TestProxyConfigServesThePodsPart(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	a, base, admin := startProxyConfigAgent(t, ns)

	annotations := map[string]string{portspec.AnnotationPort: "8080", portspec.AnnotationPorts: "8080,9000=tcp"}
	createPodAs(t, ctx, ns, "web-0", "web", a.node, newPodIP(), true, annotations)
	createPodAs(t, ctx, ns, "db-0", "db", a.node, newPodIP(), true, annotations)
	createPodAs(t, ctx, ns, "plain", "web", a.node, newPodIP(), false, annotations)
	webID, dbID := identityOf(t, ctx, ns, "web"), identityOf(t, ctx, ns, "db")

	get := func(ns, name string) (int, []byte) {
		t.Helper()
		resp, err := admin.Get(base + proxyconfig.PodPath(ns, name))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	read := func(ns, name string) (proxyconfig.Config, xds.Resources, error) {
		status, body := get(ns, name)
		if status != http.StatusOK {
			return proxyconfig.Config{}, xds.Resources{}, fmt.Errorf("GET %s: %d %s", proxyconfig.PodPath(ns, name), status, body)
		}
		var c proxyconfig.Config
		if err := json.Unmarshal(body, &c); err != nil {
			return c, xds.Resources{}, err
		}
		res, err := c.Decode()
		return c, res, err
	}
	webKey, dbKey := xds.PodKey(ns, "web-0"), xds.PodKey(ns, "db-0")
	var web xds.Resources
	testenv.Eventually(t, "web-0's capture listener and its identity's clusters on the proxy-config endpoint", func() error {
		var err error
		if _, web, err = read(ns, "web-0"); err != nil {
			return err
		}
		if !slices.Contains(names(web.Listeners), xds.CaptureListener(webKey)) {
			return fmt.Errorf("listeners %q lack %q", names(web.Listeners), xds.CaptureListener(webKey))
		}
		if !slices.Contains(names(web.Clusters), xds.SourceCluster(xds.HTTPCluster(xds.FQDN("db", ns, meshDomain), 8080), webID)) {
			return fmt.Errorf("clusters %q lack web's cluster of db:8080", names(web.Clusters))
		}
		return nil
	})
	if !slices.Contains(names(web.Routes), xds.CaptureRoutes(webID)) || !slices.Contains(names(web.Clusters), xds.AppCluster(webKey, 8080)) {
		t.Errorf("web-0: routes %q, clusters %q; want %q and %q among them", names(web.Routes), names(web.Clusters), xds.CaptureRoutes(webID), xds.AppCluster(webKey, 8080))
	}
	for _, n := range slices.Concat(names(web.Listeners), names(web.Routes), names(web.Clusters)) {
		if strings.Contains(n, dbKey) || strings.HasSuffix(n, "|"+xds.SourceKey(dbID)) {
			t.Errorf("web-0's configuration holds %q, db-0's", n)
		}
	}
	// Negative control: the other pod is on the same endpoint, with its own.
	if _, db, err := read(ns, "db-0"); err != nil || !slices.Contains(names(db.Listeners), xds.CaptureListener(dbKey)) {
		t.Errorf("db-0: listeners %q, %v; want its capture listener", names(db.Listeners), err)
	}

	// The pod's SVID, served to the node's Envoy by SDS, is not on the endpoint.
	ca, err := spiffetest.NewCA(meshDomain)
	if err != nil {
		t.Fatal(err)
	}
	chain, key, err := ca.Issue(webID)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := xds.SVIDSecret(webID, chain, key)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := xds.BundleSecret(meshDomain, ca.BundlePEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.options.XDS.Server.PublishSecrets(a.node, []*tlsv3.Secret{secret, bundle}); err != nil {
		t.Fatal(err)
	}
	c := a.dial(t, ctx)
	if err := c.Await(ctx, func(s xdstest.State) error {
		if s.Secret(xds.CertificateSecret(webID)) == nil {
			return fmt.Errorf("no secret %q served yet", webID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, body := get(ns, "web-0")
	keyBlock := strings.Split(strings.TrimSpace(string(key)), "\n")[1] // a line of the key's base64
	for _, leak := range []string{"PRIVATE KEY", keyBlock, "transport_sockets.tls.v3.Secret", `"privateKey"`} {
		if bytes.Contains(body, []byte(leak)) {
			t.Errorf("the proxy-config endpoint's answer for web-0 holds %q", leak)
		}
	}

	status, body := get(ns, "plain")
	if status != http.StatusNotFound || !strings.Contains(string(body), "pod "+ns+"/plain has no proxy configuration on node "+a.node) {
		t.Errorf("an unmeshed pod: %d %s; want 404 saying it has no proxy configuration", status, body)
	}
}

// TestProxyConfigOnlyForItsReader: the agent serves a pod's proxy configuration to a caller the
// API server vouches for and allows get on its path, and to nobody else: no credentials 401; a
// token of a ServiceAccount without a grant 403, bound to the shipped metrics-reader (another
// path) 403, bound to the shipped proxy-config-reader the pod's configuration; a client
// certificate of a user granted /proxy-config/<this namespace>/* the pod's configuration, and
// 403 for a pod of another namespace.
func TestProxyConfigOnlyForItsReader(t *testing.T) {
	ctx := testContext(t)
	installShippedRBAC(t, ctx)
	ns := namespace(t, ctx)
	a, base, _ := startProxyConfigAgent(t, ns)
	createPodAs(t, ctx, ns, "web-0", "web", a.node, newPodIP(), true, map[string]string{portspec.AnnotationPort: "8080"})
	path := proxyconfig.PodPath(ns, "web-0")

	admin := kubernetes.NewForConfigOrDie(env.Config)
	bind := func(name, role string, subject rbacv1.Subject) {
		t.Helper()
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: []rbacv1.Subject{subject}}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tokenOf := func(name, role string) *rest.Config {
		t.Helper()
		token, err := env.ServiceAccountToken(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if role != "" {
			bind(name, role, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name})
		}
		return &rest.Config{BearerToken: token}
	}
	// A user of one namespace's pods: a ClusterRole of its own, as docs/user-guide says.
	user := ns + "-reader"
	onlyHere := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{proxyconfig.Path + ns + "/*"}, Verbs: []string{"get"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, onlyHere, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind(user, user, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user})
	certificate, err := env.UserConfig(user)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		who  string
		cfg  *rest.Config
		path string
		want int
	}{
		{"no credentials", &rest.Config{}, path, http.StatusUnauthorized},
		{"a ServiceAccount without a grant", tokenOf("nosy", ""), path, http.StatusForbidden},
		{"a ServiceAccount with metrics-reader", tokenOf("prometheus", "aether-operator-metrics-reader"), path, http.StatusForbidden},
		{"a ServiceAccount with proxy-config-reader", tokenOf("operator", "aether-operator-"+proxyconfig.ReaderRole), path, http.StatusOK},
		{"a certificate granted this namespace", certificate, path, http.StatusOK},
		{"a certificate granted this namespace, another's pod", certificate, proxyconfig.PodPath("kube-system", "web-0"), http.StatusForbidden},
	} {
		caller := apiauthtest.Client(t, c.cfg)
		testenv.Eventually(t, c.who+" answered "+fmt.Sprint(c.want), func() error {
			resp, err := caller.Get(base + c.path)
			if err != nil {
				return err
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			if resp.StatusCode != c.want || (c.want == http.StatusOK) != bytes.Contains(body, []byte(xds.CaptureListener(xds.PodKey(ns, "web-0")))) {
				return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, body)
			}
			return nil
		})
	}
}

// startProxyConfigAgent starts an xDS-serving agent with --proxy-config on its secure metrics
// server (MetricsOptions, as cmd/agent wires it), and returns it, the server's base URL and a
// client of the admin's (a client certificate of system:masters).
func startProxyConfigAgent(t *testing.T, ns string) (*xdsAgent, string, *http.Client) {
	t.Helper()
	addr := testenv.FreeLoopbackAddress(t)
	a := startXDSAgentAs(t, ns, env.Config, MetricsOptions(addr, true, ""), false, func(o *Options) { o.XDS.ProxyConfig = true })
	return a, "https://" + addr, apiauthtest.Client(t, env.Config)
}

// names are the resources' names.
func names[T interface{ GetName() string }](items []T) []string {
	out := make([]string, len(items))
	for i, r := range items {
		out[i] = r.GetName()
	}
	return out
}
