// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aether-mesh/aether-operator/internal/registration"
)

// What the chart's values reach in the objects. A name here that config/ no longer has fails
// the generation, naming it.
const (
	managerContainer      = "spec.template.spec.containers[name=manager]"
	agentContainer        = "spec.template.spec.containers[name=agent]"
	installCNIContainer   = "spec.template.spec.initContainers[name=install-cni]"
	envoyContainer        = "spec.template.spec.containers[name=envoy]"
	envoyHelperContainer  = "spec.template.spec.containers[name=envoy-helper]"
	envoySeccompContainer = "spec.template.spec.initContainers[name=install-seccomp]"
	csiContainer          = "spec.template.spec.containers[name=csi-node]"
	// webhookCertVolume is the manager's volume of the webhook's serving certificate.
	webhookCertVolume = "spec.template.spec.volumes[name=webhook-certs].secret.secretName"
	// cniBinVolume and cniConfVolume are the node's CNI directories, mounted into the agent.
	cniBinVolume  = "spec.template.spec.volumes[name=cni-bin].hostPath.path"
	cniConfVolume = "spec.template.spec.volumes[name=cni-conf].hostPath.path"
	// seccompVolume is the kubelet's directory of Localhost seccomp profiles (its aether
	// subdirectory), where the node Envoy's init container writes Envoy's profile.
	seccompVolume = "spec.template.spec.volumes[name=seccomp].hostPath.path"
	// namespaceSelector is a pod webhook's exclusion of the ignored namespaces.
	namespaceSelector = "namespaceSelector.matchExpressions[key=kubernetes.io/metadata.name].values"
	// injectCAFrom is cert-manager's annotation asking it to inject the Certificate's CA.
	injectCAFrom = "cert-manager.io/inject-ca-from"
)

// identityIssuer is the manager's and the agent's --identity-issuer.
const identityIssuer = "{{ if .Values.spire.enabled }}spire{{ else }}none{{ end }}"

// An image is a container's image, as the chart's image values spell it.
type image struct{ Repository, Tag string }

// templateValues replaces what the values set by templates, reading each default first: the
// table's rows, then what stays code (SPIRE's words and the registrar's flags, the webhooks),
// then the rows that append to a container's args, which go last.
func (g *generator) templateValues(objs []chartObject) error {
	g.defaults = map[string]valueDefault{}
	dep, err := only(objs, "Deployment")
	if err != nil {
		return err
	}
	ds, err := named(objs, kindDaemonSet, g.b.prefix+agentDaemonSet)
	if err != nil {
		return err
	}
	g.managerName, g.agentName = strings.TrimPrefix(dep.name, g.b.prefix), strings.TrimPrefix(ds.name, g.b.prefix)
	if err := g.applyRows(objs, appends, true); err != nil {
		return err
	}
	var spire []chartObject
	for _, o := range objs {
		if o.part == spirePart {
			spire = append(spire, o)
		}
	}
	if err := g.spire(dep, ds, spire); err != nil {
		return err
	}
	for _, o := range objs {
		if strings.HasSuffix(o.kind, "WebhookConfiguration") {
			if err := g.webhook(o); err != nil {
				return err
			}
		}
	}
	if err := g.applyRows(objs, appends, false); err != nil {
		return err
	}
	// Every object of a part that config/default does not deploy needs a row that turns it on.
	for _, o := range objs {
		if (o.part == certManagerPart || o.part == prometheusPart) && o.cond == "" {
			return fmt.Errorf("%s %s: no row of hack/chart's table turns it on (how: gate); add one", o.kind, o.name)
		}
	}
	return nil
}

// The DaemonSets the chart templates, by name without config/base's prefix: the node agent's
// (config/agent) and the node Envoy's (config/envoy, present with envoy.enabled only).
const (
	agentDaemonSet = "agent"
	envoyDaemonSet = "envoy"
)

// named is the one object of kind named name.
func named(objs []chartObject, kind, name string) (chartObject, error) {
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			return o, nil
		}
	}
	return chartObject{}, fmt.Errorf("the chart templates %s %s, which config/ does not hold; hack/chart's values.go must say which", kind, name)
}

