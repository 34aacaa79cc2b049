// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// The chart's values, as data: one row a value and a place it lands. A value that lands in
// several places (manager.image: the manager, the registrar, --identity-image) has a row for
// each; every row that reads a default from config/ must read the same one, or the generation
// fails naming both places. Adding a value of one of these shapes is one row here, its comment in
// values.yaml (valuesTemplate, which must hold every row's value) and a case in the tests
// (TestValues, TestWorkloadValues).
//
// What stays code, because no row's shape fits it:
//   - envoy.enabled and spire.enabled: merges of whole kustomize builds (config/base against
//     config/default, each without and with config/spire), not a field (chart.go's objects);
//   - spire.install: SPIRE's own objects, under spire.enabled too (chart.go's spireObjects);
//   - spire.namespace, meshDomain (spire.trustDomain), spire.clusterName: words inside SPIRE's configuration
//     files and flags, found by pattern and checked to agree; the registrar's flags, checked
//     against the agent's ServiceAccount; the manager's and the agent's --mesh-domain, meshDomain
//     whatever the issuer, read back from SPIRE's configuration (spire.go);
//   - certManager.enabled's annotation and ignoredNamespaces in the webhooks'
//     namespaceSelector: a conditional key, a required value and a check against the binaries'
//     default (values.go's webhook);
//   - nameOverride, fullnameOverride, crd.keep: names and labels of every object (chart.go's
//     templateMetadata, rewriteNames).
var table = slices.Concat([]row{
	// The manager's Deployment (config/manager).
	{value: "manager.replicas", in: manager, at: "spec.replicas", how: setScalar},
	{value: managerImage, in: manager, at: managerContainer, how: setImage, appTag: true},
	{value: "manager.resources", in: manager, at: managerContainer + ".resources", how: setBlock},
	{value: certSecretName, in: manager, at: webhookCertVolume, how: setScalar, text: certSecretText, derived: true},
	// The manager's own rotation of the webhooks' certificate, unless cert-manager issues it; it
	// writes the Secret the manager mounts, and its Role may update only that one.
	{value: certManagerEnabled, in: manager, at: managerContainer, how: setFlag, flag: "--cert-rotation", text: `{{ if .Values.certManager.enabled }}false{{ else }}true{{ end }}`},
	{value: certSecretName, in: manager, at: managerContainer, how: setFlag, flag: "--cert-rotation-secret", text: certSecretText},
	{value: certSecretName, in: sel{kind: "Role", name: "webhook-cert-role"}, at: "rules[0].resourceNames[0]", how: setScalar, text: certSecretText, derived: true},
	// The install makes that Secret, empty, for the rotation to fill (its Role may not create
	// one); cert-manager makes its own.
	{value: certSecretName, in: certSecret, at: "metadata.name", how: setScalar, text: certSecretText, derived: true},
	{value: certManagerEnabled, in: certSecret, how: gateObjects, text: "not .Values.certManager.enabled"},
	{value: "spire.enabled", in: manager, at: managerContainer, how: setFlag, flag: "--identity-issuer", text: identityIssuer},
	{value: identityGateValue, in: manager, at: managerContainer, how: setFlag, flag: "--identity-gate", text: `{{ if .Values.identityGate.enabled }}true{{ else }}false{{ end }}`, dflt: flagTrue}, // cmd/manager's --identity-gate default
	{value: ignoredValue, in: manager, at: managerContainer, how: setFlag, flag: ignoredNamespacesFlag, text: ignoredFlag},
	// The pod webhook injects the identity containers from the manager's own image: one value.
	{value: managerImage, in: manager, at: managerContainer, how: setFlag, flag: "--identity-image", text: imageRef(".Values." + managerImage)},
}, placement("manager", manager), []row{
	{value: "manager.logLevel", in: manager, at: managerContainer, how: addFlag, flag: "--zap-log-level", text: zapLevel("manager")},
	{value: "manager.extraArgs", in: manager, at: managerContainer, how: addArgs},

	// The node agent's DaemonSet (config/agent) and its init container install-cni, which runs
	// the agent's binary: the agent's image, whatever config/ would let differ.
	{value: "agent.image", in: agent, at: agentContainer, how: setImage, appTag: true},
	{value: "agent.image", in: agent, at: installCNIContainer, how: setImage, appTag: true},
	{value: "agent.resources", in: agent, at: agentContainer + ".resources", how: setBlock},
	{value: "agent.installCNI.resources", in: agent, at: installCNIContainer + ".resources", how: setBlock},
	{value: "agent.cni.binDir", in: agent, at: cniBinVolume, how: setScalar},
	{value: "agent.cni.confDir", in: agent, at: cniConfVolume, how: setScalar},
	{value: "spire.enabled", in: agent, at: agentContainer, how: setFlag, flag: "--identity-issuer", text: identityIssuer},
	{value: ignoredValue, in: agent, at: agentContainer, how: setFlag, flag: ignoredNamespacesFlag, text: ignoredFlag},
	{value: "agent.captureMode", in: agent, at: agentContainer, how: setFlag, flag: "--capture-mode", text: `{{ include "@.captureMode" $ }}`, dflt: string(model.CaptureSurface)},
	{value: "agent.meshDNS", in: agent, at: agentContainer, how: setFlag, flag: "--mesh-dns", text: `{{ if .Values.agent.meshDNS }}true{{ else }}false{{ end }}`, dflt: flagTrue}, // cmd/agent's --mesh-dns default
	{value: ignoredValue, in: agent, at: installCNIContainer, how: setFlag, flag: ignoredNamespacesFlag, text: ignoredFlag},
}, placement("agent", agent), []row{
	{value: "agent.logLevel", in: agent, at: agentContainer, how: addFlag, flag: "--zap-log-level", text: zapLevel("agent")},
	{value: "agent.extraArgs", in: agent, at: agentContainer, how: addArgs},

	// The node Envoy's DaemonSet (config/envoy). Envoy's container runs a shell script that
	// waits for the bootstrap, then execs Envoy: its flags go on that line, shell-quoted.
	{value: "envoy.image", in: envoy, at: envoyContainer, how: setImage},
	{value: "envoy.resources", in: envoy, at: envoyContainer + ".resources", how: setBlock},
	{value: "envoy.helper.image", in: envoy, at: envoyHelperContainer, how: setImage, appTag: true},
	{value: "envoy.helper.resources", in: envoy, at: envoyHelperContainer + ".resources", how: setBlock},
	// The init container that writes Envoy's seccomp profile runs the helper's binary, and
	// writes it where the kubelet finds Localhost profiles (<its root dir>/seccomp/aether).
	{value: "envoy.helper.image", in: envoy, at: envoySeccompContainer, how: setImage, appTag: true},
	{value: "envoy.seccompProfileDir", in: envoy, at: seccompVolume, how: setScalar, text: `{{ include "@.seccompProfileDir" $ }}`},
}, placement("envoy", envoy), []row{
	{value: "envoy.logLevel", in: envoy, at: envoyContainer, how: addToScript, flag: envoyExec,
		text: `{{ with .Values.envoy.logLevel }} --log-level {{ include "@.envoyLogLevel" $ }}{{ end }}`},
	{value: "envoy.extraArgs", in: envoy, at: envoyContainer, how: addToScript, flag: envoyExec,
		text: `{{ range .Values.envoy.extraArgs }} {{ include "@.shellQuote" . }}{{ end }}`, empty: emptySeq},

	// cert-manager's Certificate writes the Secret the manager mounts: one value.
	{value: certSecretName, in: sel{part: certManagerPart, kind: "Certificate"}, at: "spec.secretName", how: setScalar, text: certSecretText, derived: true},

	// SPIRE's objects (config/spire). The registrar, the SPIRE server's sidecar, runs the
	// manager's image.
	{value: "spire.server.image", in: spireServer, at: spireServerContainer, how: setImage},
	{value: "spire.server.resources", in: spireServer, at: spireServerContainer + ".resources", how: setBlock},
	{value: "spire.agent.image", in: spireAgent, at: spireAgentContainer, how: setImage},
	{value: "spire.agent.resources", in: spireAgent, at: spireAgentContainer + ".resources", how: setBlock},
	{value: managerImage, in: spireServer, at: registrarContainer, how: setImage, appTag: true},
	{value: "spire.registrar.resources", in: spireServer, at: registrarContainer + ".resources", how: setBlock},

	// The csi.aether.io node plugin (config/csi), the carrier of apps' Unix sockets.
	// It runs for the identity gate too, whose socket volume it carries (SPIRE's agent sockets).
	{value: "udsCsi.enabled", in: csiObjects, how: gateObjects, text: csiNeeded},
	// The agent delivers to sockets, and reads EndpointPolicies, only where the plugin runs.
	{value: "udsCsi.enabled", in: agent, at: agentContainer, how: setFlag, flag: "--uds-csi", text: `{{ if .Values.udsCsi.enabled }}true{{ else }}false{{ end }}`, dflt: flagTrue}, // cmd/agent's --uds-csi default
	{value: "udsCsi.image", in: csiNode, at: csiContainer, how: setImage, appTag: true},
	{value: "udsCsi.resources", in: csiNode, at: csiContainer + ".resources", how: setBlock},

	// Every pod's image pull secrets.
	{value: pullSecrets, in: manager, at: podSpec + "." + pullSecrets, how: setBlock, empty: emptySeq},
	{value: pullSecrets, in: agent, at: podSpec + "." + pullSecrets, how: setBlock, empty: emptySeq},
	{value: pullSecrets, in: envoy, at: podSpec + "." + pullSecrets, how: setBlock, empty: emptySeq},
	{value: pullSecrets, in: spireServer, at: podSpec + "." + pullSecrets, how: setBlock, empty: emptySeq},
	{value: pullSecrets, in: spireAgent, at: podSpec + "." + pullSecrets, how: setBlock, empty: emptySeq},
	{value: pullSecrets, in: csiNode, at: podSpec + "." + pullSecrets, how: setBlock, empty: emptySeq},

	// Parts of the chart that a value turns on. A new component gated by a value is one row of
	// this shape, selecting its objects by part, kind, name or label.
	{value: certManagerEnabled, in: sel{part: certManagerPart}, how: gateObjects},
	{value: "crd.enabled", in: sel{kind: kindCRD}, how: gateObjects},
	// config/prometheus's objects, by kind: all off by default, as each needs the Prometheus
	// operator's CRDs or Grafana's sidecar in the cluster.
	{value: serviceMonitorValue, in: sel{part: prometheusPart, kind: "ServiceMonitor"}, how: gateObjects},
	// The agents' and the node proxies' metrics Services, for their ServiceMonitors.
	{value: serviceMonitorValue, in: sel{part: prometheusPart, kind: kindService}, how: gateObjects},
	{value: "prometheus.rules.enabled", in: sel{part: prometheusPart, kind: "PrometheusRule"}, how: gateObjects},
	{value: "prometheus.dashboard.enabled", in: sel{part: prometheusPart, kind: "ConfigMap"}, how: gateObjects},
})

