#!/usr/bin/env bash
# Fetches Debian packages, each at the version installed on this machine, into the versioned cache
# that hack/build-binaries.sh uses, for hack/image to take files from (the node Envoy's image takes
# the C library and a shell from them: make images). apt-get download verifies each .deb against
# the archive's signed index (its SHA256), so the same name and version is the same bytes; the
# installed version is the one the host's dynamic loader resolves with, which the image's tests
# compare against (ldd). A .deb already in the cache is not fetched again.
#
#   hack/build-debs.sh libc6 dash coreutils
#
# Prints the path of each .deb, one per line, in the order given, on stdout; progress on stderr.
# Fails, naming the package, when one is not installed, or when its installed version is no
# longer in the apt index (a security update superseded it: apt-get update, then upgrade the
# package, and the image is built from the new one).
#
#   AETHER_CACHE    cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aether)
set -euo pipefail

(($#)) || { echo "usage: hack/build-debs.sh <package>..." >&2; exit 2; }
CACHE=${AETHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aether}
out=$CACHE/debs
log() { echo "build-debs: $*" >&2; }

mkdir -p "$out"
exec 9>"$CACHE/.lock-debs"
flock 9

arch=$(dpkg --print-architecture)
# As root, apt downloads as its _apt user, which cannot write into a cache under root's home
# (0700): it would warn and download as root anyway. Say so instead of warning.
apt_opts=()
((EUID != 0)) || apt_opts=(-o APT::Sandbox::User=root)
paths=()
for pkg in "$@"; do
  # The installed package of the machine's own architecture (libc6:amd64, not a foreign one).
  version=$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' "$pkg:$arch" 2>/dev/null | awk '$1 == "ii" {print $2}') || true
  [[ -n $version ]] || { log "$pkg:$arch is not installed: install it (apt-get install $pkg), so that its version is the one the image takes"; exit 1; }
  # The file name apt-get download gives it: an epoch's colon is written %3a.
  deb=$out/${pkg}_${version//:/%3a}_$arch.deb
  if [[ ! -s $deb ]]; then
    log "fetching $pkg $version ($arch)"
    tmp=$(mktemp -d "$out/.fetch-XXXXXX")
    if ! (cd "$tmp" && apt-get download -q "${apt_opts[@]}" "$pkg:$arch=$version" >&2); then
      rm -rf "$tmp"
      log "apt-get download $pkg:$arch=$version failed: is $version still in the apt index (apt-cache policy $pkg)? If a newer version replaced it, upgrade the package (apt-get update && apt-get install $pkg) and run this again"
      exit 1
    fi
    got=$(ls "$tmp"/*.deb)
    [[ $(basename "$got") == "$(basename "$deb")" ]] || { rm -rf "$tmp"; log "apt-get download $pkg=$version gave $(basename "$got"), want $(basename "$deb")"; exit 1; }
    mv "$got" "$deb"
    rm -rf "$tmp"
  fi
  paths+=("$deb")
done
printf '%s\n' "${paths[@]}"
