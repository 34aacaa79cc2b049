// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/registration"
)

// What the chart's values reach in the objects. A name here that config/ no longer has fails
// the generation, naming it.
const (
	managerContainer     = "spec.template.spec.containers[name=manager]"
	agentContainer       = "spec.template.spec.containers[name=agent]"
	installCNIContainer  = "spec.template.spec.initContainers[name=install-cni]"
	envoyContainer       = "spec.template.spec.containers[name=envoy]"
	envoyHelperContainer = "spec.template.spec.containers[name=envoy-helper]"
	// webhookCertVolume is the manager's volume of the webhook's serving certificate.
	webhookCertVolume = "spec.template.spec.volumes[name=webhook-certs].secret.secretName"
	// cniBinVolume and cniConfVolume are the node's CNI directories, mounted into the agent.
	cniBinVolume  = "spec.template.spec.volumes[name=cni-bin].hostPath.path"
	cniConfVolume = "spec.template.spec.volumes[name=cni-conf].hostPath.path"
	// namespaceSelector is a pod webhook's exclusion of the ignored namespaces.
	namespaceSelector = "namespaceSelector.matchExpressions[key=kubernetes.io/metadata.name].values"
	// injectCAFrom is cert-manager's annotation asking it to inject the Certificate's CA.
	injectCAFrom = "cert-manager.io/inject-ca-from"
)

// identityIssuer is the manager's and the agent's --identity-issuer.
const identityIssuer = "{{ if .Values.spire.enabled }}spire{{ else }}none{{ end }}"

// An image is the default of a values' image block.
type image struct{ Repository, Tag, PullPolicy string }

// defaults are the defaults of values.yaml, each read from config/ (or, for what config/ leaves
// to a binary's flag default, from the Go constant the flag defaults to).
type defaults struct {
	Replicas                                                        string
	ManagerImage, AgentImage, EnvoyImage, EnvoyHelperImage          image
	ManagerResources, AgentResources, InstallCNIResources, EnvoyRes string
	EnvoyHelperRes                                                  string
	CaptureMode                                                     string
	MeshDNS                                                         bool
	CNIBinDir, CNIConfDir                                           string
	IgnoredNamespaces                                               []string
	CertSecretName                                                  string
	Spire                                                           spireDefaults
}

