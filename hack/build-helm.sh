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
. "$(dirname "$0")/lib/gobuild.sh"

HELM_VERSION=${HELM_VERSION:-v4.3.1}
# The version is set as helm's Makefile sets it for a tagged build.
gobuild_cached helm helm.sh/helm/v4 "$HELM_VERSION" ./cmd/helm \
  "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.metadata= -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