// only is the one object of kind.
func only(objs []chartObject, kind string) (chartObject, error) {
	var found []chartObject
	for _, o := range objs {
		if o.kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		return chartObject{}, fmt.Errorf("the chart templates one %s (%d in config/); hack/chart's values.go must say which", kind, len(found))
	}
	return found[0], nil
}

// webhook makes a webhook configuration's CA cert-manager's (the annotation, under
// certManager.enabled; otherwise the manager's rotation injects its own), and its
// namespaceSelector the ignored namespaces.
func (g *generator) webhook(o chartObject) error {
	fail := func(err error) error { return fmt.Errorf("%s %s: %w", o.kind, o.name, err) }
	ann, err := find(o.node, "metadata.annotations")
	if err != nil {
		return fail(err)
	}
	i := keyIndex(ann, injectCAFrom)
	if i < 0 {
		return fail(fmt.Errorf("no annotation %s: with certManager.enabled the chart has cert-manager inject the CA through it", injectCAFrom))
	}
	// The annotation alone, or the whole annotations when it is the only one (not an empty
	// annotations: without cert-manager).
	m, at := ann, i
	if len(ann.Content) == 2 {
		m, at = lookup(o.node, "metadata"), keyIndex(lookup(o.node, "metadata"), "annotations")
	}
	m.Content = slices.Concat(m.Content[:at], g.t.wrapKeys(certManagerOn, m.Content[at:at+2]), m.Content[at+2:])
	hooks := lookup(o.node, "webhooks")
	if hooks == nil || len(hooks.Content) == 0 {
		return fail(fmt.Errorf("no webhooks"))
	}
	for _, h := range hooks.Content {
		cc := lookup(h, "clientConfig")
		if cc == nil {
			return fail(fmt.Errorf("webhook %s has no clientConfig", lookup(h, "name").Value))
		}
		values, err := find(h, namespaceSelector)
		if err != nil {
			return fail(err)
		}
		if err := g.ignoredNamespaces(o, values); err != nil {
			return fail(err)
		}
		*values = *g.t.block(`include "` + g.chartName + `.ignoredNamespaceList" $`)
	}
	return nil
}

// ignoredNamespaces checks a webhook's excluded namespaces against the binaries' default
// --ignored-namespaces, and sets the default of ignoredNamespaces: that list without the
// release's namespace, which the chart always adds.
func (g *generator) ignoredNamespaces(o chartObject, list *yaml.Node) error {
	var got []string
	for _, n := range list.Content {
		got = append(got, n.Value)
	}
	if !slices.Equal(got, registration.DefaultIgnoredNamespaces) {
		return fmt.Errorf("its namespaceSelector excludes %v, the manager's and agent's --ignored-namespaces default (internal/registration.DefaultIgnoredNamespaces) is %v: keep them in step",
			got, registration.DefaultIgnoredNamespaces)
	}
	if !slices.Contains(got, g.b.namespace) {
		return fmt.Errorf("its namespaceSelector does not exclude the operator's namespace %s", g.b.namespace)
	}
	dflt := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, ns := range got {
		if ns != g.b.namespace {
			dflt.Content = append(dflt.Content, str(ns))
		}
	}
	return g.setDefault(ignoredValue, dflt, o.kind+" "+o.name+" "+namespaceSelector)
}

// splitImage splits repository:tag.
func splitImage(ref string) (image, error) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") || strings.Contains(ref, "@") {
		return image{}, fmt.Errorf("image %q is not repository:tag, which the chart's image values spell", ref)
	}
	return image{Repository: ref[:i], Tag: ref[i+1:]}, nil
}

// isFlag matches an args item that gives the flag name (--name or --name=value).
func isFlag(name string) func(*yaml.Node) bool {
	return func(a *yaml.Node) bool { return a.Value == name || strings.HasPrefix(a.Value, name+"=") }
}

// flags sets, in the args of the container at path, each flag of flags (--name=template),
// replacing the flag's item when config/ already gives it.
func (g *generator) flags(o chartObject, path string, flags ...string) error {
	args, err := find(o.node, path+".args")
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.kind, o.name, err)
	}
	for _, f := range flags {
		name, text, _ := strings.Cut(f, "=")
		v := str(name + "=" + g.t.raw(text))
		i := slices.IndexFunc(args.Content, isFlag(name))
		if i >= 0 {
			args.Content[i] = v
		} else {
			args.Content = append(args.Content, v)
		}
	}
	return nil
}
