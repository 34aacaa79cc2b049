#!/usr/bin/env bash
# Builds the node's container runtime from the Go module proxy into the versioned cache that
# hack/build-binaries.sh uses: containerd (with containerd-shim-runc-v2 and ctr), runc (cgo,
# seccomp: needs Debian's libseccomp-dev and pkg-config) and the CNI reference plugins the node
# uses (bridge, host-local, loopback, portmap). A version already in the cache is not rebuilt.
#
# Prints the directory holding every binary on the last line of stdout; progress on stderr.
#
#   AETHER_CACHE         cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aether)
#   CONTAINERD_VERSION   github.com/containerd/containerd/v2 (default v2.4.2)
#   RUNC_VERSION         github.com/opencontainers/runc (default v1.5.3)
#   CNI_PLUGINS_VERSION  github.com/containernetworking/plugins (default v1.10.0)
set -euo pipefail

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.5.3}
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-v1.10.0}
CACHE=${AETHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aether}

log() { echo "build-runtime: $*" >&2; }

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock-runtime"
flock 9

# build_module MODULE VERSION OUTDIR CGO TAGS PKG:NAME... builds each package PKG of
# MODULE@VERSION (a path inside the module, "." for its root) into OUTDIR/NAME, NAME being the
# last element of PKG's import path (go build's name for it).
build_module() {
  local module=$1 version=$2 out=$3 cgo=$4 tags=$5
  shift 5
  local missing=()
  for spec in "$@"; do
    [[ -x $out/${spec#*:} ]] || missing+=("$spec")
  done
  if ((${#missing[@]} == 0)); then
    log "$module $version: cached in $out"
    return
  fi
  local src
  src=$(go mod download -json "$module@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  local pkgs=() names=() tmp=$out/.build
  for spec in "${missing[@]}"; do
    pkgs+=("./${spec%%:*}")
    names+=("${spec#*:}")
  done
  rm -rf "$tmp" && mkdir -p "$tmp"
  log "building ${names[*]} from $module@$version"
  # Build inside the module's own (read-only) tree, with its own go.mod and go.sum: exactly its
  # release's dependencies. One go build for every package: they link side by side. Each
  # binary is named after its package's last path element, as NAME is.
  (cd "$src" && CGO_ENABLED=$cgo go build -trimpath -tags "$tags" -ldflags "-s -w" -o "$tmp/" "${pkgs[@]}") >&2
  for name in "${names[@]}"; do
    mv "$tmp/$name" "$out/$name"
  done
  rmdir "$tmp"
}

if ! pkg-config --exists libseccomp 2>/dev/null; then
  echo "build-runtime: runc needs libseccomp-dev and pkg-config: apt-get install libseccomp-dev pkg-config" >&2
  exit 1
fi

build_module github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" "$CACHE/containerd/$CONTAINERD_VERSION" 0 \
  "no_btrfs no_devmapper no_zfs" cmd/containerd:containerd cmd/containerd-shim-runc-v2:containerd-shim-runc-v2 cmd/ctr:ctr
build_module github.com/opencontainers/runc "$RUNC_VERSION" "$CACHE/runc/$RUNC_VERSION" 1 seccomp .:runc
build_module github.com/containernetworking/plugins "$CNI_PLUGINS_VERSION" "$CACHE/cni-plugins/$CNI_PLUGINS_VERSION" 0 "" \
  plugins/main/bridge:bridge plugins/ipam/host-local:host-local plugins/main/loopback:loopback plugins/meta/portmap:portmap

bin=$CACHE/runtime/containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-cni-$CNI_PLUGINS_VERSION
mkdir -p "$bin"
for f in "$CACHE/containerd/$CONTAINERD_VERSION"/* "$CACHE/runc/$RUNC_VERSION"/* "$CACHE/cni-plugins/$CNI_PLUGINS_VERSION"/*; do
  ln -sfn "$f" "$bin/$(basename "$f")"
done
echo "$bin"