// placement is the rows of where a workload's pods run and what they carry: component's
// nodeSelector, tolerations and affinity (the pod spec's fields of the same names) and its
// podAnnotations and podLabels, added to its pods' metadata.
func placement(component string, in sel) []row {
	return []row{
		{value: component + ".nodeSelector", in: in, at: podSpec + ".nodeSelector", how: setBlock, empty: emptyMap},
		{value: component + ".tolerations", in: in, at: podSpec + ".tolerations", how: setBlock, empty: emptySeq},
		{value: component + ".affinity", in: in, at: podSpec + ".affinity", how: setBlock, empty: emptyMap},
		{value: component + ".podAnnotations", in: in, at: podMeta + ".annotations", how: addEntries},
		{value: component + ".podLabels", in: in, at: podMeta + ".labels", how: addEntries},
	}
}

// pullSecrets is the value of every pod's image pull secrets, and the pod spec's field.
const pullSecrets = "imagePullSecrets"

// certSecretName is the Secret of the webhooks' certificate: the install makes it and the
// manager mounts it, the rotation writes it (and its Role names it), or cert-manager's
// Certificate does (certManagerEnabled). Empty by default, for a name derived from the release
// as every other object's (certSecretText, the helper certSecretName).
const (
	certManagerEnabled = "certManager.enabled"
	certSecretName     = "webhook.certSecretName"
	certSecretText     = `{{ include "@.certSecretName" $ }}`
)

