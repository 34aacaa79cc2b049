// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"

	"go.yaml.in/yaml/v3"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// chartVersion is the chart's own version; appVersion is the operator image's tag config/ deploys,
// which the operator's images follow unless their tag is set.
const chartVersion = "0.1.0"

// minKubeVersion is the oldest Kubernetes the chart installs on: the agent's per-node write
// authority (config/admission) needs the node-name claim of bound service-account tokens (1.32),
// and the SPIRE agent the chart installs by default is allowed to read its kubelet's pods by
// nodes/pods alone (config/spire/agent-rbac.yaml), which the kubelet honours from 1.33 on
// (KubeletFineGrainedAuthz); an older kubelet would demand nodes/proxy.
const minKubeVersion = ">= 1.33.0-0"

func (g *generator) chartFile() string {
	return fmt.Sprintf(`# %s
apiVersion: v2
name: %s
description: >-
  The Aether service mesh operator: the manager (the mesh's controllers and admission webhooks),
  the node agent with its CNI plugin, and each node's Envoy.
type: application
version: %s
appVersion: %q
kubeVersion: %q
keywords:
- kubernetes
- operator
- service-mesh
annotations:
  aether.io/generated-by: hack/chart
`, generatedNote, g.chartName, chartVersion, g.appVersion.node.Value, minKubeVersion)
}

