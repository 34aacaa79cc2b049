#!/usr/bin/env bash
# Builds the real control-plane binaries the tests run against — kube-apiserver and kubectl from
# k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3 — from the Go module proxy into a cache
# outside the repository, keyed by version. A version that is already in the cache is not rebuilt.
#
# Prints the directory holding kube-apiserver, etcd and kubectl (the envtest asset directory) as
# the last line on stdout; progress goes to stderr.
#
#   AETHER_CACHE     cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aether)
#   K8S_VERSION      k8s.io/kubernetes version (default v1.37.2)
#   STAGING_VERSION  version of its k8s.io/* staging modules (default v0.37.2)
#   ETCD_VERSION     go.etcd.io/etcd/server/v3 version (default v3.6.16)
#   K8S_CMDS         the k8s.io/kubernetes commands to build (default: kube-apiserver kubectl;
#                    hack/cluster adds kubelet, kube-controller-manager, kube-scheduler, kube-proxy)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
STAGING_VERSION=${STAGING_VERSION:-v0.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
CACHE=${AETHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aether}
read -r -a K8S_CMDS <<<"${K8S_CMDS:-kube-apiserver kubectl}"

log() { echo "build-binaries: $*" >&2; }

k8s_dir=$CACHE/kubernetes/$K8S_VERSION
etcd_dir=$CACHE/etcd/$ETCD_VERSION
assets=$CACHE/envtest/k8s-$K8S_VERSION-etcd-$ETCD_VERSION

mkdir -p "$CACHE"
# One build at a time per cache, however many make targets or CI steps ask at once.
exec 9>"$CACHE/.lock"
flock 9

# build_k8s builds the k8s.io/kubernetes commands named in its arguments into $k8s_dir.
build_k8s() {
  local src=$CACHE/src/kubernetes-$K8S_VERSION
  mkdir -p "$src"
  ( cd "$src"
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    {
      echo "module aether.io/build/kubernetes"
      echo
      echo "go 1.26.0"
      echo
      echo "require k8s.io/kubernetes $K8S_VERSION"
      echo
      # Kubernetes maps its k8s.io/* modules to ./staging; outside its tree they must be
      # pinned to the published staging versions instead. Take the list from its own go.mod so a
      # staging module added in a new release (v1.37 added cri-streaming and streaming) is not missed.
      grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" \
        | awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}'
    } > go.mod
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      for cmd in "$@"; do
        printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"
      done
      printf ')\n'
    } > tools.go
    log "resolving k8s.io/kubernetes $K8S_VERSION (staging $STAGING_VERSION)"
    go mod tidy >&2
    local ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $pkg.gitVersion=$K8S_VERSION"
      ldflags+=" -X $pkg.gitMajor=$(echo "${K8S_VERSION#v}" | cut -d. -f1)"
      ldflags+=" -X $pkg.gitMinor=$(echo "${K8S_VERSION#v}" | cut -d. -f2)"
      ldflags+=" -X $pkg.gitTreeState=clean"
    done
    # One go build for every command: the packages they share are compiled once either way (the
    # build cache), but one invocation also links the commands side by side, which one build per
    # command would do one after the other.
    local pkgs=() tmp=$k8s_dir/.build
    for cmd in "$@"; do
      pkgs+=("k8s.io/kubernetes/cmd/$cmd")
    done
    rm -rf "$tmp" && mkdir -p "$tmp"
    log "building $* $K8S_VERSION (the first build of the set takes about 10 minutes on 2 cores)"
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}" >&2
    for cmd in "$@"; do
      mv "$tmp/$cmd" "$k8s_dir/$cmd"
    done
    rmdir "$tmp"
  )
}

build_etcd() {
  local src=$CACHE/src/etcd-$ETCD_VERSION
  mkdir -p "$src"
  ( cd "$src"
    printf 'module aether.io/build/etcd\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > go.mod
    cat > main.go <<'GO'
// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    log "resolving go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    go mod tidy >&2
    log "building etcd $ETCD_VERSION"
    mkdir -p "$etcd_dir.tmp"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$etcd_dir.tmp/etcd" . >&2
  )
  rm -rf "$etcd_dir" && mv "$etcd_dir.tmp" "$etcd_dir"
}

missing=()
for cmd in "${K8S_CMDS[@]}"; do
  [[ -x $k8s_dir/$cmd ]] || missing+=("$cmd")
done
if ((${#missing[@]})); then
  build_k8s "${missing[@]}"
else
  log "${K8S_CMDS[*]} $K8S_VERSION: cached in $k8s_dir"
fi
if [[ -x $etcd_dir/etcd ]]; then
  log "etcd $ETCD_VERSION: cached in $etcd_dir"
else
  build_etcd
fi

mkdir -p "$assets"
for cmd in "${K8S_CMDS[@]}"; do
  ln -sfn "$k8s_dir/$cmd" "$assets/$cmd"
done
ln -sfn "$etcd_dir/etcd" "$assets/etcd"
echo "$assets"
