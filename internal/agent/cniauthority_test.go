// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether-operator/internal/cni"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// The shipped names (config/base's prefix) of the plugin's and the agent's ServiceAccounts.
const pluginServiceAccount = "aether-operator-cni"

// installShippedRBAC applies the namespace, ServiceAccounts, roles and bindings of config/base
// exactly as kustomize renders them (the agent's, the plugin's, its token Role), with the real
// kubectl.
func installShippedRBAC(t *testing.T, ctx context.Context) {
	t.Helper()
	rbac := kustomized(t, ctx, filepath.Join(testenv.RepoRoot(), "config", "base"),
		"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	file := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(file, rbac, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := env.Kubectl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply the shipped RBAC: %v\n%s%s", err, out, stderr)
	}
}

// kustomized is `kubectl kustomize dir`, only the objects of kinds, as one YAML stream.
func kustomized(t *testing.T, ctx context.Context, dir string, kinds ...string) []byte {
	t.Helper()
	out, stderr, err := env.Kubectl(ctx, "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr)
	}
	var keep [][]byte
	for doc := range bytes.SplitSeq([]byte(out), []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(kinds, meta.Kind) {
			keep = append(keep, doc)
		}
	}
	return bytes.Join(keep, []byte("\n---\n"))
}

// agentPod creates a pod standing for the agent's own in the agent's namespace, controlled by ds
// when it is not nil.
func agentPod(t *testing.T, ctx context.Context, ds *appsv1.DaemonSet) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.AgentNamespace, Name: "agent-" + rand.String(6)},
		Spec: corev1.PodSpec{ServiceAccountName: testenv.AgentName,
			Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}},
	}
	if ds != nil {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: new(true)}}
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// asAgent is a typed clientset speaking as the agent's ServiceAccount (impersonated, with the
// shipped RBAC applied).
func asAgent(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.AgentConfig(testNode))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// rules is what a SelfSubjectRulesReview in ns says cfg's caller may do, as sorted
// "verb group/resource [names]" lines.
func rules(t *testing.T, ctx context.Context, cfg *rest.Config, ns string) []string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range review.Status.ResourceRules {
		for _, v := range r.Verbs {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					line := v + " " + g + "/" + res
					if len(r.ResourceNames) > 0 {
						line += " " + fmt.Sprint(r.ResourceNames)
					}
					lines = append(lines, line)
				}
			}
		}
	}
	slices.Sort(lines)
	return slices.Compact(lines)
}

// grantedBeyondAnyone is rules(cfg) less what a ServiceAccount bound to nothing may do in ns (what
// the cluster grants every authenticated caller: reviews of itself, trust bundles, ...).
func grantedBeyondAnyone(t *testing.T, ctx context.Context, cfg *rest.Config, ns string) []string {
	t.Helper()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	bare := "bare-" + rand.String(6)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: bare}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, bare, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	baseline := rules(t, ctx, WithToken(env.Config, tr.Status.Token), ns)
	return slices.DeleteFunc(rules(t, ctx, cfg, ns), func(line string) bool { return slices.Contains(baseline, line) })
}

// TestPluginKubeconfigCanOnlyGetPods runs the agent's keeper, speaking as the agent's
// ServiceAccount under the shipped RBAC: the kubeconfig it writes for the CNI plugin (0600)
// authenticates as the plugin's own ServiceAccount, which a SelfSubjectRulesReview shows may get
// pods and nothing else, for at most an hour; and the agent may ask for no other
// ServiceAccount's token.
func TestPluginKubeconfigCanOnlyGetPods(t *testing.T) {
	ctx := testContext(t)
	installShippedRBAC(t, ctx)
	agentCfg := env.AgentConfig(testNode)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	keeper := &cniKeeper{log: ctrl.Log.WithName("plugin-token-test"), opts: CNIInstallOptions{
		Installer: cni.Installer{BinDir: t.TempDir(), ConfDir: t.TempDir()}, Kubeconfig: kubeconfig, RestConfig: agentCfg,
		PluginToken: &ServiceAccountToken{Client: asAgent(t).CoreV1(), Namespace: testenv.AgentNamespace, Name: pluginServiceAccount,
			Lifetime: PluginTokenLifetime},
	}}
	keeper.keep(ctx)

	if info, err := os.Stat(kubeconfig); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the plugin's kubeconfig: %v (%v), want mode 0600", info, err)
	}
	pluginCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if granted := grantedBeyondAnyone(t, ctx, pluginCfg, testenv.AgentNamespace); !slices.Equal(granted, []string{"get /pods"}) {
		t.Errorf("the plugin's kubeconfig may %q; want only [get /pods]", granted)
	}
	cs, err := kubernetes.NewForConfig(pluginCfg)
	if err != nil {
		t.Fatal(err)
	}
	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if want := "system:serviceaccount:" + testenv.AgentNamespace + ":" + pluginServiceAccount; err != nil || who.Status.UserInfo.Username != want {
		t.Errorf("the plugin's kubeconfig speaks as %+v (%v), want %s", who, err, want)
	}

	other := &ServiceAccountToken{Client: asAgent(t).CoreV1(), Namespace: testenv.AgentNamespace, Name: "aether-operator-controller-manager", Lifetime: ReaderTokenLifetime}
	if _, err := other.Token(ctx); !apierrors.IsForbidden(err) {
		t.Errorf("the agent asked for the manager's token: %v, want Forbidden (its Role names two ServiceAccounts)", err)
	}

	if lifetime := tokenLifetime(t, pluginCfg.BearerToken); lifetime <= 0 || lifetime > PluginTokenLifetime {
		t.Errorf("the plugin's token lives %s, want at most %s", lifetime, PluginTokenLifetime)
	}
}

