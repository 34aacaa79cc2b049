#!/usr/bin/env bash
# Deploys the operator into the local cluster (hack/cluster/up.sh) the way a user does, with the
# node's Envoy (config/envoy), SPIRE and the CSI node plugin, and the node's CNI dirs under
# $STATE/cni. This cluster's images come from the local import of make images (no registry is
# reachable from it), so the node Envoy's image is make images' (hack/image envoy.go: the same
# release binary as envoyproxy/envoy, with the files config/envoy's DaemonSet needs) in place of
# envoyproxy/envoy: the repository changes, nothing else of the DaemonSet. One of the documented
# install paths (hack/install/install.sh) is installed for real: the Helm chart, by the documented
# command with the node's values, or kustomize, config/base with the components config/envoy,
# config/spire and config/csi through an overlay written to $STATE/deploy. Either way the manager keeps its webhook
# certificate itself (--cert-rotation: the Secret the install makes, and the webhook
# configurations' caBundle), as on a cluster without cert-manager. test/e2e/cluster/install_test.go dry-runs the
# other paths against this API server.
# The Gateway API's CRDs are installed first, so that the manager serves route status.
set -euo pipefail
cd "$(dirname "$0")/../.."
STATE=${AETHER_CLUSTER_DIR:-/tmp/aether-cluster}
K=hack/cluster/kubectl.sh
NS=aether-operator-system
P=$STATE/pki
log() { echo "cluster-deploy: $*" >&2; }

# The node Envoy's image, as make images named it in its archive (docker.io/aether/envoy:v<release>):
# put in place of envoyproxy/envoy by both install paths.
envoy_image=$(tar -xOf bin/images/envoy.tar index.json | sed -n 's/.*"io.containerd.image.name": *"\([^"]*\)".*/\1/p')
[[ $envoy_image == *:* ]] || { echo "cluster-deploy: bin/images/envoy.tar names no image (\"$envoy_image\"): run make images" >&2; exit 1; }
envoy_repository=${envoy_image%:*} envoy_tag=${envoy_image##*:}

# config/base, config/envoy, config/spire and config/csi as they are, but for three things this node lacks:
# - a registry: the node Envoy's image is the local one above;
# - its runtime reads its CNI configuration and plugins under $STATE/cni (hack/cluster/up.sh),
#   not /etc/cni/net.d and /opt/cni/bin, so the agent DaemonSet's two hostPaths point there;
# - it has no cluster DNS, so the SPIRE agent finds its server by the Service's address, which
#   the kubelet gives each pod created after the Service (SPIRE_SERVER_SERVICE_HOST; kustomize
#   applies Services before DaemonSets), instead of spire-server.spire-system.svc.
# And one thing the specs need: they read the agent's configuration over its xDS socket as the
# node's Envoy (xdstest), from a process of the node itself, in no pod, which the agent serves
# there only with --node-envoy-host=true (besides the node Envoy's pods, which it serves as
# deployed). Everything else (the init container that chains aether-cni into the node's conflist,
# the agent's socket under /var/run/aether/cni, the pods' namespaces under /var/run/netns, SPIRE's
# sockets under /run/spire) is what users deploy.
overlay=$STATE/deploy
mkdir -p "$overlay"
cat >"$overlay/kustomization.yaml" <<YAML
# Written by hack/cluster/deploy.sh: config/base, config/envoy, config/spire and config/csi, with the
# local Envoy image, the node's CNI dirs under $STATE/cni, the SPIRE server's address from the
# Service's environment, and the agent's xDS socket serving the node's own processes (the specs').
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$overlay" config/base)
components:
- $(realpath --relative-to="$overlay" config/envoy)
- $(realpath --relative-to="$overlay" config/spire)
- $(realpath --relative-to="$overlay" config/csi)
images:
- name: docker.io/envoyproxy/envoy
  newName: $envoy_repository
  newTag: $envoy_tag
patches:
- target: {kind: DaemonSet, name: spire-agent}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: -serverAddress=\$(SPIRE_SERVER_SERVICE_HOST)
- target: {kind: DaemonSet, labelSelector: app.kubernetes.io/name=aether-agent}
  patch: |-
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: agent}
    spec:
      template:
        spec:
          volumes:
          - name: cni-bin
            hostPath: {path: $STATE/cni/bin, type: Directory}
          - name: cni-conf
            hostPath: {path: $STATE/cni/net.d, type: Directory}
