// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// The node agent's side of config/spire: its flag and its mount of the SPIRE agent's admin socket.
const (
	adminSocketFlag   = "--spire-admin-socket"
	adminSocket       = "/run/spire/admin-sockets/admin.sock"
	adminSocketVolume = "spire-admin-socket"
	adminSocketDir    = "/run/spire/admin-sockets"
)

// wantIdentityFlags checks the manager's and the node agent's --identity-issuer and --mesh-domain
// ("<unset>": the flag is absent).
func wantIdentityFlags(t *testing.T, objs []obj, issuer, domain string) {
	t.Helper()
	for _, w := range []struct{ kind, name string }{{"Deployment", "manager"}, {"DaemonSet", "agent"}} {
		cont := container(t, objs, w.kind, w.name)
		for flag, want := range map[string]string{"--identity-issuer": issuer, "--mesh-domain": domain} {
			if got := flagValue(cont, flag); got != want {
				t.Errorf("%s %s: %s=%s, want %s", w.kind, w.name, flag, got, want)
			}
		}
	}
}

func sets(values ...string) []string {
	var args []string
	for _, v := range values {
		args = append(args, "--set", v)
	}
	return args
}

// inBuild keeps the objects of objs whose kind/namespace/name is one of in's.
func inBuild(objs, in []obj) []obj {
	want := ids(in)
	return slices.DeleteFunc(slices.Clone(objs), func(o obj) bool { return !slices.Contains(want, id(o)) })
}

// adminSocketWiring says what the node agent's DaemonSet holds of config/spire's patches: its
// flag's value, and the host path of its volume and its mount in the agent container ("" for
// each that is absent).
func adminSocketWiring(t *testing.T, objs []obj) (flag, volume, mount string) {
	t.Helper()
	ds := theOne(t, objs, "DaemonSet")
	if v := flagValue(container(t, objs, "DaemonSet", "agent"), adminSocketFlag); v != "<unset>" {
		flag = v
	}
	for _, v := range get(ds, "spec", "template", "spec", "volumes").([]any) {
		if v.(obj)["name"] == adminSocketVolume {
			volume, _ = get(v, "hostPath", "path").(string)
		}
	}
	mounts, _ := container(t, objs, "DaemonSet", "agent")["volumeMounts"].([]any)
	for _, m := range mounts {
		if m.(obj)["name"] == adminSocketVolume {
			mount, _ = m.(obj)["mountPath"].(string)
		}
	}
	return flag, volume, mount
}

// inNamespace are the ids of the objects of objs in namespace ns, and of the Namespace ns.
func inNamespace(objs []obj, ns string) []string {
	var out []string
	for _, o := range objs {
		if field(o, "metadata", "namespace") == ns || (o["kind"] == "Namespace" && field(o, "metadata", "name") == ns) {
			out = append(out, id(o))
		}
	}
	return out
}

// TestSpireOff: spire.enabled=false renders exactly config/default (with envoy.enabled=false,
// config/base): nothing of SPIRE, no admin socket, --identity-issuer=none and no --mesh-domain,
// whatever spire.install says (it means nothing without spire.enabled).
func TestSpireOff(t *testing.T) {
	for _, c := range []struct {
		set []string
		dir string
	}{
		{[]string{"spire.enabled=false"}, defaultDir},
		{[]string{"spire.enabled=false", "spire.install=true"}, defaultDir},
		{[]string{"spire.enabled=false", "envoy.enabled=false"}, baseCSIDir},
	} {
		t.Run(strings.Join(c.set, ","), func(t *testing.T) {
			objs := render(t, sets(c.set...)...)
			sameObjects(t, objs, withoutCAInjection(withoutNamespaceObject(kustomized(t, c.dir))))
			wantIdentityFlags(t, objs, "none", "aether.internal") // meshDomain's default, with or without SPIRE
			if f, v, m := adminSocketWiring(t, objs); f != "" || v != "" || m != "" {
				t.Errorf("the node agent still has SPIRE's admin socket: flag %q, volume %q, mount %q", f, v, m)
			}
			if got := inNamespace(objs, spireNamespace); len(got) > 0 {
				t.Errorf("SPIRE's objects with spire.enabled=false: %v", got)
			}
		})
	}
}

