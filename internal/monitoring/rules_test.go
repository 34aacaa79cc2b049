// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package monitoring

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryAlertIsTested fails for an alert of rules.yaml without a promtool test that expects it
// to fire, or without one that expects it silent (make rules-check runs them).
func TestEveryAlertIsTested(t *testing.T) {
	for _, p := range Untested(readRules(t), readRuleTests(t)) {
		t.Error(p)
	}
}

// TestUntestedAlertIsReported is the negative control of TestEveryAlertIsTested: with one alert's
// firing case taken out of the tests, or its silent case, the check names that alert.
func TestUntestedAlertIsReported(t *testing.T) {
	rules := readRules(t)
	alert := rules.Alerts()[0].Alert
	for _, firing := range []bool{true, false} {
		tests := readRuleTests(t)
		for i, g := range tests.Tests {
			tests.Tests[i].AlertTests = slices.DeleteFunc(slices.Clone(g.AlertTests), func(a AlertTest) bool {
				return a.Alertname == alert && (len(a.ExpAlerts) > 0) == firing
			})
		}
		problems := Untested(rules, tests)
		want := "alert " + alert + ": no promtool test expects it to "
		if len(problems) != 1 || !strings.HasPrefix(problems[0], want) {
			t.Errorf("tests without %s's case (firing %v): problems %q, want one starting %q", alert, firing, problems, want)
		}
	}
}

// TestAlertsHaveRunbooks checks each alert's summary, description and severity, and that its
// runbook_url is a section of docs/operations/runbooks.md.
func TestAlertsHaveRunbooks(t *testing.T) {
	doc, err := os.ReadFile(runbooksPath)
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(doc))
	const prefix = "docs/operations/runbooks.md#"
	for _, a := range readRules(t).Alerts() {
		for _, key := range []string{"summary", "description", "runbook_url"} {
			if a.Annotations[key] == "" {
				t.Errorf("alert %s: no annotation %s", a.Alert, key)
			}
		}
		if s := a.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("alert %s: severity %q, want warning or critical", a.Alert, s)
		}
		url := a.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, prefix)
		if !ok || !anchors[anchor] {
			t.Errorf("alert %s: runbook_url %q is no section of %s (want %s<anchor of a heading>)", a.Alert, url, runbooksPath, prefix)
		}
	}
	if !anchors["pod-held-in-init-by-aether-identity-ready"] {
		t.Errorf("%s: no section \"Pod held in Init by aether-identity-ready\"", runbooksPath)
	}
}

// headingAnchors are the anchors a Markdown renderer gives the document's headings: lower case,
// spaces as '-', punctuation but '-' and '_' dropped.
func headingAnchors(doc string) map[string]bool {
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	out := map[string]bool{}
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}

func TestMetricNames(t *testing.T) {
	cases := map[string]struct {
		expr string
		want []string
	}{
		"aggregation and range": {
			expr: `sum by (controller) (rate(controller_runtime_reconcile_errors_total{controller=~"a|b"}[5m])) > 0`,
			want: []string{"controller_runtime_reconcile_errors_total"},
		},
		"ratio with matchers holding PromQL words": {
			expr: "sum by (instance) (rate(a_total{outcome=\"sum(by)\"}[5m]))\n / sum by (instance) (rate(b_total[5m])) > 0.05",
			want: []string{"a_total", "b_total"},
		},
		"histogram quantile": {
			expr: `histogram_quantile(0.99, sum by (le) (rate(d_seconds_bucket[$__rate_interval])))`,
			want: []string{"d_seconds_bucket"},
		},
		"binary operators, on, offset, bool": {
			expr: `x == bool on (job) group_left (node) y offset 5m unless z`,
			want: []string{"x", "y", "z"},
		},
		"a series of a promtool test": {
			expr: `aether_agent_xds_nacks_total{instance="node-a:19090",type="listener"}`,
			want: []string{"aether_agent_xds_nacks_total"},
		},
		"bare metric and number": {expr: `max(g) == 0`, want: []string{"g"}},
		"recording rule name":    {expr: `job:up:sum > 1e3`, want: []string{"job:up:sum"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := MetricNames(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("MetricNames(%q) = %q, want %q", c.expr, got, c.want)
			}
		})
	}
	for _, bad := range []string{`{__name__="x"}`, `rate(x[5m`, `x{a="b}`} {
		if got, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%q) = %q, want an error", bad, got)
		}
	}
}
