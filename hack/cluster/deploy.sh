#!/usr/bin/env bash
# Deploys the operator into the local cluster (hack/cluster/up.sh) the way a user does, but
# without the node's Envoy: `kubectl apply -k config/base` (config/default minus the component
# config/envoy, whose envoyproxy/envoy image this cluster cannot pull: its images come from the
# local import of make images, and no registry is reachable from it). What cert-manager
# does on a real cluster is done here by hand: the webhook's serving certificate, signed by the
# cluster's CA, as Secret webhook-server-cert, and that CA as the webhook configuration's caBundle.
set -euo pipefail
cd "$(dirname "$0")/../.."
STATE=${AETHER_CLUSTER_DIR:-/tmp/aether-cluster}
K=hack/cluster/kubectl.sh
NS=aether-operator-system
SVC=aether-operator-webhook-service
P=$STATE/pki
log() { echo "cluster-deploy: $*" >&2; }

certs=$STATE/webhook-certs
mkdir -p "$certs"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$certs/tls.key" \
  -subj "/CN=$SVC.$NS.svc" -out "$certs/tls.csr" 2>/dev/null
openssl x509 -req -in "$certs/tls.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 30 \
  -extfile <(printf 'subjectAltName=DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\nextendedKeyUsage=serverAuth' "$SVC" "$NS" "$SVC" "$NS") \
  -out "$certs/tls.crt" 2>/dev/null

log "kubectl apply -k config/base (config/default without the node's Envoy)"
$K apply -k config/base >/dev/null
$K -n "$NS" create secret tls webhook-server-cert --cert "$certs/tls.crt" --key "$certs/tls.key" --dry-run=client -o yaml | $K apply -f - >/dev/null
for kind in validating mutating; do
  $K patch ${kind}webhookconfiguration aether-operator-${kind}-webhook-configuration --type=json \
    -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$(base64 -w0 <"$P/ca.crt")\"}]" >/dev/null
done
log "waiting for the manager and the agent"
$K -n "$NS" rollout status deployment/aether-operator-controller-manager --timeout=120s
$K -n "$NS" rollout status daemonset/aether-operator-agent --timeout=120s
