// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/golden"
)

const statusData = "testdata/status"

// TestStatusGolden runs kubectl aether status against the envtest API server: every service of
// the namespace, one service, all namespaces, JSON, an absent service, and a namespace with none.
func TestStatusGolden(t *testing.T) {
	cases := map[string]struct {
		args []string
		exit int
	}{
		"namespace":      {[]string{"-n", "shop"}, 0},
		"one-service":    {[]string{"payments", "-n", "shop"}, 0},
		"all-namespaces": {[]string{"-A"}, 0},
		"json":           {[]string{"web", "-n", "shop", "-o", "json"}, 0},
		"no-such":        {[]string{"ledger", "-n", "shop"}, ExitFound},
		"empty":          {[]string{"-n", "default"}, 0},
	}
	names := make([]string, 0, len(cases))
	for name, c := range cases {
		names = append(names, name)
		out, code := run(t, "", append(append([]string{"status"}, c.args...), kubeconfig()...)...)
		if code != c.exit {
			t.Errorf("case %s: exit status %d, want %d\n%s", name, code, c.exit, out)
		}
		got := fmt.Sprintf("$ kubectl aether status %s\n%sexit status %d\n", strings.Join(c.args, " "), out, code)
		golden.Compare(t, statusData, name, ".out", []byte(got), *update)
	}
	golden.Orphans(t, statusData, names, ".in", ".out", *update)
}

// TestStatusColour shows colour is added only when asked (a terminal), in each status's colour,
// and keeps the columns aligned: with the escapes removed the table is the plain one.
func TestStatusColour(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason}
	}
	statuses := []ServiceStatus{{
		Service:    ServiceRef{Namespace: "shop", Name: "payments"},
		Conditions: []metav1.Condition{cond(meshv1alpha1.ServiceConditionReady, metav1.ConditionTrue, "EndpointsReady")},
		Ports: []PortReport{
			{Port: 8080, Protocol: meshv1alpha1.ProtocolHTTP, Conditions: []metav1.Condition{cond(meshv1alpha1.PortConditionReady, metav1.ConditionTrue, "EndpointsReady")}},
			{Port: 9000, Protocol: meshv1alpha1.ProtocolTCP, Conditions: []metav1.Condition{
				cond(meshv1alpha1.PortConditionReady, metav1.ConditionUnknown, "Pending"),
				cond(meshv1alpha1.PortConditionProtocolConsistent, metav1.ConditionFalse, "ProtocolConflict")}},
		},
	}}
	var plain, coloured bytes.Buffer
	if err := WriteStatus(&plain, statuses, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteStatus(&coloured, statuses, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Errorf("plain output has escapes:\n%q", plain.String())
	}
	for _, want := range []string{colourTrue + "True" + colourReset, colourFalse + "False ProtocolConflict" + colourReset,
		colourUnknown + "Unknown Pending" + colourReset, colourNone + "-" + colourReset} {
		if !strings.Contains(coloured.String(), want) {
			t.Errorf("coloured output lacks %q:\n%s", want, coloured.String())
		}
	}
	stripped := coloured.String()
	for _, code := range []string{colourTrue, colourFalse, colourUnknown, colourNone, colourReset} {
		stripped = strings.ReplaceAll(stripped, code, "")
	}
	// Every cell of a coloured column carries escapes of the same length, so with them removed
	// the table is the plain one, byte for byte: the columns line up on the terminal.
	if stripped != plain.String() {
		t.Errorf("coloured output, escapes removed, differs from the plain one:\n%s", golden.Diff(plain.String(), stripped))
	}
}