// TestSpireInstallOff: spire.install=false renders config/default with config/spire's patches
// of the operator's objects only (the node agent's admin socket and flag), and none of SPIRE's
// own objects: a cluster with its own SPIRE.
func TestSpireInstallOff(t *testing.T) {
	for _, c := range []struct {
		set        []string
		dir, plain string
	}{
		{[]string{"spire.install=false"}, defaultSpireDir, defaultDir},
		{[]string{"spire.install=false", "envoy.enabled=false"}, baseSpireDir, baseCSIDir},
	} {
		t.Run(strings.Join(c.set, ","), func(t *testing.T) {
			objs := render(t, sets(c.set...)...)
			patched := inBuild(kustomized(t, c.dir), kustomized(t, c.plain))
			sameObjects(t, objs, withoutCAInjection(withoutNamespaceObject(patched)))
			if f, v, m := adminSocketWiring(t, objs); f != adminSocket || v != adminSocketDir || m != adminSocketDir {
				t.Errorf("the node agent's admin socket: flag %q, volume %q, mount %q; want %s, %s, %s", f, v, m, adminSocket, adminSocketDir, adminSocketDir)
			}
			wantIdentityFlags(t, objs, "spire", "aether.internal") // meshDomain's default
			if got := inNamespace(objs, spireNamespace); len(got) > 0 {
				t.Errorf("SPIRE's objects with spire.install=false: %v", got)
			}
		})
	}
	// The defaults hold the same patches, and SPIRE's objects (the positive control of the
	// checks above).
	objs := render(t)
	if f, v, m := adminSocketWiring(t, objs); f != adminSocket || v != adminSocketDir || m != adminSocketDir {
		t.Errorf("defaults: the node agent's admin socket: flag %q, volume %q, mount %q", f, v, m)
	}
	if got := inNamespace(objs, spireNamespace); !slices.Contains(got, "StatefulSet/"+spireNamespace+"/spire-server") {
		t.Errorf("defaults: SPIRE's objects %v lack its server", got)
	}
}

// TestSpireFollowsTheRelease: a release of another name in another namespace makes its node
// agent SPIRE's one authorized delegate (authorized_delegates) and the delegate the registrar
// registers (--spire-delegate-namespace, --spire-delegate-service-account); SPIRE stays in its
// own namespace.
func TestSpireFollowsTheRelease(t *testing.T) {
	const name, ns = "mesh", "mesh-system"
	out, err := helmTemplateAs(name, ns)
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeObjects(t, out)
	sa := field(theOneIn(t, objs, ns, "DaemonSet"), "spec", "template", "spec", "serviceAccountName")
	if sa != "mesh-aether-operator-agent" {
		t.Fatalf("the node agent runs as %q, want mesh-aether-operator-agent", sa)
	}
	var agentConf string
	for _, o := range objs {
		if o["kind"] == "ConfigMap" && field(o, "metadata", "namespace") == spireNamespace {
			if c := field(o, "data", "agent.conf"); c != "" {
				agentConf = c
			}
		}
	}
	delegates := regexp.MustCompile(`(?s)authorized_delegates = \[\s*(.*?)\s*\]`).FindStringSubmatch(agentConf)
	want := fmt.Sprintf(`"spiffe://aether.internal/ns/%s/sa/%s",`, ns, sa)
	if delegates == nil || delegates[1] != want {
		t.Errorf("the SPIRE agent's authorized_delegates hold %q, want %s alone", delegates, want)
	}
	registrar := containerIn(t, objs, spireNamespace, "StatefulSet", "registrar")
	for flag, want := range map[string]string{"--spire-delegate-namespace": ns, "--spire-delegate-service-account": sa} {
		if got := flagValue(registrar, flag); got != want {
			t.Errorf("the registrar's %s=%s, want %s", flag, got, want)
		}
	}
	if got := inNamespace(objs, ns); slices.ContainsFunc(got, func(i string) bool { return strings.Contains(i, "spire") }) {
		t.Errorf("SPIRE's objects in the release's namespace: %v", got)
	}
}

