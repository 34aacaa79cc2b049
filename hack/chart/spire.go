// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/spireregistrar"
)

// What the spire values reach in config/spire's objects.
const (
	spireServerContainer = "spec.template.spec.containers[name=spire-server]"
	spireAgentContainer  = "spec.template.spec.containers[name=spire-agent]"
	registrarContainer   = "spec.template.spec.containers[name=registrar]"
)

// The places of SPIRE's configuration (its ConfigMaps' server.conf and agent.conf, and the
// registrar's flags) that name the trust domain and the k8s_psat cluster. Each must be found, and
// all must agree: the chart templates them from one value each.
var (
	trustDomainSetting = regexp.MustCompile(`trust_domain = "([^"]*)"`)
	// The agent's NodeAttestor k8s_psat: cluster = "<name>".
	agentCluster = regexp.MustCompile(`\bcluster = "([^"]*)"`)
	// The server's NodeAttestor k8s_psat: clusters = { "<name>" = { ... } }.
	serverCluster = regexp.MustCompile(`clusters = \{\s*"([^"]*)" = \{`)
	// The registrar's --spire-node-selectors, the node agents' alias: k8s_psat:cluster:<name>.
	clusterSelector = regexp.MustCompile(`k8s_psat:cluster:([^\s,"]*)`)
	// The registrar's --spire-node-agent-path, a node's agent ID: /spire/agent/k8s_psat/<name>/.
	agentPathCluster = regexp.MustCompile(`/spire/agent/k8s_psat/([^/\s"]*)/`)
)

// spireDefaults are the defaults of the spire values the code templates, read from config/spire
// (the table's rows template SPIRE's images and resources).
type spireDefaults struct {
	Namespace, TrustDomain, ClusterName string
}