// valuesTemplate is values.yaml: every value, with what it does. Its defaults come from config/.
const valuesTemplate = `# The values of the {{.Name}} chart.
# {{.Note}}
#
# Install into the namespace the release's objects go to:
#   helm install {{.Name}} dist/chart --namespace {{.Namespace}} --create-namespace
# A release named {{.Name}} names its objects exactly as kustomize does (config/default).

# nameOverride replaces the chart's name ({{.Name}}) in the objects' names, which are
# <release>-<name>-<object>, or <release>-<object> when the release's name contains <name>.
nameOverride: ""
# fullnameOverride replaces that <release>-<name> whole: the objects are <fullnameOverride>-<object>.
fullnameOverride: ""

global:
  # imageRegistry, when set, replaces the registry of every image the chart runs (the operator's,
  # Envoy's, SPIRE's): registry.example/mirror makes docker.io/aether/operator
  # registry.example/mirror/aether/operator.
  imageRegistry: ""

# imagePullSecrets are the Secrets (of type kubernetes.io/dockerconfigjson, in the release's
# namespace; SPIRE's pods read them in spire.namespace) every pod of the chart pulls its images
# with: a list of {name: <secret>}.
imagePullSecrets: {{y 0 "imagePullSecrets"}}

crd:
  # enabled installs the CRDs MeshEndpoint and MeshService (config/crd). Turn it off when
  # something else installs them.
  enabled: true
  # keep leaves the CRDs in the cluster on helm uninstall (helm.sh/resource-policy: keep):
  # deleting a CRD deletes every MeshEndpoint and MeshService with it.
  keep: true

manager:
  # replicas of the manager Deployment (the controllers and the admission webhooks). With
  # leader election (--leader-elect) one replica reconciles at a time; every replica serves
  # the webhooks.
  replicas: {{d "manager.replicas"}}
  # image: the repository and tag of the image holding the manager's and the agent's binaries
  # (one image, both), and its pullPolicy (IfNotPresent, Always or Never).
  image:
    repository: {{d "manager.image.repository"}}
    # tag: "" is the chart's appVersion, the release the chart was built for.
    tag: {{printf "%q" (d "manager.image.tag")}}
    # digest (sha256:...), when set, pins the image by content: the tag is then ignored.
    digest: {{printf "%q" (d "manager.image.digest")}}
    pullPolicy: {{d "manager.image.pullPolicy"}}
  # resources of the manager's container.
  resources:{{y 4 "manager.resources"}}
  # nodeSelector, tolerations and affinity: where the manager's pods run (the pod spec's fields
  # of the same names). affinity's default spreads the replicas over nodes; helm merges what you
  # set into it: set affinity.podAntiAffinity to null to drop it.
  nodeSelector:{{y 4 "manager.nodeSelector"}}
  tolerations:{{y 4 "manager.tolerations"}}
  affinity:{{y 4 "manager.affinity"}}
  # podAnnotations and podLabels are added to the manager's pods' annotations and labels (not
  # to the selector, which stays config/'s).
  podAnnotations:{{y 4 "manager.podAnnotations"}}
  podLabels:{{y 4 "manager.podLabels"}}
  # logLevel is the manager's --zap-log-level: debug, info, error, panic, or a number above 0 for
  # more verbose logs. "": the flag is not given, the binary logs at info.
  logLevel: {{printf "%q" (d "manager.logLevel")}}
  # extraArgs are appended to the manager's arguments, after every flag the chart sets (a flag
  # given again here wins).
  extraArgs:{{y 4 "manager.extraArgs"}}

agent:
  # image: the repository, tag and pullPolicy of the node agent's image (DaemonSet), for its
  # container and its init container install-cni, which chains the mesh's CNI plugin into the
  # node's CNI configuration.
  image:
    repository: {{d "agent.image.repository"}}
    # tag: "" is the chart's appVersion; digest, when set, pins the image (the tag is ignored).
    tag: {{printf "%q" (d "agent.image.tag")}}
    digest: {{printf "%q" (d "agent.image.digest")}}
    pullPolicy: {{d "agent.image.pullPolicy"}}
  # captureMode is how a meshed pod's outbound TCP reaches the node's proxy, unless the pod's
  # annotation aether.io/capture-mode says otherwise (the agent's --capture-mode): one of
  # {{.CaptureModes}}. scoped: only the mesh ports 18081 and 18082; surface: every dial
  # surface's VIP and port; all: all outbound TCP but loopback and exclusions.
  captureMode: {{d "agent.captureMode"}}
  # meshDNS serves the mesh DNS in every meshed pod (the agent's --mesh-dns): its DNS queries are
  # redirected to the agent on 127.0.0.1:18054 in the pod, which answers
  # <service>.<namespace>.<mesh domain> with the service's VIP and forwards every other query to
  # the pod's resolver unchanged. false: no pod's DNS is touched.
  meshDNS: {{d "agent.meshDNS"}}
  # resources of the agent's container.
  resources:{{y 4 "agent.resources"}}
  # cni: the node's CNI directories, as the node's container runtime reads them, mounted into
  # the agent and install-cni: confDir holds the CNI configuration (the first file, a conflist
  # written by the cluster's primary CNI, gets the mesh's plugin chained last), binDir the
  # plugins (the mesh's aether-cni is copied there).
  cni:
    binDir: {{d "agent.cni.binDir"}}
    confDir: {{d "agent.cni.confDir"}}
  installCNI:
    # resources of the init container install-cni.
    resources:{{y 6 "agent.installCNI.resources"}}
  # nodeSelector, tolerations and affinity: where the node agent's pods run (the pod spec's
  # fields of the same names). The default tolerations take every taint: a node without its
  # agent cannot start meshed pods.
  nodeSelector:{{y 4 "agent.nodeSelector"}}
  tolerations:{{y 4 "agent.tolerations"}}
  affinity:{{y 4 "agent.affinity"}}
  # podAnnotations and podLabels are added to the node agent's pods' annotations and labels
  # (not to the selector, which stays config/'s).
  podAnnotations:{{y 4 "agent.podAnnotations"}}
  podLabels:{{y 4 "agent.podLabels"}}
  # logLevel is the agent's --zap-log-level: debug, info, error, panic, or a number above 0 for
  # more verbose logs. "": the flag is not given, the binary logs at info.
  logLevel: {{printf "%q" (d "agent.logLevel")}}
  # extraArgs are appended to the agent's arguments (not install-cni's), after every flag the
  # chart sets (a flag given again here wins).
  extraArgs:{{y 4 "agent.extraArgs"}}

identityGate:
  # enabled injects the identity gate into mesh pods (the manager's --identity-gate): the init
  # container aether-identity-ready holds a pod until SPIRE has issued its SVID. Its way to SPIRE's
  # socket is an inline csi.aether.io volume (not a hostPath), so gated pods pass Pod Security's
  # baseline and restricted levels; the CSI node plugin runs for it whatever udsCsi.enabled says.
  # Only with spire.enabled. A pod opts out with the annotation aether.io/identity-gate: "false".
  enabled: {{d "identityGate.enabled"}}

udsCsi:
  # enabled runs csi.aether.io, the mesh's CSI node plugin, on every node (config/csi): the carrier
  # of an app's Unix socket (endpoint.aether.io/uds-socket). A pod with an inline
  # csi: {driver: csi.aether.io} volume gets a tmpfs of its own at /run/aether/uds/<pod-uid>,
  # root:<its fsGroup>, mode 2770, which the node's Envoy dials and the agent probes. false: the
  # agents (--uds-csi=false) keep every pod on TCP delivery and read no EndpointPolicy; pods with
  # such a volume wait in ContainerCreating (FailedMount); the plugin still runs for the identity
  # gate (identityGate.enabled, with spire.enabled). With envoy.enabled false it still runs: the
  # agent probes the sockets for your own proxy.
  enabled: {{d "udsCsi.enabled"}}
  # image of the plugin: the operator's (tag "" is the chart's appVersion; digest pins it).
  image:{{image 4 "udsCsi.image"}}
  # resources of the plugin's container.
  resources:{{y 4 "udsCsi.resources"}}

envoy:
  # enabled runs the node's Envoy on each node, in a DaemonSet of its own that the node's agent
  # configures over xDS (config/default, with the component config/envoy): an agent upgrade
  # leaves it running; an Envoy upgrade starts the new one beside the old (SO_REUSEPORT) and
  # drains the old. false: the agent alone (config/base), for a cluster that cannot pull Envoy's
  # image or that runs its own; the agent still serves xDS on its socket.
  enabled: true
  # image: the repository, tag and pullPolicy of the node's Envoy: the 1.40 line, which the
  # agent's xDS protos come from.
  image:{{image 4 "envoy.image"}}
  # resources of Envoy's container. One Envoy proxies every meshed pod of its node: no CPU
  # limit, as throttling a proxy stalls every connection through it.
  resources:{{y 4 "envoy.resources"}}
  # seccompProfileDir is the host directory Envoy's seccomp profile is written to (envoy.json,
  # by the init container install-seccomp): <the kubelet's root dir>/seccomp/aether. Envoy's
  # container names it as its Localhost profile aether/envoy.json, which the kubelet looks up
  # under <its root dir>/seccomp. Change it with a kubelet whose root dir is not
  # /var/lib/kubelet; it must end in /seccomp/aether.
  seccompProfileDir: {{d "envoy.seccompProfileDir"}}
  helper:
    # image of envoy-helper, beside Envoy in its pod: it answers the readiness probe and drains
    # Envoy before it stops (the agent's binary: envoy-helper, envoy-drain), and of the init
    # container install-seccomp, which writes Envoy's seccomp profile. A value of its own,
    # not agent.image, so that an agent upgrade leaves the node's Envoy running; change it with
    # envoy.image, when Envoy is to roll anyway.
    image:
      repository: {{d "envoy.helper.image.repository"}}
      # tag: "" is the chart's appVersion; digest, when set, pins the image.
      tag: {{printf "%q" (d "envoy.helper.image.tag")}}
      digest: {{printf "%q" (d "envoy.helper.image.digest")}}
      pullPolicy: {{d "envoy.helper.image.pullPolicy"}}
    # resources of envoy-helper.
    resources:{{y 6 "envoy.helper.resources"}}
  # nodeSelector, tolerations and affinity: where the node Envoy's pods run (the pod spec's
  # fields of the same names). Keep them on the agents' nodes: a node's agent configures its
  # Envoy, and an Envoy on a node without one waits for its bootstrap.
  nodeSelector:{{y 4 "envoy.nodeSelector"}}
  tolerations:{{y 4 "envoy.tolerations"}}
  affinity:{{y 4 "envoy.affinity"}}
  # podAnnotations and podLabels are added to the node Envoy's pods' annotations and labels
  # (not to the selector, which stays config/'s).
  podAnnotations:{{y 4 "envoy.podAnnotations"}}
  podLabels:{{y 4 "envoy.podLabels"}}
  # logLevel is Envoy's --log-level: trace, debug, info, warning, warn, error, critical or off.
  # "": the flag is not given, Envoy logs at info.
  logLevel: {{printf "%q" (d "envoy.logLevel")}}
  # extraArgs are appended to Envoy's command line, each one shell-quoted, after the flags
  # config/envoy gives it (--drain-time-s, --drain-strategy, ...).
  extraArgs:{{y 4 "envoy.extraArgs"}}

# meshDomain is the mesh's DNS domain and its SPIFFE trust domain: services are
# <svc>.<ns>.<meshDomain> and identities spiffe://<meshDomain>/ns/<ns>/sa/<sa>. The manager's and
# the agent's --mesh-domain, and SPIRE's trust domain (spire.trustDomain). A DNS domain in lower
# case. The node agent refuses to start when its SPIRE agent serves another trust domain.
meshDomain: {{.Spire.TrustDomain}}

# ignoredNamespaces are the namespaces the mesh never takes, whatever their pods' labels: the
# manager's, the agent's and install-cni's --ignored-namespaces, and the namespaces the pod
# webhooks are never called for. The release's namespace is always added.
ignoredNamespaces:{{y 0 "ignoredNamespaces"}}

spire:
  # enabled makes SPIRE the mesh's workload identity issuer: the manager and the agent run with
  # --identity-issuer=spire, and the node agent mounts the SPIRE
  # agent's admin socket (the host's /run/spire/admin-sockets) and fetches its pods' SVIDs there
  # (--spire-admin-socket=/run/spire/admin-sockets/admin.sock): config/spire's patches of the
  # node agent. false: --identity-issuer=none, the mesh without an issuer (config/default), and
  # nothing of SPIRE is installed, whatever install says.
  enabled: true
  # install deploys SPIRE itself with the mesh (config/spire's own objects, in namespace
  # namespace): the SPIRE server (a StatefulSet of one, with the manager's registrar as a sidecar,
  # which writes the MeshServices' registration entries), a SPIRE agent per node (DaemonSet), their
  # RBAC and configuration. Only with enabled. false: the cluster runs its own SPIRE, whose trust
  # domain is meshDomain, whose agents serve the Workload API at
  # /run/spire/agent-sockets/spire-agent.sock and the admin API at
  # /run/spire/admin-sockets/admin.sock on each node, with
  # spiffe://<meshDomain>/ns/<release namespace>/sa/<fullname>-agent among their
  # authorized_delegates, and whose registration you manage (or run the registrar yourself).
  install: true
  # namespace is SPIRE's own namespace, which the chart creates (and helm uninstall deletes) with
  # install: not the release's, so that the cluster's identity issuer, its CA and its RBAC stay
  # apart from the operator's. It must not exist before the install.
  namespace: {{.Spire.Namespace}}
  # trustDomain is SPIRE's trust domain, which is the mesh's domain. "": meshDomain. Anything
  # but meshDomain is refused: set meshDomain instead.
  trustDomain: ""
  # clusterName is the cluster's name in SPIRE's k8s_psat node attestation: the server admits
  # agents of this cluster, and the node agents' alias entry selects k8s_psat:cluster:<clusterName>.
  clusterName: {{.Spire.ClusterName}}
  server:
    # image: the repository, tag and pullPolicy of spire-server (SPIRE's release image of the same
    # version has the binary at the same path, /opt/spire/bin/spire-server).
    image:{{image 6 "spire.server.image"}}
    # resources of the SPIRE server's container.
    resources:{{y 6 "spire.server.resources"}}
  agent:
    # image: the repository, tag and pullPolicy of spire-agent (/opt/spire/bin/spire-agent).
    image:{{image 6 "spire.agent.image"}}
    # resources of the SPIRE agent's container.
    resources:{{y 6 "spire.agent.resources"}}
  registrar:
    # resources of the registrar, the SPIRE server's sidecar, which runs manager.image.
    resources:{{y 6 "spire.registrar.resources"}}

certManager:
  # enabled has cert-manager issue the webhooks' serving certificate (config/certmanager: a
  # self-signed Issuer and a Certificate writing Secret webhook.certSecretName) and inject its
  # CA into the webhook configurations. It needs cert-manager in the cluster. false: the manager
  # keeps the certificate itself (--cert-rotation): it writes a CA and the certificate into
  # Secret webhook.certSecretName, which the chart makes empty, renews them, and injects the CA
  # into the webhook configurations (a Role lets it read and update that one Secret, and
  # manager-role those two configurations, by name).
  enabled: false

webhook:
  # certSecretName is the Secret the manager serves the admission webhooks with, mounted at its
  # --webhook-cert-dir and reloaded when it changes; its certificate is valid for
  # <fullname>-webhook-service.<namespace>.svc. The chart makes it, empty, and the manager's
  # rotation writes it (the manager may not create Secrets); or cert-manager makes and writes
  # it, with certManager.enabled. Empty: <fullname>-webhook-server-cert.
  certSecretName: {{printf "%q" (d "webhook.certSecretName")}}

# prometheus: monitoring of the mesh with the Prometheus operator (its CRDs must be installed)
# and Grafana (config/prometheus). Each part is off by default.
prometheus:
  serviceMonitor:
    # enabled adds ServiceMonitors of the manager's and the node agents' metrics and of the node
    # proxies' own statistics (Envoy's, relayed by envoy-helper on each proxy pod's port 19004),
    # and the agents' and the proxies' headless Services (port 19090 on each node, 19004 on each
    # proxy pod). All three serve HTTPS and authorize each scrape by its bearer token
    # (TokenReview, SubjectAccessReview): bind the ClusterRole <fullname>-metrics-reader to
    # Prometheus's ServiceAccount.
    enabled: false
  rules:
    # enabled adds the mesh's alerts (a PrometheusRule), each with its runbook in
    # docs/operations/runbooks.md.
    enabled: false
  dashboard:
    # enabled adds the Grafana dashboard as a ConfigMap labelled grafana_dashboard: "1", which
    # Grafana's dashboard sidecar loads.
    enabled: false
`