// flagTrue is a boolean flag's default true, as the rows' dflt spells it.
const flagTrue = "true"

// identityGateValue turns the identity gate on, the manager's --identity-gate.
const identityGateValue = "identityGate.enabled"

// csiNeeded is when the csi.aether.io plugin runs: for the apps' sockets, or for the identity
// gate's SPIRE socket volume (injected only with SPIRE).
const csiNeeded = "or .Values.udsCsi.enabled (and .Values.spire.enabled .Values." + identityGateValue + ")"

// serviceMonitorValue turns on the monitors of the mesh's metrics and its proxies' statistics.
const serviceMonitorValue = "prometheus.serviceMonitor.enabled"

// The objects the rows select.
var (
	manager     = sel{kind: "Deployment", name: "controller-manager"}
	certSecret  = sel{kind: "Secret", name: "webhook-server-cert"}
	agent       = sel{kind: kindDaemonSet, name: agentDaemonSet}
	envoy       = sel{kind: kindDaemonSet, name: envoyDaemonSet}
	spireServer = sel{part: spirePart, kind: "StatefulSet"}
	spireAgent  = sel{part: spirePart, kind: kindDaemonSet}
	// csiNode is config/csi's plugin DaemonSet; csiObjects are all of config/csi's objects.
	csiNode    = sel{kind: kindDaemonSet, label: csiLabel}
	csiObjects = sel{label: csiLabel}
)