// tokenLifetime is exp - iat of a service-account token (a JWT; its signature is the API
// server's business, only its claims are read here).
func tokenLifetime(t *testing.T, token string) time.Duration {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		IssuedAt  int64 `json:"iat"`
		ExpiresAt int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return time.Duration(claims.ExpiresAt-claims.IssuedAt) * time.Second
}

// TestARefusedPodTokenIsNoUninstall: when the agent stops and the API server refuses its pod's
// token (401: the pod was force-deleted), the plugin stays while the DaemonSet does; a token of
// the agent's reader bound to no pod (asked for under the shipped Role) then tells a deleted
// DaemonSet, and a deleted ServiceAccount (the reader's, deleted with the installation).
func TestARefusedPodTokenIsNoUninstall(t *testing.T) {
	ctx := testContext(t)
	installShippedRBAC(t, ctx)
	labels := map[string]string{"app": "agent-" + rand.String(6)}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.AgentNamespace, Name: labels["app"]},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}},
		}},
	}
	if err := env.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	pod := agentPod(t, ctx, ds)
	self := Self{Pod: client.ObjectKeyFromObject(pod), Owner: metav1.GetControllerOf(pod)}

	// The agent's pod token, as the kubelet projects it: bound to the pod.
	podToken := &ServiceAccountToken{Client: kubernetes.NewForConfigOrDie(env.Config).CoreV1(), Namespace: testenv.AgentNamespace,
		Name: testenv.AgentName, BoundPod: pod.Name, Lifetime: ReaderTokenLifetime}
	spare := &ServiceAccountToken{Client: asAgent(t).CoreV1(), Namespace: testenv.AgentNamespace, Name: ReaderAccount(testenv.AgentName), Lifetime: ReaderTokenLifetime}
	reader := func(tokens *ServiceAccountToken) client.Reader {
		t.Helper()
		token, err := tokens.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(WithToken(env.Config, token), client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	withPodToken, withSpare := reader(podToken), reader(spare)
	expect := func(spare client.Reader, want bool, because string) {
		t.Helper()
		got, why, err := Uninstalling(ctx, self, withPodToken, spare)
		if err != nil || got != want || !strings.Contains(why, because) {
			t.Errorf("Uninstalling = %v, %q, %v; want %v because %q", got, why, err, want, because)
		}
	}
	expect(withSpare, false, "stays: the agent restarts or is upgraded")

	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil { // force-deleted
		t.Fatal(err)
	}
	testenv.Eventually(t, "the pod's token refused", func() error {
		if err := withPodToken.Get(ctx, client.ObjectKeyFromObject(ds), &appsv1.DaemonSet{}); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("get DaemonSet: %v", err)
		}
		return nil
	})
	expect(nil, false, "refuses the agent's pod token")
	expect(withSpare, false, "stays: the agent restarts or is upgraded")

	if err := env.Client.Delete(ctx, ds); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyGone(t, env.Client, ds)
	expect(withSpare, true, "is deleted")
	expect(nil, false, "refuses the agent's pod token")

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.AgentNamespace, Name: ReaderAccount(testenv.AgentName)}}
	if err := env.Client.Delete(ctx, sa); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { installShippedRBAC(t, context.Background()) }) // the ServiceAccount back
	testenv.Eventually(t, "the spare token refused with its ServiceAccount", func() error {
		if err := withSpare.Get(ctx, self.Pod, &corev1.Pod{}); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("get pod: %v", err)
		}
		return nil
	})
	expect(withSpare, true, "the ServiceAccount is deleted with the installation")
}

