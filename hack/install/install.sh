#!/usr/bin/env bash
# The documented install paths, in one place: docs/install.md and README.md quote these commands
# (hack/docscheck fails when a documented `helm install` or `kubectl apply -k` is not one of them,
# or one of them is not documented), and the cluster tier runs them: hack/cluster/deploy.sh
# installs one for real, test/e2e/cluster/install_test.go dry-runs every one against the API server.
#
#   hack/install/install.sh <path> [args...]       run the path's command, args appended
#   hack/install/install.sh --dry-run <path>       the same objects, server-side dry run: Helm's
#                                                  rendered by helm template (the release may exist)
#   hack/install/install.sh --list                 the paths' names
#
#   HELM, KUBECTL   the binaries (default: helm, kubectl on PATH); KUBECONFIG as usual, or
#                   KUBECTL_ARGS / HELM_ARGS (for example --kubeconfig <file>) put before the command's own
set -euo pipefail
cd "$(dirname "$0")/../.."

# name, then the command a user types from the repository's top directory.
PATHS='
helm                    helm install aether-operator dist/chart -n aether-operator-system --create-namespace
helm-cert-manager       helm install aether-operator dist/chart -n aether-operator-system --create-namespace --set certManager.enabled=true
kustomize               kubectl apply -k config/default
kustomize-spire         kubectl apply -k config/overlays/spire
kustomize-cert-manager  kubectl apply -k config/overlays/cert-manager
'

dry=false
case ${1:-} in
--list) awk 'NF {print $1}' <<<"$PATHS"; exit 0 ;;
--dry-run) dry=true; shift ;;
esac
name=${1:?usage: hack/install/install.sh [--dry-run] <path> [args...]; paths: $(awk 'NF {printf "%s ", $1}' <<<"$PATHS")}
shift
line=$(awk -v n="$name" '$1 == n {$1 = ""; sub(/^ +/, ""); print}' <<<"$PATHS")
[[ -n $line ]] || { echo "install: no path $name; the paths: $(awk 'NF {printf "%s ", $1}' <<<"$PATHS")" >&2; exit 2; }
read -r -a cmd <<<"$line"
HELM=${HELM:-helm}
KUBECTL=${KUBECTL:-kubectl}
read -r -a helm_args <<<"${HELM_ARGS:-}"
read -r -a kubectl_args <<<"${KUBECTL_ARGS:-}"

case ${cmd[0]} in
helm)
  if $dry; then
    # helm install's own arguments, rendered: `helm install --dry-run=server` would refuse a
    # release name in use, and the cluster tier has installed one.
    echo "install: $line (dry run: helm template | kubectl apply --dry-run=server)" >&2
    "$HELM" "${helm_args[@]}" template "${cmd[@]:2}" "$@" | "$KUBECTL" "${kubectl_args[@]}" apply --dry-run=server -f -
  else
    echo "install: $line $*" >&2
    "$HELM" "${helm_args[@]}" "${cmd[@]:1}" "$@"
  fi
  ;;
kubectl)
  if $dry; then
    echo "install: $line --dry-run=server" >&2
    "$KUBECTL" "${kubectl_args[@]}" "${cmd[@]:1}" --dry-run=server "$@"
  else
    echo "install: $line $*" >&2
    "$KUBECTL" "${kubectl_args[@]}" "${cmd[@]:1}" "$@"
  fi
  ;;
esac