// csiLabel is the label of config/csi's objects, the csi.aether.io node plugin.
const csiLabel = "app.kubernetes.io/name=aether-csi-node"

// Paths of a workload's pod template.
const (
	podSpec = "spec.template.spec"
	podMeta = "spec.template.metadata"
	// envoyExec starts the line of Envoy's container script that runs Envoy.
	envoyExec = "exec envoy "
	// ignoredFlag is the ignored namespaces, comma-separated (ignoredNamespacesFlag).
	ignoredFlag           = `{{ include "@.ignoredNamespaces" $ }}`
	ignoredNamespacesFlag = "--ignored-namespaces"
	ignoredValue          = "ignoredNamespaces"
	// managerImage is the image of the manager, the registrar and the identity containers.
	managerImage = "manager.image"
)

// zapLevel is the template text of component's --zap-log-level, checked by a helper.
func zapLevel(component string) string {
	return `{{ include "@.zapLogLevel" (dict "value" "` + component + `.logLevel" "level" .Values.` + component + `.logLevel) }}`
}

// A part is the build an object comes from.
type part int

const (
	// operatorPart: config/default's objects (with config/envoy's and config/spire's patches).
	operatorPart part = iota
	// spirePart: config/spire's own objects, SPIRE in its namespace.
	spirePart
	certManagerPart
	prometheusPart
)

// A sel selects objects: those of part, of kind unless kind is "", named name (without config/
// base's prefix) unless name is "", labelled label (key=value, in their metadata) unless label
// is "". A component whose objects share a label (kustomize's labels:) is one sel. A row whose sel
// selects nothing fails the generation.
type sel struct {
	part              part
	kind, name, label string
}

func (s sel) String() string {
	parts := map[part]string{operatorPart: "config/default", spirePart: spireDir, certManagerPart: certManagerDir, prometheusPart: prometheusDir}
	out := parts[s.part] + "'s"
	if s.kind == "" {
		out += " objects"
		if s.label != "" {
			out += " labelled " + s.label
		}
		return out
	}
	out += " " + s.kind
	if s.name != "" {
		out += " " + s.name
	}
	if s.label != "" {
		out += " labelled " + s.label
	}
	return out
}

// A how is what a row does to the field at its path.
type how int

