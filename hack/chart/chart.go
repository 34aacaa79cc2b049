// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// kindCRD is the kind of the objects that go to templates/crd.
const kindCRD = "CustomResourceDefinition"

// kindNamespace is the kind the chart makes one of (SPIRE's), not the release's.
const kindNamespace = "Namespace"

// kindDaemonSet is the kind of the node agent's, the node Envoy's and SPIRE's agents' workloads.
const kindDaemonSet = "DaemonSet"

// kindService is a Service's kind: the webhook's, the manager's metrics' and those monitors scrape.
const kindService = "Service"

// The values that switch parts of the chart on and off that the code templates (the table's
// gate rows turn on the others).
const (
	envoyOn       = ".Values.envoy.enabled"
	certManagerOn = ".Values.certManager.enabled"
	// spireOn turns on config/spire's patches of the operator's objects (the node agent's admin
	// socket) and the chart's SPIRE flags; spireInstallOn, SPIRE's own objects. spire.install
	// means nothing without spire.enabled (the mesh would not use the SPIRE it installs), so
	// spire.enabled=false alone turns both off, whatever spire.install's default says.
	spireOn        = ".Values.spire.enabled"
	spireInstallOn = "and .Values.spire.enabled .Values.spire.install"
)

// A chartObject is an object of the chart: its tree, with tokens, and the condition under which
// the chart renders it at all ("" for always).
type chartObject struct {
	object
	cond string
	// dir is the directory of templates/ that holds it (see dirOf).
	dir string
	// part is the build it comes from: SPIRE's own objects (config/spire's resources) go to
	// templates/spire/, config/prometheus's to templates/prometheus/.
	part part
}

// A generator turns the builds into the chart's files.
type generator struct {
	t *templater
	b *builds
	// chartName is config/base's prefix without its '-': the chart's name, and the fullname of
	// a release of the same name, whose objects are then named exactly as kustomize names them.
	chartName string
	// names are the prefixed names of every object of the builds, which the chart derives from
	// the release (see rewriteNames).
	names map[string]bool
	// defaults are the defaults values.yaml gets, by value, read from the builds (the table's
	// rows and the code's).
	defaults map[string]valueDefault
	// appVersion is the tag config/ gives the operator's own images (every appTag row's, which
	// must agree): the chart's appVersion, which those images' empty tag stands for.
	appVersion valueDefault
	// spireValues are the defaults of the spire values the code templates.
	spireValues spireDefaults
	// managerName and agentName are the names, without the prefix, of the manager's
	// Deployment and the agent's DaemonSet.
	managerName, agentName string
	// spireNamespace is config/spire's namespace, which the chart makes spire.namespace.
	spireNamespace string
	// spireServer and spireAgent are the names of SPIRE's StatefulSet and DaemonSet.
	spireServer, spireAgent string
}

// generate returns the chart's files, by path in the chart, made from the repository at root.
func generate(root string) (map[string]string, error) {
	b, err := kustomizeAll(root)
	if err != nil {
		return nil, err
	}
	g := &generator{t: newTemplater(), b: b, chartName: strings.TrimSuffix(b.prefix, "-"), names: map[string]bool{}}
	for _, objs := range [][]object{b.base, b.def, b.certManager, b.prometheus, b.defSpire} {
		for _, o := range objs {
			g.names[o.name] = true
		}
	}
	objs, err := g.objects()
	if err != nil {
		return nil, err
	}
	if err := assignDirs(objs); err != nil {
		return nil, err
	}
	for _, o := range objs {
		if err := escapeActions(g.t, o.node); err != nil {
			return nil, err
		}
	}
	if err := g.templateValues(objs); err != nil {
		return nil, err
	}
	for _, o := range objs {
		if err := g.templateMetadata(o); err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.kind, o.name, err)
		}
	}
	files, err := g.templates(objs)
	if err != nil {
		return nil, err
	}
	if files["values.yaml"], err = g.valuesFile(); err != nil {
		return nil, err
	}
	if files["values.schema.json"], err = valuesSchema(files["values.yaml"], enumValues()); err != nil {
		return nil, err
	}
	if files["README.md"], err = valuesReference(files["values.yaml"]); err != nil {
		return nil, err
	}
	files["Chart.yaml"] = g.chartFile()
	files["templates/_helpers.tpl"] = g.helpersFile()
	files["templates/NOTES.txt"] = g.notesFile()
	files[".helmignore"] = helmignore
	return files, nil
}

