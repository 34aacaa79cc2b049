// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// The tests render a chart generated from this repository's config/ with the real helm (built
// by hack/build-helm.sh into the binary cache) and compare it with kustomize's builds.
const (
	root      = "../.."
	release   = "aether-operator"
	namespace = "aether-operator-system"
	// defaultSpireDir and baseSpireDir are config/default and config/base with the component
	// config/spire (overlays in testdata, relative to root): what the chart renders with SPIRE
	// enabled and installed, its defaults.
	defaultSpireDir = "hack/chart/testdata/default-spire"
	baseSpireDir    = "hack/chart/testdata/base-spire"
	// baseCSIDir is config/base with the component config/csi: what the chart renders without
	// the node's Envoy and without SPIRE (the socket carrier is not Envoy's).
	baseCSIDir = "hack/chart/testdata/base-csi"
	// spireNamespace is config/spire's namespace, spire.namespace's default.
	spireNamespace = "spire-system"
)

var (
	helm  string // the helm binary
	chart string // the chart generated from config/, in a temporary directory
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	out, err := exec.Command("../build-helm.sh").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "hack/build-helm.sh: %v\n", err)
		return 1
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	helm = filepath.Join(lines[len(lines)-1], "helm")
	tmp, err := os.MkdirTemp("", "aether-chart-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	chart = filepath.Join(tmp, "chart")
	if err := run(root, chart, ""); err != nil {
		fmt.Fprintf(os.Stderr, "generating the chart: %v\n", err)
		return 1
	}
	return m.Run()
}

// obj is a Kubernetes object as a generic tree.
type obj = map[string]any

// render is `helm template` of the generated chart as release into namespace, with args
// (--set ...), as objects.
func render(t *testing.T, args ...string) []obj {
	t.Helper()
	out, err := helmTemplate(args...)
	if err != nil {
		t.Fatalf("helm template %v: %v", args, err)
	}
	return decodeObjects(t, out)
}

func helmTemplate(args ...string) ([]byte, error) {
	return helmTemplateAs(release, namespace, args...)
}