const (
	// setScalar replaces the scalar by the value (or by the row's text, a template that checks
	// it); the default is config/'s, or "" for a derived row (text derives the field when the
	// value is empty).
	setScalar how = iota
	// setImage sets the container's image and imagePullPolicy from the value's repository, tag and
	// pullPolicy; the defaults are config/'s (image: repository:tag).
	setImage
	// setBlock sets the field to the value as YAML (toYaml). Where config/ gives the field, its
	// YAML is the default; where not, the field is added only when the value is not empty, and
	// the default is empty (the row's empty).
	setBlock
	// addEntries adds the value's entries (a map) to the mapping at the path (made when config/
	// has none); the default is {}.
	addEntries
	// setFlag sets --flag=text in the container's args, in place of config/'s item for the flag.
	setFlag
	// addFlag appends --flag=text to the container's args when the value is set; the default
	// is "" (the binary's own default).
	addFlag
	// addArgs appends the value's items to the container's args; the default is [].
	addArgs
	// addToScript appends text to the line of the container's script (its args' item) that starts
	// with flag; the value's default is "", or the row's empty.
	addToScript
	// gateObjects renders the selected objects only when the value is true (and they rendered
	// before); values.yaml says the value's default: true for a part of config/default, false
	// for one it does not deploy.
	gateObjects
)

// appends are the hows that append to a container's args: they go after every flag the chart
// sets (code included), so that a flag given again in extraArgs wins (the last one does).
var appends = []how{addFlag, addArgs}

// Empty defaults of a block the config/ does not give.
const (
	emptyMap = "{}"
	emptySeq = "[]"
)

// A row is one place a chart value lands.
type row struct {
	// value is the value's path under .Values.
	value string
	in    sel
	// at is the field's path in each selected object (find's syntax); for image, flag, optFlag,
	// addArgs and script, the container's.
	at  string
	how how
	// setFlag is the flag of flag and optFlag (--name), the line's start of script.
	flag string
	// text is the template text of flag, optFlag (default {{ .Values.<value> }}), script and,
	// when set, scalar; "@." stands for the chart's helpers' namespace.
	text string
	// empty is block's default where config/ does not give the field, and script's default:
	// emptyMap or emptySeq.
	empty string
	// derived marks a setScalar row whose text derives the field when the value is empty (a
	// name from the release's): the value's default is "", not config/'s.
	derived bool
	// dflt is a flag's default, where config/ leaves the flag to the binary.
	dflt string
	// appTag marks an image row of the operator's own image: its tag's default is "", the
	// chart's appVersion (config/'s tag, the same in every such row).
	appTag bool
}

// where names a row's place, for errors.
func (r row) where(o chartObject) string {
	return fmt.Sprintf("%s %s %s", o.kind, o.name, r.at)
}