// objects merges config/base and config/default into one set under envoy.enabled, twice: as
// they are, and with the component config/spire; merges those two under spire.enabled (its
// patches of the node agent); adds config/certmanager's and config/prometheus's objects (which
// the table's gate rows turn on) and config/spire's own under spire.install. The operator's Namespace is left out: helm install
// --create-namespace makes the release's namespace, which a chart cannot own and install into.
// SPIRE's is kept (see spireObjects).
func (g *generator) objects() ([]chartObject, error) {
	plain, err := g.mergeEnvoy(g.b.base, g.b.def, "")
	if err != nil {
		return nil, err
	}
	baseOwn, baseOperator := splitComponent(g.b.base, g.b.baseSpire)
	defOwn, defOperator := splitComponent(g.b.def, g.b.defSpire)
	if err := alike(baseOwn, defOwn); err != nil {
		return nil, fmt.Errorf("%s adds other objects to %s than to %s: %w", spireDir, baseDir, defaultDir, err)
	}
	withSpire, err := g.mergeEnvoy(baseOperator, defOperator, " with "+spireDir)
	if err != nil {
		return nil, err
	}
	out, err := g.mergeSpire(plain, withSpire)
	if err != nil {
		return nil, err
	}
	for _, o := range g.b.certManager {
		out = append(out, chartObject{object: o, part: certManagerPart})
	}
	for _, o := range g.b.prometheus {
		if o.kind == "ServiceMonitor" || o.kind == kindService {
			if err := g.selectRelease(o); err != nil {
				return nil, fmt.Errorf("%s %s: %w", o.kind, o.name, err)
			}
		}
		out = append(out, chartObject{object: o, part: prometheusPart})
	}
	spire, err := g.spireObjects(defOwn)
	if err != nil {
		return nil, err
	}
	out = append(out, spire...)
	kept := out[:0]
	for _, o := range out {
		if o.kind != kindNamespace || o.part == spirePart {
			kept = append(kept, o)
			continue
		}
		if o.name != g.b.namespace {
			return nil, fmt.Errorf("%s %s: the chart installs into the release's namespace only (config/base's %s); it makes no other", o.kind, o.name, g.b.namespace)
		}
	}
	return kept, nil
}

// key identifies an object within a build.
func key(o object) string { return o.kind + "/" + o.namespace + "/" + o.name }

// mergeEnvoy merges off (config/base) and on (config/default, the same with the component
// config/envoy), both built with, says with, into one set under envoy.enabled: in on's order,
// then off's own objects.
func (g *generator) mergeEnvoy(off, on []object, with string) ([]chartObject, error) {
	base := map[string]object{}
	for _, o := range off {
		base[key(o)] = o
	}
	var out []chartObject
	for _, o := range on {
		b, ok := base[key(o)]
		delete(base, key(o))
		if !ok {
			cond := envoyOn
			if hasLabel(o.node, csiLabel) {
				// config/csi is config/default's, not Envoy's: without Envoy the agent still probes
				// the sockets. Its own value turns it off (a row).
				cond = ""
			}
			out = append(out, chartObject{object: o, cond: cond})
			continue
		}
		n, err := g.t.merge(o.kind+" "+o.name, b.node, o.node, envoyOn)
		if err != nil {
			return nil, fmt.Errorf("%s and %s%s: %w", baseDir, defaultDir, with, err)
		}
		o.node = n
		out = append(out, chartObject{object: o})
	}
	for _, o := range off { // in config/base only: in build order
		if _, ok := base[key(o)]; ok {
			out = append(out, chartObject{object: o, cond: "not " + envoyOn})
		}
	}
	return out, nil
}