func (g *generator) valuesFile() (string, error) {
	modes := make([]string, len(model.CaptureModes))
	for i, m := range model.CaptureModes {
		modes[i] = string(m)
	}
	dflt := func(value string) (*yaml.Node, error) {
		d, ok := g.defaults[value]
		if !ok {
			return nil, fmt.Errorf("valuesTemplate gives the default of %s, which no row of the table or code reads", value)
		}
		return d.node, nil
	}
	// scalar is a scalar value's default.
	scalar := func(value string) (string, error) {
		n, err := dflt(value)
		if err != nil {
			return "", err
		}
		if n.Kind != yaml.ScalarNode {
			return "", fmt.Errorf("%s's default is not a scalar", value)
		}
		return n.Value, nil
	}
	funcs := template.FuncMap{
		// d is a scalar value's default.
		"d": scalar,
		// image is an image value's defaults after its key: repository, tag, digest and
		// pullPolicy on the next lines, indented by n (tag and digest quoted: "" is a value).
		"image": func(n int, value string) (string, error) {
			var b strings.Builder
			for _, f := range []struct {
				key    string
				quoted bool
			}{{"repository", false}, {"tag", true}, {"digest", true}, {"pullPolicy", false}} {
				v, err := scalar(value + "." + f.key)
				if err != nil {
					return "", err
				}
				if f.quoted {
					v = fmt.Sprintf("%q", v)
				}
				fmt.Fprintf(&b, "\n%s%s: %s", strings.Repeat(" ", n), f.key, v)
			}
			return b.String(), nil
		},
		// y is a block value's default, after its key: {} or [] when empty, else its YAML on
		// the next lines, indented by n.
		"y": func(n int, value string) (string, error) {
			d, err := dflt(value)
			if err != nil {
				return "", err
			}
			if len(d.Content) == 0 && d.Kind != yaml.ScalarNode {
				return " " + map[yaml.Kind]string{yaml.MappingNode: emptyMap, yaml.SequenceNode: emptySeq}[d.Kind], nil
			}
			text, err := encode(d)
			return "\n" + indentBlock(n, text), err
		},
	}
	t := template.Must(template.New("values").Funcs(funcs).Parse(valuesTemplate))
	var buf bytes.Buffer
	err := t.Execute(&buf, map[string]any{
		"Name": g.chartName, "Namespace": g.b.namespace, "Note": generatedNote, "Spire": g.spireValues,
		"CaptureModes": strings.Join(modes, ", "),
	})
	if err != nil {
		return "", err
	}
	return buf.String(), g.checkValues(buf.Bytes())
}

