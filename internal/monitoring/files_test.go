// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package monitoring

import (
	"path/filepath"
	"runtime"
	"testing"
)

// The shipped files, under config/prometheus and docs/.
var (
	rulesPath     = repoPath("config/prometheus/rules.yaml")
	ruleTestsPath = repoPath("config/prometheus/tests/aether-mesh.rules.test.yaml")
	dashboardPath = repoPath("config/prometheus/dashboards/aether-mesh.json")
	runbooksPath  = repoPath("docs/operations/runbooks.md")
)

// repoPath is rel in the repository.
func repoPath(rel string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", filepath.FromSlash(rel))
}

func readRules(t *testing.T) RuleFile {
	t.Helper()
	rules, err := ReadRules(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules.Alerts()) == 0 {
		t.Fatalf("%s: no alerts", rulesPath)
	}
	return rules
}

func readRuleTests(t *testing.T) RuleTests {
	t.Helper()
	tests, err := ReadRuleTests(ruleTestsPath)
	if err != nil {
		t.Fatal(err)
	}
	return tests
}