// spire templates config/spire's objects (objs) from the spire values: their namespace, trust
// domain and cluster name (the table does their images and resources); the delegate the
// registrar registers is the node agent's (ds) ServiceAccount. The manager and the agent get
// --mesh-domain, meshDomain, whatever the issuer (SPIRE's trust domain must be the same).
func (g *generator) spire(dep, ds chartObject, objs []chartObject) error {
	server, err := only(objs, "StatefulSet")
	if err != nil {
		return fmt.Errorf("%s: %w", spireDir, err)
	}
	agent, err := only(objs, kindDaemonSet)
	if err != nil {
		return fmt.Errorf("%s: %w", spireDir, err)
	}
	g.spireServer, g.spireAgent = server.name, agent.name
	d := &g.spireValues
	d.Namespace = g.spireNamespace
	if d.TrustDomain, err = g.spireTrustDomain(objs); err != nil {
		return err
	}
	if d.ClusterName, err = spireClusterName(objs); err != nil {
		return err
	}
	td, cluster := g.helper("spireTrustDomain"), g.helper("spireClusterName")
	ns := g.helper("spireNamespace")
	for _, o := range objs {
		err := scalars(o.node, func(s *yaml.Node) error {
			v := replaceWord(s.Value, d.TrustDomain, g.t.raw(td))
			v = replaceWord(v, g.spireNamespace, g.t.raw(ns))
			v = strings.ReplaceAll(v, `"`+d.ClusterName+`"`, `"`+g.t.raw(cluster)+`"`)
			v = strings.ReplaceAll(v, "/spire/agent/k8s_psat/"+d.ClusterName+"/", "/spire/agent/k8s_psat/"+g.t.raw(cluster)+"/")
			s.Value = strings.ReplaceAll(v, "k8s_psat:cluster:"+d.ClusterName, "k8s_psat:cluster:"+g.t.raw(cluster))
			for _, left := range []string{d.TrustDomain, g.spireNamespace} {
				if strings.Contains(s.Value, left) {
					return fmt.Errorf("%q still holds %q inside a longer word, which the chart would not template: write it apart", s.Value, left)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.kind, o.name, err)
		}
	}
	if err := g.registrar(server, ds); err != nil {
		return err
	}
	for _, o := range []struct {
		obj  chartObject
		path string
	}{{dep, managerContainer}, {ds, agentContainer}} {
		if err := g.flags(o.obj, o.path, "--mesh-domain="+g.helper("meshDomain")); err != nil {
			return err
		}
	}
	return nil
}

// helper is the template text including the chart's helper name (with the root context).
func (g *generator) helper(name string) string {
	return `{{ include "` + g.chartName + `.` + name + `" $ }}`
}

// spireTrustDomain reads the trust domain of SPIRE's configuration, which must be the mesh's
// domain the binaries default to: config/ gives none of them --mesh-domain.
func (g *generator) spireTrustDomain(objs []chartObject) (string, error) {
	found := matches(objs, trustDomainSetting)
	if len(found) == 0 {
		return "", fmt.Errorf("%s: no trust_domain setting in its configuration, which spire.trustDomain templates", spireDir)
	}
	for _, td := range found {
		if td != resolve.DefaultMeshDomain {
			return "", fmt.Errorf("%s: trust_domain %q, but the manager and the agent run with the mesh domain %s (--mesh-domain's default, internal/resolve.DefaultMeshDomain): SPIRE's trust domain is the mesh's domain, make them one",
				spireDir, td, resolve.DefaultMeshDomain)
		}
	}
	return resolve.DefaultMeshDomain, nil
}

// spireClusterName reads the k8s_psat cluster's name, which the server's and the agent's
// NodeAttestor and the registrar's node selector and node agent path each name.
func spireClusterName(objs []chartObject) (string, error) {
	var names []string
	for _, p := range []struct {
		what    string
		pattern *regexp.Regexp
	}{
		{"the SPIRE agent's NodeAttestor k8s_psat (cluster = \"...\")", agentCluster},
		{"the SPIRE server's NodeAttestor k8s_psat (clusters = { \"...\" = {)", serverCluster},
		{"the registrar's --spire-node-selectors (k8s_psat:cluster:...)", clusterSelector},
		{"the registrar's --spire-node-agent-path (/spire/agent/k8s_psat/.../)", agentPathCluster},
	} {
		found := matches(objs, p.pattern)
		if len(found) == 0 {
			return "", fmt.Errorf("%s: no cluster name in %s, which spire.clusterName templates", spireDir, p.what)
		}
		names = append(names, found...)
	}
	slices.Sort(names)
	if names = slices.Compact(names); len(names) != 1 {
		return "", fmt.Errorf("%s: the k8s_psat cluster is named %v; the server, the agent and the registrar's --spire-node-selectors and --spire-node-agent-path must name one cluster", spireDir, names)
	}
	return names[0], nil
}

// matches are the first groups of pattern's matches in every scalar of objs.
func matches(objs []chartObject, pattern *regexp.Regexp) []string {
	var out []string
	for _, o := range objs {
		_ = scalars(o.node, func(s *yaml.Node) error {
			for _, m := range pattern.FindAllStringSubmatch(s.Value, -1) {
				out = append(out, m[1])
			}
			return nil
		})
	}
	return out
}

// registrar templates the flags of the manager's registrar, the SPIRE server's sidecar, that name
// what the release names (its image and resources are the table's rows): the
// trust domain (--mesh-domain) and the node agent's ServiceAccount, the delegate it registers.
// Its --spire-delegate-namespace, config/base's namespace, becomes the release's (rewriteNames).
func (g *generator) registrar(server, ds chartObject) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s %s: container registrar: "+format, append([]any{server.kind, server.name}, a...)...)
	}
	args, err := find(server.node, registrarContainer+".args")
	if err != nil {
		return fail("%w", err)
	}
	flag := func(name, dflt string) string {
		for _, a := range args.Content {
			if v, ok := strings.CutPrefix(a.Value, name+"="); ok {
				return v
			}
		}
		return dflt
	}
	if ns := flag("--spire-delegate-namespace", ""); ns != g.b.namespace {
		return fail("--spire-delegate-namespace=%q, not the node agent's namespace %s (config/base): the chart makes it the release's", ns, g.b.namespace)
	}
	sa, err := find(ds.node, "spec.template.spec.serviceAccountName")
	if err != nil {
		return fmt.Errorf("%s %s: %w", ds.kind, ds.name, err)
	}
	if got := flag("--spire-delegate-service-account", spireregistrar.DefaultDelegateServiceAccount); got != sa.Value {
		return fail("--spire-delegate-service-account is %s, but the node agent runs as %s: make them one", got, sa.Value)
	}
	if got := flag("--mesh-domain", resolve.DefaultMeshDomain); got != g.spireValues.TrustDomain {
		return fail("--mesh-domain is %s, SPIRE's trust domain %s: make them one", got, g.spireValues.TrustDomain)
	}
	return g.flags(server, registrarContainer,
		"--mesh-domain="+g.helper("spireTrustDomain"),
		"--spire-delegate-service-account="+g.resourceNameText(strings.TrimPrefix(sa.Value, g.b.prefix)))
}

// condFlags appends flags (--name=template), under the template condition cond, to the args of
// the container at path, which must not give them already.
func (g *generator) condFlags(o chartObject, path, cond string, flags ...string) error {
	args, err := find(o.node, path+".args")
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.kind, o.name, err)
	}
	var items []*yaml.Node
	for _, f := range flags {
		name, text, _ := strings.Cut(f, "=")
		if slices.ContainsFunc(args.Content, isFlag(name)) {
			return fmt.Errorf("%s %s: %s gives %s itself, which the chart sets under %s", o.kind, o.name, path, name, cond)
		}
		items = append(items, str(name+"="+g.t.raw(text)))
	}
	args.Content = append(args.Content, g.t.wrapItems(cond, items)...)
	return nil
}

// replaceWord replaces each occurrence of old in s that no letter, digit, '-' or '_' adjoins
// (spire-system in spire-server.spire-system.svc, not in my-spire-system) by repl.
func replaceWord(s, old, repl string) string {
	inWord := func(b byte) bool {
		return b == '-' || b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	var out strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			out.WriteString(s)
			return out.String()
		}
		end := i + len(old)
		if (i > 0 && inWord(s[i-1])) || (end < len(s) && inWord(s[end])) {
			out.WriteString(s[:end])
		} else {
			out.WriteString(s[:i] + repl)
		}
		s = s[end:]
	}
}