// helmTemplateAs is `helm template` of the generated chart as release name into namespace ns.
func helmTemplateAs(name, ns string, args ...string) ([]byte, error) {
	cmd := exec.Command(helm, append([]string{"template", name, chart, "--namespace", ns}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

func decodeObjects(t *testing.T, data []byte) []obj {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var objs []obj
	for {
		var o obj
		err := dec.Decode(&o)
		if err == io.EOF {
			return objs
		}
		if err != nil {
			t.Fatalf("decoding helm's output: %v", err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
}

// kustomized is `kustomize build` of a config/ directory (or, for config/certmanager and
// config/prometheus, of it under config/base's namespace and prefix), as objects.
func kustomized(t *testing.T, dir string) []obj {
	t.Helper()
	var objs []object
	var err error
	if dir == certManagerDir || dir == prometheusDir {
		objs, err = kustomizeUnder(root, dir, namespace, release+"-")
	} else {
		objs, err = kustomize(filepath.Join(root, dir))
	}
	if err != nil {
		t.Fatal(err)
	}
	out := make([]obj, len(objs))
	for i, o := range objs {
		if err := o.node.Decode(&out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// clusterScopedKinds are the kinds of these objects that no namespace holds (Kubernetes' API,
// written here independently of the generator's list).
var clusterScopedKinds = []string{
	"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
	"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}

// id is an object's kind/namespace/name; a cluster-scoped object has no namespace, whatever
// its metadata says (kustomize gives a ValidatingAdmissionPolicy one).
func id(o obj) string {
	kind, _ := o["kind"].(string)
	ns := field(o, "metadata", "namespace")
	if slices.Contains(clusterScopedKinds, kind) {
		ns = ""
	}
	return kind + "/" + ns + "/" + field(o, "metadata", "name")
}

func field(o obj, path ...string) string {
	v, _ := get(o, path...).(string)
	return v
}

// get walks a path of mapping keys.
func get(o any, path ...string) any {
	for _, k := range path {
		m, ok := o.(obj)
		if !ok {
			return nil
		}
		o = m[k]
	}
	return o
}

func ids(objs []obj) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, id(o))
	}
	slices.Sort(out)
	return out
}

// withoutNamespaceObject drops the release's Namespace: helm install --create-namespace makes
// it, the chart has none. (It has SPIRE's.)
// withoutCAInjection is a kustomize build as the chart renders it by default (certManager.enabled
// false: the manager's rotation injects the CA): without cert-manager's annotation on the webhook
// configurations.
func withoutCAInjection(objs []obj) []obj {
	out := make([]obj, 0, len(objs))
	for _, o := range objs {
		if strings.HasSuffix(o["kind"].(string), "WebhookConfiguration") {
			o = deepCopy(o).(obj)
			meta := o["metadata"].(obj)
			if ann, ok := meta["annotations"].(obj); ok {
				delete(ann, injectCAFrom)
				if len(ann) == 0 {
					delete(meta, "annotations")
				}
			}
		}
		out = append(out, o)
	}
	return out
}

func withoutNamespaceObject(objs []obj) []obj {
	return slices.DeleteFunc(slices.Clone(objs), func(o obj) bool {
		return o["kind"] == "Namespace" && field(o, "metadata", "name") == namespace
	})
}

// chartFlags are the flags the chart sets on every run, where config/ leaves them to the
// binaries' defaults: normalize removes them, and each test checks their values itself.
var chartFlags = []string{"--identity-issuer=", "--identity-gate=", "--ignored-namespaces=", "--capture-mode=", "--mesh-dns=", "--mesh-domain=", "--spire-delegate-service-account="}

// normalize removes from an object what the chart adds on purpose, so that what is left must
// be kustomize's: its own labels (and kustomize's managed-by), the release label of pod templates,
// CRDs' resource policy, the
// namespace of a cluster-scoped object, and chartFlags.
func normalize(o obj) obj {
	o = deepCopy(o).(obj)
	meta := o["metadata"].(obj)
	if slices.Contains(clusterScopedKinds, o["kind"].(string)) {
		delete(meta, "namespace")
	}
	if labels, ok := meta["labels"].(obj); ok {
		for _, l := range []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by"} {
			delete(labels, l)
		}
		if len(labels) == 0 {
			delete(meta, "labels")
		}
	}
	if labels, ok := get(o, "spec", "template", "metadata", "labels").(obj); ok {
		delete(labels, "app.kubernetes.io/instance") // each pod's release, for the monitored Services
	}
	if ann, ok := meta["annotations"].(obj); ok {
		delete(ann, "helm.sh/resource-policy")
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
	for _, c := range containers(o) {
		args, _ := c["args"].([]any)
		c["args"] = slices.DeleteFunc(args, func(a any) bool {
			s, _ := a.(string)
			return slices.ContainsFunc(chartFlags, func(f string) bool { return strings.HasPrefix(s, f) })
		})
	}
	return o
}

// containers are the containers and init containers of a Deployment's, DaemonSet's or
// StatefulSet's pods.
func containers(o obj) []obj {
	var out []obj
	for _, key := range []string{"initContainers", "containers"} {
		list, _ := get(o, "spec", "template", "spec", key).([]any)
		for _, c := range list {
			out = append(out, c.(obj))
		}
	}
	return out
}

// container is the container name of the one object of kind in the release's namespace.
func container(t *testing.T, objs []obj, kind, name string) obj {
	t.Helper()
	return containerIn(t, objs, namespace, kind, name)
}

// containerIn is the container name of the object of kind in namespace ns that runs it (the
// agent's DaemonSet runs agent, the node Envoy's envoy).
func containerIn(t *testing.T, objs []obj, ns, kind, name string) obj {
	t.Helper()
	for _, o := range objs {
		if o["kind"] != kind || field(o, "metadata", "namespace") != ns {
			continue
		}
		for _, c := range containers(o) {
			if c["name"] == name {
				return c
			}
		}
	}
	t.Fatalf("no %s in namespace %s has a container %s", kind, ns, name)
	return nil
}

// theOne is the one object of kind in the release's namespace (the operator's, not SPIRE's); of
// the DaemonSets, the node agent's (the node Envoy's is the other, with envoy.enabled).
func theOne(t *testing.T, objs []obj, kind string) obj {
	t.Helper()
	return theOneIn(t, objs, namespace, kind)
}

func theOneIn(t *testing.T, objs []obj, ns, kind string) obj {
	t.Helper()
	var found []obj
	for _, o := range objs {
		if o["kind"] == kind && field(o, "metadata", "namespace") == ns &&
			(kind != "DaemonSet" || strings.HasSuffix(field(o, "metadata", "name"), "-agent")) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s in namespace %s, want 1", len(found), kind, ns)
	}
	return found[0]
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case obj:
		m := obj{}
		for k, x := range v {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, x := range v {
			l[i] = deepCopy(x)
		}
		return l
	}
	return v
}

// sameObjects fails unless chart holds exactly kust's objects (kind, namespace, name) and
// each, normalized, equals kustomize's.
func sameObjects(t *testing.T, chartObjs, kust []obj) {
	t.Helper()
	if d := cmp.Diff(ids(kust), ids(chartObjs)); d != "" {
		t.Fatalf("the chart's objects (kind/namespace/name) are not kustomize's (-kustomize +chart):\n%s", d)
	}
	byID := map[string]obj{}
	for _, o := range kust {
		byID[id(o)] = normalize(o)
	}
	for _, o := range chartObjs {
		if d := cmp.Diff(byID[id(o)], normalize(o)); d != "" {
			t.Errorf("%s differs from kustomize's (-kustomize +chart):\n%s", id(o), d)
		}
	}
}

func args(c obj) []string {
	var out []string
	for _, a := range c["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// flagValue is the value of --name in a container's args, or "<unset>".
func flagValue(c obj, name string) string {
	for _, a := range args(c) {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return "<unset>"
}

// TestDefaultsAreKustomize: with its default values the chart installs exactly the objects of
// config/default with the component config/spire (but the release's Namespace), as kustomize
// builds them, without cert-manager's CA annotation (certManager.enabled: false, the manager's
// rotation keeps the certificate), plus the flags the chart always sets, at the binaries'
// defaults.
func TestDefaultsAreKustomize(t *testing.T) {
	objs := render(t)
	want := withoutCAInjection(withoutNamespaceObject(kustomized(t, defaultSpireDir)))
	sameObjects(t, objs, want)

	ignored := "kube-system,kube-public,kube-node-lease," + namespace
	for _, c := range []struct{ kind, name, flag, want string }{
		{"Deployment", "manager", "--identity-issuer", "spire"},
		{"Deployment", "manager", "--cert-rotation", "true"},
		{"Deployment", "manager", "--cert-rotation-secret", "aether-operator-webhook-server-cert"},
		{"Deployment", "manager", "--ignored-namespaces", ignored},
		{"DaemonSet", "agent", "--identity-issuer", "spire"},
		{"DaemonSet", "agent", "--ignored-namespaces", ignored},
		{"DaemonSet", "agent", "--capture-mode", "surface"},
		{"DaemonSet", "agent", "--mesh-dns", "true"},
		{"Deployment", "manager", "--identity-gate", "true"},
		{"DaemonSet", "install-cni", "--ignored-namespaces", ignored},
		{"Deployment", "manager", "--mesh-domain", "aether.internal"},
		{"DaemonSet", "agent", "--mesh-domain", "aether.internal"},
	} {
		if got := flagValue(container(t, objs, c.kind, c.name), c.flag); got != c.want {
			t.Errorf("%s container %s: %s=%s, want %s", c.kind, c.name, c.flag, got, c.want)
		}
	}
	// The registrar's, at the binary's defaults: config/spire leaves them to it.
	registrar := containerIn(t, objs, spireNamespace, "StatefulSet", "registrar")
	for flag, want := range map[string]string{"--mesh-domain": "aether.internal", "--spire-delegate-service-account": release + "-agent"} {
		if got := flagValue(registrar, flag); got != want {
			t.Errorf("StatefulSet container registrar: %s=%s, want %s", flag, got, want)
		}
	}
	for _, o := range objs {
		if got := field(o, "metadata", "labels", "app.kubernetes.io/managed-by"); got != "Helm" {
			t.Errorf("%s: label app.kubernetes.io/managed-by=%q, want Helm", id(o), got)
		}
	}
}

// TestEnvoyOff: envoy.enabled=false is config/base (the agent without the node's Envoy), with
// config/spire and config/csi.
func TestEnvoyOff(t *testing.T) {
	objs := render(t, "--set", "envoy.enabled=false")
	want := withoutCAInjection(withoutNamespaceObject(kustomized(t, baseSpireDir)))
	sameObjects(t, objs, want)
	for _, o := range objs {
		if o["kind"] != "DaemonSet" {
			continue
		}
		for _, c := range containers(o) {
			if c["name"] == "envoy" {
				t.Errorf("envoy.enabled=false still runs the container envoy (%s)", field(o, "metadata", "name"))
			}
		}
	}
}

// TestPrometheusOn: each prometheus.*.enabled adds config/prometheus's objects of its kinds, as
// kustomize builds them (the alerts' and the dashboard's "{{" included; a ServiceMonitor's and a
// monitored Service's selector narrowed to the release), and nothing else.
func TestPrometheusOn(t *testing.T) {
	defaults := withoutCAInjection(withoutNamespaceObject(kustomized(t, defaultSpireDir)))
	monitoring := kustomized(t, prometheusDir)
	for value, kinds := range map[string][]string{
		"prometheus.serviceMonitor.enabled": {"ServiceMonitor", "Service"},
		"prometheus.rules.enabled":          {"PrometheusRule"},
		"prometheus.dashboard.enabled":      {"ConfigMap"},
	} {
		t.Run(value, func(t *testing.T) {
			want := slices.Clone(defaults)
			for _, o := range monitoring {
				if slices.Contains(kinds, o["kind"].(string)) {
					switch o["kind"] { // narrowed to the release's Services or pods
					case "ServiceMonitor":
						o = deepCopy(o).(obj)
						get(o, "spec", "selector", "matchLabels").(obj)["app.kubernetes.io/instance"] = release
					case "Service":
						o = deepCopy(o).(obj)
						get(o, "spec", "selector").(obj)["app.kubernetes.io/instance"] = release
					}
					want = append(want, o)
				}
			}
			if len(want) == len(defaults) {
				t.Fatalf("%s: config/prometheus has no object of kinds %v", value, kinds)
			}
			sameObjects(t, render(t, "--set", value+"=true"), want)
		})
	}
}

// TestCertManagerOn: certManager.enabled=true is config/default with config/certmanager's Issuer
// and Certificate (writing webhook.certSecretName), cert-manager's CA annotation on the webhook
// configurations, the manager's own rotation off, and without the empty Secret config/default
// makes for the rotation (cert-manager makes its own).
func TestCertManagerOn(t *testing.T) {
	objs := render(t, "--set", "certManager.enabled=true", "--set", "webhook.certSecretName=my-webhook-tls")
	var hooks []obj
	for _, o := range objs {
		if strings.HasSuffix(o["kind"].(string), "WebhookConfiguration") {
			hooks = append(hooks, o)
		}
	}
	if len(hooks) != 2 {
		t.Fatalf("%d webhook configurations, want 2", len(hooks))
	}
	for _, h := range hooks {
		if ann := get(h, "metadata", "annotations", injectCAFrom); ann != release+"-system/"+release+"-serving-cert" && ann != namespace+"/"+release+"-serving-cert" {
			t.Errorf("%s: annotation %s=%v with certManager.enabled=true, want the Certificate's", id(h), injectCAFrom, ann)
		}
		for _, w := range h["webhooks"].([]any) {
			if cc := w.(obj)["clientConfig"].(obj); cc["caBundle"] != nil {
				t.Errorf("%s: caBundle %v, want none: cert-manager injects it", id(h), cc["caBundle"])
			}
		}
	}
	manager := container(t, objs, "Deployment", "manager")
	for flag, want := range map[string]string{"--cert-rotation": "false", "--cert-rotation-secret": "my-webhook-tls"} {
		if got := flagValue(manager, flag); got != want {
			t.Errorf("the manager's %s=%s, want %s", flag, got, want)
		}
	}
	if got := get(theOne(t, objs, "Certificate"), "spec", "secretName"); got != "my-webhook-tls" {
		t.Errorf("the Certificate writes Secret %v, want webhook.certSecretName my-webhook-tls", got)
	}
	for _, o := range objs {
		if o["kind"] == "Secret" {
			t.Errorf("Secret %v with certManager.enabled=true: cert-manager could not write its kubernetes.io/tls Secret over it", field(o, "metadata", "name"))
		}
	}

	// Put back what the values changed: the rest is config/default's, with config/spire, and
	// config/certmanager's objects.
	kust := slices.DeleteFunc(withoutNamespaceObject(kustomized(t, defaultSpireDir)), func(o obj) bool { return o["kind"] == "Secret" })
	for _, o := range kust {
		switch o["kind"] {
		case "Deployment":
			for _, v := range get(o, "spec", "template", "spec", "volumes").([]any) {
				if v.(obj)["name"] == "webhook-certs" {
					v.(obj)["secret"].(obj)["secretName"] = "my-webhook-tls"
				}
			}
			for _, c := range get(o, "spec", "template", "spec", "containers").([]any) {
				args := c.(obj)["args"].([]any)
				for i, a := range args {
					switch a {
					case "--cert-rotation=true":
						args[i] = "--cert-rotation=false"
					case "--cert-rotation-secret=aether-operator-webhook-server-cert":
						args[i] = "--cert-rotation-secret=my-webhook-tls"
					}
				}
			}
		case "Role":
			if field(o, "metadata", "name") == release+"-webhook-cert-role" {
				get(o, "rules").([]any)[0].(obj)["resourceNames"] = []any{"my-webhook-tls"}
			}
		}
	}
	certs := kustomized(t, certManagerDir)
	for _, o := range certs {
		if o["kind"] == "Certificate" {
			o["spec"].(obj)["secretName"] = "my-webhook-tls"
		}
	}
	sameObjects(t, objs, append(kust, certs...))
}

// TestValues: each value changes what it says, and only there.
func TestValues(t *testing.T) {
	dep := func(objs []obj) obj { return theOne(t, objs, "Deployment") }
	imageIn := func(ns, kind, name string) func(objs []obj) any {
		return func(objs []obj) any {
			c := containerIn(t, objs, ns, kind, name)
			return c["image"].(string) + " " + c["imagePullPolicy"].(string)
		}
	}
	image := func(kind, name string) func(objs []obj) any { return imageIn(namespace, kind, name) }
	limitIn := func(ns, kind, name string) func(objs []obj) any {
		return func(objs []obj) any {
			return get(containerIn(t, objs, ns, kind, name), "resources", "limits", "memory")
		}
	}
	limit := func(kind, name string) func(objs []obj) any { return limitIn(namespace, kind, name) }
	flagOf := func(kind, name, f string) func(objs []obj) any {
		return func(objs []obj) any { return flagValue(container(t, objs, kind, name), f) }
	}
	selectors := func(objs []obj) any {
		var out []any
		for _, o := range objs {
			if strings.HasSuffix(o["kind"].(string), "WebhookConfiguration") {
				for _, w := range o["webhooks"].([]any) {
					expr := get(w, "namespaceSelector", "matchExpressions").([]any)[0]
					out = append(out, get(expr, "values"))
				}
			}
		}
		return out
	}
	ignored := []any{"a", "b", namespace}
	defaultIDs := ids(render(t))
	for _, c := range []struct {
		name string
		set  []string
		got  func([]obj) any
		want any
	}{
		{"replicas", []string{"manager.replicas=3"}, func(o []obj) any { return get(dep(o), "spec", "replicas") }, 3},
		{"capture mode", []string{"agent.captureMode=all"}, flagOf("DaemonSet", "agent", "--capture-mode"), "all"},
		{"mesh DNS", []string{"agent.meshDNS=false"}, flagOf("DaemonSet", "agent", "--mesh-dns"), "false"},
		{"identity gate", []string{"identityGate.enabled=false"}, flagOf("Deployment", "manager", "--identity-gate"), "false"},
		{"manager image", []string{"manager.image.repository=r.example/op", "manager.image.tag=v9", "manager.image.pullPolicy=Always"},
			image("Deployment", "manager"), "r.example/op:v9 Always"},
		{"manager image: the identity containers the webhook injects", []string{"manager.image.repository=r.example/op", "manager.image.tag=v9"},
			flagOf("Deployment", "manager", "--identity-image"), "r.example/op:v9"},
		{"agent image: the agent", []string{"agent.image.repository=r.example/ag", "agent.image.tag=v8", "agent.image.pullPolicy=Never"},
			image("DaemonSet", "agent"), "r.example/ag:v8 Never"},
		{"agent image: install-cni", []string{"agent.image.repository=r.example/ag", "agent.image.tag=v8", "agent.image.pullPolicy=Never"},
			image("DaemonSet", "install-cni"), "r.example/ag:v8 Never"},
		{"envoy image", []string{"envoy.image.repository=r.example/envoy", "envoy.image.tag=v1.40.1", "envoy.image.pullPolicy=Always"},
			image("DaemonSet", "envoy"), "r.example/envoy:v1.40.1 Always"},
		{"agent image: not the node Envoy's, which an agent upgrade leaves running", []string{"agent.image.repository=r.example/ag", "agent.image.tag=v8"},
			image("DaemonSet", "envoy-helper"), "docker.io/aether/operator:dev IfNotPresent"},
		{"envoy helper image", []string{"envoy.helper.image.repository=r.example/ag", "envoy.helper.image.tag=v8", "envoy.helper.image.pullPolicy=Never"},
			image("DaemonSet", "envoy-helper"), "r.example/ag:v8 Never"},
		{"envoy helper image: install-seccomp", []string{"envoy.helper.image.repository=r.example/ag", "envoy.helper.image.tag=v8", "envoy.helper.image.pullPolicy=Never"},
			image("DaemonSet", "install-seccomp"), "r.example/ag:v8 Never"},
		{"Envoy's seccomp profile directory", []string{"envoy.seccompProfileDir=/data/kubelet/seccomp/aether"}, func(o []obj) any {
			var paths []any
			for _, ds := range o {
				if ds["kind"] != "DaemonSet" {
					continue
				}
				for _, v := range get(ds, "spec", "template", "spec", "volumes").([]any) {
					if v.(obj)["name"] == "seccomp" {
						paths = append(paths, get(ds, "metadata", "name"), get(v, "hostPath", "path"))
					}
				}
			}
			return paths
		}, []any{release + "-envoy", "/data/kubelet/seccomp/aether"}},
		{"manager resources", []string{"manager.resources.limits.memory=1Gi"}, limit("Deployment", "manager"), "1Gi"},
		{"agent resources", []string{"agent.resources.limits.memory=2Gi"}, limit("DaemonSet", "agent"), "2Gi"},
		{"install-cni resources", []string{"agent.installCNI.resources.limits.memory=3Gi"}, limit("DaemonSet", "install-cni"), "3Gi"},
		{"envoy resources", []string{"envoy.resources.limits.memory=4Gi"}, limit("DaemonSet", "envoy"), "4Gi"},
		{"manager image: the registrar", []string{"manager.image.repository=r.example/op", "manager.image.tag=v9", "manager.image.pullPolicy=Always"},
			imageIn(spireNamespace, "StatefulSet", "registrar"), "r.example/op:v9 Always"},
		{"spire server image", []string{"spire.server.image.repository=r.example/ss", "spire.server.image.tag=v1.13.4", "spire.server.image.pullPolicy=Always"},
			imageIn(spireNamespace, "StatefulSet", "spire-server"), "r.example/ss:v1.13.4 Always"},
		{"spire agent image", []string{"spire.agent.image.repository=r.example/sa", "spire.agent.image.tag=v1.13.5", "spire.agent.image.pullPolicy=Never"},
			imageIn(spireNamespace, "DaemonSet", "spire-agent"), "r.example/sa:v1.13.5 Never"},
		{"spire server resources", []string{"spire.server.resources.limits.memory=5Gi"}, limitIn(spireNamespace, "StatefulSet", "spire-server"), "5Gi"},
		{"spire agent resources", []string{"spire.agent.resources.limits.memory=6Gi"}, limitIn(spireNamespace, "DaemonSet", "spire-agent"), "6Gi"},
		{"registrar resources", []string{"spire.registrar.resources.limits.memory=7Gi"}, limitIn(spireNamespace, "StatefulSet", "registrar"), "7Gi"},
		{"ignored namespaces: the manager", []string{"ignoredNamespaces={a,b}"}, flagOf("Deployment", "manager", "--ignored-namespaces"), "a,b," + namespace},
		{"ignored namespaces: the agent", []string{"ignoredNamespaces={a,b}"}, flagOf("DaemonSet", "agent", "--ignored-namespaces"), "a,b," + namespace},
		{"ignored namespaces: install-cni", []string{"ignoredNamespaces={a,b}"}, flagOf("DaemonSet", "install-cni", "--ignored-namespaces"), "a,b," + namespace},
		{"ignored namespaces: the webhooks", []string{"ignoredNamespaces={a,b}"}, selectors, []any{ignored, ignored, ignored, ignored}},
		{"certificate's Secret", []string{"certManager.enabled=true", "webhook.certSecretName=tls-x"}, func(o []obj) any {
			return get(theOne(t, o, "Certificate"), "spec", "secretName")
		}, "tls-x"},
		{"rotated certificate's Secret", []string{"webhook.certSecretName=tls-x"}, func(o []obj) any {
			var role obj
			for _, r := range o {
				if r["kind"] == "Role" && field(r, "metadata", "name") == release+"-webhook-cert-role" {
					role = r
				}
			}
			return []any{flagValue(container(t, o, "Deployment", "manager"), "--cert-rotation-secret"), get(role, "rules").([]any)[0].(obj)["resourceNames"],
				field(theOne(t, o, "Secret"), "metadata", "name")}
		}, []any{"tls-x", []any{"tls-x"}, "tls-x"}},
		{"CNI directories", []string{"agent.cni.binDir=/x/bin", "agent.cni.confDir=/x/net.d"}, func(o []obj) any {
			var paths []any
			for _, v := range get(theOne(t, o, "DaemonSet"), "spec", "template", "spec", "volumes").([]any) {
				if name := v.(obj)["name"]; name == "cni-bin" || name == "cni-conf" {
					paths = append(paths, get(v, "hostPath", "path"))
				}
			}
			return paths
		}, []any{"/x/bin", "/x/net.d"}},
		{"no CRDs", []string{"crd.enabled=false"}, func(o []obj) any {
			return slices.ContainsFunc(o, func(x obj) bool { return x["kind"] == "CustomResourceDefinition" })
		}, false},
		{"fullnameOverride", []string{"fullnameOverride=mesh"}, func(o []obj) any { return get(dep(o), "metadata", "name") },
			"mesh-controller-manager"},
		{"nameOverride", []string{"nameOverride=mesh"}, func(o []obj) any { return get(dep(o), "metadata", "name") },
			"aether-operator-mesh-controller-manager"},
		{"CRDs not kept", []string{"crd.keep=false"}, func(o []obj) any {
			return slices.ContainsFunc(o, func(x obj) bool { return get(x, "metadata", "annotations", "helm.sh/resource-policy") != nil })
		}, false},
		{"CRDs kept", nil, func(o []obj) any {
			return get(o[slices.IndexFunc(o, func(x obj) bool { return x["kind"] == "CustomResourceDefinition" })], "metadata", "annotations", "helm.sh/resource-policy")
		}, "keep"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var set []string
			for _, s := range c.set {
				set = append(set, "--set", s)
			}
			objs := render(t, set...)
			if got := c.got(objs); !cmp.Equal(got, c.want) {
				t.Errorf("--set %v: got %v, want %v", c.set, got, c.want)
			}
			// Everything else stays as with the defaults (each value changes its fields only):
			// the same objects.
			renamesOrDrops := slices.Contains([]string{"no CRDs", "fullnameOverride", "nameOverride", "certificate's Secret", "rotated certificate's Secret"}, c.name)
			if d := cmp.Diff(defaultIDs, ids(objs)); d != "" && !renamesOrDrops {
				t.Errorf("--set %v changed the set of objects:\n%s", c.set, d)
			}
		})
	}
}

// TestNamesFollowTheRelease: another release name renames every object and every reference to
// one (the agent's identity in the admission policy, the webhook's Service and certificate).
func TestNamesFollowTheRelease(t *testing.T) {
	out, err := exec.Command(helm, "template", "mesh", chart, "--namespace", "mesh-system", "--set", "certManager.enabled=true").Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	text := string(out)
	// What may still say aether-operator-: the chart's label (its name and version) and the
	// names, which are mesh-aether-operator-<object>.
	rest := strings.NewReplacer("helm.sh/chart: "+release+"-", "", "mesh-"+release+"-", "").Replace(text)
	if strings.Contains(rest, release+"-") || strings.Contains(rest, namespace) {
		t.Errorf("release mesh in mesh-system still names %s- or %s:\n%s", release, namespace, grepLines(rest, release+"-", namespace))
	}
	for _, want := range []string{
		`request.userInfo.username == 'system:serviceaccount:' + 'mesh-system' + ':' + 'mesh-aether-operator-agent'`,
		"name: mesh-aether-operator-controller-manager",
		"- mesh-aether-operator-webhook-service.mesh-system.svc",
		"cert-manager.io/inject-ca-from: mesh-system/mesh-aether-operator-serving-cert",
		"name: mesh-aether-operator-selfsigned-issuer",
		"policyName: mesh-aether-operator-aether-agent-node-authority",
		"--cert-rotation-service=mesh-aether-operator-webhook-service",
		"--cert-rotation-validating-webhooks=mesh-aether-operator-validating-webhook-configuration",
		"- mesh-aether-operator-mutating-webhook-configuration", // manager-role's update, by name
		"secretName: mesh-aether-operator-webhook-server-cert",  // the Certificate's and the manager's volume
		"--cert-rotation-secret=mesh-aether-operator-webhook-server-cert",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("release mesh in mesh-system: no %q in helm template's output", want)
		}
	}
}

func grepLines(text string, subs ...string) string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(l, s) }) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestBadValues: a value the chart cannot use fails helm template with a message naming it and
// the fix.
func TestBadValues(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"agent.captureMode=everything"}, `agent.captureMode: "everything" is not a capture mode; set one of scoped, surface, all`},
		{[]string{"envoy.seccompProfileDir=/data/kubelet/seccomp"}, `envoy.seccompProfileDir: "/data/kubelet/seccomp" is not <the kubelet's root dir>/seccomp/aether, where the kubelet finds Envoy's Localhost profile aether/envoy.json; set it to an absolute path ending in /seccomp/aether, such as /var/lib/kubelet/seccomp/aether`},
		{[]string{"envoy.seccompProfileDir=seccomp/aether"}, `envoy.seccompProfileDir: "seccomp/aether" is not <the kubelet's root dir>/seccomp/aether`},
		{[]string{"meshDomain=Aether.Internal"}, `meshDomain: "Aether.Internal" is not a DNS domain in lower case (letters, digits, '-' and '.', at most 253 characters); it names the services and is the SPIFFE trust domain: set one such as aether.internal`},
		// Without SPIRE, the manager's and the agent's --mesh-domain still take it.
		{[]string{"spire.enabled=false", "meshDomain=mesh_"}, `meshDomain: "mesh_" is not a DNS domain in lower case`},
		{[]string{"spire.trustDomain=corp.example"}, `spire.trustDomain: "corp.example" is not meshDomain "aether.internal"; the mesh's domain is its SPIFFE trust domain: set meshDomain: corp.example and leave spire.trustDomain empty`},
		{[]string{"spire.namespace=" + namespace}, `spire.namespace: "aether-operator-system" is the release's namespace; with spire.install the chart creates SPIRE's namespace, apart from the operator's: set another, such as spire-system (or spire.install=false to run your own SPIRE)`},
		{[]string{"spire.namespace=Spire"}, `spire.namespace: "Spire" is not a namespace name (lower-case letters, digits and '-', at most 63 characters): set one such as spire-system`},
		{[]string{"spire.clusterName=a:b"}, `spire.clusterName: "a:b" is not a cluster name for SPIRE's k8s_psat (letters, digits, '-', '_' and '.', starting and ending with a letter or digit): set one such as aether`},
	} {
		var args []string
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		_, err := helmTemplate(args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %v: error %v, want one containing %q", c.set, err, c.want)
		}
	}
}

// TestLint: helm lint --strict passes the chart, with its defaults and with each part off.
func TestLint(t *testing.T) {
	for _, values := range [][]string{
		nil,
		{"spire.enabled=false"},
		{"spire.install=false"},
		{"envoy.enabled=false"},
		{"certManager.enabled=true"},
		{"manager.logLevel=debug", "agent.nodeSelector.disk=ssd", "envoy.podLabels.team=mesh", "envoy.extraArgs={--concurrency,2}"},
	} {
		args := append([]string{"lint", "--strict", chart}, sets(values...)...)
		if out, err := exec.Command(helm, args...).CombinedOutput(); err != nil {
			t.Errorf("helm %v: %v\n%s", args, err, out)
		}
	}
}

// TestVerifyReportsHandEdits is the negative control of make verify-chart: a chart that matches
// passes; one with a hand-edited template, a file removed or a file added fails, naming each.
func TestVerifyReportsHandEdits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "chart")
	if err := run(root, dir, ""); err != nil {
		t.Fatal(err)
	}
	if err := run(root, "", dir); err != nil {
		t.Fatalf("a freshly generated chart fails verification: %v", err)
	}
	manager := filepath.Join(dir, "templates", "manager", "controller-manager-deployment.yaml")
	data, err := os.ReadFile(manager)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "replicas: {{ .Values.manager.replicas }}", "replicas: 3", 1)
	if edited == string(data) {
		t.Fatal("the manager's template has no templated replicas to edit")
	}
	if err := os.WriteFile(manager, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	// SPIRE's agent configuration, with the delegate's namespace written in.
	spireAgent := filepath.Join(dir, "templates", "spire", "spire-agent-config-map.yaml")
	data, err = os.ReadFile(spireAgent)
	if err != nil {
		t.Fatal(err)
	}
	edited = strings.Replace(string(data), "/ns/{{ .Release.Namespace }}/", "/ns/aether-operator-system/", 1)
	if edited == string(data) {
		t.Fatal("SPIRE's agent configuration has no templated delegate namespace to edit")
	}
	if err := os.WriteFile(spireAgent, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "templates", "NOTES.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "extra.yaml"), []byte("kind: ConfigMap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = run(root, "", dir)
	if err == nil {
		t.Fatal("verification passed a hand-edited chart")
	}
	t.Logf("the failure it produces:\n%v", err)
	for _, want := range []string{
		"is not what config/ generates; run make chart",
		"--- " + manager,
		"-  replicas: 3",
		"+  replicas: {{ .Values.manager.replicas }}",
		"--- " + spireAgent,
		"/ns/aether-operator-system/sa/",
		filepath.Join(dir, "templates", "NOTES.txt") + ": missing (generated from config/)",
		filepath.Join(dir, "templates", "extra.yaml") + ": not generated from config/ (delete it)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the verification's error lacks %q", want)
		}
	}
}

