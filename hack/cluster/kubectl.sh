#!/usr/bin/env bash
# kubectl against the local cluster, run inside the node's network namespace.
STATE=${AETHER_CLUSTER_DIR:-/tmp/aether-cluster}
exec nsenter --net="/run/netns/${AETHER_NETNS:-aether-node}" "$(dirname "$(readlink -f "$(K8S_CMDS=kubectl "$(dirname "$0")/../build-binaries.sh" 2>/dev/null)/kubectl")")/kubectl" \
  --kubeconfig "$STATE/pki/admin.kubeconfig" "$@"
