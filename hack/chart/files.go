// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"

	"github.com/aether-mesh/aether-operator/internal/model"
)

// chartVersion is the chart's own version; appVersion is the image tag config/ deploys.
const chartVersion = "0.1.0"

// minKubeVersion is the oldest Kubernetes the operator runs on: the agent's per-node write
// authority (config/admission) needs the node-name claim of bound service-account tokens (1.32).
const minKubeVersion = ">= 1.32.0-0"

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
`, generatedNote, g.chartName, chartVersion, g.values.ManagerImage.Tag, minKubeVersion)
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
  replicas: {{.V.Replicas}}
  # image: the repository and tag of the image holding the manager's and the agent's binaries
  # (one image, both), and its pullPolicy (IfNotPresent, Always or Never).
  image:
    repository: {{.V.ManagerImage.Repository}}
    tag: {{printf "%q" .V.ManagerImage.Tag}}
    pullPolicy: {{.V.ManagerImage.PullPolicy}}
  # resources of the manager's container.
  resources:
{{indent 4 .V.ManagerResources}}

agent:
  # image: the repository, tag and pullPolicy of the node agent's image (DaemonSet), for its
  # container and its init container install-cni, which chains the mesh's CNI plugin into the
  # node's CNI configuration.
  image:
    repository: {{.V.AgentImage.Repository}}
    tag: {{printf "%q" .V.AgentImage.Tag}}
    pullPolicy: {{.V.AgentImage.PullPolicy}}
  # captureMode is how a meshed pod's outbound TCP reaches the node's proxy, unless the pod's
  # annotation aether.io/capture-mode says otherwise (the agent's --capture-mode): one of
  # {{.CaptureModes}}. scoped: only the mesh ports 18081 and 18082; surface: every dial
  # surface's VIP and port; all: all outbound TCP but loopback and exclusions.
  captureMode: {{.V.CaptureMode}}
  # resources of the agent's container.
  resources:
{{indent 4 .V.AgentResources}}
  # cni: the node's CNI directories, as the node's container runtime reads them, mounted into
  # the agent and install-cni: confDir holds the CNI configuration (the first file, a conflist
  # written by the cluster's primary CNI, gets the mesh's plugin chained last), binDir the
  # plugins (the mesh's aether-cni is copied there).
  cni:
    binDir: {{.V.CNIBinDir}}
    confDir: {{.V.CNIConfDir}}
  installCNI:
    # resources of the init container install-cni.
    resources:
{{indent 6 .V.InstallCNIResources}}

envoy:
  # enabled runs the node's Envoy beside each node's agent, which configures it over xDS
  # (config/default, with the component config/envoy). false: the agent alone (config/base),
  # for a cluster that cannot pull Envoy's image or that runs its own; the agent still serves
  # xDS on its socket.
  enabled: true
  # image: the repository, tag and pullPolicy of the node's Envoy: the 1.40 line, which the
  # agent's xDS protos come from.
  image:
    repository: {{.V.EnvoyImage.Repository}}
    tag: {{printf "%q" .V.EnvoyImage.Tag}}
    pullPolicy: {{.V.EnvoyImage.PullPolicy}}
  # resources of Envoy's container. One Envoy proxies every meshed pod of its node: no CPU
  # limit, as throttling a proxy stalls every connection through it.
  resources:
{{indent 4 .V.EnvoyRes}}

# ignoredNamespaces are the namespaces the mesh never takes, whatever their pods' labels: the
# manager's, the agent's and install-cni's --ignored-namespaces, and the namespaces the pod
# webhooks are never called for. The release's namespace is always added.
ignoredNamespaces:
{{- range .V.IgnoredNamespaces}}
- {{.}}
{{- end}}

spire:
  # enabled makes SPIRE the mesh's workload identity issuer: the manager and the agent run with
  # --identity-issuer=spire. false: --identity-issuer=none, the mesh without an issuer.
  enabled: true

certManager:
  # enabled has cert-manager issue the webhooks' serving certificate (config/certmanager: a
  # self-signed Issuer and a Certificate writing Secret webhook.certSecretName) and inject its
  # CA into the webhook configurations. It needs cert-manager in the cluster. false: provide
  # the Secret and webhook.caBundle yourself.
  enabled: true

webhook:
  # certSecretName is the Secret (type kubernetes.io/tls: tls.crt and tls.key) the manager
  # serves the admission webhooks with, mounted at its --webhook-cert-dir and reloaded when it
  # changes. Its certificate must be valid for <fullname>-webhook-service.<namespace>.svc. With
  # certManager.enabled, cert-manager writes it.
  certSecretName: {{.V.CertSecretName}}
  # caBundle is the base64-encoded PEM of the CA that signed certSecretName's certificate: the
  # API server checks the webhooks' certificate with it. Required when certManager.enabled is
  # false, unused otherwise.
  caBundle: ""
`

func (g *generator) valuesFile() (string, error) {
	modes := make([]string, len(model.CaptureModes))
	for i, m := range model.CaptureModes {
		modes[i] = string(m)
	}
	t := template.Must(template.New("values").Funcs(template.FuncMap{"indent": indentBlock}).Parse(valuesTemplate))
	var buf bytes.Buffer
	err := t.Execute(&buf, map[string]any{
		"Name": g.chartName, "Namespace": g.b.namespace, "Note": generatedNote, "V": g.values,
		"CaptureModes": strings.Join(modes, ", "),
	})
	return buf.String(), err
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
agent.captureMode, refused unless it is a capture mode.
*/}}
{{- define "@.captureMode" -}}
{{- $modes := list @MODES@ }}
{{- if not (has .Values.agent.captureMode $modes) }}
{{- fail (printf "agent.captureMode: %q is not a capture mode; set one of %s" (toString .Values.agent.captureMode) (join ", " $modes)) }}
{{- end }}
{{- .Values.agent.captureMode }}
{{- end }}
`

func (g *generator) helpersFile() string {
	modes := make([]string, len(model.CaptureModes))
	for i, m := range model.CaptureModes {
		modes[i] = fmt.Sprintf("%q", m)
	}
	return strings.NewReplacer("@GENERATED@", generatedNote, "@MODES@", strings.Join(modes, " "), "@.", g.chartName+".").
		Replace(helpersTemplate)
}

func (g *generator) notesFile() string {
	return `{{/* ` + generatedNote + ` */ -}}
{{ .Chart.Name }} {{ .Chart.AppVersion }} is installed in namespace {{ .Release.Namespace }} (release {{ .Release.Name }}).

Wait for the manager and the node agents:

  kubectl -n {{ .Release.Namespace }} rollout status deployment/` + g.resourceNameText(g.managerName) + `
  kubectl -n {{ .Release.Namespace }} rollout status daemonset/` + g.resourceNameText(g.agentName) + `

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