// TestConfigDriftFailsGeneration: where config/ and the binaries' defaults disagree (the
// webhooks' namespaces against --ignored-namespaces' default), generation fails naming both,
// rather than template one of them.
func TestConfigDriftFailsGeneration(t *testing.T) {
	tmp := t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join(root, "config"), tmp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	hook := filepath.Join(tmp, "config", "webhook", "validating.yaml")
	data, err := os.ReadFile(hook)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "values: [kube-system, kube-public,", "values: [kube-system,", 1)
	if edited == string(data) {
		t.Fatal("config/webhook/validating.yaml lists no namespaces to edit")
	}
	if err := os.WriteFile(hook, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = generate(tmp)
	want := "its namespaceSelector excludes [kube-system kube-node-lease aether-operator-system], the manager's and agent's --ignored-namespaces default"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("generate with a drifted config/webhook: error %v, want one containing %q", err, want)
	}
}

// TestMergeRefusesRewrites: the merge of config/base and config/default templates additions and
// removals, and a flag's changed value; any other scalar the component rewrites is an error
// naming where, not a silent pick.
func TestMergeRefusesRewrites(t *testing.T) {
	parse := func(s string) *yaml.Node {
		docs, err := decodeAll([]byte(s))
		if err != nil || len(docs) != 1 {
			t.Fatalf("parse %q: %v", s, err)
		}
		return docs[0]
	}
	tm := newTemplater()
	off := parse("spec:\n  replicas: 1\n  args: [a, b]\n")
	merged, err := tm.merge("Deployment x", off, parse("spec:\n  replicas: 1\n  args: [a, c, b]\n  extra: true\n"), ".Values.on")
	if err != nil {
		t.Fatal(err)
	}
	text, err := tm.render(merged)
	if err != nil {
		t.Fatal(err)
	}
	want := "spec:\n  args:\n    - a\n    {{- if .Values.on }}\n    - c\n    {{- end }}\n    - b\n  {{- if .Values.on }}\n  extra: true\n  {{- end }}\n  replicas: 1\n"
	if text != want {
		t.Errorf("merged:\n%s\nwant:\n%s", text, want)
	}
	_, err = tm.merge("Deployment x", off, parse("spec:\n  replicas: 2\n  args: [a, b]\n"), ".Values.on")
	if err == nil || !strings.Contains(err.Error(), `Deployment x.spec.replicas is "1" without and "2" with the condition .Values.on`) {
		t.Errorf("merging a rewritten replicas: error %v, want one naming Deployment x.spec.replicas", err)
	}
	// A flag whose value the component changes (config/spire's --identity-issuer) is one item,
	// its value chosen by the condition; an argument that is no flag is still refused.
	flags := parse("args: [--a=1, --issuer=none, --b]\n")
	merged, err = tm.merge("Deployment x", flags, parse("args: [--a=1, --issuer=spire, --b]\n"), ".Values.on")
	if err != nil {
		t.Fatal(err)
	}
	if text, err = tm.render(merged); err != nil {
		t.Fatal(err)
	}
	if want := "args:\n  - --a=1\n  - --issuer={{ if .Values.on }}spire{{ else }}none{{ end }}\n  - --b\n"; text != want {
		t.Errorf("merged flags:\n%s\nwant:\n%s", text, want)
	}
	_, err = tm.merge("Deployment x", parse("spec:\n  image: x\n"), parse("spec:\n  image: y\n"), ".Values.on")
	if err == nil || !strings.Contains(err.Error(), `Deployment x.spec.image is "x" without and "y" with the condition .Values.on`) {
		t.Errorf("merging a rewritten image: error %v, want one naming Deployment x.spec.image", err)
	}
}