// splitComponent splits a build with config/spire (with) by the build without it (without):
// the component's own objects, and the build's objects as the component patched them.
func splitComponent(without, with []object) (own, patched []object) {
	in := map[string]bool{}
	for _, o := range without {
		in[key(o)] = true
	}
	for _, o := range with {
		if in[key(o)] {
			patched = append(patched, o)
		} else {
			own = append(own, o)
		}
	}
	return own, patched
}

// alike fails unless a and b are the same objects, alike.
func alike(a, b []object) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d objects against %d", len(a), len(b))
	}
	for i := range a {
		if key(a[i]) != key(b[i]) || !equal(a[i].node, b[i].node) {
			return fmt.Errorf("%s against %s", key(a[i]), key(b[i]))
		}
	}
	return nil
}

// mergeSpire merges the operator's objects without config/spire (off) and with it (on), each
// already merged under envoy.enabled, under spire.enabled. The component may patch the
// operator's objects; it may not add or remove one.
func (g *generator) mergeSpire(off, on []chartObject) ([]chartObject, error) {
	if len(off) != len(on) {
		return nil, fmt.Errorf("%s adds or removes objects of the operator (%d without it, %d with it); it may only patch them", spireDir, len(off), len(on))
	}
	out := make([]chartObject, len(off))
	for i := range off {
		a, b := off[i], on[i]
		if key(a.object) != key(b.object) || a.cond != b.cond {
			return nil, fmt.Errorf("%s changes which operator objects render when: %s (%q) without it, %s (%q) with it", spireDir, key(a.object), a.cond, key(b.object), b.cond)
		}
		n, err := g.t.merge(b.kind+" "+b.name, a.node, b.node, spireOn)
		if err != nil {
			return nil, fmt.Errorf("%s without and with %s: %w", defaultDir, spireDir, err)
		}
		b.node = n
		out[i] = b
	}
	return out, nil
}

// spireObjects are config/spire's own objects, rendered under spire.install, and the chart's
// one other Namespace than the release's: SPIRE's. A chart may create this one, unlike the
// release's (which helm install --create-namespace makes before the chart installs into it):
// SPIRE's namespace is not where the release lives, so installing the release creates it and
// uninstalling it deletes it, with the SPIRE objects the chart put there. Every namespaced
// object of the component must be in it, so that spire.namespace moves them all.
func (g *generator) spireObjects(own []object) ([]chartObject, error) {
	var namespaces []string
	for _, o := range own {
		if o.kind == kindNamespace {
			namespaces = append(namespaces, o.name)
		}
	}
	if len(namespaces) != 1 {
		return nil, fmt.Errorf("%s makes the Namespaces %v; the chart needs exactly one, SPIRE's (spire.namespace)", spireDir, namespaces)
	}
	g.spireNamespace = namespaces[0]
	var out []chartObject
	for _, o := range own {
		if o.namespace != "" && o.namespace != g.spireNamespace {
			return nil, fmt.Errorf("%s %s: in namespace %s; %s's objects must be in its Namespace %s, which spire.namespace names",
				o.kind, o.name, o.namespace, spireDir, g.spireNamespace)
		}
		out = append(out, chartObject{object: o, cond: spireInstallOn, part: spirePart})
	}
	return out, nil
}

// escapeActions keeps any "{{" of the configuration (a CRD's description quoting a Go template,
// say) from being read by helm as a template action.
func escapeActions(t *templater, n *yaml.Node) error {
	return scalars(n, func(s *yaml.Node) error {
		if strings.Contains(s.Value, "{{") {
			s.Value = strings.ReplaceAll(s.Value, "{{", t.raw("{{`{{`}}"))
		}
		return nil
	})
}

