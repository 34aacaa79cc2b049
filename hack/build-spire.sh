#!/usr/bin/env bash
# Builds SPIRE (spire-server and spire-agent) from the Go module proxy into the versioned cache
# that hack/build-binaries.sh uses, inside the module's own downloaded tree with its own go.mod and
# go.sum: exactly its release's dependencies. A version already in the cache is not rebuilt.
#
# spire-server keeps its registration entries in SQLite (github.com/mattn/go-sqlite3: cgo), so it
# is linked statically (-linkmode external -extldflags -static; osusergo and netgo keep glibc's
# NSS out of the binary) to run in an image that has nothing but the binary. spire-agent needs no
# cgo. Needs gcc and libc6-dev.
#
# Prints the directory holding both binaries on the last line of stdout; progress on stderr.
#
#   AETHER_CACHE    cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aether)
#   SPIRE_VERSION   github.com/spiffe/spire (default v1.13.3)
set -euo pipefail

SPIRE_VERSION=${SPIRE_VERSION:-v1.13.3}
CACHE=${AETHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aether}
out=$CACHE/spire/$SPIRE_VERSION

log() { echo "build-spire: $*" >&2; }
# check runs a freshly built binary's -version before it is cached: a binary that cannot start
# (a version string its init rejects) is never cached as good.
check() {
  local got
  got=$("$1" -version 2>&1) && [[ $got == "${SPIRE_VERSION#v}" ]] || {
    log "$(basename "$1" .tmp) does not start as version ${SPIRE_VERSION#v}: $got"
    rm -f "$1"
    exit 1
  }
}

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock-spire"
flock 9

# A binary cached by an earlier version of this script with a "v" in its version tag panics at
# start: drop it, so it is built again.
for bin in spire-server spire-agent; do
  if [[ -x $out/$bin && $("$out/$bin" -version 2>&1) != "${SPIRE_VERSION#v}" ]]; then
    log "dropping the cached $bin: it does not start as version ${SPIRE_VERSION#v}"
    rm -f "$out/$bin"
  fi
done
if [[ -x $out/spire-server && -x $out/spire-agent ]]; then
  log "spire $SPIRE_VERSION: cached in $out"
  echo "$out"
  exit 0
fi

src=$(go mod download -json "github.com/spiffe/spire@$SPIRE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[[ -n $src ]] || { log "could not download github.com/spiffe/spire@$SPIRE_VERSION"; exit 1; }
mkdir -p "$out"
# SPIRE's own build sets the tag without its "v" (its Makefile: git_tag:v%=%): the server parses
# its version as semver at start (its datastore's migrations), and panics on "v1.13.3".
version_flag="-X github.com/spiffe/spire/pkg/common/version.gittag=${SPIRE_VERSION#v}"

if [[ ! -x $out/spire-server ]]; then
  log "building spire-server $SPIRE_VERSION (cgo, static; about 10 minutes on 2 cores the first time)"
  (cd "$src" && CGO_ENABLED=1 go build -trimpath -tags osusergo,netgo \
    -ldflags "-s -w $version_flag -linkmode external -extldflags -static" \
    -o "$out/spire-server.tmp" ./cmd/spire-server) >&2
  check "$out/spire-server.tmp"
  mv "$out/spire-server.tmp" "$out/spire-server"
fi
if [[ ! -x $out/spire-agent ]]; then
  log "building spire-agent $SPIRE_VERSION"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $version_flag" \
    -o "$out/spire-agent.tmp" ./cmd/spire-agent) >&2
  check "$out/spire-agent.tmp"
  mv "$out/spire-agent.tmp" "$out/spire-agent"
fi
echo "$out"