// checkValues fails unless values.yaml (text) holds every value of the table, each at the
// default read from config/: a row without its documented value would be a knob nobody sees.
func (g *generator) checkValues(text []byte) error {
	docs, err := decodeAll(text)
	if err != nil || len(docs) != 1 {
		return fmt.Errorf("values.yaml: not one YAML mapping (%v)", err)
	}
	for _, r := range table {
		if _, err := find(docs[0], r.value); err != nil {
			return fmt.Errorf("values.yaml has no %s, which a row of hack/chart's table templates: add it, with what it does, to valuesTemplate", r.value)
		}
	}
	for value, d := range g.defaults {
		n, err := find(docs[0], value)
		if err != nil {
			return fmt.Errorf("values.yaml has no %s (default %s)", value, d.where)
		}
		if !equal(n, d.node) {
			return fmt.Errorf("values.yaml gives %s a default other than the one read at %s", value, d.where)
		}
	}
	return nil
}

// indentBlock indents every line of the YAML block text by n spaces, dropping its final newline.
func indentBlock(n int, text string) string {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.Repeat(" ", n) + l
	}
	return strings.Join(lines, "\n")
}

// helpersTemplate is templates/_helpers.tpl; @ stands for the chart's name, the helpers'
// namespace. name, fullname and resourceName are those of kubebuilder's helm plugin.
const helpersTemplate = `{{/* @GENERATED@ */}}

{{/*
The chart's name.
*/}}
{{- define "@.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name, which every object's name starts with: the release's name when it
contains the chart's, else <release>-<chart>; truncated at 63 characters, the limit of some
name fields (DNS labels).
*/}}
{{- define "@.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
An object's name, <fullname>-<suffix>, at most 63 characters (the full name is cut, not the
suffix). Takes a dict: suffix (the object's name in config/, without its prefix) and context
(the root context).
*/}}
{{- define "@.resourceName" -}}
{{- $fullname := include "@.fullname" .context }}
{{- $suffix := .suffix }}
{{- $maxLen := sub 62 (len $suffix) | int }}
{{- if gt (len $fullname) $maxLen }}
{{- printf "%s-%s" (trunc $maxLen $fullname | trimSuffix "-") $suffix | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" $fullname $suffix | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
The Secret of the webhooks' certificate: webhook.certSecretName, or <fullname>-webhook-server-cert
(the name config/ gives it, under the release's name).
*/}}
{{- define "@.certSecretName" -}}
{{- .Values.webhook.certSecretName | default (include "@.resourceName" (dict "suffix" "webhook-server-cert" "context" $)) }}
{{- end }}

{{/*
The labels of every object of the chart (not of its pod templates and selectors, which keep
config/'s).
*/}}
{{- define "@.labels" -}}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The namespaces the mesh never takes: ignoredNamespaces and the release's own, as a YAML list
(the pod webhooks' namespaceSelector) and comma-separated (--ignored-namespaces).
*/}}
{{- define "@.ignoredNamespaceList" -}}
{{- toYaml (uniq (concat .Values.ignoredNamespaces (list .Release.Namespace))) }}
{{- end }}
{{- define "@.ignoredNamespaces" -}}
{{- join "," (uniq (concat .Values.ignoredNamespaces (list .Release.Namespace))) }}
{{- end }}

{{/*
meshDomain, refused unless it is a DNS domain in lower case (the manager's and the agent's
--mesh-domain, and a SPIFFE trust domain).
*/}}
{{- define "@.meshDomain" -}}
{{- $d := toString .Values.meshDomain }}
{{- if or (gt (len $d) 253) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $d)) }}
{{- fail (printf "meshDomain: %q is not a DNS domain in lower case (letters, digits, '-' and '.', at most 253 characters); it names the services and is the SPIFFE trust domain: set one such as @DOMAIN@" $d) }}
{{- end }}
{{- $d }}
{{- end }}

{{/*
spire.trustDomain: meshDomain, which it may only repeat (the mesh's domain is its trust domain).
*/}}
{{- define "@.spireTrustDomain" -}}
{{- $d := include "@.meshDomain" . }}
{{- $td := toString (.Values.spire.trustDomain | default $d) }}
{{- if ne $td $d }}
{{- fail (printf "spire.trustDomain: %q is not meshDomain %q; the mesh's domain is its SPIFFE trust domain: set meshDomain: %s and leave spire.trustDomain empty" $td $d $td) }}
{{- end }}
{{- $td }}
{{- end }}

{{/*
spire.namespace, refused unless it is a namespace name other than the release's: the chart
creates it, which it cannot do for the namespace it installs into.
*/}}
{{- define "@.spireNamespace" -}}
{{- $ns := toString .Values.spire.namespace }}
{{- if or (gt (len $ns) 63) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $ns)) }}
{{- fail (printf "spire.namespace: %q is not a namespace name (lower-case letters, digits and '-', at most 63 characters): set one such as @SPIRENS@" $ns) }}
{{- end }}
{{- if eq $ns .Release.Namespace }}
{{- fail (printf "spire.namespace: %q is the release's namespace; with spire.install the chart creates SPIRE's namespace, apart from the operator's: set another, such as @SPIRENS@ (or spire.install=false to run your own SPIRE)" $ns) }}
{{- end }}
{{- $ns }}
{{- end }}

{{/*
spire.clusterName, refused unless it can stand in SPIRE's configuration and in a selector
(k8s_psat:cluster:<name>).
*/}}
{{- define "@.spireClusterName" -}}
{{- $name := toString .Values.spire.clusterName }}
{{- if not (regexMatch "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" $name) }}
{{- fail (printf "spire.clusterName: %q is not a cluster name for SPIRE's k8s_psat (letters, digits, '-', '_' and '.', starting and ending with a letter or digit): set one such as @CLUSTER@" $name) }}
{{- end }}
{{- $name }}
{{- end }}

{{/*
A --zap-log-level (manager.logLevel, agent.logLevel), refused unless controller-runtime's zap
takes it. Takes a dict: value (the value's name) and level.
*/}}
{{- define "@.zapLogLevel" -}}
{{- $level := toString .level }}
{{- if not (regexMatch "^(debug|info|error|panic|[1-9][0-9]*)$" $level) }}
{{- fail (printf "%s: %q is not a log level; set one of debug, info, error, panic, a number above 0 (more verbose as it grows), or \"\" for the binary's default" .value $level) }}
{{- end }}
{{- $level }}
{{- end }}

{{/*
envoy.logLevel, refused unless Envoy's --log-level takes it.
*/}}
{{- define "@.envoyLogLevel" -}}
{{- $levels := list "trace" "debug" "info" "warning" "warn" "error" "critical" "off" }}
{{- $level := toString .Values.envoy.logLevel }}
{{- if not (has $level $levels) }}
{{- fail (printf "envoy.logLevel: %q is not one of Envoy's log levels; set one of %s, or \"\" for Envoy's default" $level (join ", " $levels)) }}
{{- end }}
{{- $level }}
{{- end }}

{{/*
envoy.seccompProfileDir, refused unless it is an absolute path ending in /seccomp/aether: Envoy's
container names its profile aether/envoy.json, under the kubelet's <root dir>/seccomp.
*/}}
{{- define "@.seccompProfileDir" -}}
{{- $dir := toString .Values.envoy.seccompProfileDir }}
{{- if not (regexMatch "^/(.+/)?seccomp/aether$" $dir) }}
{{- fail (printf "envoy.seccompProfileDir: %q is not <the kubelet's root dir>/seccomp/aether, where the kubelet finds Envoy's Localhost profile aether/envoy.json; set it to an absolute path ending in /seccomp/aether, such as /var/lib/kubelet/seccomp/aether" $dir) }}
{{- end }}
{{- $dir }}
{{- end }}

{{/*
Its argument as one word of a shell command line: in single quotes, each of its own single
quotes written '\''.
*/}}
{{- define "@.shellQuote" -}}
'{{ replace "'" "'\\''" (toString .) }}'
{{- end }}

{{/*
agent.captureMode, refused unless it is a capture mode.
*/}}
{{- define "@.captureMode" -}}
{{- $modes := list @MODES@ }}
{{- if not (has .Values.agent.captureMode $modes) }}
{{- fail (printf "agent.captureMode: %q is not a capture mode; set one of %s" (toString .Values.agent.captureMode) (join ", " $modes)) }}
{{- end }}
{{- .Values.agent.captureMode }}
{{- end }}

{{/*
An image reference from an image value (dict "image" <value> "context" $): repository@digest
when a digest is set, else repository:tag, the tag the chart's appVersion when empty. With
global.imageRegistry the repository's own registry (its first part, when that names a host) is
replaced by it: one mirror for every image.
*/}}
{{- define "@.image" -}}
{{- $img := .image }}
{{- $repo := $img.repository }}
{{- $registry := "" }}
{{- with .context.Values.global }}{{ $registry = .imageRegistry | default "" }}{{ end }}
{{- if $registry }}
{{- $parts := splitList "/" $repo }}
{{- $first := first $parts }}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) }}
{{- $repo = join "/" (rest $parts) }}
{{- end }}
{{- $repo = printf "%s/%s" (trimSuffix "/" $registry) $repo }}
{{- end }}
{{- if $img.digest }}
{{- if not (regexMatch "^sha256:[a-f0-9]{64}$" (toString $img.digest)) }}
{{- fail (printf "image %s: digest %q is not sha256:<64 hex digits>; set the digest the registry reports for the image (or leave it empty to use the tag)" $img.repository (toString $img.digest)) }}
{{- end }}
{{- printf "%s@%s" $repo $img.digest }}
{{- else }}
{{- printf "%s:%s" $repo (toString ($img.tag | default .context.Chart.AppVersion)) }}
{{- end }}
{{- end }}
`

