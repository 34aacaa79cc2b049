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
. "$(dirname "$0")/lib/gobuild.sh"

PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}
# The version is set as Prometheus's promu sets it for a tagged build. remove_all_sd is
# Prometheus's own build tag (plugins/) that leaves out the service discoveries (the cloud
# providers' SDKs among them): checking and unit-testing rule files discovers nothing, and the
# build is a fifth smaller.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=remove_all_sd"
gobuild_cached promtool github.com/prometheus/prometheus "$PROMTOOL_VERSION" ./cmd/promtool \
  "-X github.com/prometheus/common/version.Version=${PROMTOOL_VERSION#v} -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.Revision=$PROMTOOL_VERSION"