// TestAnAgentCannotTakeAnotherNodesClaim: the agent may ask for tokens of two ServiceAccounts, the
// plugin's and its reader's, never of its own: one of its own bound to another node's agent pod
// would carry that node's claim, which the node-authority policy takes for that node's agent
// (root on one node could then write every node's MeshEndpoints). Under the shipped RBAC the
// agent of one node asking for its ServiceAccount's token bound to another node's agent pod is
// Forbidden; a token of the reader cannot be bound to that pod (the API server binds a token to a
// pod of its own ServiceAccount only), and unbound it may get pods and DaemonSets, nothing else.
func TestAnAgentCannotTakeAnotherNodesClaim(t *testing.T) {
	ctx := testContext(t)
	installShippedRBAC(t, ctx)
	other := "node-b-" + rand.String(5)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: other}}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	if _, err := env.AgentTokenConfig(ctx, other); err != nil { // the other node's agent pod
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: testenv.AgentNamespace, Name: "agent-" + other}, pod); err != nil {
		t.Fatal(err)
	}
	boundToIt := func(account string) error {
		request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}}
		_, err := asAgent(t).CoreV1().ServiceAccounts(testenv.AgentNamespace).CreateToken(ctx, account, request, metav1.CreateOptions{})
		return err
	}
	if err := boundToIt(testenv.AgentName); !apierrors.IsForbidden(err) {
		t.Errorf("the agent of %s asked for its ServiceAccount's token bound to %s's agent pod (it would carry %s's claim): %v, want Forbidden",
			testNode, other, other, err)
	}
	reader := ReaderAccount(testenv.AgentName)
	if err := boundToIt(reader); err == nil {
		t.Errorf("a token of the reader bound to %s's agent pod, which runs as the agent: granted, want refused", other)
	}
	tokens := &ServiceAccountToken{Client: asAgent(t).CoreV1(), Namespace: testenv.AgentNamespace, Name: reader, Lifetime: ReaderTokenLifetime}
	token, err := tokens.Token(ctx)
	if err != nil {
		t.Fatalf("the reader's token, bound to no pod: %v", err)
	}
	if granted := grantedBeyondAnyone(t, ctx, WithToken(env.Config, token), testenv.AgentNamespace); !slices.Equal(granted, []string{"get /pods", "get apps/daemonsets"}) {
		t.Errorf("the reader may %q; want only [get /pods get apps/daemonsets]", granted)
	}
}

// TestNodeAuthorityFollowsTheAgentsNamespace: config/base built with another namespace and name
// prefix (mesh-system, mesh-) gives a node-authority policy that matches the agent's username as
// built, system:serviceaccount:mesh-system:mesh-agent, not the shipped one: applied to the real API
// server, it denies that agent, with its node's claim, a MeshEndpoint of another node. (Spelt
// out, the policy matched only the shipped namespace and prefix: under any other it matched
// nobody, and every agent could write every node's endpoints.)
func TestNodeAuthorityFollowsTheAgentsNamespace(t *testing.T) {
	ctx := testContext(t)
	if _, err := testenv.InstallNodeAuthority(env); err != nil { // the agent's ClusterRole, agent-role
		t.Fatal(err)
	}
	const agentNS, prefix = "mesh-system", "mesh-"
	user := "system:serviceaccount:" + agentNS + ":" + prefix + "agent"
	config := filepath.Join(t.TempDir(), "config")
	if out, err := exec.CommandContext(ctx, "cp", "-r", filepath.Join(testenv.RepoRoot(), "config"), config).CombinedOutput(); err != nil {
		t.Fatalf("copying config/: %v\n%s", err, out)
	}
	base := filepath.Join(config, "base", "kustomization.yaml")
	k, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.NewReplacer("namespace: aether-operator-system\n", "namespace: "+agentNS+"\n",
		"namePrefix: aether-operator-\n", "namePrefix: "+prefix+"\n").Replace(string(k))
	if changed == string(k) || strings.Count(changed, agentNS) != 1 {
		t.Fatalf("config/base/kustomization.yaml does not set namespace and namePrefix as this test expects:\n%s", k)
	}
	if err := os.WriteFile(base, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	policies := string(kustomized(t, ctx, filepath.Join(config, "base"), "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"))
	// The expression as one line (kustomize folds a long one).
	if strings.Count(policies, "kind: ValidatingAdmissionPolicy") != 2 || !strings.Contains(strings.Join(strings.Fields(policies), " "), "'"+agentNS+"' + ':' + '"+prefix+"agent'") {
		t.Fatalf("the built policy and binding do not name %s:\n%s", user, policies)
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(policies), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := env.Kubectl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply the built policy: %v\n%s%s", err, out, stderr)
	}
	// That agent's rights: the shipped agent role, bound to it.
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: prefix + "agent-" + rand.String(5)},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agent-role"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agentNS, Name: prefix + "agent"}}}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Extra: map[string][]string{testenv.NodeClaim: {testNode}},
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + agentNS, "system:authenticated"}}
	asThatAgent, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	nodeAuthorityEnforced(t, ctx, asThatAgent, namespace(t, ctx), testNode)
}