- target: {kind: DaemonSet, labelSelector: app.kubernetes.io/name=aether-agent}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --node-envoy-host=true
YAML
# The Gateway API's standard-channel CRDs, from the sigs.k8s.io/gateway-api module go.mod pins
# (the CRDs only, as internal/testenv installs them), before the manager starts: it sets up its
# route controllers for the route kinds the cluster serves when it starts.
gwapi=$(go mod download -json sigs.k8s.io/gateway-api | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')/config/crd/standard
crds=()
for f in "$gwapi"/*.yaml; do grep -q '^kind: CustomResourceDefinition$' "$f" && crds+=(-f "$f"); done
((${#crds[@]})) || { echo "cluster-deploy: no Gateway API CRDs under $gwapi" >&2; exit 1; }
log "Gateway API CRDs ($((${#crds[@]} / 2)) files from $gwapi)"
$K apply --server-side "${crds[@]}" >/dev/null
$K wait --for condition=Established --timeout=60s "${crds[@]}" >/dev/null

# Two install paths, as users have them: the Helm chart (dist/chart, generated from config/) and
# kustomize. Each run takes one: AETHER_INSTALL=helm or kustomize, else they alternate by the
# commit (the last hex digit of HEAD: even helm, odd kustomize), so both are installed on the node
# across commits; hack/chart's tests prove, every run, that the chart renders kustomize's objects.
install=${AETHER_INSTALL:-}
if [[ -z $install ]]; then
  head=$(git rev-parse HEAD 2>/dev/null || echo 0)
  if (( 16#${head: -1} % 2 == 0 )); then install=helm; else install=kustomize; fi
fi
case $install in
kustomize)
  log "kubectl apply -k config/base + config/envoy + config/spire + config/csi (config/default with SPIRE; Envoy's image $envoy_image; the node's CNI dirs under $STATE/cni)"
  $K apply -k "$overlay" >/dev/null
  ;;
helm)
  HELM=$(hack/build-helm.sh 2>/dev/null | tail -1)/helm
  log "hack/install/install.sh helm: the documented helm install (the chart's defaults: Envoy on, SPIRE on, cert-manager off, the manager's rotation), with Envoy's image $envoy_image and the node's CNI dirs under $STATE/cni"
  # Helm, like every client, runs inside the node's network namespace.
  HELM=$HELM HELM_ARGS="--kubeconfig $P/admin.kubeconfig" nsenter --net="/run/netns/${AETHER_NETNS:-aether-node}" \
    hack/install/install.sh helm --set envoy.image.repository="$envoy_repository" --set envoy.image.tag="$envoy_tag" \
    --set agent.cni.binDir="$STATE/cni/bin" --set agent.cni.confDir="$STATE/cni/net.d" --set 'agent.extraArgs={--node-envoy-host=true}' >/dev/null
  # The kustomize overlay's one patch a chart value does not cover: no cluster DNS here.
  $K -n spire-system patch daemonset spire-agent --type=json \
    -p '[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"-serverAddress=$(SPIRE_SERVER_SERVICE_HOST)"}]' >/dev/null
  ;;
*)
  echo "cluster-deploy: AETHER_INSTALL=$install: want helm or kustomize" >&2
  exit 2
  ;;
esac
echo "$install" >"$STATE/install"
log "waiting for the manager and the agent"
# rolled_out waits for a rollout; when it times out, it says why the pods are not there: the node's
# taints and pressure conditions (a host disk below the kubelet's eviction threshold taints the node
# disk-pressure, and nothing new schedules) and the namespace's pods and warning events.
rolled_out() {
  local ns=$1 what=$2 timeout=$3
  $K -n "$ns" rollout status "$what" --timeout="$timeout" && return 0
  echo "cluster-deploy: $what in $ns did not roll out within $timeout" >&2
  $K get nodes -o jsonpath='{range .items[*]}{.metadata.name}: taints {.spec.taints}; {range .status.conditions[?(@.status=="True")]}{.type} {end}{"\n"}{end}' >&2 || true
  $K -n "$ns" get pods -o wide >&2 || true
  $K -n "$ns" get events --field-selector type=Warning --sort-by=.lastTimestamp 2>/dev/null | tail -5 >&2 || true
  return 1
}
# The manager turns ready once its webhook certificate is in place: it fills the Secret the
# install made (the one its volume webhook-certs mounts) and injects the CA, and the kubelet then
# fills the pod's volume (within its sync period, about a minute).
rolled_out "$NS" deployment/aether-operator-controller-manager 300s
cert_secret=$($K -n "$NS" get deployment/aether-operator-controller-manager -o jsonpath='{.spec.template.spec.volumes[?(@.name=="webhook-certs")].secret.secretName}')
log "the manager's webhook certificate: Secret $cert_secret ($($K -n "$NS" get secret "$cert_secret" -o jsonpath='{.data.ca\.crt}' | base64 -d | openssl x509 -noout -subject -enddate | tr '\n' ' '))"
rolled_out "$NS" daemonset/aether-operator-agent 120s
rolled_out "$NS" daemonset/aether-operator-csi-node 120s
# The node's Envoy is ready once it holds the agent's first configuration (its /ready, answered by
# envoy-helper): the agent wrote its bootstrap, Envoy reached the agent's xDS socket and took what
# it was sent.
rolled_out "$NS" daemonset/aether-operator-envoy 120s
log "the node's Envoy: image $($K -n "$NS" get pods -l app.kubernetes.io/name=aether-envoy -o jsonpath='{.items[0].status.containerStatuses[?(@.name=="envoy")].image}'), ready"
log "the agent's init container chained aether-cni into $STATE/cni/net.d/10-aether.conflist:"
grep -o '"type": "[a-z-]*"' "$STATE/cni/net.d/10-aether.conflist" | tr '\n' ' ' >&2; echo >&2

# SPIRE: the server, then the agent, whose readiness (spire-agent healthcheck) needs it to have
# attested its node and synced; then the server's own record of that attestation: an agent of
# node $NODE, attested by k8s_psat.
log "waiting for SPIRE: the server, the agent, the agent's k8s_psat attestation"
rolled_out spire-system statefulset/spire-server 120s
rolled_out spire-system daemonset/spire-agent 180s
NODE=$($K get nodes -o jsonpath='{.items[0].metadata.name}')
spire_server() { $K -n spire-system exec spire-server-0 -c spire-server -- /opt/spire/bin/spire-server "$@" -socketPath /run/spire/server-sockets/api.sock; }
for _ in $(seq 60); do
  agents=$(spire_server agent list -selector "k8s_psat:agent_node_name:$NODE" 2>&1) && grep -q 'Attestation type *: k8s_psat' <<<"$agents" && break
  sleep 1
done
grep -q 'Attestation type *: k8s_psat' <<<"$agents" || { echo "cluster-deploy: no agent of node $NODE attested by k8s_psat: $agents" >&2; exit 1; }
grep 'SPIFFE ID' <<<"$agents" | sed 's/^ */cluster-deploy: attested: /' >&2
