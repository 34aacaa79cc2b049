#!/usr/bin/env bash
# Builds promtool (github.com/prometheus/prometheus, cmd/promtool) from the Go module proxy into
# the versioned cache that hack/build-binaries.sh uses, for `make rules-check`: it checks and
# unit-tests config/prometheus's alerting rules. A version already in the cache is not rebuilt.
#
# Prints the directory holding promtool on the last line of stdout; progress on stderr.
#
#   AETHER_CACHE       cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aether)
#   PROMTOOL_VERSION   github.com/prometheus/prometheus version (default v0.316.0)
set -euo pipefail

PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}
CACHE=${AETHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aether}
out=$CACHE/promtool/$PROMTOOL_VERSION

log() { echo "build-promtool: $*" >&2; }

mkdir -p "$CACHE"
# One build at a time per cache: make rules-check and the tests may ask at once.
exec 9>"$CACHE/.lock-promtool"
flock 9

if [[ -x $out/promtool ]]; then
  log "promtool $PROMTOOL_VERSION: cached in $out"
else
  src=$(go mod download -json "github.com/prometheus/prometheus@$PROMTOOL_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [[ -n $src ]] || { log "go mod download github.com/prometheus/prometheus@$PROMTOOL_VERSION gave no source directory"; exit 1; }
  log "building promtool $PROMTOOL_VERSION (a few minutes on 2 cores the first time)"
  mkdir -p "$out"
  # Inside the module's own (read-only) tree, with its own go.mod and go.sum: exactly its
  # release's dependencies (go install pkg@version refuses a module with replace directives).
  # The module ships a go.work naming directories its zip lacks: off. The version is set as
  # Prometheus's promu sets it for a tagged build.
  (cd "$src" && GOWORK=off CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMTOOL_VERSION#v} -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.Revision=$PROMTOOL_VERSION" \
    -o "$out/promtool.tmp" ./cmd/promtool) >&2
  mv "$out/promtool.tmp" "$out/promtool"
fi
echo "$out"