// clusterScoped are the kinds of the chart that no namespace holds. kustomize gives every
// object its namespace, these too (it knows nothing of ValidatingAdmissionPolicy); the chart
// drops it.
var clusterScoped = []string{
	kindNamespace, kindCRD, "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration",
	"MutatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
	"CSIDriver",
}

// selectRelease narrows a ServiceMonitor's selector to its own release's Services, and a
// monitored Service's to its own release's pods (every object of the chart, and every pod
// template, carries the release in app.kubernetes.io/instance): two releases in one namespace
// would otherwise each scrape both.
func (g *generator) selectRelease(o object) error {
	at := "spec.selector.matchLabels"
	if o.kind == kindService {
		at = "spec.selector"
	}
	match, err := find(o.node, at)
	if err != nil {
		return err
	}
	match.Content = append(match.Content, str(releaseLabel), g.t.value(".Release.Name"))
	return nil
}

// releaseLabel is the label that names an object's release.
const releaseLabel = "app.kubernetes.io/instance"

// helperLabels are the labels _helpers.tpl's aether-operator.labels gives every object.
var helperLabels = []string{"helm.sh/chart", releaseLabel, "app.kubernetes.io/managed-by"}

// templateMetadata gives an object the release's namespace, names derived from the release, the
// chart's labels and, for a CRD, helm's resource policy.
func (g *generator) templateMetadata(o chartObject) error {
	meta := lookup(o.node, "metadata")
	if meta == nil {
		return fmt.Errorf("no metadata")
	}
	if slices.Contains(clusterScoped, o.kind) {
		remove(meta, "namespace")
	}
	labels := lookup(meta, "labels")
	if labels == nil {
		labels = &yaml.Node{Kind: yaml.MappingNode, Tag: tagMap}
		set(meta, "labels", labels)
	}
	for _, l := range helperLabels { // kustomize's managed-by: kustomize, for one
		remove(labels, l)
	}
	k, v := g.t.lineKey(`{{- include "` + g.chartName + `.labels" $ | nindent ` + indentMark + ` }}`)
	labels.Content = append([]*yaml.Node{k, v}, labels.Content...)
	if podLabels, err := find(o.node, podMeta+".labels"); err == nil {
		// Each pod carries its release too, so that a monitored Service selects its own release's
		// pods (selectRelease). Not in the workload's selector: that one is immutable, and an upgrade
		// from a release without the label would fail.
		remove(podLabels, releaseLabel)
		podLabels.Content = append(podLabels.Content, str(releaseLabel), g.t.value(".Release.Name"))
	}
	if o.kind == kindCRD {
		ann := lookup(meta, "annotations")
		if ann == nil {
			ann = &yaml.Node{Kind: yaml.MappingNode, Tag: tagMap}
			set(meta, "annotations", ann)
		}
		ann.Content = append(ann.Content, g.t.wrapKeys(".Values.crd.keep", []*yaml.Node{str("helm.sh/resource-policy"), str("keep")})...)
	}
	return g.rewriteNames(o.node)
}

// rewriteNames replaces config/base's namespace by the release's, and each name config/base's
// prefix gave an object by the chart's resourceName of the same suffix, wherever they appear:
// metadata, references (roleRef, subjects, a webhook's service, a policy binding's policy), DNS
// names and expressions. With the release named as the chart (aether-operator) the names are
// kustomize's. A string carrying the prefix that names no object is an error, as the chart
// would otherwise keep a name that does not follow the release.
func (g *generator) rewriteNames(n *yaml.Node) error {
	ns := g.t.raw("{{ .Release.Namespace }}")
	named := regexp.MustCompile(regexp.QuoteMeta(g.b.prefix) + `[a-z0-9](?:[-a-z0-9]*[a-z0-9])?`)
	return scalars(n, func(s *yaml.Node) error {
		v := strings.ReplaceAll(s.Value, g.b.namespace, ns)
		var bad string
		v = named.ReplaceAllStringFunc(v, func(name string) string {
			if !g.names[name] {
				bad = name
				return name
			}
			return g.resourceName(strings.TrimPrefix(name, g.b.prefix))
		})
		if bad != "" {
			return fmt.Errorf("%q carries config/base's name prefix %s but names no object of the chart; the chart cannot derive it from the release", s.Value, g.b.prefix)
		}
		s.Value = v
		return nil
	})
}

