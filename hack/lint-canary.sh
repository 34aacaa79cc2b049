#!/usr/bin/env bash
# Negative control for the import rules in .golangci.yml: plants a file that breaks each depguard
# rule, in every package (or glob) the rule names, and fails unless golangci-lint reports each
# one under the rule that should catch it. A rule that silently stopped matching (a renamed path,
# a typo in a glob, a list mode that lets everything through) would otherwise pass forever.
set -euo pipefail
lint=${1:?usage: lint-canary.sh path/to/golangci-lint}
cd "$(dirname "$0")/.."

module=github.com/aether-mesh/aether-operator
# Each canary: the package directory it is planted in, the import it makes, the rule that must
# flag it, and the lint pass. internal/controller's canary runs in a pass of its own, without
# tests: importing internal/agent from the controller closes an import cycle with the agent's
# canary and with the agent's envtest suite (which runs the MeshService controller), and the type
# checker stops at a cycle before depguard runs.
canaries=(
  "api/v1alpha1 $module/internal/conditions api-imports-no-internal 1"
  "internal/portspec k8s.io/apimachinery/pkg/util/sets pure-core 1"
  "internal/resolve k8s.io/api/core/v1 pure-core 1"
  "internal/workloadidentity k8s.io/apimachinery/pkg/util/sets pure-core 1"
  "internal/workloadidentity k8s.io/client-go/rest pure 1"
  "internal/portspec k8s.io/client-go/rest pure 1"
  "internal/resolve sigs.k8s.io/controller-runtime/pkg/client pure 1"
  "internal/meshservice k8s.io/client-go/tools/cache pure 1"
  "internal/routes sigs.k8s.io/controller-runtime/pkg/client pure 1"
  "internal/conditions k8s.io/client-go/dynamic pure 1"
  "internal/registration sigs.k8s.io/controller-runtime/pkg/client pure 1"
  "internal/model k8s.io/client-go/discovery pure 1"
  "internal/xds k8s.io/client-go/rest pure 1"
  "internal/capture sigs.k8s.io/controller-runtime/pkg/client pure 1"
  "internal/capture github.com/google/nftables capture-pure 1"
  "internal/proxyless k8s.io/client-go/rest pure 1"
  "internal/agent $module/internal/controller agent-not-controller 1"
  "internal/xds $module/internal/controller agent-not-controller 1"
  "internal/xdsserver $module/internal/controller agent-not-controller 1"
  "internal/controller $module/internal/agent controller-not-agent 2"
  "internal/spireregistrar $module/internal/xds controller-not-agent 1"
  "internal/cni sigs.k8s.io/controller-runtime/pkg/client cni-plugin 1"
)

planted=() # files written
created=() # directories made for packages that do not exist yet (internal/model, internal/capture)
cleanup() {
  rm -f "${planted[@]}"
  for d in "${created[@]}"; do rmdir "$d"; done
}
trap cleanup EXIT

# plant writes dir/zz_canary_<rule>.go importing imp and prints the file's path.
plant() {
  local dir=$1 imp=$2 rule=$3
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir"
    created+=("$dir")
  fi
  local f="$dir/zz_canary_$rule.go"
  printf 'package %s\n\nimport _ "%s"\n' "$(basename "$dir")" "$imp" >"$f"
  planted+=("$f")
}

status=0
for pass in 1 2; do
  # Report every issue: by default golangci-lint keeps only 3 of the same text, and canaries of
  # one rule planting the same import would hide one another.
  flags=(--enable-only depguard --max-same-issues 0 --max-issues-per-linter 0)
  [ "$pass" = 2 ] && flags+=(--tests=false)
  dirs=()
  expect=()
  for c in "${canaries[@]}"; do
    read -r dir imp rule p <<<"$c"
    [ "$p" = "$pass" ] || continue
    plant "$dir" "$imp" "$rule"
    dirs+=("./$dir/")
    expect+=("$dir/zz_canary_$rule.go $rule")
  done
  out=$("$lint" run "${flags[@]}" $(printf '%s\n' "${dirs[@]}" | sort -u) 2>&1 || true)
  for e in "${expect[@]}"; do
    read -r f rule <<<"$e"
    if ! grep -q "^$f:.* from list '$rule': .*(depguard)$" <<<"$out"; then
      echo "lint canary: depguard rule $rule did not flag $f; the import rules in .golangci.yml no longer match" >&2
      status=1
    fi
  done
  if grep -q '(typecheck)' <<<"$out"; then
    echo "lint canary: the planted files do not type-check, so depguard never ran on them:" >&2
    grep '(typecheck)' <<<"$out" >&2
    status=1
  fi
  rm -f "${planted[@]}"
done
[ $status -eq 0 ] && echo "lint canary: depguard flags all ${#canaries[@]} planted violations, each under its rule"
exit $status