// selectObjects is what s selects of objs.
func (g *generator) selectObjects(objs []chartObject, s sel) []*chartObject {
	var out []*chartObject
	for i := range objs {
		o := &objs[i]
		if o.part != s.part || (s.kind != "" && o.kind != s.kind) ||
			(s.name != "" && strings.TrimPrefix(o.name, g.b.prefix) != s.name) || !hasLabel(o.node, s.label) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// hasLabel says whether object n's metadata has the label key=value (any object, for "").
func hasLabel(n *yaml.Node, label string) bool {
	if label == "" {
		return true
	}
	k, v, _ := strings.Cut(label, "=")
	l := lookup(lookup(lookup(n, "metadata"), "labels"), k)
	return l != nil && l.Value == v
}

// applyRows applies the rows of the table whose how is (or, with not, is not) among hows.
func (g *generator) applyRows(objs []chartObject, hows []how, not bool) error {
	for _, r := range table {
		if slices.Contains(hows, r.how) == not {
			continue
		}
		found := g.selectObjects(objs, r.in)
		if len(found) == 0 {
			return fmt.Errorf("the value %s lands in %s, which config/ does not hold: change its row in hack/chart's table", r.value, r.in)
		}
		for _, o := range found {
			if err := g.apply(r, o); err != nil {
				return fmt.Errorf("the value %s: %s %s: %w", r.value, o.kind, o.name, err)
			}
		}
	}
	return nil
}

// apply puts row r into object o.
func (g *generator) apply(r row, o *chartObject) error {
	v := ".Values." + r.value
	text := strings.ReplaceAll(r.text, "@.", g.chartName+".")
	switch r.how {
	case gateObjects:
		if r.text != "" { // a condition of more than the value
			v = r.text
		}
		if o.cond == "" {
			o.cond = v
		} else {
			o.cond = "and (" + o.cond + ") (" + v + ")"
		}
		return nil
	case setScalar:
		return g.applyScalar(r, o, v, text)
	case setImage:
		return g.applyImage(r, o, v)
	case setBlock:
		return g.applyBlock(r, o, v)
	case addEntries:
		return g.applyEntries(r, o, v)
	case setFlag, addFlag, addArgs:
		return g.applyArgs(r, o, v, text)
	case addToScript:
		return g.scriptText(r, o, text)
	}
	return fmt.Errorf("row of unknown kind %d", r.how)
}

// applyScalar replaces the scalar at r.at by the value, or by text when the row has one.
func (g *generator) applyScalar(r row, o *chartObject, v, text string) error {
	n, err := find(o.node, r.at)
	if err != nil {
		return err
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%s is not a scalar", r.at)
	}
	dflt := clone(n)
	if r.derived {
		dflt = str("")
	}
	if err := g.setDefault(r.value, dflt, r.where(*o)); err != nil {
		return err
	}
	if text != "" {
		*n = *str(g.t.raw(text))
		return nil
	}
	*n = *g.t.value(v)
	return nil
}

// applyImage templates the image and pull policy of the container at r.at.
func (g *generator) applyImage(r row, o *chartObject, v string) error {
	c, err := find(o.node, r.at)
	if err != nil {
		return err
	}
	img, pull := lookup(c, "image"), lookup(c, "imagePullPolicy")
	if img == nil || pull == nil {
		return fmt.Errorf("%s has no image or no imagePullPolicy, which the chart templates", r.at)
	}
	i, err := splitImage(img.Value)
	if err != nil {
		return fmt.Errorf("%s: %w", r.at, err)
	}
	tag := i.Tag
	if r.appTag {
		if err := g.setAppVersion(i.Tag, r.where(*o)); err != nil {
			return err
		}
		tag = ""
	}
	for _, d := range []struct{ key, value string }{{"repository", i.Repository}, {"tag", tag}, {"digest", ""}, {"pullPolicy", pull.Value}} {
		if err := g.setDefault(r.value+"."+d.key, str(d.value), r.where(*o)); err != nil {
			return err
		}
	}
	set(c, "image", str(g.t.raw(strings.ReplaceAll(imageRef(v), "@.", g.chartName+"."))))
	set(c, "imagePullPolicy", g.t.value(v+".pullPolicy"))
	return nil
}

// imageRef is the template text of the image reference of image value v (.Values.<value>).
func imageRef(v string) string {
	return `{{ include "@.image" (dict "image" ` + v + ` "context" $) }}`
}

// setAppVersion records tag, read at where, as the operator's own images' tag: the chart's
// appVersion. Every such image must have the same one.
func (g *generator) setAppVersion(tag, where string) error {
	if g.appVersion.node == nil {
		g.appVersion = valueDefault{node: str(tag), where: where}
		return nil
	}
	if g.appVersion.node.Value != tag {
		return fmt.Errorf("the operator's image is tagged %s at %s but %s at %s: the chart's appVersion is one tag; make them one in config/",
			tag, where, g.appVersion.node.Value, g.appVersion.where)
	}
	return nil
}

// applyBlock sets the field at r.at to the value as YAML, or adds it when the value is not empty.
func (g *generator) applyBlock(r row, o *chartObject, v string) error {
	parent, key, err := parentOf(o.node, r.at)
	if err != nil {
		return err
	}
	if n := lookup(parent, key); n != nil {
		if err := g.setDefault(r.value, clone(n), r.where(*o)); err != nil {
			return err
		}
		set(parent, key, g.t.block("toYaml "+v))
		return nil
	}
	if r.empty == "" {
		return fmt.Errorf("no %s, and the row gives no empty default for the chart to add it under", r.at)
	}
	if err := g.setDefault(r.value, emptyNode(r.empty), r.where(*o)); err != nil {
		return err
	}
	parent.Content = append(parent.Content, g.t.wrapKeys(v, []*yaml.Node{str(key), g.t.block("toYaml " + v)})...)
	return nil
}

// applyEntries adds the value's entries to the mapping at r.at.
func (g *generator) applyEntries(r row, o *chartObject, v string) error {
	parent, key, err := parentOf(o.node, r.at)
	if err != nil {
		return err
	}
	if err := g.setDefault(r.value, emptyNode(emptyMap), r.where(*o)); err != nil {
		return err
	}
	m := lookup(parent, key)
	if m == nil {
		parent.Content = append(parent.Content, g.t.wrapKeys(v, []*yaml.Node{str(key), g.t.block("toYaml " + v)})...)
		return nil
	}
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%s is not a mapping", r.at)
	}
	k, val := g.t.lineKey("{{- with " + v + " }}{{- toYaml . | nindent " + indentMark + " }}{{- end }}")
	m.Content = append(m.Content, k, val)
	return nil
}

// applyArgs sets or appends flags and arguments of the container at r.at.
func (g *generator) applyArgs(r row, o *chartObject, v, text string) error {
	switch r.how {
	case setFlag:
		if r.dflt != "" {
			var d yaml.Node // the flag's default, typed as YAML types it (true: a bool)
			if err := yaml.Unmarshal([]byte(r.dflt), &d); err != nil {
				return err
			}
			if err := g.setDefault(r.value, d.Content[0], r.where(*o)); err != nil {
				return err
			}
		}
		return g.flags(*o, r.at, r.flag+"="+text)
	case addFlag:
		if err := g.setDefault(r.value, str(""), r.where(*o)); err != nil {
			return err
		}
		if text == "" {
			text = "{{ " + v + " }}"
		}
		return g.condFlags(*o, r.at, v, r.flag+"="+text)
	}
	// addArgs: the items, at the args' indentation.
	if err := g.setDefault(r.value, emptyNode(emptySeq), r.where(*o)); err != nil {
		return err
	}
	args, err := find(o.node, r.at+".args")
	if err != nil {
		return err
	}
	args.Content = append(args.Content, g.t.lineItem("{{- with "+v+" }}{{- toYaml . | nindent "+indentMark+" }}{{- end }}"))
	return nil
}

// scriptText appends text to the line of the container's script that starts with r.flag.
func (g *generator) scriptText(r row, o *chartObject, text string) error {
	args, err := find(o.node, r.at+".args")
	if err != nil {
		return err
	}
	var lines []*yaml.Node
	for _, a := range args.Content {
		for l := range strings.SplitSeq(a.Value, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), r.flag) {
				lines = append(lines, a)
			}
		}
	}
	if len(lines) != 1 {
		return fmt.Errorf("%s: %d lines of its args start with %q, want 1: the chart appends %s's flags to it", r.at, len(lines), r.flag, r.value)
	}
	a := lines[0]
	var out []string
	for l := range strings.SplitSeq(a.Value, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), r.flag) {
			l += g.t.raw(text)
		}
		out = append(out, l)
	}
	a.Value = strings.Join(out, "\n")
	d := str("")
	if r.empty != "" {
		d = emptyNode(r.empty)
	}
	return g.setDefault(r.value, d, r.where(*o))
}

