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

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock-spire"
flock 9

if [[ -x $out/spire-server && -x $out/spire-agent ]]; then
  log "spire $SPIRE_VERSION: cached in $out"
  echo "$out"
  exit 0
fi

src=$(go mod download -json "github.com/spiffe/spire@$SPIRE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[[ -n $src ]] || { log "could not download github.com/spiffe/spire@$SPIRE_VERSION"; exit 1; }
mkdir -p "$out"
version_flag="-X github.com/spiffe/spire/pkg/common/version.gittag=$SPIRE_VERSION"

if [[ ! -x $out/spire-server ]]; then
  log "building spire-server $SPIRE_VERSION (cgo, static; about 10 minutes on 2 cores the first time)"
  (cd "$src" && CGO_ENABLED=1 go build -trimpath -tags osusergo,netgo \
    -ldflags "-s -w $version_flag -linkmode external -extldflags -static" \
    -o "$out/spire-server.tmp" ./cmd/spire-server) >&2
  mv "$out/spire-server.tmp" "$out/spire-server"
fi
if [[ ! -x $out/spire-agent ]]; then
  log "building spire-agent $SPIRE_VERSION"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $version_flag" \
    -o "$out/spire-agent.tmp" ./cmd/spire-agent) >&2
  mv "$out/spire-agent.tmp" "$out/spire-agent"
fi
echo "$out"
