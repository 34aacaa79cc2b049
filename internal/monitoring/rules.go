// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"sigs.k8s.io/yaml"
)

// A RuleFile is Prometheus's rule file, the spec of a PrometheusRule.
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// A RuleGroup is one group of a rule file.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// A Rule is an alerting rule (Alert) or a recording rule (Record).
type Rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Alerts are the file's alerting rules, in order.
func (f RuleFile) Alerts() []Rule {
	var out []Rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// RuleFileOf is the rule file a PrometheusRule manifest holds (its spec, every field kept), as
// YAML for promtool.
func RuleFileOf(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var obj struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if obj.Kind != "PrometheusRule" || obj.Spec["groups"] == nil {
		return nil, fmt.Errorf("%s: kind %q with spec.groups %v: want a PrometheusRule with its rule groups in spec.groups", path, obj.Kind, obj.Spec["groups"])
	}
	return yaml.Marshal(obj.Spec)
}

// ReadRules reads the rule file of the PrometheusRule manifest at path.
func ReadRules(path string) (RuleFile, error) {
	var f RuleFile
	data, err := RuleFileOf(path)
	if err != nil {
		return f, err
	}
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// RuleTests is a promtool unit-test file (promtool test rules).
type RuleTests struct {
	RuleFiles          []string    `json:"rule_files"`
	EvaluationInterval string      `json:"evaluation_interval,omitempty"`
	GroupEvalOrder     []string    `json:"group_eval_order,omitempty"`
	Tests              []TestGroup `json:"tests"`
}

// A TestGroup is one test of a promtool test file: input series and what to expect of them.
type TestGroup struct {
	Name           string            `json:"name"`
	Interval       string            `json:"interval,omitempty"`
	ExternalLabels map[string]string `json:"external_labels,omitempty"`
	ExternalURL    string            `json:"external_url,omitempty"`
	InputSeries    []Series          `json:"input_series"`
	AlertTests     []AlertTest       `json:"alert_rule_test"`
	ExprTests      []ExprTest        `json:"promql_expr_test"`
}

// A Series is an input series of a test: metric{labels} and its values.
type Series struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

// An AlertTest expects alert Alertname's firing instances at EvalTime (none: it does not fire).
type AlertTest struct {
	EvalTime  string            `json:"eval_time"`
	Alertname string            `json:"alertname"`
	ExpAlerts []json.RawMessage `json:"exp_alerts"`
}

// An ExprTest expects the samples of an expression at an evaluation time.
type ExprTest struct {
	Expr       string            `json:"expr"`
	EvalTime   string            `json:"eval_time"`
	ExpSamples []json.RawMessage `json:"exp_samples"`
}

// ReadRuleTests reads the promtool test file at path; a field promtool does not know is an error.
func ReadRuleTests(path string) (RuleTests, error) {
	var t RuleTests
	data, err := os.ReadFile(path)
	if err != nil {
		return t, err
	}
	if err := yaml.UnmarshalStrict(data, &t); err != nil {
		return t, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Untested names each alert of rules that tests never expect to fire, or never expect to stay
// silent, and each alert the tests expect that rules do not have.
func Untested(rules RuleFile, tests RuleTests) []string {
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, g := range tests.Tests {
		for _, a := range g.AlertTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	var problems []string
	known := map[string]bool{}
	for _, a := range rules.Alerts() {
		known[a.Alert] = true
		if !fires[a.Alert] {
			problems = append(problems, fmt.Sprintf("alert %s: no promtool test expects it to fire (an alert_rule_test with exp_alerts)", a.Alert))
		}
		if !silent[a.Alert] {
			problems = append(problems, fmt.Sprintf("alert %s: no promtool test expects it to stay silent (an alert_rule_test with exp_alerts: [])", a.Alert))
		}
	}
	for name := range fires {
		if !known[name] {
			problems = append(problems, fmt.Sprintf("promtool tests expect alert %s, which no rule defines", name))
		}
	}
	for name := range silent {
		if !known[name] && !fires[name] {
			problems = append(problems, fmt.Sprintf("promtool tests expect alert %s, which no rule defines", name))
		}
	}
	slices.Sort(problems)
	return problems
}