func (g *generator) helpersFile() string {
	modes := make([]string, len(model.CaptureModes))
	for i, m := range model.CaptureModes {
		modes[i] = fmt.Sprintf("%q", m)
	}
	return strings.NewReplacer("@GENERATED@", generatedNote, "@MODES@", strings.Join(modes, " "), "@.", g.chartName+".",
		"@DOMAIN@", g.spireValues.TrustDomain, "@SPIRENS@", g.spireValues.Namespace, "@CLUSTER@", g.spireValues.ClusterName).
		Replace(helpersTemplate)
}

func (g *generator) notesFile() string {
	return `{{/* ` + generatedNote + ` */ -}}
{{ .Chart.Name }} {{ .Chart.AppVersion }} is installed in namespace {{ .Release.Namespace }} (release {{ .Release.Name }}).

Wait for the manager and the node agents:

  kubectl -n {{ .Release.Namespace }} rollout status deployment/` + g.resourceNameText(g.managerName) + `
  kubectl -n {{ .Release.Namespace }} rollout status daemonset/` + g.resourceNameText(g.agentName) + `

{{- if and .Values.spire.enabled .Values.spire.install }}

and SPIRE, the mesh's identity issuer (trust domain ` + g.helper("spireTrustDomain") + `):

  kubectl -n {{ .Values.spire.namespace }} rollout status statefulset/` + g.spireServer + `
  kubectl -n {{ .Values.spire.namespace }} rollout status daemonset/` + g.spireAgent + `
{{- end }}

A pod joins the mesh with the label aether.io/managed: "true" and its ports' protocols in
annotations; kubectl get meshservices,meshendpoints -A shows what the mesh made of it.
`
}

const helmignore = `# Patterns to ignore when packaging the chart (helm package).
.DS_Store
.git/
.gitignore
*.swp
*.tmp
*.bak
*.orig
*~
.idea/
.vscode/
*.tgz
`
