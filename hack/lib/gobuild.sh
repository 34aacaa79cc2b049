# shellcheck shell=bash
# Sourced by the hack/build-<tool>.sh scripts that build one Go program from the Go module proxy
# at a pinned version into the versioned cache hack/build-binaries.sh uses. A version already in
# the cache is not rebuilt.
#
#   AETHER_CACHE   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aether)

# gobuild_cached TOOL MODULE VERSION PACKAGE LDFLAGS builds MODULE@VERSION's PACKAGE (./cmd/...)
# into $AETHER_CACHE/TOOL/VERSION/TOOL, linked with LDFLAGS (the release's version stamps), and
# prints that directory on stdout; progress goes to stderr as "build-TOOL: ...".
gobuild_cached() {
  local tool=$1 module=$2 version=$3 pkg=$4 ldflags=$5
  local cache=${AETHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aether}
  local out=$cache/$tool/$version src

  mkdir -p "$cache"
  # One build at a time per cache and tool: a make target and the tests may ask at once. The
  # lock is held until the calling script exits.
  exec 9>"$cache/.lock-$tool"
  flock 9

  if [[ -x $out/$tool ]]; then
    echo "build-$tool: $tool $version: cached in $out" >&2
  else
    src=$(go mod download -json "$module@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    if [[ -z $src ]]; then
      echo "build-$tool: go mod download $module@$version gave no source directory" >&2
      return 1
    fi
    echo "build-$tool: building $tool $version (a few minutes on 2 cores the first time)" >&2
    mkdir -p "$out"
    # Inside the module's own (read-only) tree, with its own go.mod and go.sum: exactly its
    # release's dependencies (go install pkg@version refuses a module with replace directives).
    # A go.work shipped in the module names directories its zip lacks: off.
    (cd "$src" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" \
      -o "$out/$tool.tmp" "$pkg") >&2
    mv "$out/$tool.tmp" "$out/$tool"
  fi
  echo "$out"
}