// parentOf is the mapping holding the last step of path, and that step's key.
func parentOf(n *yaml.Node, path string) (*yaml.Node, string, error) {
	s := steps(path)
	parent := n
	if len(s) > 1 {
		var err error
		if parent, err = find(n, strings.Join(s[:len(s)-1], ".")); err != nil {
			return nil, "", err
		}
	}
	if parent.Kind != yaml.MappingNode {
		return nil, "", fmt.Errorf("%s's parent is not a mapping", path)
	}
	return parent, s[len(s)-1], nil
}

func emptyNode(empty string) *yaml.Node {
	if empty == emptySeq {
		return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	}
	return &yaml.Node{Kind: yaml.MappingNode, Tag: tagMap, Style: yaml.FlowStyle}
}

// setDefault records value's default, read at where. Two places of one value must agree: the
// chart gives both the one value.
func (g *generator) setDefault(value string, n *yaml.Node, where string) error {
	if d, ok := g.defaults[value]; ok {
		if !equal(d.node, n) {
			a, _ := encode(d.node)
			b, _ := encode(n)
			return fmt.Errorf("%s is %s at %s but %s at %s: the chart gives both the one value %s; make them one in config/",
				value, strings.TrimSpace(b), where, strings.TrimSpace(a), d.where, value)
		}
		return nil
	}
	g.defaults[value] = valueDefault{node: n, where: where}
	return nil
}

// A valueDefault is a value's default and where in config/ it was read.
type valueDefault struct {
	node  *yaml.Node
	where string
}