// TestSpireValues: spire.namespace, meshDomain and spire.clusterName change exactly what
// config/spire's namespace, trust domain (aether.internal) and k8s_psat cluster ("aether") are
// in the defaults, everywhere (objects' namespaces, references, SPIRE's configuration, the
// registrar's node selector and node agent path, the --mesh-domain flags), and nothing else.
func TestSpireValues(t *testing.T) {
	defaults, err := helmTemplate()
	if err != nil {
		t.Fatal(err)
	}
	changed, err := helmTemplate(sets("spire.namespace=ids-system", "meshDomain=example.org", "spire.clusterName=prod")...)
	if err != nil {
		t.Fatal(err)
	}
	// helm's "# Source: <template file>" lines name the files, whose names are config/'s.
	source := regexp.MustCompile(`(?m)^# Source: .*\n`)
	defaults, changed = source.ReplaceAll(defaults, nil), source.ReplaceAll(changed, nil)
	substitutions := []struct{ old, new string }{
		{spireNamespace, "ids-system"},
		{"aether.internal", "example.org"},
		{`"aether"`, `"prod"`},
		{"k8s_psat:cluster:aether", "k8s_psat:cluster:prod"},
		{"/spire/agent/k8s_psat/aether/", "/spire/agent/k8s_psat/prod/"},
	}
	text := string(defaults)
	for _, s := range substitutions {
		// Each occurs in the defaults (or the comparison below would prove nothing of it) and
		// nowhere with the values.
		if !strings.Contains(text, s.old) {
			t.Errorf("the defaults hold no %q", s.old)
		}
		if strings.Contains(string(changed), s.old) {
			t.Errorf("with the values, still %q:\n%s", s.old, grepLines(string(changed), s.old))
		}
		text = strings.ReplaceAll(text, s.old, s.new)
	}
	want, got := decodeObjects(t, []byte(text)), decodeObjects(t, changed)
	if d := cmp.Diff(ids(want), ids(got)); d != "" {
		t.Fatalf("objects (-defaults, substituted +values):\n%s", d)
	}
	byID := map[string]obj{}
	for _, o := range want {
		byID[id(o)] = o
	}
	for _, o := range got {
		if d := cmp.Diff(byID[id(o)], o); d != "" {
			t.Errorf("%s (-defaults, substituted +values):\n%s", id(o), d)
		}
	}
	for _, w := range []struct{ ns, kind, name string }{
		{namespace, "Deployment", "manager"}, {namespace, "DaemonSet", "agent"}, {"ids-system", "StatefulSet", "registrar"},
	} {
		if v := flagValue(containerIn(t, got, w.ns, w.kind, w.name), "--mesh-domain"); v != "example.org" {
			t.Errorf("%s %s: --mesh-domain=%s, want example.org", w.kind, w.name, v)
		}
	}
}

// TestSpireConfigDriftFailsGeneration: where config/spire's settings disagree with each other or
// with the binaries' defaults, generation fails naming them, rather than template one of them.
func TestSpireConfigDriftFailsGeneration(t *testing.T) {
	for _, c := range []struct {
		file, old, new, want string
	}{
		{"agent.yaml", `cluster = "aether"`, `cluster = "other"`,
			"config/spire: the k8s_psat cluster is named [aether other]; the server, the agent and the registrar's --spire-node-selectors and --spire-node-agent-path must name one cluster"},
		{"registrar.yaml", "/spire/agent/k8s_psat/aether/{node-uid}", "/spire/agent/k8s_psat/other/{node-uid}",
			"config/spire: the k8s_psat cluster is named [aether other]"},
		{"server.yaml", `trust_domain = "aether.internal"`, `trust_domain = "other.internal"`,
			`config/spire: trust_domain "other.internal", but the manager and the agent run with the mesh domain aether.internal`},
		{"registrar.yaml", "--spire-delegate-namespace=aether-operator-system", "--spire-delegate-namespace=elsewhere",
			`container registrar: --spire-delegate-namespace="elsewhere", not the node agent's namespace aether-operator-system`},
		{"registrar.yaml", "- --spire-registrar-only", "- --spire-registrar-only\n        - --spire-delegate-service-account=someone",
			"--spire-delegate-service-account is someone, but the node agent runs as aether-operator-agent"},
		{"agent.yaml", "namespace: spire-system", "namespace: elsewhere",
			"in namespace elsewhere; config/spire's objects must be in its Namespace spire-system"},
	} {
		t.Run(c.file+": "+c.new, func(t *testing.T) {
			tmp := t.TempDir()
			if out, err := exec.Command("cp", "-r", filepath.Join(root, "config"), tmp).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
			path := filepath.Join(tmp, "config", "spire", c.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(data), c.old, c.new, 1)
			if edited == string(data) {
				t.Fatalf("config/spire/%s holds no %q to edit", c.file, c.old)
			}
			if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = generate(tmp)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("generate: error %v, want one containing %q", err, c.want)
			}
			t.Logf("the failure it produces: %v", err)
		})
	}
}

