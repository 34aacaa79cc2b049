#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v4, cmd/helm) from the Go module proxy into the versioned cache that
# hack/build-binaries.sh uses, for `make chart-check` and hack/chart's tests. A version already in
# the cache is not rebuilt.
#
# Prints the directory holding helm on the last line of stdout; progress on stderr.
#
#   AETHER_CACHE   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aether)
#   HELM_VERSION   helm.sh/helm/v4 version (default v4.3.1)
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v4.3.1}
CACHE=${AETHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aether}
out=$CACHE/helm/$HELM_VERSION

log() { echo "build-helm: $*" >&2; }

mkdir -p "$CACHE"
# One build at a time per cache: make chart-check and hack/chart's tests may ask at once.
exec 9>"$CACHE/.lock-helm"
flock 9

if [[ -x $out/helm ]]; then
  log "helm $HELM_VERSION: cached in $out"
else
  src=$(go mod download -json "helm.sh/helm/v4@$HELM_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [[ -n $src ]] || { log "go mod download helm.sh/helm/v4@$HELM_VERSION gave no source directory"; exit 1; }
  log "building helm $HELM_VERSION (a few minutes on 2 cores the first time)"
  mkdir -p "$out"
  # Inside the module's own (read-only) tree, with its own go.mod and go.sum: exactly its
  # release's dependencies. The version is set as helm's Makefile sets it for a tagged build.
  (cd "$src" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.metadata= -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
    -o "$out/helm.tmp" ./cmd/helm) >&2
  mv "$out/helm.tmp" "$out/helm"
fi
echo "$out"
