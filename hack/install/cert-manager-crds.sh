#!/usr/bin/env bash
# Prints the directory holding cert-manager's CRDs (Certificate, Issuer, …), from the
# github.com/cert-manager/cert-manager module of CERT_MANAGER_VERSION: the Go module cache keeps it
# by version, outside the repository, as hack/cluster/deploy.sh takes the Gateway API's CRDs. The
# cluster tier installs them so that the API server can dry-run the cert-manager install path
# (the chart's certManager.enabled=true, config/overlays/cert-manager); cert-manager itself is
# not run.
#
#   CERT_MANAGER_VERSION   default v1.21.2
set -euo pipefail
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.21.2}
dir=$(go mod download -json "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -d $dir/deploy/crds ]] || { echo "cert-manager-crds: no deploy/crds in module github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION ($dir)" >&2; exit 1; }
echo "$dir/deploy/crds"
