#!/usr/bin/env bash
# make rules-check: promtool (hack/build-promtool.sh) checks the alerting rules of
# config/prometheus/rules.yaml (a PrometheusRule; its spec is the rule file) and runs their unit
# tests, config/prometheus/tests/*.test.yaml, against them.
set -euo pipefail
cd "$(dirname "$0")/.."

promtool="$(hack/build-promtool.sh)/promtool"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The test files name the rule file aether-mesh.rules.yaml, beside them.
go run ./hack/promrules config/prometheus/rules.yaml > "$tmp/aether-mesh.rules.yaml"
cp config/prometheus/tests/*.test.yaml "$tmp/"
"$promtool" check rules "$tmp/aether-mesh.rules.yaml"
"$promtool" test rules "$tmp"/*.test.yaml