// resourceName is a token for the name of the object whose name suffix is suffix.
func (g *generator) resourceName(suffix string) string {
	return g.t.raw(g.resourceNameText(suffix))
}

func (g *generator) resourceNameText(suffix string) string {
	return `{{ include "` + g.chartName + `.resourceName" (dict "suffix" "` + suffix + `" "context" $) }}`
}

// generatedNote heads every file of the chart.
const generatedNote = "Generated by hack/chart from config/ (make chart): edit config/ or hack/chart, not this file."

// templates renders the objects into templates/<dir>/<file>.yaml, the directory by the object's
// part of the operator (as kubebuilder's helm plugin groups them), the file by its name.
func (g *generator) templates(objs []chartObject) (map[string]string, error) {
	paths := map[string][]int{}
	for i, o := range objs {
		p := path.Join("templates", o.dir, strings.TrimPrefix(o.name, g.b.prefix))
		paths[p] = append(paths[p], i)
	}
	files := map[string]string{}
	for p, idx := range paths {
		for _, i := range idx {
			name := p
			if len(idx) > 1 { // a policy and its binding share a name
				name += "-" + kebab(objs[i].kind)
			}
			text, err := g.t.render(objs[i].node)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", objs[i].kind, objs[i].name, err)
			}
			if c := objs[i].cond; c != "" {
				text = "{{- if " + c + " }}\n" + text + "{{- end }}\n"
			}
			files[name+".yaml"] = "{{/* " + generatedNote + " */ -}}\n" + text
		}
	}
	return files, nil
}

// assignDirs sets each object's directory, before the names become templates: a Service is the
// webhook's when a webhook configuration names it.
func assignDirs(objs []chartObject) error {
	webhookServices := map[string]bool{}
	for _, o := range objs {
		if strings.HasSuffix(o.kind, "WebhookConfiguration") {
			_ = scalars(o.node, func(s *yaml.Node) error { webhookServices[s.Value] = true; return nil })
		}
	}
	for i := range objs {
		dir, err := dirOf(objs[i], webhookServices)
		if err != nil {
			return err
		}
		objs[i].dir = dir
	}
	return nil
}

// dirOf is the directory of templates/ that holds o.
func dirOf(o chartObject, webhookServices map[string]bool) (string, error) {
	switch o.part {
	case spirePart:
		return "spire", nil
	case prometheusPart:
		return "prometheus", nil
	}
	if hasLabel(o.node, csiLabel) {
		return "csi", nil
	}
	switch o.kind {
	case kindCRD:
		return "crd", nil
	case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
		return "rbac", nil
	case "Deployment", "PodDisruptionBudget":
		return "manager", nil
	case kindDaemonSet:
		return "agent", nil
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "Secret":
		// The one Secret of config/ is the webhooks' certificate's (config/manager).
		return "webhook", nil
	case kindService:
		if webhookServices[o.name] {
			return "webhook", nil
		}
		return "metrics", nil
	case "Issuer", "Certificate":
		return "cert-manager", nil
	case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		return "admission", nil
	}
	return "", fmt.Errorf("%s %s: hack/chart has no templates/ directory for kind %s; add it to dirOf (and to clusterScoped if no namespace holds it)", o.kind, o.name, o.kind)
}

// kebab is ValidatingAdmissionPolicy as validating-admission-policy.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
