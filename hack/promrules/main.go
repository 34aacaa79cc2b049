// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

// Command promrules writes the rule file a PrometheusRule manifest holds (its spec), which
// promtool reads: make rules-check checks and unit-tests config/prometheus/rules.yaml with it.
//
//	go run ./hack/promrules config/prometheus/rules.yaml > aether-mesh.rules.yaml
package main

import (
	"fmt"
	"os"

	"github.com/aether-mesh/aether-operator/internal/monitoring"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: promrules PROMETHEUSRULE.yaml > RULES.yaml")
		os.Exit(2)
	}
	data, err := monitoring.RuleFileOf(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "promrules: %v\n", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(data)
}
