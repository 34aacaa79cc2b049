// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Package monitoring reads what the operator ships for Prometheus and Grafana (config/prometheus:
// the PrometheusRule, its promtool unit tests, the dashboard) so that tests can hold them to the
// code: every alert has a promtool test that fires it and one that does not, every runbook_url
// names a section of docs/operations/runbooks.md, and every metric a rule, a test series or a
// panel queries is one the manager or the agent exports (names_test.go, against their real
// registries). It imports no Kubernetes client code and nothing of the operator's.
package monitoring