// templateValues replaces what the values set by templates, reading each default first.
func (g *generator) templateValues(all []chartObject) error {
	var objs, spire []chartObject
	for _, o := range all {
		if o.spire {
			spire = append(spire, o)
		} else {
			objs = append(objs, o)
		}
	}
	dep, err := only(objs, "Deployment")
	if err != nil {
		return err
	}
	ds, err := named(objs, "DaemonSet", g.b.prefix+agentDaemonSet)
	if err != nil {
		return err
	}
	g.managerName, g.agentName = strings.TrimPrefix(dep.name, g.b.prefix), strings.TrimPrefix(ds.name, g.b.prefix)
	steps := []func() error{
		func() error { return g.manager(dep) },
		func() error { return g.agent(ds) },
		func() error { return g.envoy(objs) },
		func() error { return g.certificate(objs) },
		// After the manager and the agent: the registrar runs the manager's image, and names the
		// agent's ServiceAccount.
		func() error { return g.spire(dep, ds, spire) },
	}
	for _, o := range objs {
		if strings.HasSuffix(o.kind, "WebhookConfiguration") {
			steps = append(steps, func() error { return g.webhook(o) })
		}
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
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

func (g *generator) manager(dep chartObject) error {
	replicas, err := find(dep.node, "spec.replicas")
	if err != nil {
		return fmt.Errorf("%s %s: %w", dep.kind, dep.name, err)
	}
	g.values.Replicas = replicas.Value
	set(lookup(dep.node, "spec"), "replicas", g.t.value(".Values.manager.replicas"))
	c, err := g.container(dep, managerContainer, "manager", "manager.resources")
	if err != nil {
		return err
	}
	g.values.ManagerImage, g.values.ManagerResources = c.image, c.resources
	// The pod webhook injects the identity containers from the manager's own image: one value.
	identityImage := "{{ .Values.manager.image.repository }}:{{ .Values.manager.image.tag }}"
	if err := g.flags(dep, managerContainer, "--identity-issuer="+identityIssuer, "--ignored-namespaces="+g.ignoredFlag(),
		"--identity-image="+identityImage); err != nil {
		return err
	}
	secret, err := find(dep.node, webhookCertVolume)
	if err != nil {
		return fmt.Errorf("%s %s: %w", dep.kind, dep.name, err)
	}
	g.values.CertSecretName = secret.Value
	*secret = *g.t.value(".Values.webhook.certSecretName")
	return nil
}

func (g *generator) agent(ds chartObject) error {
	agent, err := g.container(ds, agentContainer, "agent", "agent.resources")
	if err != nil {
		return err
	}
	g.values.AgentImage, g.values.AgentResources = agent.image, agent.resources
	// install-cni runs the agent's binary: the agent's image, whatever config/ would let differ.
	install, err := g.container(ds, installCNIContainer, "agent", "agent.installCNI.resources")
	if err != nil {
		return err
	}
	if install.image != agent.image {
		return fmt.Errorf("%s %s: install-cni's image %+v is not the agent's %+v; the chart gives both agent.image", ds.kind, ds.name, install.image, agent.image)
	}
	g.values.InstallCNIResources = install.resources
	g.values.CaptureMode = string(model.CaptureSurface)
	g.values.MeshDNS = true // cmd/agent's --mesh-dns default
	if err := g.flags(ds, agentContainer, "--identity-issuer="+identityIssuer, "--ignored-namespaces="+g.ignoredFlag(),
		`--capture-mode={{ include "`+g.chartName+`.captureMode" $ }}`,
		`--mesh-dns={{ if .Values.agent.meshDNS }}true{{ else }}false{{ end }}`); err != nil {
		return err
	}
	if err := g.flags(ds, installCNIContainer, "--ignored-namespaces="+g.ignoredFlag()); err != nil {
		return err
	}
	for _, v := range []struct {
		path, value string
		dflt        *string
	}{{cniBinVolume, "agent.cni.binDir", &g.values.CNIBinDir}, {cniConfVolume, "agent.cni.confDir", &g.values.CNIConfDir}} {
		n, err := find(ds.node, v.path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", ds.kind, ds.name, err)
		}
		*v.dflt = n.Value
		*n = *g.t.value(".Values." + v.value)
	}
	return nil
}

// envoy templates the node Envoy's DaemonSet (config/envoy): Envoy's image and resources, and its
// helper's. The helper runs the agent's binary, but from a value of its own (envoy.helper.image),
// so that an agent upgrade (agent.image) leaves the node's Envoy running.
func (g *generator) envoy(objs []chartObject) error {
	ds, err := named(objs, "DaemonSet", g.b.prefix+envoyDaemonSet)
	if err != nil {
		return err
	}
	envoy, err := g.container(ds, envoyContainer, "envoy", "envoy.resources")
	if err != nil {
		return err
	}
	g.values.EnvoyImage, g.values.EnvoyRes = envoy.image, envoy.resources
	helper, err := g.container(ds, envoyHelperContainer, "envoy.helper", "envoy.helper.resources")
	if err != nil {
		return err
	}
	g.values.EnvoyHelperImage, g.values.EnvoyHelperRes = helper.image, helper.resources
	return nil
}

func (g *generator) ignoredFlag() string {
	return `{{ include "` + g.chartName + `.ignoredNamespaces" $ }}`
}

// certificate gives cert-manager's Certificate the Secret webhook.certSecretName.
func (g *generator) certificate(objs []chartObject) error {
	cert, err := only(objs, "Certificate")
	if err != nil {
		return err
	}
	secret, err := find(cert.node, "spec.secretName")
	if err != nil {
		return fmt.Errorf("%s %s: %w", cert.kind, cert.name, err)
	}
	if secret.Value != g.values.CertSecretName {
		return fmt.Errorf("%s %s writes Secret %s, but the manager mounts %s: make them one", cert.kind, cert.name, secret.Value, g.values.CertSecretName)
	}
	*secret = *g.t.value(".Values.webhook.certSecretName")
	return nil
}

// webhook makes a webhook configuration's CA cert-manager's (injected) or webhook.caBundle, and
// its namespaceSelector the ignored namespaces.
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
		caBundle := g.t.value(`required (printf "webhook.caBundle is required when certManager.enabled is false: set it to the base64-encoded PEM of the CA that signed Secret %s (the API server checks the webhook's certificate with it)" .Values.webhook.certSecretName) .Values.webhook.caBundle`)
		cc.Content = append(cc.Content, g.t.wrapKeys("not "+certManagerOn, []*yaml.Node{str("caBundle"), caBundle})...)
		values, err := find(h, namespaceSelector)
		if err != nil {
			return fail(err)
		}
		if err := g.ignoredNamespaces(values); err != nil {
			return fail(err)
		}
		*values = *g.t.block(`include "` + g.chartName + `.ignoredNamespaceList" $`)
	}
	return nil
}

// ignoredNamespaces checks a webhook's excluded namespaces against the binaries' default
// --ignored-namespaces, and sets the default of ignoredNamespaces: that list without the
// release's namespace, which the chart always adds.
func (g *generator) ignoredNamespaces(list *yaml.Node) error {
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
	g.values.IgnoredNamespaces = slices.DeleteFunc(slices.Clone(got), func(ns string) bool { return ns == g.b.namespace })
	return nil
}

// A containerDefault is what a container's values default to.
type containerDefault struct {
	image     image
	resources string
}

// container templates a container's image and pull policy from .Values.<imageOf>.image and its
// resources from .Values.<resources>, returning their defaults.
func (g *generator) container(o chartObject, path, imageOf, resources string) (containerDefault, error) {
	fail := func(err error) (containerDefault, error) {
		return containerDefault{}, fmt.Errorf("%s %s: %w", o.kind, o.name, err)
	}
	c, err := find(o.node, path)
	if err != nil {
		return fail(err)
	}
	var d containerDefault
	for _, key := range []string{"image", "imagePullPolicy", "resources"} {
		if lookup(c, key) == nil {
			return fail(fmt.Errorf("%s has no %s, which the chart templates", path, key))
		}
	}
	if d.image, err = splitImage(lookup(c, "image").Value); err != nil {
		return fail(fmt.Errorf("%s: %w", path, err))
	}
	d.image.PullPolicy = lookup(c, "imagePullPolicy").Value
	if d.resources, err = encode(lookup(c, "resources")); err != nil {
		return fail(err)
	}
	v := ".Values." + imageOf + ".image"
	set(c, "image", str(g.t.raw("{{ "+v+".repository }}:{{ "+v+".tag }}")))
	set(c, "imagePullPolicy", g.t.value(v+".pullPolicy"))
	set(c, "resources", g.t.block("toYaml .Values."+resources))
	return d, nil
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