// TestMergeTwice: a tree merged under one condition merges again under a second (config/spire's
// patches of what config/envoy already patched): the first condition's lines stay where they
// stand, the second's wrap what it adds; a key the second adds beside the first's is refused,
// naming where.
func TestMergeTwice(t *testing.T) {
	parse := func(s string) *yaml.Node {
		docs, err := decodeAll([]byte(s))
		if err != nil || len(docs) != 1 {
			t.Fatalf("parse %q: %v", s, err)
		}
		return docs[0]
	}
	tm := newTemplater()
	once := func(off, on string) *yaml.Node {
		n, err := tm.merge("DaemonSet x", parse(off), parse(on), ".Values.a")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Without b and with b, each merged under a: a adds the key extra and the item c.
	withoutB := once("spec:\n  args: [x]\n", "spec:\n  args: [x, c]\n  extra: true\n")
	withB := once("spec:\n  args: [x, d]\n", "spec:\n  args: [x, c, d]\n  extra: true\n")
	merged, err := tm.merge("DaemonSet x", withoutB, withB, ".Values.b")
	if err != nil {
		t.Fatal(err)
	}
	text, err := tm.render(merged)
	if err != nil {
		t.Fatal(err)
	}
	want := "spec:\n  args:\n    - x\n    {{- if .Values.a }}\n    - c\n    {{- end }}\n    {{- if .Values.b }}\n    - d\n    {{- end }}\n" +
		"  {{- if .Values.a }}\n  extra: true\n  {{- end }}\n"
	if text != want {
		t.Errorf("merged:\n%s\nwant:\n%s", text, want)
	}
	// b adds a key to the mapping a already templated.
	withB = once("spec:\n  args: [x]\n  more: 1\n", "spec:\n  args: [x, c]\n  extra: true\n  more: 1\n")
	_, err = tm.merge("DaemonSet x", withoutB, withB, ".Values.b")
	if err == nil || !strings.Contains(err.Error(), "DaemonSet x.spec has keys") || !strings.Contains(err.Error(), "in a mapping already templated by another condition") {
		t.Errorf("b adding a key beside a's: error %v, want one naming DaemonSet x.spec", err)
	}
}

// TestMeshDomain: meshDomain is the manager's and the agent's --mesh-domain, with SPIRE or
// without, and SPIRE's trust domain (its server's and agent's trust_domain, the registrar's
// --mesh-domain, the delegate's ID); spire.trustDomain may repeat it, and nothing else.
func TestMeshDomain(t *testing.T) {
	const domain = "corp.example"
	for _, set := range [][]string{{"meshDomain=" + domain}, {"meshDomain=" + domain, "spire.trustDomain=" + domain}, {"meshDomain=" + domain, "spire.enabled=false"}} {
		t.Run(strings.Join(set, ","), func(t *testing.T) {
			objs := render(t, sets(set...)...)
			issuer := "spire"
			if slices.Contains(set, "spire.enabled=false") {
				issuer = "none"
			}
			wantIdentityFlags(t, objs, issuer, domain)
			if issuer == "none" {
				return
			}
			if got := flagValue(containerIn(t, objs, spireNamespace, "StatefulSet", "registrar"), "--mesh-domain"); got != domain {
				t.Errorf("the registrar's --mesh-domain=%s, want %s", got, domain)
			}
			var confs int
			for _, o := range objs {
				if o["kind"] != "ConfigMap" || field(o, "metadata", "namespace") != spireNamespace {
					continue
				}
				for _, key := range []string{"server.conf", "agent.conf"} {
					if c := field(o, "data", key); c != "" {
						confs++
						if !strings.Contains(c, `trust_domain = "`+domain+`"`) || strings.Contains(c, "aether.internal") {
							t.Errorf("SPIRE's %s does not hold trust domain %s alone:\n%s", key, domain, c)
						}
					}
				}
			}
			if confs != 2 {
				t.Errorf("%d SPIRE configurations found, want the server's and the agent's", confs)
			}
		})
	}
}
